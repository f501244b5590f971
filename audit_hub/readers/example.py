"""The bundled example: MATH-Vision (mathllm/MATH-V, MIT licence), shipped as compact Parquet.

Built by ``scripts/build_example.py`` from the upstream repository's per-question output files:
3,040 test questions, the eleven image-enabled runs as the ``full`` arm and the GPT-4 text-only
run as the ``blind`` arm. See ``audit_hub/data/MATHV_NOTICE.md`` for source, commit and licence.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

EXAMPLE_NAME = "MATH-Vision (test, 3,040 questions)"
SOURCE = {
    "repo": "mathllm/MATH-V",
    "commit": "a1f5cc3add200c0cd080fad463e500f44ef1fb41",
    "license": "MIT",
    "url": "https://github.com/mathllm/MATH-V",
}


def example_dir() -> Path:
    return Path(str(resources.files("audit_hub") / "data"))


def example_paths() -> dict[str, Path]:
    d = example_dir()
    return {"questions": d / "mathv_questions.parquet", "runs": d / "mathv_runs.parquet"}


def example_frame():
    """The bundled example as a validated :class:`~audit_hub.frame.core.AuditFrame`."""
    import pandas as pd

    from ..frame.core import AuditFrame
    from ..hub.folders import sha256_file

    p = example_paths()
    q = pd.read_parquet(p["questions"])
    r = pd.read_parquet(p["runs"])
    frame = AuditFrame.from_tables(q, r, questions_source=str(p["questions"]), runs_source=str(p["runs"]))
    frame.sources = [
        {"path": f"audit_hub/data/{path.name}", "kind": kind, "bytes": path.stat().st_size,
         "sha256": sha256_file(path), "rows": n, "upstream": SOURCE}
        for kind, path, n in (("questions", p["questions"], len(q)), ("runs", p["runs"], len(r)))
    ]
    full, blind = frame.models_in("full"), frame.models_in("blind")
    frame.meta["benchmark"] = EXAMPLE_NAME
    frame.meta["dataset"] = {"name": "MATH-Vision", "split": "test", **SOURCE}
    frame.meta["judges"] = {m: "MATH-V official evaluation script (string match of model_answer)" for m in full + blind}
    frame.meta["pool"] = {
        "full_models": full, "blind_models": blind, "paired": frame.paired_models(),
        "pool_level": True,
        "note": ("MATH-Vision ships no same-model text-only runs: the blind arm is GPT-4 (text only), "
                 "compared with the image-enabled pool at pool level, not per model"),
    }
    # counts come from the data (the bare-letter option count is the option detector's own line on the card)
    n_free = int((frame.n_options == 0).sum())
    frame.meta["notes"] = [f"{n_free:,} items are free-form (numeric or text answers) with no options."]
    return frame
