"""TsT-RF: k-fold random-forest stress test of a benchmark's questions (no images, no models).

An option-level random-forest classifier ("is this option gold?", :class:`BaggedTrees`) is trained
on the k-1 training folds and scores the held-out fold; its probabilities are normalised within
each question to P(gold) over the options, so any number of options works. Numeric questions get a
regression forest scored by Mean Relative Accuracy. ``s(x)`` is the out-of-fold, calibrated
(:mod:`.calibrate`) P(gold) (numeric: MRA), averaged over repeats with different fold seeds.
Figures are reported per format (choice / numeric) and n-weighted over the same questions, against
a label-permutation null (:mod:`.null`).

Training rows get their label statistics by *cross-fitting* (inner folds of the training set), so
the statistics a training row sees were computed without its own answer, exactly like a held-out
row's. Held-out rows get statistics fitted on the whole training set. No held-out answer is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..schema import LETTERS
from ..stats.core import Z95
from .cv import fold_assignments, inner_folds, run_cv
from .features import FullLabels, TstData, build_data, feature_group, make_featuriser, signed_exp, signed_log

MRA_THRESHOLDS = np.linspace(0.50, 0.95, 10)
DEFAULT_TREES = 30
DEFAULT_MAX_SAMPLES = 5_000
DEFAULT_PERMUTATIONS = 99  # the smallest N whose (g+1)/(N+1) can reach 0.01
NULL_TREES = 10  # the test pipeline's cheaper refit: trees per forest ...
NULL_MAX_SAMPLES = 1_000  # ... and bootstrap rows per tree
IMPORTANCE_ROWS = 20_000


def mean_relative_accuracy(pred, gold) -> np.ndarray:
    """Per-item MRA as the official VSI-Bench scorer computes it.

    For thresholds theta = 0.50, 0.55, ..., 0.95: the item scores 1 at theta when
    ``|pred - gold| / |gold| <= 1 - theta`` (``<=``, as the official scorer), and the MRA is the mean
    over the ten thresholds. A gold of 0 scores 1 only for an exact prediction of 0.
    """
    pred = np.atleast_1d(np.asarray(pred, dtype=np.float64))
    gold = np.atleast_1d(np.asarray(gold, dtype=np.float64))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(pred - gold) / np.abs(gold)
    rel = np.where(gold == 0, np.where(pred == 0, 0.0, np.inf), rel)
    rel = np.where(np.isfinite(pred), rel, np.inf)
    return (rel[:, None] <= (1 - MRA_THRESHOLDS)[None, :]).mean(axis=1)


@dataclass
class TstResult:
    """Outcome of a TsT run.

    ``per_question``: one row per question of the frame (question-code order): ``question_id``,
    ``tst_s`` (s(x): out-of-fold calibrated P(gold) or MRA, averaged over repeats; NaN when not
    scored), ``tst_s_raw`` (uncalibrated), ``tst_s_minus_chance``, ``tst_chance`` (1/K; numeric: the
    out-of-fold MRA of the category's training median), ``tst_pred`` (predicted letter / value as
    text), ``tst_correct`` (tie-aware, mean over repeats; MRA for numeric), ``tst_mra`` (numeric
    only), ``tst_majority``, ``tst_format`` (choice/numeric/none).
    ``summary``: JSON-serialisable headline figures, intervals, per-category table, params, seeds.
    """

    per_question: pd.DataFrame
    summary: dict
    arrays: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------- helpers
def _matrix(cols: dict[str, np.ndarray], names: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    names = list(cols) if names is None else names
    if not names:
        return np.zeros((0, 0), dtype=np.float32), names
    n = len(next(iter(cols.values())))
    X = np.empty((n, len(names)), dtype=np.float32)
    for j, c in enumerate(names):
        X[:, j] = cols[c]
    return X, names


def _normalise(p: np.ndarray, q_local: np.ndarray, n_q: int, k_of_row: np.ndarray) -> np.ndarray:
    """Normalise per-option probabilities to sum to 1 within each question (uniform if all zero)."""
    s = np.bincount(q_local, weights=p, minlength=n_q)[q_local]
    return np.where(s > 0, p / np.where(s > 0, s, 1.0), 1.0 / k_of_row)


def _wald(x: np.ndarray) -> list[float | None]:
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return [None, None]
    m = float(x.mean())
    if len(x) < 2:
        return [m, m]
    h = Z95 * float(x.std(ddof=1)) / np.sqrt(len(x))
    return [float(m - h), float(m + h)]


def _mean(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(x.mean()) if len(x) else None


# ---------------------------------------------------------------------------------------- engine
@dataclass
class RfParams:
    n_estimators: int = 50
    min_samples_leaf: int = 5
    max_samples: int = 5_000  # bootstrap sample cap per tree (speed on large benchmarks)
    max_features: str | float = "sqrt"
    n_jobs: int = 1
    n_inner: int = 5
    importances: bool = True
    max_train_rows: int | None = 60_000  # forests fit on at most this many training rows (whole questions)


def _cap_rows(q_of_row: np.ndarray, cap: int | None, seed: int) -> np.ndarray:
    """Indices of a seeded random subset of whole questions with at most ``cap`` rows (all if None)."""
    n = len(q_of_row)
    if cap is None or n <= cap:
        return np.arange(n)
    uq, inv = np.unique(q_of_row, return_inverse=True)
    per_q = n / len(uq)
    rng = np.random.default_rng(seed)
    keep = np.zeros(len(uq), dtype=bool)
    keep[rng.permutation(len(uq))[: max(int(cap / per_q), 1)]] = True
    return np.flatnonzero(keep[inv])


class BaggedTrees:
    """A random forest: bootstrap-weighted CART trees with random feature subsets, averaged.

    The algorithm of scikit-learn's ``RandomForestClassifier`` / ``RandomForestRegressor`` (each
    tree a ``DecisionTreeClassifier`` / ``DecisionTreeRegressor`` fitted with bootstrap counts as
    sample weights, ``max_samples`` rows drawn with replacement), built here so that the hundreds
    of small forests of the permutation null skip scikit-learn's per-tree validation overhead.
    Tree ``t`` uses bootstrap generator ``default_rng([seed, t])`` and tree seed ``seed + t``.
    """

    def __init__(self, kind: str, n_estimators: int, min_samples_leaf: int, max_features, max_samples: int | None,
                 seed: int, n_jobs: int = 1):
        self.kind, self.n_estimators, self.min_samples_leaf = kind, n_estimators, min_samples_leaf
        self.max_features, self.max_samples, self.seed, self.n_jobs = max_features, max_samples, seed, n_jobs
        self.classes_ = np.array([0, 1])
        self.estimators_: list = []

    def fit(self, X: np.ndarray, y: np.ndarray) -> BaggedTrees:
        import sklearn
        from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

        X = np.ascontiguousarray(X, dtype=np.float32)
        n = len(X)
        m = n if self.max_samples is None else min(int(self.max_samples), n)
        if self.kind == "clf":
            y = np.asarray(y).astype(np.int64)
            self.classes_ = np.unique(y)
            y = np.searchsorted(self.classes_, y).astype(np.float64)
        else:
            y = np.asarray(y, dtype=np.float64)
        cls = DecisionTreeClassifier if self.kind == "clf" else DecisionTreeRegressor

        def one(t: int):
            w = np.bincount(np.random.default_rng([self.seed, t]).integers(0, n, size=m), minlength=n)
            tree = cls(min_samples_leaf=self.min_samples_leaf, max_features=self.max_features,
                       random_state=(self.seed + t) % (2 ** 32))
            with sklearn.config_context(skip_parameter_validation=True, assume_finite=True):
                return tree.fit(X, y, sample_weight=w.astype(np.float64), check_input=False)

        if self.n_jobs != 1 and self.n_estimators > 1:
            import os
            from concurrent.futures import ThreadPoolExecutor

            workers = (os.cpu_count() or 1) if self.n_jobs < 0 else self.n_jobs
            with ThreadPoolExecutor(max_workers=workers) as ex:
                self.estimators_ = list(ex.map(one, range(self.n_estimators)))
        else:
            self.estimators_ = [one(t) for t in range(self.n_estimators)]
        return self

    def set_params(self, **kw) -> BaggedTrees:
        for k_, v in kw.items():
            setattr(self, k_, v)
        return self

    def _mean(self, X: np.ndarray, proba: bool) -> np.ndarray:
        X = np.ascontiguousarray(X, dtype=np.float32)
        acc = None
        for tree in self.estimators_:  # fixed order: bit-identical reruns
            v = tree.predict_proba(X, check_input=False) if proba else tree.predict(X, check_input=False)
            acc = v.astype(np.float64) if acc is None else acc + v
        return acc / len(self.estimators_)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self._mean(X, True)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self._mean(X, False)


def _make_rf(kind: str, p: RfParams, n_rows: int, seed: int) -> BaggedTrees:
    ms = None if n_rows <= p.max_samples else p.max_samples
    return BaggedTrees(kind, p.n_estimators, p.min_samples_leaf, p.max_features, ms, seed, p.n_jobs)


def _permutation_importances(score, X: np.ndarray, names: list[str], rng, kind: str,
                             imp: dict[str, list[tuple[str, float]]]) -> None:
    """Drop in ``score`` when each feature group's columns are shuffled across rows (appended to ``imp``)."""
    base = score(X)
    for g in sorted({feature_group(c) for c in names}):
        idx = [i for i, c in enumerate(names) if feature_group(c) == g]
        Xp = X.copy()
        Xp[:, idx] = X[rng.permutation(len(X))][:, idx]
        imp.setdefault(g, []).append((kind, float(base - score(Xp))))


class _CvRf:
    """The core TsT-RF loop's state: out-of-fold outputs of every repeat, filled fold by fold."""

    def __init__(self, data: TstData, labels: FullLabels, assign: np.ndarray, featuriser, params: RfParams,
                 seed: int):
        self.data, self.labels, self.featuriser, self.params, self.seed = data, labels, featuriser, params, seed
        n_q, R, Nn, reps = data.n_questions, len(data.opt_q), len(data.num_q), assign.shape[0]
        self.p_opt = np.full((reps, R), np.nan)
        self.p_cal = np.full((reps, R), np.nan)
        self.r_raw = np.full((reps, R), np.nan)
        self.betas = np.full((reps, int(assign.max()) + 1 if assign.size else 0), np.nan)
        self.num_pred = np.full((reps, Nn), np.nan)
        self.maj_pos = np.full((reps, n_q), -1, dtype=np.int64)
        self.num_base = np.full((reps, Nn), np.nan)
        self.scorable = data.kind >= 0
        self.units = data.meta_units if hasattr(data, "meta_units") else np.arange(n_q)
        self.imp: dict[str, list[tuple[str, float]]] = {}
        self.k_row = np.maximum(data.n_choices[data.opt_q].astype(np.float64), 1.0)
        self.ncat = len(data.category_labels)
        self.kmax = int(data.n_choices.max()) if n_q else 0
        self.feat_names: dict[str, list[str]] = {}
        self.cats_num = data.category[data.num_q]

    def fit_predict(self, train: np.ndarray, test: np.ndarray, r: int, f: int) -> None:
        """Fold ``f`` of repeat ``r``: features, the option classifier, the numeric regressor, baselines."""
        data = self.data
        train = train & self.scorable
        test = test & self.scorable
        fseed = self.seed * 1_000_003 + r * 1009 + f
        parts = self._cross_fit_features(train, fseed)
        fitted_all = self.featuriser.fit(data, self.labels.view(data, train))
        te_o = np.flatnonzero(test[data.opt_q])
        te_n = np.flatnonzero(test[data.num_q])
        if len(te_o):
            self._option_classifier(fitted_all, parts, te_o, r, fseed)
        if len(te_n):
            self._numeric_regressor(fitted_all, parts, te_n, r, fseed)
        self._baselines(train, test, te_n, r)

    def _cross_fit_features(self, train: np.ndarray, fseed: int) -> dict[str, list]:
        """Training features by cross-fitting (each inner part featurised by a fit on the others)."""
        data = self.data
        inner = inner_folds(self.units, train, self.params.n_inner, fseed)
        parts: dict[str, list] = {"opt_rows": [], "num_rows": [], "Xo": [], "Xn": []}
        for j in range(self.params.n_inner):
            fit_mask = train & (inner != j)
            part = inner == j
            if not part.any():
                continue
            fitted = self.featuriser.fit(data, self.labels.view(data, fit_mask))
            orows = np.flatnonzero(part[data.opt_q])
            nrows = np.flatnonzero(part[data.num_q])
            parts["opt_rows"].append(orows)
            parts["num_rows"].append(nrows)
            parts["Xo"].append(fitted.option_features(data, orows))
            parts["Xn"].append(fitted.numeric_features(data, nrows))
        return parts

    def _option_classifier(self, fitted_all, parts: dict[str, list], te_o: np.ndarray, r: int, fseed: int) -> None:
        """Option rows: is this option the gold? Probabilities normalised within each question."""
        data, labels, params = self.data, self.labels, self.params
        cols_te = fitted_all.option_features(data, te_o)
        names = self.feat_names.setdefault("option", list(cols_te))
        Xte, _ = _matrix(cols_te, names)
        Xtr = np.concatenate([_matrix(c, names)[0] for c in parts["Xo"]], axis=0)
        tr_rows = np.concatenate(parts["opt_rows"])
        sub = _cap_rows(data.opt_q[tr_rows], params.max_train_rows, fseed + 3)
        Xtr, tr_rows = Xtr[sub], tr_rows[sub]
        y = labels.opt_gold[tr_rows]
        if len(np.unique(y)) < 2:
            raise InputError("TsT-RF: a training fold has no gold (or only gold) options")
        clf = _make_rf("clf", params, len(tr_rows), fseed)
        clf.fit(Xtr, y)
        clf.set_params(n_jobs=1)  # prediction in a fixed order: bit-identical reruns
        ql, qn = np.unique(data.opt_q[te_o], return_inverse=True)
        col1 = list(clf.classes_).index(1)
        pr_te = clf.predict_proba(Xte)[:, col1]
        self.p_opt[r, te_o] = _normalise(pr_te, qn, len(ql), self.k_row[te_o])
        self.r_raw[r, te_o] = pr_te
        if r == 0 and params.importances:
            # on at most IMPORTANCE_ROWS held-out option rows (whole questions), for speed
            rng = np.random.default_rng(fseed)
            sub = np.arange(len(te_o))
            if len(ql) * 4 > IMPORTANCE_ROWS:
                keep_q = np.zeros(len(ql), dtype=bool)
                keep_q[rng.permutation(len(ql))[: max(IMPORTANCE_ROWS // 4, 1)]] = True
                sub = np.flatnonzero(keep_q[qn])
            _, qn_s = np.unique(qn[sub], return_inverse=True)
            gold = labels.opt_gold[te_o[sub]] == 1
            k_sub = self.k_row[te_o[sub]]

            def score_sub(X):
                pr = clf.predict_proba(X)[:, col1]
                return _normalise(pr, qn_s, int(qn_s.max()) + 1, k_sub)[gold].mean()

            _permutation_importances(score_sub, Xte[sub], names, rng, "choice", self.imp)

    def _numeric_regressor(self, fitted_all, parts: dict[str, list], te_n: np.ndarray, r: int, fseed: int) -> None:
        """Numeric questions: the gold value, regressed on a signed-log scale."""
        data, labels, params = self.data, self.labels, self.params
        cols_te = fitted_all.numeric_features(data, te_n)
        names = self.feat_names.setdefault("numeric", list(cols_te))
        Xte, _ = _matrix(cols_te, names)
        tr_rows = np.concatenate(parts["num_rows"])
        gold_te = labels.num_value[te_n]
        if len(tr_rows) == 0:
            self.num_pred[r, te_n] = np.nan
            return
        Xtr = np.concatenate([_matrix(c, names)[0] for c in parts["Xn"]], axis=0)
        sub = _cap_rows(tr_rows, params.max_train_rows, fseed + 5)
        Xtr, tr_rows = Xtr[sub], tr_rows[sub]
        reg = _make_rf("reg", params, len(tr_rows), fseed + 1)
        reg.fit(Xtr, signed_log(labels.num_value[tr_rows]))
        reg.set_params(n_jobs=1)
        self.num_pred[r, te_n] = signed_exp(reg.predict(Xte))
        if r == 0 and params.importances:
            rng = np.random.default_rng(fseed + 7)
            _permutation_importances(lambda X: mean_relative_accuracy(signed_exp(reg.predict(X)), gold_te).mean(),
                                     Xte, names, rng, "numeric", self.imp)

    def _baselines(self, train: np.ndarray, test: np.ndarray, te_n: np.ndarray, r: int) -> None:
        """Learned on the training folds, every repeat: most frequent gold position per category (choice),
        per-category median gold value (numeric; global median if unseen)."""
        data, labels, kmax = self.data, self.labels, self.kmax
        ch_tr = train & (data.kind == 0)
        cnt = np.zeros((self.ncat, max(kmax, 1)))
        np.add.at(cnt, (data.category[ch_tr], labels.gold_pos[ch_tr].astype(np.int64)), 1.0)
        ch_te = np.flatnonzero(test & (data.kind == 0))
        if len(ch_te):
            rows = cnt[data.category[ch_te]].copy()
            rows[np.arange(max(kmax, 1))[None, :] >= data.n_choices[ch_te][:, None]] = -1.0
            self.maj_pos[r, ch_te] = rows.argmax(axis=1)
        if len(te_n):
            trn = train[data.num_q]
            vals = labels.num_value[trn]
            gmed = float(np.median(vals)) if len(vals) else 0.0
            med = np.full(self.ncat, gmed)
            for c in np.unique(self.cats_num[te_n]):
                v = labels.num_value[trn & (self.cats_num == c)]
                if len(v):
                    med[c] = float(np.median(v))
            self.num_base[r, te_n] = med[self.cats_num[te_n]]

    def calibrate(self, assign: np.ndarray, calibrate: str) -> None:
        """For held-out fold f, a calibration map fitted on the out-of-fold forest probabilities of the
        questions *outside* f (its training folds) and their answers."""
        from .scaling import fit_isotonic, fit_power, isotonic_normalise, power_normalise

        data, labels = self.data, self.labels
        if not len(data.opt_q):
            return
        fold_row = assign[:, data.opt_q]
        for r in range(assign.shape[0]):
            for f in range(self.betas.shape[1]):
                te = np.flatnonzero((fold_row[r] == f) & np.isfinite(self.r_raw[r]))
                if not len(te):
                    continue
                qs, ql_te = np.unique(data.opt_q[te], return_inverse=True)
                tr = np.flatnonzero((fold_row[r] != f) & np.isfinite(self.r_raw[r]))
                if calibrate == "isotonic" and len(tr):
                    iso = fit_isotonic(self.p_opt[r, tr], labels.opt_gold[tr] == 1)
                    self.p_cal[r, te] = isotonic_normalise(iso, self.p_opt[r, te], ql_te, len(qs))
                else:
                    beta = 1.0
                    if calibrate == "power" and len(tr):
                        qt, ql_tr = np.unique(data.opt_q[tr], return_inverse=True)
                        beta = fit_power(self.r_raw[r, tr], ql_tr, len(qt), labels.opt_gold[tr] == 1)
                    self.betas[r, f] = beta
                    self.p_cal[r, te] = power_normalise(self.r_raw[r, te], ql_te, len(qs), beta)


def _cv_rf(data: TstData, labels: FullLabels, assign: np.ndarray, featuriser, params: RfParams, seed: int,
           progress: Callable[[], None] | None = None, *, calibrate: str = "isotonic") -> dict[str, Any]:
    """Out-of-fold predictions for every repeat (the core TsT-RF loop).

    Returns per repeat: raw normalised option probabilities ``p_opt`` and calibrated ones ``p_cal``
    (:mod:`.calibrate`: fold f's calibration map is fitted on the out-of-fold probabilities and
    answers of the questions outside f)
    (R,), numeric predictions, and the training-fold baselines (``maj_pos``: most frequent gold
    position of the category; ``num_base``: the category's median gold value), all out of fold.
    Repeat ``r``'s forests are seeded from (seed, r, fold) only, so rerunning one repeat on other
    answers (the permutation null) reuses the identical pipeline.
    """
    cv = _CvRf(data, labels, assign, featuriser, params, seed)
    run_cv(assign, cv.fit_predict, progress)
    cv.calibrate(assign, calibrate)
    return {"p_opt": cv.p_opt, "p_cal": cv.p_cal, "betas": cv.betas, "calibrate": calibrate, "num_pred": cv.num_pred,
            "maj_pos": cv.maj_pos, "num_base": cv.num_base, "importances": cv.imp, "feature_names": cv.feat_names}


def _choice_segments(data: TstData) -> tuple[np.ndarray, np.ndarray]:
    """Choice questions (those with option rows) and the start of their option segments."""
    choice = np.flatnonzero((data.kind == 0) & (data.n_choices > 0))
    return choice, data.opt_start[choice]


def repeat_scores(data: TstData, labels: FullLabels, out: dict[str, Any]) -> np.ndarray:
    """(repeats, Q) per-question score of every repeat: tie-aware argmax correctness (choice), MRA
    (numeric), NaN (unscored). The statistic of the permutation null is built from these."""
    from .scaling import top_label

    reps = out["p_opt"].shape[0]
    S = np.full((reps, data.n_questions), np.nan)
    choice, seg = _choice_segments(data)
    gold_rows = labels.opt_gold == 1
    for r in range(reps):
        if len(choice):
            S[r, choice] = top_label(out["p_opt"][r], seg, gold_rows)[1]
        if len(data.num_q):
            S[r, data.num_q] = mean_relative_accuracy(out["num_pred"][r], labels.num_value)
    return S


def format_means(data: TstData, S: np.ndarray) -> dict[str, np.ndarray]:
    """Per-format mean of per-question scores, for each row of S: ``choice``, ``numeric``, ``all``
    (the n-weighted combination = mean over all scored questions)."""
    S = np.atleast_2d(S)
    out = {}
    for name, m in (("choice", data.kind == 0), ("numeric", data.kind == 1), ("all", data.kind >= 0)):
        out[name] = S[:, m].mean(axis=1) if m.any() else np.full(len(S), np.nan)
    return out


def _evaluate(data: TstData, labels: FullLabels, out: dict[str, Any]) -> tuple[pd.DataFrame, dict]:
    """Per-question scores and calibration figures from out-of-fold predictions."""
    from .scaling import reliability, top_label

    n_q = data.n_questions
    letters = LETTERS
    s = np.full(n_q, np.nan)
    s_raw = np.full(n_q, np.nan)
    chance = np.full(n_q, np.nan)
    mra = np.full(n_q, np.nan)
    maj = np.full(n_q, np.nan)
    pred_txt = np.full(n_q, None, dtype=object)
    fmt = np.full(n_q, "none", dtype=object)
    S = repeat_scores(data, labels, out)
    correct = S.mean(axis=0)
    reps = S.shape[0]
    extra: dict[str, Any] = {"repeat_scores": S}
    choice, seg = _choice_segments(data)
    gold_rows = labels.opt_gold == 1
    if len(choice):
        p_mean = out["p_cal"].mean(axis=0)
        s[data.opt_q[gold_rows]] = p_mean[gold_rows]
        s_raw[data.opt_q[gold_rows]] = out["p_opt"].mean(axis=0)[gold_rows]
        chance[choice] = 1.0 / data.n_choices[choice]
        # predicted letter: first maximum of the repeat-averaged calibrated P
        mx = np.maximum.reduceat(p_mean, seg)
        is_max = np.isclose(p_mean, np.repeat(mx, data.n_choices[choice]), rtol=0, atol=1e-12)
        first = np.full(n_q, -1, dtype=np.int64)
        idx = np.flatnonzero(is_max)[::-1]
        first[data.opt_q[idx]] = data.opt_pos[idx]
        atype = data.answer_type
        for i in choice:
            pred_txt[i] = (("yes", "no")[first[i]] if atype[i] == "yesno" else letters[first[i]])
        fmt[choice] = "choice"
        maj[choice] = (out["maj_pos"][:, choice] == labels.gold_pos[choice][None, :]).mean(axis=0)
        conf_raw, corr_raw, conf_cal, corr_cal = [], [], [], []
        for r in range(reps):
            c0, a0 = top_label(out["p_opt"][r], seg, gold_rows)
            c1, a1 = top_label(out["p_cal"][r], seg, gold_rows)
            conf_raw.append(c0), corr_raw.append(a0), conf_cal.append(c1), corr_cal.append(a1)
        before = reliability(np.concatenate(conf_raw), np.concatenate(corr_raw))
        after = reliability(np.concatenate(conf_cal), np.concatenate(corr_cal))
        b = out["betas"][np.isfinite(out["betas"])]
        extra["calibration"] = {
            "method": out["calibrate"],
            "fitted_on": "for held-out fold f: the out-of-fold option probabilities and answers of the questions "
                         "outside f (its training folds), same repeat",
            "ece_before": before["ece"], "ece_after": after["ece"],
            "mean_p_gold_raw": float(s_raw[choice].mean()), "mean_p_gold_calibrated": float(s[choice].mean()),
            "power_beta_range": [float(b.min()), float(b.max())] if len(b) else [None, None],
            "reliability_before": before["bins"], "reliability_after": after["bins"],
            "ece_definition": "top-label: 10 equal-width bins of the largest P; sum of bin share x "
                              "|accuracy - mean confidence|; out of fold, pooled over repeats",
        }
    nq = data.num_q
    if len(nq):
        gold = labels.num_value
        s[nq] = S[:, nq].mean(axis=0)
        s_raw[nq] = s[nq]
        mra[nq] = s[nq]
        pm = signed_exp(np.nanmean(signed_log(out["num_pred"]), axis=0))
        pred_txt[nq] = [f"{v:.6g}" for v in pm]
        base = np.stack([mean_relative_accuracy(out["num_base"][r], gold) for r in range(reps)]).mean(axis=0)
        maj[nq] = base
        chance[nq] = base
        fmt[nq] = "numeric"
    per_q = pd.DataFrame({
        "question_id": data.question_id,
        "tst_s": s,
        "tst_s_minus_chance": s - chance,
        "tst_chance": chance,
        "tst_s_raw": s_raw,
        "tst_pred": pd.array(pred_txt, dtype="string"),
        "tst_correct": correct,
        "tst_mra": mra,
        "tst_majority": maj,
        "tst_format": fmt.astype(str),
    })
    return per_q, extra


def _block(per_q: pd.DataFrame, m: np.ndarray) -> dict:
    """n, accuracy (+ Wald interval over questions), chance, majority baseline, mean s(x) over ``m``."""
    corr = per_q["tst_correct"].to_numpy()[m]
    return {"n": int(m.sum()), "accuracy": _mean(corr), "accuracy_ci": _wald(corr),
            "chance": _mean(per_q["tst_chance"].to_numpy()[m]),
            "majority_baseline": _mean(per_q["tst_majority"].to_numpy()[m]),
            "mean_s": _mean(per_q["tst_s"].to_numpy()[m]), "mean_s_ci": _wald(per_q["tst_s"].to_numpy()[m]),
            "mean_s_raw": _mean(per_q["tst_s_raw"].to_numpy()[m]),
            "mean_s_minus_chance": _mean(per_q["tst_s_minus_chance"].to_numpy()[m])}


def _headline(data: TstData, per_q: pd.DataFrame, mask: np.ndarray | None = None) -> dict:
    """Per-format and combined figures over ``mask`` (the combination is over the same questions)."""
    m = np.ones(len(per_q), dtype=bool) if mask is None else mask
    fmt = per_q["tst_format"].to_numpy()
    out = {"all": _block(per_q, m & (fmt != "none"))}
    for f in ("choice", "numeric"):
        out[f] = _block(per_q, m & (fmt == f))
    out["n"] = int(m.sum())
    return out


def group_units(frame_questions: pd.DataFrame, group_column: str | None) -> np.ndarray | None:
    if group_column is None:
        return None
    if group_column not in frame_questions.columns:
        raise InputError(f"group column {group_column!r} is not a question column; "
                         f"available: {list(frame_questions.columns)}", column=group_column)
    g = frame_questions[group_column].astype(object)
    ids = frame_questions["question_id"].astype(str)
    g = g.where(g.notna(), "\x00q:" + ids)  # a question without a group is its own group
    codes, _ = pd.factorize(g.astype(str))
    return codes.astype(np.int64)


def permutation_null(data: TstData, labels: FullLabels, assign0: np.ndarray, featuriser, params: RfParams,
                     seed: int, groups: np.ndarray | None, n_permutations: int, *, jobs: int = 1,
                     progress: Callable[[], None] | None = None) -> dict[str, Any]:
    """The test statistic on the observed answers and on ``n_permutations`` permuted answer sets.

    One *test pipeline* (``params``: the cheaper refit, e.g. fewer trees) is run on repeat 0's folds
    ``assign0`` (1, Q) with repeat 0's forest seeds, once on the observed answers and once per
    permutation, so the observed statistic and the null statistics are computed identically.
    Returns {"observed": {fmt: float}, "null": {fmt: (N,) array}, "n_exchangeable": int} with fmt in
    choice / numeric / all. Runs in ``jobs`` threads (tree building releases the GIL); the result
    does not depend on ``jobs``.
    """
    from dataclasses import replace

    from .null import Permuter, strata_codes

    perm = Permuter.build(strata_codes(data.kind, data.category, data.n_choices, data.answer_type), groups, seed)
    p0 = replace(params, importances=False, n_jobs=1)
    num_pos = np.full(data.n_questions, -1, dtype=np.int64)
    num_pos[data.num_q] = np.arange(len(data.num_q))

    def one(b: int) -> dict[str, float]:
        if b < 0:
            lab = labels
        else:
            src = perm.source(b)
            gp = labels.gold_pos[src]
            lab = FullLabels(opt_gold=(data.opt_pos == gp[data.opt_q]).astype(np.int8), gold_pos=gp,
                             num_value=labels.num_value[num_pos[src[data.num_q]]])
        out = _cv_rf(data, lab, assign0, featuriser, p0, seed, calibrate="none")
        fm = format_means(data, repeat_scores(data, lab, out))
        if progress is not None and b >= 0:
            progress()
        return {k_: float(v[0]) for k_, v in fm.items()}

    todo = list(range(-1, n_permutations))
    import warnings

    with warnings.catch_warnings():
        # scikit-learn's forests warn about their joblib config when fitted inside a worker thread
        warnings.filterwarnings("ignore", message=".*sklearn.utils.parallel.delayed.*")
        if jobs > 1 and len(todo) > 1:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=jobs) as ex:
                rows = list(ex.map(one, todo))
        else:
            rows = [one(b) for b in todo]
    fmts = ("choice", "numeric", "all")
    return {"observed": rows[0], "null": {f: np.array([r_[f] for r_ in rows[1:]], dtype=np.float64) for f in fmts},
            "n_exchangeable": perm.n_exchangeable}


def default_null_jobs() -> int:
    """Threads for the permutation null: the machine's cores, at most 4."""
    import os

    return max(1, min(4, os.cpu_count() or 1))


# What the summary's derived figures mean (recorded with them).
_DEFINITIONS = {
    "combination": "n-weighted over the scored questions: choice accuracy and numeric MRA, choice 1/K and "
                   "numeric baseline MRA, each over the same questions",
    "numeric_chance_definition": "per question: MRA of the training-fold median gold value of its category "
                                 "(global training median for an unseen category), out of fold, mean over "
                                 "repeats (also the numeric majority baseline)",
    "importance_method": "permutation of each feature group's columns on the held-out rows (repeat 0, "
                         "one permutation per fold); drop in mean held-out raw P(gold) / numeric MRA",
    "reading_definition": "per format: shortcut = the null test rejects at p <= 0.05 and the score's interval is "
                          "above chance (numeric: the category-median baseline); information_only = the null test "
                          "rejects but the score is not above chance (forests fitted to shuffled answers score "
                          "below chance, so the text saves a forest from that loss, no shortcut beyond the "
                          "stratum's answer frequencies); no_evidence = the null test does not reject",
}


def _fold_headline(data: TstData, per_q: pd.DataFrame) -> dict:
    h = _headline(data, per_q)
    return {"accuracy": h["all"]["accuracy"], "mean_p_gold": h["choice"]["mean_s"]}


#: the level at which a format's null test is read as "the text predicts the answer"
TST_ALPHA = 0.05


def score_vs_chance(b: dict) -> str | None:
    """Where a format's score sits against its chance level (numeric: the category-median baseline), by the
    score's interval: ``"above"``, ``"at"`` or ``"below"``; None without a score."""
    acc, ch, c = b.get("accuracy"), b.get("chance"), b.get("accuracy_ci") or (None, None)
    if acc is None or ch is None:
        return None
    if c and c[0] is not None and c[1] is not None:
        return "above" if c[0] > ch else "below" if c[1] < ch else "at"
    return "above" if acc > ch else "below" if acc < ch else "at"


def tst_reading(b: dict) -> str | None:
    """What a format's two figures say together: ``"shortcut"`` (the null test rejects and the score is above
    chance), ``"information_only"`` (the null test rejects but the score is not above chance: forests fitted to
    shuffled answers score below the chance level, so the text saves a forest from that loss without a shortcut
    beyond what the stratum's answer frequencies give), ``"no_evidence"`` (the null test does not reject); None
    without a null."""
    p = b.get("p_value")
    if p is None:
        return None
    if p > TST_ALPHA:
        return "no_evidence"
    return "shortcut" if score_vs_chance(b) == "above" else "information_only"


def _by_format(head: dict, null: dict | None, extra: dict) -> dict:
    """Per answer format (choice, numeric): accuracy, chance, baselines and the null figures."""
    from .null import null_figures

    none = np.zeros(0)
    by_format = {}
    for f in ("choice", "numeric"):
        b = head[f]
        if b["n"] == 0:
            continue
        nf = null_figures(None if null is None else null["observed"][f], null["null"][f] if null else none)
        by_format[f] = {
            "n": b["n"], "accuracy": b["accuracy"], "accuracy_ci": b["accuracy_ci"],
            "accuracy_measure": "argmax P(gold) is gold (tie-aware)" if f == "choice" else "mean relative accuracy",
            "chance": b["chance"], "majority_baseline": b["majority_baseline"], **nf,
            "excess_over_chance": None if b["accuracy"] is None else b["accuracy"] - b["chance"],
            "mean_s": b["mean_s"], "mean_s_ci": b["mean_s_ci"], "mean_s_raw": b["mean_s_raw"],
        }
        by_format[f]["score_vs_chance"] = score_vs_chance(by_format[f])
        by_format[f]["reading"] = tst_reading(by_format[f])
        if f == "choice" and "calibration" in extra:
            c = extra["calibration"]
            by_format[f].update({"mean_p_gold": b["mean_s"], "mean_p_gold_raw": b["mean_s_raw"],
                                 "ece_before": c["ece_before"], "ece_after": c["ece_after"]})
    return by_format


def _per_category_rows(data: TstData, per_q: pd.DataFrame) -> list[dict]:
    """The headline figures of each category."""
    per_cat = []
    for c, label in enumerate(data.category_labels):
        h = _headline(data, per_q, data.category == c)
        per_cat.append({"category": label, "n": h["n"], "n_scored": h["all"]["n"], "n_choice": h["choice"]["n"],
                        "n_numeric": h["numeric"]["n"], "accuracy": h["all"]["accuracy"],
                        "chance": h["all"]["chance"], "majority_baseline": h["all"]["majority_baseline"],
                        "mean_p_gold": h["choice"]["mean_s"], "choice_accuracy": h["choice"]["accuracy"],
                        "numeric_mra": h["numeric"]["mean_s"], "numeric_baseline_mra": h["numeric"]["chance"],
                        "mean_s_minus_chance": h["all"]["mean_s_minus_chance"]})
    return per_cat


def _importance_rows(importances: dict[str, list[tuple[str, float]]]) -> list[dict]:
    """Mean drop per feature group and format, largest first."""
    imp_rows = []
    for g, vals in sorted(importances.items()):
        ch = [v for f_, v in vals if f_ == "choice"]
        nu = [v for f_, v in vals if f_ == "numeric"]
        imp_rows.append({"group": g, "drop_mean_p_gold": float(np.mean(ch)) if ch else None,
                         "drop_numeric_mra": float(np.mean(nu)) if nu else None})
    imp_rows.sort(key=lambda d: -(d["drop_mean_p_gold"] or 0.0) - (d["drop_numeric_mra"] or 0.0))
    return imp_rows


def _null_settings(null: dict | None, null_permutations: int, n_trees: int, n_rows: int, seed: int,
                   group_column: str | None) -> dict:
    """What the label-permutation null assumes and computes (recorded in the summary)."""
    return {
        "n_permutations": int(null_permutations),
        "n_exchangeable_questions": None if null is None else null["n_exchangeable"],
        "assumes": "within a stratum (category x answer format x number of options) the gold answer is "
                   "independent of the question and option text; with a group column, the answers of one "
                   "group's questions in a stratum move together",
        "strata": "category x format (choice / yes-no / numeric) x number of options",
        "statistic": f"out-of-fold accuracy (numeric: MRA) per format and n-weighted overall of the test "
                     f"pipeline: repeat 0's folds and forest seeds, the same features, {n_trees} trees per "
                     f"forest on at most {n_rows} bootstrap rows; computed "
                     "identically on the observed answers (test_statistic) and on every permutation",
        "p_value": "one-sided, (1 + #{null >= observed}) / (N + 1)",
        "excess": "test_statistic minus the null mean (same pipeline, so no bias under the null); "
                  "excess_ci = excess +/- 1.96 null sd",
        "seed_rule": f"permutation b: numpy default_rng([{seed}, 0x7E57, b])",
        "group_column": group_column,
    }


def check_calibration(calibrate: str) -> None:
    """``--calibration`` is one of :data:`.scaling.METHODS` (one line naming the option otherwise)."""
    from .scaling import METHODS

    if calibrate not in METHODS:
        raise InputError(f"--calibration must be one of {', '.join(METHODS)}, got {calibrate!r}")


def _checked_data(frame, calibrate: str, null_permutations: int) -> tuple[pd.DataFrame, TstData, FullLabels]:
    """The questions, TsT's arrays and labels, after checking the settings and that something is scorable."""
    check_calibration(calibrate)
    if null_permutations < 0:
        raise InputError(f"--null-permutations must be >= 0, got {null_permutations}")
    questions = frame.questions if hasattr(frame, "questions") else frame
    data, labels = build_data(questions)
    if (data.kind >= 0).sum() == 0:
        raise InputError("TsT-RF found no multiple-choice, yes/no or numeric question to score")
    return questions, data, labels


def _run_groupings(data: TstData, labels: FullLabels, groups: np.ndarray | None, both_groupings: bool,
                   featuriser, params: RfParams, *, k: int, repeats: int, seed: int, calibrate: str,
                   progress) -> tuple[dict[str, tuple], dict[str, np.ndarray]]:
    """The cross-validated run with grouped folds (when a group column is given) and/or ungrouped ones.

    Folds are stratified by category x format (choice / yes-no / numeric)."""
    strata = data.category * 3 + np.where(data.kind == 1, 1, np.where(data.kind == 0, 0, 2))
    runs: dict[str, tuple] = {}
    plan = [("grouped", groups)] if groups is not None else []
    if groups is None or both_groupings:
        plan.append(("ungrouped", None))
    assigns = {}
    for name, g in plan:
        data.meta_units = g if g is not None else np.arange(data.n_questions)  # type: ignore[attr-defined]
        assign = fold_assignments(strata, g, k=k, repeats=repeats, seed=seed)
        out = _cv_rf(data, labels, assign, featuriser, params, seed, progress, calibrate=calibrate)
        per_q, extra = _evaluate(data, labels, out)
        runs[name] = (per_q, out, extra)
        assigns[name] = assign
    return runs, assigns


def _forest_params(params: RfParams, n_estimators: int, max_samples: int) -> dict:
    return {"n_estimators": n_estimators, "min_samples_leaf": params.min_samples_leaf,
            "max_samples_per_tree": max_samples, "n_inner_crossfit": params.n_inner,
            "max_train_rows": params.max_train_rows}


def _label_null(data: TstData, labels: FullLabels, assign: np.ndarray, featuriser, params: RfParams,
                groups: np.ndarray | None, seed: int, n_permutations: int, *, n_trees: int, n_rows: int, jobs: int,
                progress) -> dict:
    """The label-permutation null of the test pipeline (repeat 0's folds, smaller forests)."""
    from dataclasses import replace

    data.meta_units = groups if groups is not None else np.arange(data.n_questions)  # type: ignore[attr-defined]
    test_params = replace(params, n_estimators=n_trees, max_samples=n_rows)
    return permutation_null(data, labels, assign, featuriser, test_params, seed, groups, n_permutations, jobs=jobs,
                            progress=progress)


def run_tst_rf(frame, *, k: int = 5, repeats: int = 3, seed: int = 0, group_column: str | None = None,
               n_estimators: int = DEFAULT_TREES, n_jobs: int = 1, featurisers: Sequence[str] = ("generic",),
               min_samples_leaf: int = 5, max_samples: int = DEFAULT_MAX_SAMPLES, n_inner: int = 5,
               importances: bool = True, both_groupings: bool = True, max_train_rows: int | None = 60_000,
               null_permutations: int = DEFAULT_PERMUTATIONS, null_jobs: int | None = None,
               null_trees: int = NULL_TREES, null_max_samples: int = NULL_MAX_SAMPLES, calibrate: str = "isotonic",
               progress: Callable[[], None] | None = None) -> TstResult:
    """TsT-RF on an :class:`~audit_hub.frame.core.AuditFrame` (pure: no I/O, deterministic for a seed).

    ``group_column``: a question column (e.g. ``group_id`` = image or scene) kept together in one
    fold; when given, the run is done with grouped folds (these give ``per_question``) and, if
    ``both_groupings``, again with ungrouped folds, and the summary reports both.
    Repeat ``r`` uses fold seed ``seed + r``; forests are seeded from (seed, repeat, fold).
    ``null_permutations``: size of the label-permutation null (:mod:`audit_hub.tst.null`); 0 skips it.
    The test statistic is the out-of-fold accuracy per format of a *test pipeline*: repeat 0's folds
    and forest seeds, the same features, forests of ``null_trees`` trees on at most
    ``null_max_samples`` bootstrap rows; it is computed identically on the observed and on every
    permuted answer set. ``null_jobs``: threads for it (default: the machine's cores, at most 4).
    ``calibrate``: ``isotonic`` (default), ``power`` or ``none`` (:mod:`.calibrate`).
    """
    from time import perf_counter

    from .null import null_figures

    t0 = perf_counter()
    questions, data, labels = _checked_data(frame, calibrate, null_permutations)
    featuriser = make_featuriser(list(featurisers))
    params = RfParams(n_estimators=n_estimators, min_samples_leaf=min_samples_leaf, max_samples=max_samples,
                      n_jobs=n_jobs, n_inner=n_inner, importances=importances, max_train_rows=max_train_rows)
    groups = group_units(questions, group_column)
    runs, assigns = _run_groupings(data, labels, groups, both_groupings, featuriser, params,
                                   k=k, repeats=repeats, seed=seed, calibrate=calibrate, progress=progress)
    main = "grouped" if groups is not None else "ungrouped"
    per_q, out, extra = runs[main]
    t_main = perf_counter() - t0

    # ---- the label-permutation null (on the main grouping)
    null = None
    if null_permutations > 0:
        null = _label_null(data, labels, assigns[main][:1], featuriser, params, groups, seed, null_permutations,
                           n_trees=min(null_trees, n_estimators), n_rows=min(max_samples, null_max_samples),
                           jobs=null_jobs or default_null_jobs(), progress=progress)
    none = np.zeros(0)
    head = _headline(data, per_q)
    by_format = _by_format(head, null, extra)
    a = head["all"]
    nf_all = null_figures(None if null is None else null["observed"]["all"], null["null"]["all"] if null else none)
    per_cat = _per_category_rows(data, per_q)
    imp_rows = _importance_rows(out["importances"])
    summary = {
        "method": "TsT-RF",
        "accuracy": a["accuracy"], "accuracy_ci": a["accuracy_ci"], "chance": a["chance"],
        "majority_baseline": a["majority_baseline"], **nf_all,
        "excess_over_chance": None if a["accuracy"] is None else a["accuracy"] - a["chance"],
        "combination": _DEFINITIONS["combination"],
        "mean_p_gold": head["choice"]["mean_s"], "mean_p_gold_ci": head["choice"]["mean_s_ci"],
        "mean_p_gold_raw": head["choice"]["mean_s_raw"],
        "n_questions": int(data.n_questions), "n_scored": a["n"], "n_choice": head["choice"]["n"],
        "n_numeric": head["numeric"]["n"], "n_unscored": int(data.n_questions - a["n"]),
        "by_format": by_format,
        "reading_definition": _DEFINITIONS["reading_definition"],
        "null": _null_settings(null, null_permutations, min(null_trees, n_estimators),
                               min(max_samples, null_max_samples), seed, group_column),
        "numeric_chance_definition": _DEFINITIONS["numeric_chance_definition"],
        "calibration": {k_: v for k_, v in extra.get("calibration", {}).items()},
        "per_category": per_cat,
        "folds": {name: _fold_headline(data, runs[name][0]) for name in runs},
        "per_question_from": main,
        "feature_importances": imp_rows,
        "importance_method": _DEFINITIONS["importance_method"],
        "feature_names": out["feature_names"],
        "params": {"k": k, "repeats": repeats, "seed": seed, "fold_seeds": [seed + r for r in range(repeats)],
                   "group_column": group_column, **_forest_params(params, n_estimators, max_samples),
                   "null_permutations": int(null_permutations), "null_trees": min(null_trees, n_estimators),
                   "null_max_samples": min(max_samples, null_max_samples), "calibrate": calibrate,
                   "featurisers": list(featurisers), "forest_seed_rule": "seed*1000003 + repeat*1009 + fold"},
    }
    arrays = {"p_opt": out["p_opt"], "p_cal": out["p_cal"], "opt_q": data.opt_q, "opt_pos": data.opt_pos,
              "repeat_scores": extra["repeat_scores"], "null": null, "seconds": perf_counter() - t0,
              "seconds_main": t_main}
    return TstResult(per_question=per_q, summary=summary, arrays=arrays)
