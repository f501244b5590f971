"""TsT-RF: k-fold random-forest stress test of a benchmark's questions (no images, no models).

An option-level classifier ("is this option gold?", scikit-learn ``RandomForestClassifier``) is
trained on the k-1 training folds and scores the held-out fold; its probabilities are normalised
within each question to P(gold) over the options, so any number of options works. Numeric
questions get a ``RandomForestRegressor`` scored by Mean Relative Accuracy. ``s(x)`` is the
out-of-fold P(gold) (or MRA), averaged over repeats with different fold seeds.

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
from .cv import fold_assignments, inner_folds, run_cv
from .features import FullLabels, TstData, build_data, feature_group, make_featuriser, signed_exp, signed_log

MRA_THRESHOLDS = np.linspace(0.50, 0.95, 10)
Z95 = 1.959963984540054
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
    ``tst_s`` (s(x): out-of-fold P(gold) or MRA, averaged over repeats; NaN when not scored),
    ``tst_s_minus_chance``, ``tst_chance`` (1/K; for numeric questions the benchmark's baseline MRA),
    ``tst_pred`` (predicted letter / value as text), ``tst_correct`` (1/0, tie-aware fraction for
    tied maxima; MRA for numeric), ``tst_mra`` (numeric only), ``tst_format`` (choice/numeric/none).
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


def _make_rf(kind: str, p: RfParams, n_rows: int, seed: int):
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if kind == "clf" else RandomForestRegressor
    ms = None if n_rows <= p.max_samples else p.max_samples
    return cls(n_estimators=p.n_estimators, min_samples_leaf=p.min_samples_leaf, max_features=p.max_features,
               max_samples=ms, n_jobs=p.n_jobs, random_state=seed)


def _cv_rf(data: TstData, labels: FullLabels, assign: np.ndarray, featuriser, params: RfParams, seed: int,
           progress: Callable[[], None] | None = None) -> dict[str, Any]:
    """Out-of-fold predictions for every repeat (the core TsT-RF loop)."""
    n_q = data.n_questions
    R = len(data.opt_q)
    Nn = len(data.num_q)
    reps = assign.shape[0]
    p_opt = np.full((reps, R), np.nan)
    num_pred = np.full((reps, Nn), np.nan)
    maj_pos = np.full(n_q, -1, dtype=np.int64)
    num_base = np.full(Nn, np.nan)
    scorable = data.kind >= 0
    units = data.meta_units if hasattr(data, "meta_units") else np.arange(n_q)
    imp: dict[str, list[tuple[str, float]]] = {}
    k_row = np.maximum(data.n_choices[data.opt_q].astype(np.float64), 1.0)
    ncat = len(data.category_labels)
    kmax = int(data.n_choices.max()) if n_q else 0
    feat_names: dict[str, list[str]] = {}

    def fit_predict(train: np.ndarray, test: np.ndarray, r: int, f: int):
        train = train & scorable
        test = test & scorable
        fseed = seed * 1_000_003 + r * 1009 + f
        inner = inner_folds(units, train, params.n_inner, fseed)
        # --- training features by cross-fitting; held-out features from the whole training set
        tr_opt_parts, tr_num_parts = [], []
        Xo_parts, Xn_parts = [], []
        for j in range(params.n_inner):
            fit_mask = train & (inner != j)
            part = inner == j
            if not part.any():
                continue
            fitted = featuriser.fit(data, labels.view(data, fit_mask))
            orows = np.flatnonzero(part[data.opt_q])
            nrows = np.flatnonzero(part[data.num_q])
            tr_opt_parts.append(orows)
            tr_num_parts.append(nrows)
            Xo_parts.append(fitted.option_features(data, orows))
            Xn_parts.append(fitted.numeric_features(data, nrows))
        fitted_all = featuriser.fit(data, labels.view(data, train))
        te_o = np.flatnonzero(test[data.opt_q])
        te_n = np.flatnonzero(test[data.num_q])
        # --- option-level classifier
        if len(te_o):
            cols_te = fitted_all.option_features(data, te_o)
            names = feat_names.setdefault("option", list(cols_te))
            Xte, _ = _matrix(cols_te, names)
            Xtr = np.concatenate([_matrix(c, names)[0] for c in Xo_parts], axis=0)
            tr_rows = np.concatenate(tr_opt_parts)
            sub = _cap_rows(data.opt_q[tr_rows], params.max_train_rows, fseed + 3)
            Xtr, tr_rows = Xtr[sub], tr_rows[sub]
            y = labels.opt_gold[tr_rows]
            if len(np.unique(y)) < 2:
                raise InputError("TsT-RF: a training fold has no gold (or only gold) options")
            clf = _make_rf("clf", params, len(tr_rows), fseed)
            clf.fit(Xtr, y)
            clf.set_params(n_jobs=1)  # prediction in a fixed order: bit-identical reruns
            ql, qn = np.unique(data.opt_q[te_o], return_inverse=True)

            def score_opt(X):
                pr = clf.predict_proba(X)[:, list(clf.classes_).index(1)]
                return _normalise(pr, qn, len(ql), k_row[te_o])

            pn = score_opt(Xte)
            p_opt[r, te_o] = pn
            if r == 0 and params.importances:
                # on at most IMPORTANCE_ROWS held-out option rows (whole questions), for speed
                rng = np.random.default_rng(fseed)
                sub = np.arange(len(te_o))
                if len(ql) * 4 > IMPORTANCE_ROWS:
                    keep_q = np.zeros(len(ql), dtype=bool)
                    keep_q[rng.permutation(len(ql))[: max(IMPORTANCE_ROWS // 4, 1)]] = True
                    sub = np.flatnonzero(keep_q[qn])
                _, qn_s = np.unique(qn[sub], return_inverse=True)
                Xs = Xte[sub]
                gold = labels.opt_gold[te_o[sub]] == 1

                def score_sub(X):
                    pr = clf.predict_proba(X)[:, list(clf.classes_).index(1)]
                    return _normalise(pr, qn_s, int(qn_s.max()) + 1, k_row[te_o[sub]])

                base = score_sub(Xs)[gold].mean()
                for g in sorted({feature_group(c) for c in names}):
                    idx = [i for i, c in enumerate(names) if feature_group(c) == g]
                    Xp = Xs.copy()
                    Xp[:, idx] = Xs[rng.permutation(len(Xs))][:, idx]
                    imp.setdefault(g, []).append(("choice", float(base - score_sub(Xp)[gold].mean())))
        # --- numeric regressor
        if len(te_n):
            cols_te = fitted_all.numeric_features(data, te_n)
            names = feat_names.setdefault("numeric", list(cols_te))
            Xte, _ = _matrix(cols_te, names)
            tr_rows = np.concatenate(tr_num_parts)
            gold_te = labels.num_value[te_n]
            if len(tr_rows) == 0:
                num_pred[r, te_n] = np.nan
            else:
                Xtr = np.concatenate([_matrix(c, names)[0] for c in Xn_parts], axis=0)
                sub = _cap_rows(tr_rows, params.max_train_rows, fseed + 5)
                Xtr, tr_rows = Xtr[sub], tr_rows[sub]
                reg = _make_rf("reg", params, len(tr_rows), fseed + 1)
                reg.fit(Xtr, signed_log(labels.num_value[tr_rows]))
                reg.set_params(n_jobs=1)
                pv = signed_exp(reg.predict(Xte))
                num_pred[r, te_n] = pv
                if r == 0 and params.importances:
                    base = mean_relative_accuracy(pv, gold_te).mean()
                    rng = np.random.default_rng(fseed + 7)
                    for g in sorted({feature_group(c) for c in names}):
                        idx = [i for i, c in enumerate(names) if feature_group(c) == g]
                        Xp = Xte.copy()
                        Xp[:, idx] = Xte[rng.permutation(len(Xp))][:, idx]
                        drop = base - mean_relative_accuracy(signed_exp(reg.predict(Xp)), gold_te).mean()
                        imp.setdefault(g, []).append(("numeric", float(drop)))
        # --- majority-answer baseline (repeat 0): most frequent gold position per category,
        #     per-category median gold value for numeric questions; both learned on training folds.
        if r == 0:
            ch_tr = train & (data.kind == 0)
            cnt = np.zeros((ncat, max(kmax, 1)))
            np.add.at(cnt, (data.category[ch_tr], labels.gold_pos[ch_tr].astype(np.int64)), 1.0)
            ch_te = np.flatnonzero(test & (data.kind == 0))
            if len(ch_te):
                rows = cnt[data.category[ch_te]].copy()
                rows[np.arange(kmax)[None, :] >= data.n_choices[ch_te][:, None]] = -1.0
                maj_pos[ch_te] = rows.argmax(axis=1)
            if len(te_n):
                trn = train[data.num_q]
                vals = labels.num_value[trn]
                gmed = float(np.median(vals)) if len(vals) else 0.0
                cats = data.category[data.num_q]
                med = np.full(ncat, gmed)
                for c in np.unique(cats[te_n]):
                    v = labels.num_value[trn & (cats == c)]
                    if len(v):
                        med[c] = float(np.median(v))
                num_base[te_n] = med[cats[te_n]]
        return None

    run_cv(assign, fit_predict, progress)
    return {"p_opt": p_opt, "num_pred": num_pred, "maj_pos": maj_pos, "num_base": num_base,
            "importances": imp, "feature_names": feat_names}


def _evaluate(data: TstData, labels: FullLabels, out: dict[str, Any]) -> tuple[pd.DataFrame, dict]:
    """Per-question scores and the headline figures from out-of-fold predictions."""
    n_q = data.n_questions
    letters = LETTERS
    s = np.full(n_q, np.nan)
    chance = np.full(n_q, np.nan)
    correct = np.full(n_q, np.nan)
    mra = np.full(n_q, np.nan)
    maj = np.full(n_q, np.nan)
    pred_txt = np.full(n_q, None, dtype=object)
    fmt = np.full(n_q, "none", dtype=object)
    # choice questions
    choice = np.flatnonzero(data.kind == 0)
    if len(choice):
        p_mean = out["p_opt"].mean(axis=0)  # (R,)
        gold_rows = labels.opt_gold == 1
        s[data.opt_q[gold_rows]] = p_mean[gold_rows]
        chance[choice] = 1.0 / data.n_choices[choice]
        qmax = np.full(n_q, -np.inf)
        np.maximum.at(qmax, data.opt_q, p_mean)
        is_max = np.isclose(p_mean, qmax[data.opt_q], rtol=0, atol=1e-12)
        n_max = np.bincount(data.opt_q, weights=is_max, minlength=n_q)
        gold_is_max = np.bincount(data.opt_q, weights=is_max & gold_rows, minlength=n_q)
        correct[choice] = gold_is_max[choice] / n_max[choice]
        # first maximum's position as the predicted letter
        first = np.full(n_q, -1, dtype=np.int64)
        idx = np.flatnonzero(is_max)[::-1]
        first[data.opt_q[idx]] = data.opt_pos[idx]
        atype = data.answer_type
        for i in choice:
            pred_txt[i] = (("yes", "no")[first[i]] if atype[i] == "yesno" else letters[first[i]])
        fmt[choice] = "choice"
        maj[choice] = (out["maj_pos"][choice] == labels.gold_pos[choice]).astype(np.float64)
    nq = data.num_q
    num_chance = None
    if len(nq):
        gold = labels.num_value
        per_rep = np.stack([mean_relative_accuracy(out["num_pred"][r], gold) for r in range(out["num_pred"].shape[0])])
        s[nq] = per_rep.mean(axis=0)
        mra[nq] = s[nq]
        correct[nq] = s[nq]
        pm = signed_exp(np.nanmean(signed_log(out["num_pred"]), axis=0))
        pred_txt[nq] = [f"{v:.6g}" for v in pm]
        base = mean_relative_accuracy(out["num_base"], gold)
        maj[nq] = base
        num_chance = float(base.mean())
        chance[nq] = num_chance
        fmt[nq] = "numeric"
    per_q = pd.DataFrame({
        "question_id": data.question_id,
        "tst_s": s,
        "tst_s_minus_chance": s - chance,
        "tst_chance": chance,
        "tst_pred": pd.array(pred_txt, dtype="string"),
        "tst_correct": correct,
        "tst_mra": mra,
        "tst_majority": maj,
        "tst_format": fmt.astype(str),
    })
    return per_q, {"num_chance": num_chance}


def _headline(data: TstData, per_q: pd.DataFrame, mask: np.ndarray | None = None) -> dict:
    """accuracy / mean_p_gold / chance / majority_baseline (+ intervals) over ``mask``."""
    m = np.ones(len(per_q), dtype=bool) if mask is None else mask
    fmt = per_q["tst_format"].to_numpy()
    scored = m & (fmt != "none")
    ch = m & (fmt == "choice")
    nu = m & (fmt == "numeric")
    corr = per_q["tst_correct"].to_numpy()
    s = per_q["tst_s"].to_numpy()
    chance = per_q["tst_chance"].to_numpy()
    maj = per_q["tst_majority"].to_numpy()
    return {
        "n": int(m.sum()), "n_scored": int(scored.sum()), "n_choice": int(ch.sum()), "n_numeric": int(nu.sum()),
        "accuracy": _mean(corr[scored]), "accuracy_ci": _wald(corr[scored]),
        "mean_p_gold": _mean(s[ch]), "mean_p_gold_ci": _wald(s[ch]),
        "chance": _mean(chance[ch]),
        "majority_baseline": _mean(maj[scored]),
        "choice_accuracy": _mean(corr[ch]), "choice_majority_baseline": _mean(maj[ch]),
        "numeric_mra": _mean(s[nu]), "numeric_mra_ci": _wald(s[nu]), "numeric_baseline_mra": _mean(maj[nu]),
        "mean_s_minus_chance": _mean((s - chance)[scored]),
    }


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


def run_tst_rf(frame, *, k: int = 5, repeats: int = 3, seed: int = 0, group_column: str | None = None,
               n_estimators: int = 50, n_jobs: int = 1, featurisers: Sequence[str] = ("generic",),
               min_samples_leaf: int = 5, max_samples: int = 5_000, n_inner: int = 5,
               importances: bool = True, both_groupings: bool = True, max_train_rows: int | None = 60_000,
               progress: Callable[[], None] | None = None) -> TstResult:
    """TsT-RF on an :class:`~audit_hub.frame.AuditFrame` (pure: no I/O, deterministic for a seed).

    ``group_column``: a question column (e.g. ``group_id`` = image or scene) kept together in one
    fold; when given, the run is done with grouped folds (these give ``per_question``) and, if
    ``both_groupings``, again with ungrouped folds, and the summary reports both.
    Repeat ``r`` uses fold seed ``seed + r``; forests are seeded from (seed, repeat, fold).
    """
    from time import perf_counter

    t0 = perf_counter()
    questions = frame.questions if hasattr(frame, "questions") else frame
    data, labels = build_data(questions)
    if (data.kind >= 0).sum() == 0:
        raise InputError("TsT-RF found no multiple-choice, yes/no or numeric question to score")
    featuriser = make_featuriser(list(featurisers))
    params = RfParams(n_estimators=n_estimators, min_samples_leaf=min_samples_leaf, max_samples=max_samples,
                      n_jobs=n_jobs, n_inner=n_inner, importances=importances, max_train_rows=max_train_rows)
    strata = data.category * 3 + np.where(data.kind == 1, 1, np.where(data.kind == 0, 0, 2))
    groups = group_units(questions, group_column)
    runs: dict[str, tuple] = {}
    plan = [("grouped", groups)] if groups is not None else []
    if groups is None or both_groupings:
        plan.append(("ungrouped", None))
    for name, g in plan:
        data.meta_units = g if g is not None else np.arange(data.n_questions)  # type: ignore[attr-defined]
        assign = fold_assignments(strata, g, k=k, repeats=repeats, seed=seed)
        out = _cv_rf(data, labels, assign, featuriser, params, seed, progress)
        per_q, extra = _evaluate(data, labels, out)
        runs[name] = (per_q, out, extra)
    main = "grouped" if groups is not None else "ungrouped"
    per_q, out, extra = runs[main]

    head = _headline(data, per_q)
    per_cat = []
    for c, label in enumerate(data.category_labels):
        h = _headline(data, per_q, data.category == c)
        per_cat.append({"category": label, **{key: h[key] for key in (
            "n", "n_scored", "n_choice", "n_numeric", "accuracy", "mean_p_gold", "chance", "majority_baseline",
            "numeric_mra", "numeric_baseline_mra", "mean_s_minus_chance")}})
    imp_rows = []
    for g, vals in sorted(out["importances"].items()):
        ch = [v for f_, v in vals if f_ == "choice"]
        nu = [v for f_, v in vals if f_ == "numeric"]
        imp_rows.append({"group": g, "drop_mean_p_gold": float(np.mean(ch)) if ch else None,
                         "drop_numeric_mra": float(np.mean(nu)) if nu else None})
    imp_rows.sort(key=lambda d: -(d["drop_mean_p_gold"] or 0.0) - (d["drop_numeric_mra"] or 0.0))
    summary = {
        "method": "TsT-RF",
        **{key: head[key] for key in ("accuracy", "accuracy_ci", "mean_p_gold", "mean_p_gold_ci", "chance",
                                      "majority_baseline")},
        "n_questions": int(data.n_questions), "n_scored": head["n_scored"], "n_choice": head["n_choice"],
        "n_numeric": head["n_numeric"], "n_unscored": int(data.n_questions - head["n_scored"]),
        "by_format": {"choice": {k_: head[k_] for k_ in ("n_choice", "choice_accuracy", "mean_p_gold", "chance",
                                                        "choice_majority_baseline")},
                      "numeric": {k_: head[k_] for k_ in ("n_numeric", "numeric_mra", "numeric_mra_ci",
                                                         "numeric_baseline_mra")}},
        "numeric_chance_definition": "out-of-fold MRA of the per-category training median (also the numeric "
                                     "majority baseline); used as tst_chance for numeric questions",
        "per_category": per_cat,
        "folds": {name: _headline(data, runs[name][0]) for name in runs},
        "per_question_from": main,
        "feature_importances": imp_rows,
        "importance_method": "permutation of each feature group's columns on the held-out rows (repeat 0, "
                             "one permutation per fold); drop in mean held-out P(gold) / numeric MRA",
        "feature_names": out["feature_names"],
        "params": {"k": k, "repeats": repeats, "seed": seed, "fold_seeds": [seed + r for r in range(repeats)],
                   "group_column": group_column, "n_estimators": n_estimators, "min_samples_leaf": min_samples_leaf,
                   "max_samples_per_tree": max_samples, "n_inner_crossfit": n_inner,
                   "max_train_rows": max_train_rows,
                   "featurisers": list(featurisers), "forest_seed_rule": "seed*1000003 + repeat*1009 + fold"},
    }
    arrays = {"p_opt": out["p_opt"], "opt_q": data.opt_q, "opt_pos": data.opt_pos,
              "seconds": perf_counter() - t0}
    return TstResult(per_question=per_q, summary=summary, arrays=arrays)
