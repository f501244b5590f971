"""Test-set Stress-Test (TsT) and Iterative Bias Pruning (IBP).

``run_tst_rf(frame, ...)`` (TsT-RF: random forest, CPU; per-format figures against a
label-permutation null, calibrated s(x)), ``run_tst_llm(frame, ...)`` (TsT-LLM: k-fold
LoRA of a causal LM; needs torch/peft), ``iterative_bias_pruning(frame, ...)``. Importing this package
imports numpy and pandas only; scikit-learn and torch are imported inside the functions.
"""

from __future__ import annotations

from typing import Any

__all__ = ["run_tst_rf", "TstResult", "iterative_bias_pruning", "PruneResult", "run_tst_llm", "LlmTstResult",
           "register_featuriser", "mean_relative_accuracy"]


def __getattr__(name: str) -> Any:
    if name in ("run_tst_rf", "TstResult", "mean_relative_accuracy"):
        from . import rf
        return getattr(rf, name)
    if name in ("iterative_bias_pruning", "PruneResult"):
        from . import prune
        return getattr(prune, name)
    if name in ("run_tst_llm", "LlmTstResult"):
        from . import llm
        return getattr(llm, name)
    if name == "register_featuriser":
        from .features import register_featuriser
        return register_featuriser
    raise AttributeError(name)
