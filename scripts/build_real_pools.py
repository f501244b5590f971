"""Build the real multi-model pools (tests/fixtures/real_pools/<name>/) from public repositories.

    .venv/bin/python scripts/build_real_pools.py BLINK_GIT_DIR MATHVISTA_GIT_DIR [OUT_DIR]

Each argument is a git directory (a bare clone or ``.git``) of:

* ``blink``: github.com/zeyofu/BLINK_Benchmark (Apache-2.0), commit 2d6a779be4aa1ad0d38d7aa539bcb43b6dd81592.
  ``eval/saved_outputs/<model>/<subtask>.json``: the validation split (1,901 items, 14 subtasks) answered by
  the 19 models of the paper (the two "concatenate images" variants are left out: their items are
  re-ordered, so their golds differ). The repository has no question or option texts (they are in the
  Hugging Face dataset): questions carry the item ID and options are the letters, their count per subtask
  from the BLINK paper (2, 3 or 4). ``answer`` is the repository's extracted choice (``prediction``); its
  "(Z)" (no choice found) and letters beyond the item's options are unparsed; ``hit`` is the repository's
  own criterion (extracted choice == gold).
* ``mathvista``: github.com/lupantech/MathVista (CC BY-SA 4.0), commit 53d525874bdde205128e6b160b7357a88277d479.
  ``results/*/output_*.json`` on testmini (1,000 items: 540 multiple choice with their option texts, 460
  free form). Question and option texts are not copied (their copyright stays with the source datasets'
  authors, per MathVista's licence section): questions carry the item ID, options are their letters. Full arm: the eight image-enabled runs; blind arm: the three text-only LLM runs without
  captions or OCR (ChatGPT, Claude, GPT-4, zero-shot). ``answer`` is the chosen option's letter (from the
  repository's ``prediction``, the option text) on mc items and the repository's ``prediction`` on free-form
  items; ``hit`` its ``true_false``.

Both are read with the product's own readers (``audit_hub.readers.blink`` and ``audit_hub.readers.mathvista``),
then their texts are stripped as above. The full model outputs (``full_prediction`` / ``response``) are kept in
``prediction`` truncated to 300 characters, which keeps each Parquet file well under 1 MB.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from audit_hub.schema import LETTERS

ROOT = Path(__file__).resolve().parents[1]
BLINK_COMMIT = "2d6a779be4aa1ad0d38d7aa539bcb43b6dd81592"
MATHVISTA_COMMIT = "53d525874bdde205128e6b160b7357a88277d479"
MATHVISTA_FULL = ["bard/output_bard.json", "idefics/output_idefics_9b_instruct.json",
                  "instruct_blip2/output_instruct_blip2_vicuna_13b.json",
                  "llama_adapter_v2/output_llama_adapter_v2.json", "llava/output_llava_llama_2_13b.json",
                  "llavar/output_llavar.json", "minigpt4/output_minigpt4_llama2.json",
                  "mplugowl/output_mplugowl_7b_ft.json"]
MATHVISTA_BLIND = ["chatgpt/output_chatgpt.json", "claude/output_claude.json", "gpt4/output_gpt4.json"]
TRUNC = 300


def _git(gd: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", gd, *args], capture_output=True, check=True).stdout


def build_blink(gd: str, commit: str = BLINK_COMMIT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read with the product's own BLINK reader (``audit_hub.readers.blink``), plain runs only."""
    import tempfile

    from audit_hub.readers.blink import read_outputs

    files = [f for f in _git(gd, "ls-tree", "-r", "--name-only", commit, "eval/saved_outputs").decode().split("\n")
             if f.endswith(".json") and "concatenate" not in f]
    gold: dict[str, str] = {}
    qrows: dict[str, dict] = {}
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(files):
            model = f.split("/")[2]
            path = Path(tmp) / model / f.split("/")[3]
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(_git(gd, "show", f"{commit}:{f}"))
            res = read_outputs(str(path))
            for q in res.questions.itertuples():
                if gold.setdefault(q.question_id, q.answer) != q.answer:
                    raise SystemExit(f"{f}: gold of {q.question_id} differs between models")
                qrows.setdefault(q.question_id, {"question_id": q.question_id, "question": q.question,
                                                 "options": list(q.options), "answer": q.answer, "answer_type": "mc",
                                                 "category": q.category})
            r = res.runs
            runs.append(pd.DataFrame({
                "question_id": r["question_id"].astype(str), "model": model, "arm": "full",
                "prediction": [("" if pd.isna(p) else str(p))[:TRUNC] for p in r["prediction"]],
                "answer": ["" if pd.isna(a) else str(a) for a in r["answer"]], "hit": r["hit"].astype(bool)}))
    qids = sorted(qrows, key=lambda s: ("_".join(s.split("_")[1:-1]), int(s.rsplit("_", 1)[1])))
    return pd.DataFrame([qrows[i] for i in qids]), pd.concat(runs, ignore_index=True)


def build_mathvista(gd: str, commit: str = MATHVISTA_COMMIT) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read with the product's own MathVista reader (``audit_hub.readers.mathvista``), then strip the texts."""
    import tempfile

    from audit_hub.readers.mathvista import read_outputs

    qrows, runs = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for arm, files in (("full", MATHVISTA_FULL), ("blind", MATHVISTA_BLIND)):
            for f in files:
                path = Path(tmp) / f.split("/")[1]
                path.write_bytes(_git(gd, "show", f"{commit}:results/{f}"))
                res = read_outputs(str(path), arm=arm)
                for q in res.questions.itertuples():
                    # question and option texts belong to the source datasets' authors (MathVista's licence
                    # note): not copied; the options are their letters, the gold and answers letters too
                    qrows.setdefault(q.question_id, {
                        "question_id": q.question_id,
                        "question": f"MathVista testmini item {q.question_id} (question text not copied)",
                        "options": list(LETTERS[:len(q.options)]), "answer": q.answer, "answer_type": q.answer_type,
                        "category": str(q.category or ""), "l2_category": str(q.l2_category or "")})
                r = res.runs
                runs.append(pd.DataFrame({
                    "question_id": r["question_id"].astype(str), "model": str(r["model"].iloc[0]), "arm": arm,
                    "prediction": [("" if pd.isna(p) else str(p))[:TRUNC] for p in r["prediction"]],
                    "answer": ["" if pd.isna(a) else str(a) for a in r["answer"]],
                    "hit": r["hit"].astype(bool)}))
    q = pd.DataFrame(sorted(qrows.values(), key=lambda x: int(x["question_id"])))
    return q, pd.concat(runs, ignore_index=True)


def write(name: str, q: pd.DataFrame, runs: pd.DataFrame, out: Path) -> None:
    d = out / name
    d.mkdir(parents=True, exist_ok=True)
    runs = runs.astype({"question_id": str, "model": str, "arm": str, "prediction": str, "answer": str})
    runs["hit"] = runs["hit"].astype("boolean")
    q.to_parquet(d / "questions.parquet", index=False, compression="zstd")
    runs.to_parquet(d / "runs.parquet", index=False, compression="zstd", compression_level=19)
    for f in ("questions.parquet", "runs.parquet"):
        print(f"{d / f}: {(d / f).stat().st_size / 1e6:.2f} MB")
    print(f"{name}: {len(q)} questions, {runs['model'].nunique()} models, {len(runs)} run rows")


def main() -> None:
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    out = Path(sys.argv[3]) if len(sys.argv) > 3 else ROOT / "tests" / "fixtures" / "real_pools"
    write("blink", *build_blink(sys.argv[1]), out)
    write("mathvista", *build_mathvista(sys.argv[2]), out)


if __name__ == "__main__":
    main()
