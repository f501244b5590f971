"""PNG figures for the report card (matplotlib, Agg backend, imported inside the functions).

* ``full_vs_blind.png``: model-averaged accuracy with vs without the image, one jittered point per
  question (the paper's Figure 2a); cells on the zero-gain diagonal are highlighted and counted.
* ``null_distribution.png``: the observed zero-gain share against the permutation null (2b), and
  what the zero-gain items are (2c: split by how many models solve them).
* ``categories.png``: per-category zero-gain excess and unanimous non-gold counts (Figure 3).
* ``judge.png``: per-category shares under the judge and under exact matching, and which models
  account for the disagreement (Figure 4).

Two steps: :func:`figure_inputs` takes from the audit result the few small arrays and tables the figures
draw (per-question correct counts, the null draws, per-category rows, judge counts: picklable, megabytes
at 1M questions), with None for a figure the inputs do not support; :func:`render_figures` draws them.
The report writer can so hand the drawing to the calibration worker process while it writes the tables
and the card (the card needs only the names, :func:`planned`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import detectors
from ..fmt import fmt_p, isnum, pct, pp
from ..hub.figures import fig_label, pyplot_agg, save_png
from ..schema import ARMS

MAX_POINTS = 30_000
BLUE, ORANGE, GREY, RED = "#3b6ea8", "#e07b24", "#9a9a9a", "#c0392b"




def _accuracy(frame, arm: str, field: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per question: number correct, number with a known outcome, share (nan when none known)."""
    c = frame.correctness(arm, field=field, models=frame.models_in(arm))
    k = (c == 1).sum(axis=1)
    n = (c >= 0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(n > 0, k / np.maximum(n, 1), np.nan)
    return k, n, share


def _table(summary_df: pd.DataFrame, role: str, primary: bool = True) -> pd.DataFrame:
    """Per-category rows of the headline statistic of the detector that plays ``role`` in the card."""
    detector = detectors.by_role(role)
    if detector is None:
        return summary_df.iloc[:0]
    stat = detectors.get(detector).headline_statistic
    t = summary_df[(summary_df["detector"] == detector) & (summary_df["primary"] == primary)]
    st = t["statistic"].astype(str)
    out = t[st == stat]
    if not len(out):
        out = t[st.str.contains(stat, regex=False)]
    return out[out["category"] != "(all)"].drop_duplicates("category")


@dataclasses.dataclass
class FigureInputs:
    """What the figures draw, taken from one audit result (see :func:`figure_inputs`)."""

    seed: int = 0
    alpha: float = 0.05
    field: str = "hit"
    #: per question (k_full, n_full, k_blind, n_blind): correct and known answers in each arm; None
    #: without both arms
    counts: tuple | None = None
    #: the image-gain detector's summary entries fig_null reads, and its permutation draws
    null: dict | None = None
    null_draws: np.ndarray | None = None
    #: per-category headline rows of the image-gain and label-conflict detectors
    categories: tuple | None = None
    #: judged vs exact per category (merged rows), judge/exact disagreement counts, model names
    judge: dict | None = None
    names: dict = dataclasses.field(default_factory=dict)


def _arm_shares(kf, nf, kb, nb) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per question from the (right, answered) counts of each arm: the full arm's share right, the blind arm's,
    where both are defined, and where the two shares are equal (zero gain; compared as integer cross products)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        x = np.where(nf > 0, kf / np.maximum(nf, 1), np.nan)
        y = np.where(nb > 0, kb / np.maximum(nb, 1), np.nan)
    ok = ~np.isnan(x) & ~np.isnan(y)
    return x, y, ok, ok & (kf * nb == kb * nf)


def fig_full_vs_blind(fi: FigureInputs, path: Path) -> None:
    field, seed = fi.field, fi.seed
    kf, nf, kb, nb = fi.counts
    x, y, ok, zero = _arm_shares(kf, nf, kb, nb)
    mf = max(int(nf.max()), 1)
    mb = max(int(nb.max()), 1)
    rng = np.random.default_rng(seed)
    idx = np.flatnonzero(ok)
    if len(idx) > MAX_POINTS:
        idx = np.sort(rng.choice(idx, MAX_POINTS, replace=False))
    jx = rng.uniform(-0.3, 0.3, len(idx)) / mf
    jy = rng.uniform(-0.3, 0.3, len(idx)) / mb
    plt = pyplot_agg()
    fig, ax = plt.subplots(figsize=(6.4, 5.6))
    z = zero[idx]
    alpha = float(np.clip(3000 / max(len(idx), 1), 0.08, 0.6))
    ax.scatter(x[idx][~z] + jx[~z], y[idx][~z] + jy[~z], s=7, alpha=alpha, color=BLUE, lw=0,
               label="gain differs from zero")
    ax.scatter(x[idx][z] + jx[z], y[idx][z] + jy[z], s=7, alpha=alpha, color=ORANGE, lw=0,
               label=f"zero gain ({int(zero.sum()):,} questions, {pct(zero.sum() / ok.sum())})")
    ax.plot([0, 1], [0, 1], color=GREY, lw=0.8, ls="--", zorder=0, label="equal accuracy with and without")
    # cell counts when the grid is small enough to read
    if mf <= 12 and mb <= 12:
        cells = pd.DataFrame({"kf": kf[ok], "kb": kb[ok], "nf": nf[ok], "nb": nb[ok]})
        cells = cells[(cells.nf == mf) & (cells.nb == mb)].value_counts(["kf", "kb"])
        for (a, b), cnt in cells.items():
            ax.text(a / mf, b / mb + 0.4 / mb, f"{cnt:,}", ha="center", va="bottom", fontsize=7, color="#333333",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.5, "alpha": 0.85}, zorder=5)
    ax.set_xlim(-0.6 / mf, 1 + 0.6 / mf)
    ax.set_ylim(-0.6 / mb, 1 + 0.75 / mb)
    what = "judged" if field == "hit" else "exact match"
    if mf <= 12 and mb <= 12:
        # small pools: label the grid by model counts, which is what a reader counts on the plot
        ax.set_xticks(np.arange(mf + 1) / mf, [str(k) for k in range(mf + 1)])
        ax.set_yticks(np.arange(mb + 1) / mb, [str(k) for k in range(mb + 1)])
        ax.set_xlabel(f"models right WITH the image (of {mf} full-arm model{'s' if mf > 1 else ''})")
        ax.set_ylabel(f"models right WITHOUT it (of {mb} blind-arm model{'s' if mb > 1 else ''})")
    else:
        ax.set_xlabel(f"accuracy with the image (share of {mf} full-arm models)")
        ax.set_ylabel(f"accuracy without it (share of {mb} blind-arm models)")
    ax.set_title(f"Full vs blind accuracy per question ({what}; jittered)\nnumbers: questions per cell")
    # below the axes: inside, the legend covered the top row's count labels
    leg = ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2, frameon=False, fontsize=8,
                    markerscale=2.5)
    for h in leg.legend_handles:
        h.set_alpha(1)
    if len(idx) < ok.sum():
        ax.text(1.0, -0.24, f"random sample of {len(idx):,} of {int(ok.sum()):,} questions", transform=ax.transAxes,
                ha="right", fontsize=7, color=GREY)
    save_png(fig, path)


def _null_draws(result: Any) -> np.ndarray | None:
    vd = result.results.get(detectors.by_role("image_gain"))
    if vd is None:
        return None
    for src in (vd.summary, vd.params, getattr(vd, "extra", None) or {}):
        for key in ("null_distribution", "null_shares", "null_draws", "null_samples"):
            v = src.get(key) if isinstance(src, dict) else None
            if v is not None and len(v):
                return np.asarray(v, dtype=np.float64)
    return None


_NULL_KEYS = ("zero_gain_share", "null_mean", "null_sd", "p_value", "excess", "n_items", "n_permutations")


def fig_null(fi: FigureInputs, path: Path) -> None:
    vd = fi.null
    obs, mu, sd = vd.get("zero_gain_share"), vd.get("null_mean"), vd.get("null_sd")
    draws = fi.null_draws
    plt = pyplot_agg()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11.5, 4.2), gridspec_kw={"width_ratios": [1.25, 1]})
    if draws is not None:
        # the null takes values k / n_items: bin edges between those values (grouping a few adjacent
        # counts per bin when there are many), so bars do not alias
        n_items = int(vd.get("n_items") or 0) or 1
        ks = np.rint(draws * n_items).astype(np.int64)
        width = max(1, int(np.ceil((ks.max() - ks.min() + 1) / 40)))
        edges = (np.arange(ks.min(), ks.max() + width + 1, width) - 0.5) / n_items
        ax.hist(100 * draws, bins=100 * edges, color=GREY, edgecolor="white",
                label=f"null ({len(draws):,} permutations)")
    elif sd:
        xs = np.linspace(mu - 4.5 * sd, mu + 4.5 * sd, 300)
        ax.fill_between(100 * xs, np.exp(-0.5 * ((xs - mu) / sd) ** 2), color=GREY, alpha=0.6,
                        label="null (normal approx., exact mean and SD)")
        ax.set_yticks([])
    ax.axvline(100 * mu, color="black", ls="--", lw=1, label=f"null mean {pct(mu)}")
    ax.axvline(100 * obs, color=RED, lw=2, label=f"observed {pct(obs)}")
    p = vd.get("p_value")
    ex = vd.get("excess")
    ttl = "Zero-gain share against the item-matched null"
    if ex is not None:
        ttl += f"\nexcess {pp(ex)}" + (f", p = {fmt_p(p, vd.get('n_permutations'))}" if isnum(p) else "")
    ax.set_title(ttl)
    ax.set_xlabel("share of questions with zero gain (%)")
    ax.set_ylabel("permutations" if draws is not None else "density")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.17), ncol=3, frameon=False)
    lo = min(100 * obs, 100 * (draws.min() if draws is not None else mu - 4.5 * (sd or 0)))
    hi = max(100 * obs, 100 * (draws.max() if draws is not None else mu + 4.5 * (sd or 0)))
    pad = max(0.5, 0.08 * (hi - lo))
    ax.set_xlim(lo - pad, hi + pad)
    # (b) what the zero-gain items are: by how many models solve them
    kf, nf, kb, nb = fi.counts
    x, y, ok, zero = _arm_shares(kf, nf, kb, nb)
    lvl = np.round(x[zero], 2)
    vals, cnt = np.unique(lvl, return_counts=True)
    colors = [GREY if v == 0 else (RED if v == 1 else ORANGE) for v in vals]
    bx.bar(np.arange(len(vals)), cnt, color=colors)
    bx.set_xticks(np.arange(len(vals)), [f"{100 * v:.0f}%" for v in vals],
                  rotation=0 if len(vals) <= 8 else 60, fontsize=8)
    bx.set_xlabel("accuracy with and without the image (equal on these items)")
    bx.set_ylabel("zero-gain questions")
    n0 = int(cnt[vals == 0].sum()) if (vals == 0).any() else 0
    n1 = int(cnt[vals == 1].sum()) if (vals == 1).any() else 0
    bx.set_title(f"Zero-gain items: {n0:,} nobody solves (grey), {n1:,} all solve blind (red)")
    for i, c in enumerate(cnt):
        bx.text(i, c, f"{c:,}", ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    save_png(fig, path)


#: bars of the per-category figure: a benchmark with thousands of categories shows those with the largest
#: zero-gain excess (either sign) and the most unanimous non-gold answers (10,000 categories drew a 480,000-pixel
#: tall image in 4 minutes and 8 GB)
CATEGORY_MAX_BARS = 40


def _top_categories(vd: pd.DataFrame, ce: pd.DataFrame, n: int) -> list:
    """At most ``n`` categories: alternately the next largest |zero-gain excess| and the next largest
    unanimous non-gold count (share x items), each category once."""
    a = list(vd.assign(_k=vd["excess"].abs()).sort_values("_k", ascending=False)["category"]) if len(vd) else []
    if len(ce):
        est = pd.to_numeric(ce["estimate"], errors="coerce").fillna(0)
        size = pd.to_numeric(ce["n_items"], errors="coerce").fillna(0) if "n_items" in ce else 1
        b = list(ce.assign(_k=est * size).sort_values("_k", ascending=False)["category"])
    else:
        b = []
    out: list = []
    for pair in zip(a + [None] * max(0, len(b) - len(a)), b + [None] * max(0, len(a) - len(b))):
        for c in pair:
            if c is not None and c not in out and len(out) < n:
                out.append(c)
    return out


def fig_categories(fi: FigureInputs, path: Path) -> None:
    vd, ce = fi.categories
    n_all = len(set(vd["category"]) | set(ce["category"])) if len(vd) or len(ce) else 0
    note = ""
    if n_all > CATEGORY_MAX_BARS:
        keep = set(_top_categories(vd, ce, CATEGORY_MAX_BARS))
        vd, ce = vd[vd["category"].isin(keep)], ce[ce["category"].isin(keep)]
        note = f" ({len(keep)} of {n_all:,} categories: the largest)"
    cats = list(vd.sort_values("excess", ascending=True)["category"]) if len(vd) else []
    cats += [c for c in ce["category"] if c not in cats]
    panels = [p for p in (("vd", vd), ("ce", ce)) if len(p[1])]
    plt = pyplot_agg()
    h = max(3.0, 0.32 * len(cats) + 1.4)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.6 * len(panels) + 1.5, h), sharey=True, squeeze=False)
    pos = {c: i for i, c in enumerate(cats)}
    alpha = fi.alpha
    for ax, (kind, t) in zip(axes[0], panels):
        t = t.set_index("category")
        yy = np.array([pos[c] for c in t.index])
        if kind == "vd":
            ex = 100 * t["excess"].to_numpy(dtype=float)
            sig = t["p_adjusted"].to_numpy(dtype=float) < alpha
            ax.barh(yy, ex, color=np.where(sig, ORANGE, GREY))
            ax.axvline(0, color="black", lw=0.8)
            ax.set_xlabel("zero-gain excess over the null (pp)")
            ax.set_title(("(a) " if len(panels) > 1 else "") + f"Zero-gain excess by category{note}\n"
                         f"orange: BH-adjusted p < {alpha:.2g}")
            for yi, v in zip(yy, ex):
                if np.isfinite(v):
                    ax.text(v, yi, f" {v:+.1f}" if v >= 0 else f"{v:+.1f} ", va="center",
                            ha="left" if v >= 0 else "right", fontsize=7)
            lim = np.nanmax(np.abs(ex)) if np.isfinite(ex).any() else 1
            ax.set_xlim(-1.35 * lim - 0.5, 1.35 * lim + 0.5)
        else:
            est = t["estimate"].to_numpy(dtype=float)
            n_it = pd.to_numeric(t["n_items"], errors="coerce").to_numpy(dtype=float)
            is_share = str(t["statistic"].iloc[0]).endswith("share") or not (np.nanmax(est) > 1)
            counts = np.round(est * n_it) if is_share else est
            ax.barh(yy, counts, color=BLUE)
            ax.set_xlabel("questions")
            ax.set_title(("(b) " if len(panels) > 1 else "") + f"Unanimous non-gold answers by category{note}\n"
                         "(questions; share of the category's eligible items)")
            for yi, c, e in zip(yy, counts, est):
                if np.isfinite(c):
                    lab = f" {c:.0f}" + (f" ({100 * e:.1f}%)" if is_share else "")
                    ax.text(c, yi, lab, va="center", fontsize=7)
            top = np.nanmax(counts) if np.isfinite(counts).any() else 1
            ax.set_xlim(0, max(top, 1) * 1.35)
            ax.xaxis.get_major_locator().set_params(integer=True)
    axes[0][0].set_yticks(np.arange(len(cats)), [fig_label(c, 40) for c in cats])
    fig.tight_layout()
    save_png(fig, path)


#: bars of the judge figure's per-run panel: a wide pool (150 models x 2 arms) shows the runs that disagree most
JUDGE_MAX_BARS = 25


def fig_judge(fi: FigureInputs, path: Path) -> None:
    m2, c, models = fi.judge["m2"], fi.judge["counts"], fi.judge["models"]
    plt = pyplot_agg()
    ncol = 2 if len(m2) else 1
    fig, axes = plt.subplots(1, ncol, figsize=(6.0 * ncol, 4.6), squeeze=False)
    axes = axes[0]
    if len(m2):
        ax = axes[0]
        xj, xe = 100 * m2["estimate_j"].to_numpy(float), 100 * m2["estimate_e"].to_numpy(float)
        ax.scatter(xe, xj, color=BLUE, s=22, zorder=3)
        lo, hi = np.nanmin([xj.min(), xe.min()]) - 2, np.nanmax([xj.max(), xe.max()]) + 2
        ax.plot([lo, hi], [lo, hi], color="black", lw=0.8, ls="--")
        d = np.abs(xj - xe)
        # the largest shifts are numbered on the plot and named in a key below it: category names next
        # to nearby points overlapped
        key = []
        for r, i in enumerate(np.argsort(-d)[:4], start=1):
            ax.annotate(str(r), (xe[i], xj[i]), fontsize=7, xytext=(5, 3), textcoords="offset points",
                        color="#333333", fontweight="bold")
            ax.scatter([xe[i]], [xj[i]], s=40, facecolors="none", edgecolors=ORANGE, zorder=4)
            key.append(f"{r}: {fig_label(m2['category'].iloc[i], 40)} ({pp(d[i] / 100)[1:]})")
        ax.text(0.0, -0.2, "\n".join(key), transform=ax.transAxes, fontsize=7, va="top", color="#333333")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xlabel("zero-gain share, exact match (%)")
        ax.set_ylabel("zero-gain share, judged (%)")
        ax.set_aspect("equal")
        ax.set_title(f"(a) Zero-gain share per category, judged vs exact\nlargest shift {pp(np.nanmax(d) / 100)[1:]} (circled and numbered: 4 largest)")
    bx = axes[-1]
    n_both, n_dis = c["n_both"], c["n_dis"]
    keys = np.flatnonzero(n_both)
    nm = len(models)
    labels = [f"{fig_label(models[k % nm], 28)}{f' ({ARMS[k // nm]})' if k >= nm else ''}" for k in keys]
    share = 100 * n_dis[keys] / n_both[keys]
    # a wide pool keeps the model runs with the most disagreement (ties: run order), so the labels stay legible
    order = np.lexsort((np.arange(len(keys)), -share))[:JUDGE_MAX_BARS][::-1]
    bx.barh(np.arange(len(order)), share[order], color=ORANGE)
    bx.set_yticks(np.arange(len(order)), [labels[i] for i in order], fontsize=8)
    for i, j in enumerate(order):
        bx.text(share[j], i, f" {n_dis[keys[j]]:,}", va="center", fontsize=7)
    bx.set_xlabel("items where judge and exact match disagree (%)")
    shown = (f"; the {len(order)} of {len(keys)} model runs with the most" if len(order) < len(keys) else "")
    bx.set_title(f"(b) Where the judge and exact matching disagree\n(labels: number of items{shown})")
    bx.set_xlim(0, max(1.0, float(share.max()) * 1.25))
    fig.tight_layout()
    save_png(fig, path)


#: name -> drawing function; each figure is written to ``figures/<name>.png``. A function is called only
#: when :func:`_supported` says the inputs support its figure (the one place those conditions live).
FIGURES = {"full_vs_blind": fig_full_vs_blind, "null_distribution": fig_null, "categories": fig_categories,
           "judge": fig_judge}


def figure_inputs(result: Any, summary_df: pd.DataFrame | None = None) -> FigureInputs:
    """The data every figure the result supports draws (None for the ones it does not)."""
    from .tables import build_summary_table, judge_disagreement_counts

    sdf = summary_df if summary_df is not None else build_summary_table(result)
    frame = result.frame
    fi = FigureInputs(seed=int(getattr(result.config, "seed", 0) or 0),
                      alpha=float(getattr(result.config, "alpha", 0.05)), field=result.primary_field)
    if frame.models_in("blind") and frame.models_in("full"):
        kf, nf, _ = _accuracy(frame, "full", fi.field)
        kb, nb, _ = _accuracy(frame, "blind", fi.field)
        small = np.int32 if frame.n_models < 2**31 else np.int64
        fi.counts = tuple(a.astype(small) for a in (kf, nf, kb, nb))
    res = result.results.get(detectors.by_role("image_gain"))
    if res is not None and res.summary:
        fi.null = {k: res.summary.get(k) for k in _NULL_KEYS}
        fi.null_draws = _null_draws(result)
    fi.categories = (_table(sdf, "image_gain"), _table(sdf, "label_conflict"))
    c = judge_disagreement_counts(frame)
    if int(np.asarray(c["n_both"]).sum()) > 0:
        a = _table(sdf, "image_gain", True)
        b = _table(sdf, "image_gain", False)
        m2 = a[["category", "estimate"]].merge(b[["category", "estimate"]], on="category", suffixes=("_j", "_e")) \
            if len(a) and len(b) else pd.DataFrame()
        fi.judge = {"m2": m2, "counts": {"n_both": c["n_both"], "n_dis": c["n_dis"]}, "models": tuple(frame.models)}
    fi.names = {name: f"figures/{name}.png" for name in FIGURES if _supported(name, fi)}
    return fi


def _supported(name: str, fi: FigureInputs) -> bool:
    """Whether the inputs ``fi`` support figure ``name`` (data for it, and something to draw)."""
    if name == "full_vs_blind":
        if fi.counts is None:
            return False
        kf, nf, kb, nb = fi.counts
        return bool(((nf > 0) & (nb > 0)).any())
    if name == "null_distribution":
        return bool(fi.null) and fi.counts is not None and fi.null.get("zero_gain_share") is not None \
            and fi.null.get("null_mean") is not None
    if name == "categories":
        return fi.categories is not None and bool(len(fi.categories[0]) or len(fi.categories[1]))
    return fi.judge is not None


def planned(fi: FigureInputs) -> dict[str, str]:
    """{name: relative path} of the figures :func:`render_figures` will write from ``fi``."""
    return dict(fi.names)


def render_figures(fi: FigureInputs, out: Path) -> dict[str, str]:
    """Draw every figure of ``fi`` into ``out``; return {name: relative path} (= :func:`planned`)."""
    out = Path(out)  # save_png creates it
    for name, rel in fi.names.items():
        FIGURES[name](fi, out / Path(rel).name)
    return dict(fi.names)


def render_figures_timed(fi: FigureInputs, out: Path) -> tuple[dict[str, str], float]:
    """:func:`render_figures` and its wall seconds (run in the calibration worker process)."""
    import time

    t0 = time.perf_counter()
    figs = render_figures(fi, out)
    return figs, time.perf_counter() - t0
