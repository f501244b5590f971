"""The curation stages: which items each stage removes, from the audit's per-question findings.

Each stage is a pure function ``(findings table, thresholds) -> (flag (Q,) bool, reason (Q,) str)``. The
pipeline applies the stages in the configured order; an item is removed by the *first* stage in that
order that flags it (so the per-stage counts depend on the order), and the overlaps table counts items
flagged by every pair of stages regardless of order.

* ``text_ablation``: answerable without the image. From the image-gain detector's per-item counts: the blind
  share ``b / Mb >= blind_min_share`` and the gain from the image ``f / Mf - b / Mb <= max_gain``
  (defaults 0.75 and 0.25: the blind-solvable corner of the (f, b) table, with a margin for a few models
  missing it; at a blind share of 0.75 the gain cannot exceed 0.25, so by default the gain condition only
  bites when ``blind_min_share`` is lowered). When TsT s(x) is given, also ``s(x) - chance >= tst_min_excess`` (text-only learnability).
* ``saturation``: the correctness-profile detector's saturated items (share of models right ``>= saturated_share``,
  default 1.0 = every model) and floor items (share right ``<= floor_share``, default 0.0 = none),
  with at least ``min_models`` models known.
* ``anomaly``: only evidence that holds. The label-error flag ``is_consensus_error_issue`` as the
  label-conflict detector publishes it (read, never re-derived: the label model makes it true only for
  flags that pass its predictive check); the option-similarity detector at severity ``>=
  distractor_severity`` (default high: exact duplicate options; critical when the gold is duplicated); a
  placeholder gold option (``nan``, empty, ``None``...: unanswerable as released), and with
  ``placeholder="any"`` any placeholder option. The correctness profile's per-item negative-discrimination
  test is off by default (``negative_discrimination=false``): one-sided per-item tests over a few dozen
  models, uncorrected over thousands of items, mostly flag noise.
* ``doubted_gold`` (applied with the anomaly stage, after it; ``doubted_gold=keep`` turns it off): the items
  whose gold the label model doubts (``consensus_error_gold_doubted``: posterior >= 0.5 that the gold is wrong,
  in a category whose answers identify the gold) but which the audit does not publish as label errors (its
  held-out check does not support them). They are not called label errors: they are left out of the items a
  selection draws from, because on them the models most likely to be right answer alike against the stated
  gold, so each of them orders the models against their order elsewhere. Measured on three real pools with
  the product (docs/curate.md, "2026-12-06, later": it helps MathVista's, is neutral on MATH-V's and costs
  BLINK's a little).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..errors import InputError
from ..fmt import count
from ..severity import LEVELS as _SEV
from . import roles

STAGES = ("text_ablation", "saturation", "anomaly")
# the anomaly stage's second rule: a doubted gold is left out of the draw, not reported as a label error
DOUBTED = "doubted_gold"


@dataclass
class StageThresholds:
    blind_min_share: float = 0.75
    max_gain: float = 0.25
    tst_min_excess: float = 0.5
    saturated_share: float = 1.0
    floor_share: float = 0.0
    min_models: int = 2
    distractor_severity: str = "high"
    negative_discrimination: bool = False
    placeholder: str = "gold"  # "gold" | "any" | "off"
    doubted_gold: str = "exclude"  # "exclude" | "keep"
    extra: dict = field(default_factory=dict)

    def validate(self) -> None:
        for name in ("blind_min_share", "max_gain", "saturated_share", "floor_share"):
            v = getattr(self, name)
            if not (-1.0 <= float(v) <= 1.0):
                raise InputError(f"curation threshold {name} must be in [0, 1] (gain: [-1, 1]), got {v}")
        if self.distractor_severity not in _SEV:
            raise InputError(f"distractor severity must be one of {_SEV}, got {self.distractor_severity!r}")
        if self.doubted_gold not in ("exclude", "keep"):
            raise InputError(f"doubted_gold must be exclude or keep, got {self.doubted_gold!r}")
        if self.placeholder not in ("gold", "any", "off"):
            raise InputError(f"placeholder must be gold, any or off, got {self.placeholder!r}")

    def as_dict(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        return d


def _col(t: pd.DataFrame, name: str, default) -> np.ndarray:
    if name in t.columns:
        return t[name].to_numpy()
    return np.full(len(t), default)


def _flag_col(t: pd.DataFrame, name: str) -> np.ndarray:
    """A nullable boolean column as a plain bool array (missing column or value: False)."""
    return np.asarray(pd.array(_col(t, name, False), dtype="boolean").fillna(False), dtype=bool)


def image_counts(t: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per item: models right with the image ``f`` and blind ``b`` (-1 unknown) and the pool sizes."""
    return tuple(_col(t, roles.column(roles.IMAGE_GAIN, c), d).astype(np.float64)
                 for c, d in (("f", -1), ("b", -1), ("mf", 0), ("mb", 0)))


def _join(parts: list[tuple[np.ndarray, str]], n: int) -> tuple[np.ndarray, np.ndarray]:
    flag = np.zeros(n, dtype=bool)
    reason = np.full(n, "", dtype=object)
    for m, text in parts:
        m = np.asarray(m, dtype=bool)
        new = m & (reason != "")
        reason = np.where(new, reason + "; " + text, np.where(m, text, reason))
        flag |= m
    return flag, reason


def text_ablation(t: pd.DataFrame, th: StageThresholds, tst_excess: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    n = len(t)
    f, b, mf, mb = image_counts(t)
    ok = (f >= 0) & (b >= 0) & (mf > 0) & (mb > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        bs = np.where(ok, b / np.maximum(mb, 1), np.nan)
        gain = np.where(ok, f / np.maximum(mf, 1) - bs, np.nan)
    blind = ok & (bs >= th.blind_min_share) & (gain <= th.max_gain)
    parts = [(blind, f"blind-solvable: >= {th.blind_min_share:g} of blind runs right, image gain <= {th.max_gain:g}")]
    if tst_excess is not None:
        te = np.asarray(tst_excess, dtype=np.float64)
        parts.append((np.isfinite(te) & (te >= th.tst_min_excess),
                      f"text-learnable: TsT s(x) - chance >= {th.tst_min_excess:g}"))
    return _join(parts, n)


def saturation(t: pd.DataFrame, th: StageThresholds) -> tuple[np.ndarray, np.ndarray]:
    k = _col(t, roles.column(roles.CORRECTNESS_PROFILE, "n_correct"), 0).astype(np.float64)
    n = _col(t, roles.column(roles.CORRECTNESS_PROFILE, "n_models"), 0).astype(np.float64)
    ok = n >= max(th.min_models, 1)
    share = np.where(ok, k / np.maximum(n, 1), np.nan)
    sat = ok & (share >= th.saturated_share)
    flo = ok & (share <= th.floor_share)
    return _join([(sat, f"saturated: share of models right >= {th.saturated_share:g}"),
                  (flo, f"floor: share of models right <= {th.floor_share:g}")], len(t))


def anomaly(t: pd.DataFrame, th: StageThresholds) -> tuple[np.ndarray, np.ndarray]:
    n = len(t)
    parts = []
    col = roles.issue_column(roles.LABEL_CONFLICT)
    ce_flag = _flag_col(t, col)
    parts.append((ce_flag, f"label error: the audit's label-error flag ({col})"))
    sev = _col(t, roles.severity_column(roles.OPTION_SIMILARITY), "info").astype(str)
    rank = np.array([_SEV.index(s) if s in _SEV else 0 for s in sev]) if n else np.zeros(0, int)
    parts.append((rank >= _SEV.index(th.distractor_severity),
                  f"broken options: duplicate options (option similarity >= {th.distractor_severity})"))
    if th.negative_discrimination:
        parts.append((_col(t, roles.issue_column(roles.CORRECTNESS_PROFILE), False).astype(bool),
                      "negative discrimination: weaker models right where stronger fail"))
    if th.placeholder != "off":
        pg = _col(t, "placeholder_gold", False).astype(bool)
        parts.append((pg, "broken options: the gold option is a placeholder text"))
        if th.placeholder == "any":
            po = _col(t, "placeholder_n_options", 0).astype(np.int64) > 0
            parts.append((po & ~pg, "broken options: placeholder option text"))
    return _join(parts, n)


def doubted_gold(t: pd.DataFrame, th: StageThresholds) -> tuple[np.ndarray, np.ndarray]:
    flag = (_flag_col(t, roles.column(roles.LABEL_CONFLICT, "gold_doubted"))
            & ~_flag_col(t, roles.issue_column(roles.LABEL_CONFLICT)))
    return _join([(flag, "doubted gold: the label model puts the gold's chance of being wrong at >= 0.5 and the "
                         "held-out check does not support it as a label error; left out of the draw (not a "
                         "finding)")], len(t))


def stage_order(stages: tuple[str, ...], th: StageThresholds) -> tuple[str, ...]:
    """The stages as applied: ``stages``, then :data:`DOUBTED` when the anomaly stage runs and it is not kept."""
    return (*stages, DOUBTED) if "anomaly" in stages and th.doubted_gold == "exclude" else tuple(stages)


def stage_flags(t: pd.DataFrame, th: StageThresholds, tst_excess: np.ndarray | None = None,
                stages: tuple[str, ...] = STAGES) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Flag and reason arrays of every named stage (computed independently of the order)."""
    out = {}
    for s in stages:
        if s == "text_ablation":
            out[s] = text_ablation(t, th, tst_excess)
        elif s == "saturation":
            out[s] = saturation(t, th)
        elif s == "anomaly":
            out[s] = anomaly(t, th)
        elif s == DOUBTED:
            out[s] = doubted_gold(t, th)
        else:
            raise InputError(f"unknown curation stage {s!r}; known: {', '.join(STAGES)}")
    return out


def apply_stages(flags: dict[str, tuple[np.ndarray, np.ndarray]], order: tuple[str, ...],
                 n: int | None = None) -> dict:
    """First-flag attribution in ``order``: removed stage per item ('' = kept), counts and overlaps.
    ``n`` (number of items) is needed only when no stage is given."""
    n = len(next(iter(flags.values()))[0]) if flags else int(n or 0)
    stage = np.full(n, "", dtype=object)
    reason = np.full(n, "", dtype=object)
    removed_by: dict[str, int] = {}
    for s in order:
        f, r = flags[s]
        new = f & (stage == "")
        stage[new] = s
        reason[new] = r[new]
        removed_by[s] = int(new.sum())
    names = list(order)
    overlaps = {a: {b: int((flags[a][0] & flags[b][0]).sum()) for b in names} for a in names}
    flagged_by = {s: int(flags[s][0].sum()) for s in names}
    return {"stage": stage, "reason": reason, "kept": stage == "", "removed_by_stage": removed_by,
            "flagged_by_stage": flagged_by, "overlaps": overlaps}


def evidence_notes(t: pd.DataFrame, tst_excess: np.ndarray | None, stages: tuple[str, ...],
                   cut_blind: dict | None = None) -> dict[str, str]:
    """Per stage, what it could not read (a stage without its evidence flags nothing and says so here);
    ``cut_blind``: ``{model: {"n_truncated", ...}}`` of the blind runs that answered prompts cut to their
    model's context (:func:`audit_hub.readers.pairing.truncated_by_arm`), which the text-ablation note names."""
    notes = {}
    if "text_ablation" in stages:
        _f, b, _mf, mb = image_counts(t)
        has_blind = bool(len(t)) and bool(((b >= 0) & (mb > 0)).any())
        if not has_blind and tst_excess is None:
            notes["text_ablation"] = ("not run: no blind (text-only) runs and no TsT scores; give --blind runs, "
                                      "--tst-scores or --tst")
        elif not has_blind:
            notes["text_ablation"] = "TsT scores only (no blind runs)"
        elif tst_excess is None:
            notes["text_ablation"] = "blind runs only (no TsT scores)"
        if has_blind and cut_blind:
            rows = sum(r["n_truncated"] for r in cut_blind.values())
            notes["text_ablation"] = "; ".join(filter(None, (notes.get("text_ablation"), (
                f"{count(len(cut_blind), 'blind run')} answered {count(rows, 'cut prompt')} (--truncate left): fewer items look "
                "text-answerable"))))
    if "anomaly" in stages and roles.issue_column(roles.LABEL_CONFLICT) not in t.columns:
        notes["anomaly"] = "no label-error flags (the label-conflict detector did not run); broken options only"
    return notes
