"""Build tests/fixtures/mathvista/results/: an excerpt of MathVista's result files, their texts replaced.

    .venv/bin/python scripts/build_mathvista_excerpt.py MATHVISTA_GIT_DIR [OUT_DIR]

From github.com/lupantech/MathVista (CC BY-SA 4.0) at commit 53d525874bdde205128e6b160b7357a88277d479, the
problems ``EXCERPT_PIDS`` of five ``results/<model>/output_<name>.json`` files and of the leaderboard
submission template, in the repository's folder layout and JSON form (an object keyed by pid, the records'
keys and order as released). What is changed, and only that: the question and option texts belong to the
source datasets' authors (MathVista's licence section), so ``question`` and ``query`` become
"MathVista testmini item <pid> (question text not copied)" and each distinct choice text becomes
"option <letter of its first occurrence>" everywhere it appears (``choices``, ``answer``, ``prediction``,
``extraction``), so that repeated choices stay repeated (pid 781). Responses, verdicts, metadata and
every other field are as released. ``bard/scores_bard.json`` (Bard's scores summary) is copied unchanged.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from audit_hub.schema import LETTERS

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "53d525874bdde205128e6b160b7357a88277d479"
FILES = ["bard/output_bard.json", "llava/output_llava_llama_2_13b.json", "mplugowl/output_mplugowl_7b_ft.json",
         "chatgpt/output_chatgpt.json", "random/output_random_guess.json",
         "leaderboad_submission_template/output_testmini_template_for_leaderboard_submission.json"]
#: the first 40 problems (pids 2 and 4 hold ChatGPT's refusals without a verdict) and pid 781 (a repeated choice)
EXCERPT_PIDS = [str(i) for i in range(1, 41)] + ["781"]


def _scrub(rec: dict) -> dict:
    out = dict(rec)
    placeholder = f"MathVista testmini item {rec['pid']} (question text not copied)"
    for k in ("question", "query"):
        if k in out:
            out[k] = placeholder
    choices = rec.get("choices")
    if choices:
        first = {}
        for i, c in enumerate(choices):
            first.setdefault(c, f"option {LETTERS[i]}")
        out["choices"] = [first[c] for c in choices]
        for k in ("answer", "prediction", "extraction"):
            if isinstance(out.get(k), str) and out[k] in first:
                out[k] = first[out[k]]
    return out


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "fixtures" / "mathvista" / "results"
    for f in FILES:
        raw = subprocess.run(["git", "--git-dir", sys.argv[1], "show", f"{COMMIT}:results/{f}"],
                             capture_output=True, check=True).stdout
        data = json.loads(raw)
        excerpt = {pid: _scrub(data[pid]) for pid in EXCERPT_PIDS}
        dst = out / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(json.dumps(excerpt, indent=4, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{dst}: {len(excerpt)} problems, {dst.stat().st_size / 1e3:.1f} kB")
    scores = out / "bard" / "scores_bard.json"  # a summary the reader must skip in a folder: copied unchanged
    scores.write_bytes(subprocess.run(["git", "--git-dir", sys.argv[1], "show", f"{COMMIT}:results/bard/scores_bard.json"],
                                      capture_output=True, check=True).stdout)


if __name__ == "__main__":
    main()
