"""TsT-RF features: a two-step featuriser protocol, generic features and a plugin registry.

Why two steps. TsT trains a blind diagnostic on k-1 folds of the test set and scores the held-out
fold. Some of the most useful features are *label-conditioned* statistics (how often an option text
was gold for questions of the same template, where the gold sits per template, the typical gold
value per template). They must be learned from the training folds only, so a featuriser is

1. ``fit(data, labels) -> fitted``: ``labels`` is a :class:`Labels` view in which every question that
   is not in the training folds has its answer *masked* (-1 / NaN). The featuriser physically
   cannot read a held-out row's answer.
2. ``fitted.option_features(data, rows)`` / ``fitted.numeric_features(data, q)``: transform any rows
   (no labels are passed).

Label-free features (template, positions, lengths, numeric values and ranks, overlap with the
question) are computed once per frame in :class:`TstData`; they never look at the answer either.

Rows are of two levels:

* option rows, one per (question, option) of ``mc`` and ``yesno`` questions (yes/no become the
  options ``["yes", "no"]``): the classifier predicts "is this option gold?";
* numeric rows, one per ``numeric`` question: the regressor predicts the value.

``free`` questions are not scored by TsT-RF.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

_NUM_IN_TEXT = re.compile(r"[-+]?(?:\d+\.\d+|\d+|\.\d+)(?:[eE][-+]?\d+)?")
_TOKEN = re.compile(r"\w+|[^\w\s]")
_DIGITS = re.compile(r"\d")


# ---------------------------------------------------------------------------------------- helpers
def norm_text(s: str) -> str:
    """Casefolded, whitespace-collapsed text (option identity for the label statistics)."""
    return " ".join(str(s).casefold().split())


def first_number(s: str) -> float:
    """First number in a text (thousands separators removed), NaN when there is none.

    A TsT feature (the leading number of an answer or option), not a canonical form: see the
    "Number forms" note in :mod:`audit_hub.schema`."""
    m = _NUM_IN_TEXT.search(str(s).replace(",", ""))
    if not m:
        return math.nan
    try:
        return float(m.group(0))
    except ValueError:  # pragma: no cover - the regex only matches floats
        return math.nan


def signed_log(x: np.ndarray) -> np.ndarray:
    """sign(x) * log1p(|x|): a scale-free transform that keeps zero and negatives."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.log1p(np.abs(x))


def signed_exp(t: np.ndarray) -> np.ndarray:
    """Inverse of :func:`signed_log`."""
    t = np.asarray(t, dtype=np.float64)
    return np.sign(t) * np.expm1(np.abs(t))


def question_template(question: str, options: list[str]) -> str:
    """The question with numbers and option words masked (``#`` and ``<o>``), casefolded.

    Two questions generated from the same template ("How many chairs are in the room?" / "How many
    tables are in the room?" with the object among the options or numbers) map to the same string.
    Image placeholders such as ``<image1>`` are masked like numbers.
    """
    opt_words = set()
    for o in options:
        opt_words.update(t for t in _TOKEN.findall(str(o).casefold()) if not _DIGITS.search(t))
    out = []
    for t in _TOKEN.findall(str(question).casefold()):
        if _DIGITS.search(t):
            out.append("#")
        elif t in opt_words and len(opt_words) > 0 and t.isalnum() and len(t) > 1:
            out.append("<o>")
        else:
            out.append(t)
    # collapse repeated masks ("# , #" lists of numbers of any length look alike)
    s = " ".join(out)
    s = re.sub(r"(# )+#", "#", s)
    return s


def _factorize(values) -> tuple[np.ndarray, int]:
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=False)
    return codes.astype(np.int64), len(uniques)


def _pair_codes(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense codes for pairs of non-negative int codes."""
    key = a.astype(np.int64) * (int(b.max()) + 2 if len(b) else 1) + (b.astype(np.int64) + 1)
    codes, uniq = pd.factorize(key)
    return codes.astype(np.int64), len(uniq)


# ---------------------------------------------------------------------------------------- data
@dataclass
class TstData:
    """Label-free, precomputed view of a frame for TsT (built once per frame).

    Question level (length Q): ``question_id``, ``kind`` (0 choice, 1 numeric, -1 unscored),
    ``n_choices`` (K; 2 for yes/no; 0 otherwise), ``category`` codes, ``template`` codes, ``group``.
    Option level (length R): ``opt_q`` (question code), ``opt_pos`` (0-based position),
    ``opt_text`` codes, ``static`` option features. Numeric level: ``num_q`` question codes and
    ``num_static`` features. ``key_*`` arrays are integer keys for the label statistics.
    """

    question_id: np.ndarray
    kind: np.ndarray
    n_choices: np.ndarray
    category: np.ndarray
    category_labels: list[str]
    template: np.ndarray
    n_templates: int
    answer_type: np.ndarray
    opt_q: np.ndarray
    opt_pos: np.ndarray
    opt_start: np.ndarray  # (Q,) first option row of each question (-1 if none)
    opt_static: dict[str, np.ndarray]
    keys: dict[str, tuple[np.ndarray, int]]  # option-level integer keys (codes, n_codes)
    opt_value: np.ndarray  # numeric value parsed from the option text (NaN if none)
    num_q: np.ndarray
    num_static: dict[str, np.ndarray]
    q_static: dict[str, np.ndarray] = field(default_factory=dict)
    questions: pd.DataFrame | None = None  # the frame's questions (for plugins)

    @property
    def n_questions(self) -> int:
        return len(self.question_id)


@dataclass
class Labels:
    """Answers visible to a featuriser's ``fit``: only those of the training questions.

    ``opt_gold``: (R,) int8, 1 gold / 0 not gold / -1 masked (held out or not fitted on).
    ``num_value``: (len(num_q),) float64 gold values, NaN when masked.
    ``train``: (Q,) bool, the questions whose answers are visible.
    """

    opt_gold: np.ndarray
    num_value: np.ndarray
    train: np.ndarray


@dataclass
class FullLabels:
    """All answers (owned by the CV engine; featurisers only ever see :class:`Labels` views)."""

    opt_gold: np.ndarray  # (R,) int8 0/1
    gold_pos: np.ndarray  # (Q,) int16 gold position for choice questions, -1 otherwise
    num_value: np.ndarray  # (len(num_q),) float64

    def view(self, data: TstData, train: np.ndarray) -> Labels:
        """Mask every answer outside ``train`` (a (Q,) bool mask)."""
        train = np.asarray(train, dtype=bool)
        og = np.where(train[data.opt_q], self.opt_gold, -1).astype(np.int8)
        nv = np.where(train[data.num_q], self.num_value, np.nan)
        return Labels(opt_gold=og, num_value=nv, train=train.copy())


def _question_kinds(atype: np.ndarray, opts_in: list) -> tuple[np.ndarray, list[list[str]], np.ndarray]:
    """Per question: kind (0 choice, 1 numeric, -1 unscored), its options, and the number of choices."""
    n = len(atype)
    kind = np.full(n, -1, dtype=np.int8)
    options: list[list[str]] = []
    for i in range(n):
        if atype[i] == "mc":
            kind[i] = 0
            options.append([str(o) for o in opts_in[i]])
        elif atype[i] == "yesno":
            kind[i] = 0
            options.append(["yes", "no"])
        else:
            if atype[i] == "numeric":
                kind[i] = 1
            options.append([])
    n_choices = np.array([len(o) if kind[i] == 0 else 0 for i, o in enumerate(options)], dtype=np.int16)
    return kind, options, n_choices


def _question_static(qtext: list[str]) -> dict[str, np.ndarray]:
    """Question-level label-free features: length, words, the numbers in the text."""
    q_nums = [[float(x) for x in _NUM_IN_TEXT.findall(t.replace(",", ""))] for t in qtext]
    q_first_num = np.array([v[0] if v else np.nan for v in q_nums], dtype=np.float64)
    q_max_num = np.array([max(v) if v else np.nan for v in q_nums], dtype=np.float64)
    return {
        "q_len": np.array([len(t) for t in qtext], dtype=np.float32),
        "q_words": np.array([len(t.split()) for t in qtext], dtype=np.float32),
        "q_n_numbers": np.array([len(v) for v in q_nums], dtype=np.float32),
        "q_first_num": signed_log(q_first_num).astype(np.float32),
        "q_max_num": signed_log(q_max_num).astype(np.float32),
    }


def _within_rank(v: np.ndarray, opt_q: np.ndarray, opt_start: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank of v among the question's options with a finite v (0 = smallest; -1 when not finite), and count.

    Vectorised through a lexsort by (question, value)."""
    finite = np.isfinite(v)
    vv = np.where(finite, v, np.inf)
    order = np.lexsort((np.arange(len(v)), vv, opt_q))
    rank = np.empty(len(v), dtype=np.float64)
    rank[order] = np.arange(len(v)) - opt_start[opt_q[order]]
    cnt = np.bincount(opt_q[finite], minlength=n)[opt_q].astype(np.float64)
    return np.where(finite, rank, -1.0), cnt


def _option_static(qtext: list[str], options: list[list[str]], n_choices: np.ndarray, opt_q: np.ndarray,
                   opt_pos: np.ndarray, opt_start: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray, int,
                                                                        np.ndarray, np.ndarray, np.ndarray]:
    """Option-row label-free features; also the option text codes, their count, value, and value ranks."""
    n = len(qtext)
    flat = [o for i in range(n) for o in options[i]] if len(opt_q) else []
    flat_norm = [norm_text(o) for o in flat]
    text_code, n_text = _factorize(flat_norm)
    uniq_norm = pd.unique(pd.Series(flat_norm, dtype=object)) if flat_norm else np.array([], dtype=object)
    uniq_val = np.array([first_number(s) for s in uniq_norm], dtype=np.float64)
    uniq_len = np.array([len(s) for s in uniq_norm], dtype=np.float64)
    uniq_words = np.array([len(s.split()) for s in uniq_norm], dtype=np.float64)
    uniq_letter = np.array([len(s) == 1 and s.isalpha() for s in uniq_norm], dtype=np.float64)
    value = uniq_val[text_code] if len(text_code) else np.zeros(0)
    length = uniq_len[text_code] if len(text_code) else np.zeros(0)
    words = uniq_words[text_code] if len(text_code) else np.zeros(0)
    K = n_choices[opt_q].astype(np.float64)
    # overlap of option tokens with the question tokens
    qtok = [set(_TOKEN.findall(t.casefold())) for t in qtext]
    overlap = np.array([
        (len(set(_TOKEN.findall(s)) & qtok[qi]) / max(len(set(_TOKEN.findall(s))), 1))
        for s, qi in zip(flat_norm, opt_q.tolist())
    ], dtype=np.float64) if len(opt_q) else np.zeros(0)
    text_freq = np.bincount(text_code, minlength=n_text)[text_code].astype(np.float64) if len(opt_q) else np.zeros(0)
    v_rank, v_cnt = _within_rank(value, opt_q, opt_start, n)
    v_rank_desc = np.where(v_rank >= 0, v_cnt - 1 - v_rank, -1.0)
    l_rank, l_cnt = _within_rank(length, opt_q, opt_start, n)
    l_mean = (np.bincount(opt_q, weights=length, minlength=n) / np.maximum(n_choices, 1))[opt_q]
    # mean of the numeric options (log scale), for relative value
    v_log = signed_log(value)
    v_sum = np.bincount(opt_q, weights=np.where(np.isfinite(v_log), v_log, 0.0), minlength=n)
    v_mean = np.where(v_cnt > 0, v_sum[opt_q] / np.maximum(v_cnt, 1), np.nan)
    opt_static = {
        "pos": opt_pos.astype(np.float32),
        "rel_pos": (opt_pos / np.maximum(K - 1, 1)).astype(np.float32),
        "is_last": (opt_pos == K - 1).astype(np.float32),
        "n_options": K.astype(np.float32),
        "len_chars": length.astype(np.float32),
        "len_words": words.astype(np.float32),
        "len_rank": np.where(l_cnt > 1, l_rank / np.maximum(l_cnt - 1, 1), 0.5).astype(np.float32),
        "len_rel": (length / np.maximum(l_mean, 1e-9)).astype(np.float32),
        "is_letter_only": (uniq_letter[text_code] if len(text_code) else np.zeros(0)).astype(np.float32),
        "value_log": v_log.astype(np.float32),
        "value_rank": np.where(v_rank >= 0, v_rank / np.maximum(v_cnt - 1, 1), np.nan).astype(np.float32),
        "value_is_max": np.where(v_cnt > 1, v_rank_desc == 0, np.nan).astype(np.float32),
        "value_is_min": np.where(v_cnt > 1, v_rank == 0, np.nan).astype(np.float32),
        "value_rel": (v_log - v_mean).astype(np.float32),
        "overlap": overlap.astype(np.float32),
        "text_freq": np.log1p(text_freq).astype(np.float32),
    }
    return opt_static, text_code, n_text, value, v_rank, v_rank_desc


def _option_keys(template: np.ndarray, category: np.ndarray, opt_q: np.ndarray, opt_pos: np.ndarray,
                 text_code: np.ndarray, n_text: int, v_rank: np.ndarray, v_rank_desc: np.ndarray) -> dict:
    """Categorical keys of option rows (target-encoded by the featurisers on training folds only)."""
    empty = (np.zeros(0, np.int64), 0)
    has = len(opt_q) > 0
    return {
        "text": (text_code, n_text),
        "tmpl_text": _pair_codes(template[opt_q], text_code) if has else empty,
        "tmpl_pos": _pair_codes(template[opt_q], opt_pos) if has else empty,
        "cat_pos": _pair_codes(category[opt_q].astype(np.int64), opt_pos) if has else empty,
        "tmpl_rank": _pair_codes(template[opt_q], v_rank.astype(np.int64)) if has else empty,
        "tmpl_rank_desc": _pair_codes(template[opt_q], v_rank_desc.astype(np.int64)) if has else empty,
    }


def _answers(q: pd.DataFrame, atype: np.ndarray, opt_q: np.ndarray, opt_pos: np.ndarray,
             num_q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The answers, kept apart from TstData: gold position, gold flag of each option row, numeric gold value."""
    gold_pos = np.full(len(q), -1, dtype=np.int16)
    gi = q["gold_index"].to_numpy()
    ans = q["answer"].astype(str).str.strip().str.lower().to_numpy(dtype=object)
    is_mc = atype == "mc"
    gold_pos[is_mc] = gi[is_mc]
    is_yn = atype == "yesno"
    gold_pos[is_yn] = np.where(ans[is_yn] == "yes", 0, 1)
    opt_gold = (opt_pos == gold_pos[opt_q]).astype(np.int8)
    num_value = np.array([first_number(a) for a in ans[num_q]], dtype=np.float64)
    return gold_pos, opt_gold, num_value


def build_data(questions: pd.DataFrame, group_column: str | None = None) -> tuple[TstData, FullLabels]:
    """Precompute the label-free features of a frame's questions, and (separately) their answers.

    ``questions`` is ``AuditFrame.questions``. Nothing in the returned :class:`TstData` depends on the
    ``answer`` column; the answers go into :class:`FullLabels`.
    """
    q = questions
    n = len(q)
    atype = q["answer_type"].to_numpy(dtype=object)
    qtext = q["question"].fillna("").astype(str).tolist()
    kind, options, n_choices = _question_kinds(atype, q["options"].tolist())
    cat_col = q["category"].astype(object).where(q["category"].notna(), "(none)").astype(str)
    category, cat_uniq = pd.factorize(cat_col, sort=True)
    template, n_templates = _factorize([question_template(qtext[i], options[i]) for i in range(n)])
    q_static = _question_static(qtext)

    opt_q = np.repeat(np.arange(n, dtype=np.int64), n_choices.astype(np.int64))
    opt_pos = (np.arange(len(opt_q)) - np.repeat(np.cumsum(n_choices) - n_choices, n_choices)).astype(np.int64)
    opt_start = np.where(n_choices > 0, np.cumsum(n_choices) - n_choices, -1).astype(np.int64)
    opt_static, text_code, n_text, value, v_rank, v_rank_desc = _option_static(qtext, options, n_choices, opt_q,
                                                                               opt_pos, opt_start)
    keys = _option_keys(template, category, opt_q, opt_pos, text_code, n_text, v_rank, v_rank_desc)
    num_q = np.flatnonzero(kind == 1).astype(np.int64)
    num_static = {name: arr[num_q] for name, arr in q_static.items()}
    gold_pos, opt_gold, num_value = _answers(q, atype, opt_q, opt_pos, num_q)

    data = TstData(
        question_id=q["question_id"].astype(str).to_numpy(dtype=object), kind=kind, n_choices=n_choices,
        category=category.astype(np.int64), category_labels=[str(c) for c in cat_uniq],
        template=template, n_templates=n_templates, answer_type=atype, opt_q=opt_q, opt_pos=opt_pos,
        opt_start=opt_start, opt_static=opt_static, keys=keys, opt_value=value, num_q=num_q,
        num_static=num_static, q_static=q_static, questions=q,
    )
    # questions whose numeric gold cannot be parsed are not scored
    bad = ~np.isfinite(num_value)
    if bad.any():
        data.kind[num_q[bad]] = -1
        keep = ~bad
        data.num_q = num_q[keep]
        data.num_static = {k: v[keep] for k, v in num_static.items()}
        num_value = num_value[keep]
    return data, FullLabels(opt_gold=opt_gold, gold_pos=gold_pos, num_value=num_value)


# ---------------------------------------------------------------------------------------- protocol
class FittedFeaturiser(Protocol):
    def option_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Feature columns for option rows ``rows`` (indices into the option level)."""

    def numeric_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Feature columns for numeric rows ``rows`` (indices into ``data.num_q``)."""


class Featuriser(Protocol):
    """Two-step featuriser: ``fit`` on training labels only, then transform any rows.

    ``group`` names the feature group (permutation importances are reported per group;
    one featuriser may return several groups by prefixing columns ``<group>:<name>``).
    """

    group: str

    def fit(self, data: TstData, labels: Labels) -> FittedFeaturiser: ...


# ---------------------------------------------------------------------------------------- generic
class StaticFeatures:
    """Label-free generic features: structure, length, numeric value/rank, overlap, template."""

    group = "static"
    GROUPS = {
        "structure": ("pos", "rel_pos", "is_last", "n_options", "is_letter_only"),
        "length": ("len_chars", "len_words", "len_rank", "len_rel"),
        "numeric_value": ("value_log", "value_rank", "value_is_max", "value_is_min", "value_rel"),
        "overlap": ("overlap", "text_freq"),
    }

    def fit(self, data: TstData, labels: Labels) -> StaticFeatures:
        return self

    def option_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        out = {f"{g}:{c}": data.opt_static[c][rows] for g, cols in self.GROUPS.items() for c in cols}
        qi = data.opt_q[rows]
        out["template:template_code"] = data.template[qi].astype(np.float32)
        out["template:category_code"] = data.category[qi].astype(np.float32)
        for c in ("q_len", "q_n_numbers", "q_max_num"):
            out[f"question:{c}"] = data.q_static[c][qi]
        return out

    def numeric_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        qi = data.num_q[rows]
        out = {f"question:{c}": v[rows] for c, v in data.num_static.items()}
        out["template:template_code"] = data.template[qi].astype(np.float32)
        out["template:category_code"] = data.category[qi].astype(np.float32)
        return out


@dataclass
class _FittedLabelStats:
    counts: dict[str, tuple[np.ndarray, np.ndarray]]  # key -> (gold count, seen count) per code
    tmpl_num: tuple[np.ndarray, np.ndarray, np.ndarray]  # per template: n, sum, sumsq of signed-log gold
    cat_num: tuple[np.ndarray, np.ndarray, np.ndarray]
    glob_num: tuple[float, float, float]
    alpha: float

    def option_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        prior = 1.0 / np.maximum(data.n_choices[data.opt_q[rows]].astype(np.float64), 1.0)
        out = {}
        names = {"tmpl_text": "option_text_gold_rate", "text": "option_text_gold_rate",
                 "tmpl_pos": "gold_position_rate", "cat_pos": "gold_position_rate",
                 "tmpl_rank": "gold_value_rank_rate", "tmpl_rank_desc": "gold_value_rank_rate"}
        for key, (g, s) in self.counts.items():
            codes = data.keys[key][0][rows]
            gg, ss = g[codes], s[codes]
            grp = names[key]
            out[f"{grp}:{key}_rate"] = ((gg + self.alpha * prior) / (ss + self.alpha)).astype(np.float32)
            out[f"{grp}:{key}_seen"] = np.log1p(ss).astype(np.float32)
        # distance of the option's value to the template's typical gold value (log space)
        qi = data.opt_q[rows]
        mean, sd, n = _mean_sd(self.tmpl_num, data.template[qi], self.glob_num)
        v = signed_log(data.opt_value[rows])
        out["gold_value_stats:opt_z"] = ((v - mean) / np.maximum(sd, 1e-3)).astype(np.float32)
        out["gold_value_stats:tmpl_n"] = np.log1p(n).astype(np.float32)
        return out

    def numeric_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        qi = data.num_q[rows]
        tm, ts, tn = _mean_sd(self.tmpl_num, data.template[qi], self.glob_num)
        cm, cs, cn = _mean_sd(self.cat_num, data.category[qi], self.glob_num)
        return {
            "gold_value_stats:tmpl_mean": tm.astype(np.float32), "gold_value_stats:tmpl_sd": ts.astype(np.float32),
            "gold_value_stats:tmpl_n": np.log1p(tn).astype(np.float32),
            "gold_value_stats:cat_mean": cm.astype(np.float32), "gold_value_stats:cat_sd": cs.astype(np.float32),
            "gold_value_stats:cat_n": np.log1p(cn).astype(np.float32),
            "gold_value_stats:global_mean": np.full(len(rows), self.glob_num[1] / max(self.glob_num[0], 1),
                                                    dtype=np.float32),
        }


def _mean_sd(stats, codes, glob) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shrunken mean and sd of signed-log gold values per code (shrinkage 1 pseudo-count to global)."""
    n, s, ss = stats
    gn, gs, gss = glob
    gmean = gs / gn if gn > 0 else 0.0
    gvar = max(gss / gn - gmean * gmean, 0.0) if gn > 0 else 1.0
    nn = n[codes] if len(n) else np.zeros(len(codes))
    sm = s[codes] if len(n) else np.zeros(len(codes))
    sq = ss[codes] if len(n) else np.zeros(len(codes))
    mean = (sm + gmean) / (nn + 1.0)
    var = (sq + gvar + gmean * gmean) / (nn + 1.0) - mean * mean
    return mean, np.sqrt(np.maximum(var, 0.0)), nn


class LabelStats:
    """Label-conditioned statistics learned on the training folds (never a held-out answer).

    * ``option_text_gold_rate``: how often this option text was gold, per template and overall;
    * ``gold_position_rate``: gold-position frequency per template and per category;
    * ``gold_value_rank_rate``: how often the option with this numeric rank (ascending and
      descending) was gold, per template (e.g. "the largest value is always gold");
    * ``gold_value_stats``: per-template / per-category mean and sd of the gold values
      (signed log), for numeric questions and for numeric options.

    Rates are smoothed towards 1/K with ``alpha`` pseudo-counts.
    """

    group = "label_stats"

    def __init__(self, alpha: float = 1.0):
        self.alpha = alpha

    def fit(self, data: TstData, labels: Labels) -> _FittedLabelStats:
        vis = labels.opt_gold >= 0
        y = (labels.opt_gold == 1).astype(np.float64)
        counts = {}
        for key, (codes, nk) in data.keys.items():
            g = np.bincount(codes[vis], weights=y[vis], minlength=nk)
            s = np.bincount(codes[vis], minlength=nk).astype(np.float64)
            counts[key] = (g, s)
        # gold values: numeric questions + numeric gold options of choice questions
        nv = labels.num_value
        ok = np.isfinite(nv)
        gold_rows = vis & (labels.opt_gold == 1) & np.isfinite(data.opt_value)
        tv = np.concatenate([signed_log(nv[ok]), signed_log(data.opt_value[gold_rows])])
        tq = np.concatenate([data.num_q[ok], data.opt_q[gold_rows]])

        def agg(codes, nk):
            return (np.bincount(codes, minlength=nk).astype(np.float64),
                    np.bincount(codes, weights=tv, minlength=nk), np.bincount(codes, weights=tv * tv, minlength=nk))

        tmpl = agg(data.template[tq], data.n_templates)
        cat = agg(data.category[tq], len(data.category_labels))
        glob = (float(len(tv)), float(tv.sum()), float((tv * tv).sum()))
        return _FittedLabelStats(counts=counts, tmpl_num=tmpl, cat_num=cat, glob_num=glob, alpha=self.alpha)


# ---------------------------------------------------------------------------------------- registry
FEATURISERS: dict[str, Callable[[], Featuriser]] = {}


def register_featuriser(name: str, factory: Callable[[], Featuriser]) -> None:
    """Add a per-benchmark featuriser plugin (``factory()`` returns a :class:`Featuriser`).

    Select plugins with ``run_tst_rf(..., featurisers=["generic", name])``. Plugin columns must be
    named ``<group>:<feature>``; a plugin must read answers only from the :class:`Labels` view.
    """
    if not name or ":" in name:
        raise ValueError(f"invalid featuriser name {name!r}")
    FEATURISERS[name] = factory


class _Generic:
    """The default featuriser set: static features plus label statistics."""

    group = "generic"

    def __init__(self):
        self.parts: list[Featuriser] = [StaticFeatures(), LabelStats()]

    def fit(self, data: TstData, labels: Labels) -> _FittedMany:
        return _FittedMany([p.fit(data, labels) for p in self.parts])


@dataclass
class _FittedMany:
    parts: list

    def option_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for p in self.parts:
            out.update(p.option_features(data, rows))
        return out

    def numeric_features(self, data: TstData, rows: np.ndarray) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for p in self.parts:
            out.update(p.numeric_features(data, rows))
        return out


register_featuriser("generic", _Generic)
register_featuriser("static", StaticFeatures)
register_featuriser("label_stats", LabelStats)


def make_featuriser(names: list[str] | tuple[str, ...]) -> Featuriser:
    """Combine registered featurisers (by name) into one."""
    missing = [n for n in names if n not in FEATURISERS]
    if missing:
        from ..errors import InputError
        raise InputError(f"unknown featuriser(s) {missing}; registered: {sorted(FEATURISERS)}")
    parts = [FEATURISERS[n]() for n in names]

    class _Combined:
        group = "+".join(names)

        def fit(self, data: TstData, labels: Labels) -> _FittedMany:
            return _FittedMany([p.fit(data, labels) for p in parts])

    return _Combined()


def feature_group(column: str) -> str:
    """Feature group of a column name ``<group>:<feature>``."""
    return column.split(":", 1)[0]
