"""Rebuild the bundled example (audit_hub/data/mathv_*.parquet) from a MATH-Vision checkout.

    .venv/bin/python scripts/build_example.py [PATH_TO_MATHV]   # default: ../shared/data/mathv

Source: github.com/mathllm/MATH-V at commit a1f5cc3add200c0cd080fad463e500f44ef1fb41 (MIT licence).
Full arm: the eleven image-enabled runs. Blind arm: GPT-4 (text only). The random-chance baseline
is not a model and is left out. hit_exact is not stored: benchaudit's own parser recomputes it at
load time, so the example always reflects the current parser.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from audit_hub.readers.mathv import read_outputs, read_questions  # noqa: E402

FULL = [
    "closed-source/Gemini/Gemini-Pro.jsonl",
    "closed-source/Qwen/Qwen-VL-Max.jsonl",
    "closed-source/Qwen/Qwen-VL-Plus.jsonl",
    "open-source/Internlm/InternLM-XComposer2-VL.jsonl",
    "open-source/Internlm/InternLM-XComposer2-VL-CoT.jsonl",
    "open-source/LLavA/LLaVA-v1.5-13B.jsonl",
    "open-source/LLavA/LLaVA-v1.5-7B.jsonl",
    "open-source/ShereGPT4V/ShareGPT4V-13B.jsonl",
    "open-source/ShereGPT4V/ShareGPT4V-7B.jsonl",
    "open-source/Sphinx/SPHINX-MoE.jsonl",
    "open-source/Sphinx/SPHINX-v2.jsonl",
]
BLIND = ["closed-source/GPT/GPT4-CoT (Text Only).jsonl"]


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "data" / "mathv"
    out = ROOT / "audit_hub" / "data"
    out.mkdir(parents=True, exist_ok=True)
    q = read_questions(str(src / "data" / "test.jsonl"))
    q = q.drop(columns=["source_file", "source_row"])
    parts = []
    for arm, files in (("full", FULL), ("blind", BLIND)):
        for rel in files:
            r = read_outputs(str(src / "outputs" / rel), arm=arm, questions=q).runs
            parts.append(r.drop(columns=["source_file", "source_row"]).astype({"model": str, "arm": str}))
    runs = pd.concat(parts, ignore_index=True)
    runs["hit"] = runs["hit"].astype("boolean")
    q.to_parquet(out / "mathv_questions.parquet", index=False, compression="zstd")
    runs.to_parquet(out / "mathv_runs.parquet", index=False, compression="zstd", compression_level=19)
    for f in ("mathv_questions.parquet", "mathv_runs.parquet"):
        print(f"{out / f}: {(out / f).stat().st_size / 1e6:.2f} MB")
    print(f"{len(q)} questions, {runs['model'].nunique()} models, {len(runs)} run rows")


if __name__ == "__main__":
    main()
