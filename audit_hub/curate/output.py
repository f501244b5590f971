"""Write the curated benchmark: a Hub-layout dataset folder with its card, figures, summary and manifest.

Layout (``datasets.load_dataset(folder, config)`` loads every config):

* ``data/test-*.parquet`` (config ``default``): the kept items with the input's question columns plus
  ``kept_by`` (why the item stayed);
* ``data/removed-*.parquet`` (config ``removed``): each dropped item, the stage that removed it, the
  reason and the other stages that also flagged it;
* ``data/findings-*.parquet``: the audit's per-question findings the stages read, for every item;
* ``data/models-*.parquet``: each model's accuracy on the whole pool, on the curated set (selected with
  every model) and on the curated set of the fold where it was held out;
* ``figures/ranking_preservation.png``, ``figures/discrimination.png``;
* ``README.md`` (card from ``cards/curate_card.md.j2``), ``summary.json`` (``curation.*``),
  ``manifest.json`` (inputs with sha256, command line, versions, seeds, outputs with sha256).

Written by the output layer (:func:`audit_hub.hub.output.output_folder`: the one shard writer, YAML header
builder and manifest schema): a failed run leaves no partial folder.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..hub.card import configs as hub_configs
from ..hub.card import yaml_text
from ..hub.figures import save_png
from ..hub.output import output_folder

TEMPLATE_NAME = "curate_card.md.j2"
BLUE, ORANGE, GREY = "#3b6ea8", "#e07b24", "#9a9a9a"
DERIVED_COLUMNS = ("n_options", "gold_index")


def stage_counts_text(s: dict) -> str:
    """Items removed per stage, naming the flags a stage raised that the chosen selection set aside (the stage
    variants compete in inner cross-validation, so ``--stages`` lists the stages that *may* be applied): "text_ablation
    0 of 79 flagged (set aside by the chosen selection)", not a bare 0 that reads as nothing flagged."""
    flagged = s.get("flagged_by_stage") or {}
    out = []
    for k, v in (s.get("removed_by_stage") or {}).items():
        f = flagged.get(k)
        out.append(f"{k} {v:,} of {f:,} flagged (set aside by the chosen selection)" if f and not v else f"{k} {v:,}")
    return ", ".join(out)


def _template() -> Path:
    pkg = Path(str(resources.files("audit_hub") / "templates" / TEMPLATE_NAME))
    if pkg.is_file():
        return pkg
    return Path(__file__).resolve().parents[2] / "cards" / TEMPLATE_NAME


def curated_table(result) -> pd.DataFrame:
    q = result.frame.questions
    cols = [c for c in q.columns if c not in DERIVED_COLUMNS]
    out = q.loc[result.kept, cols].reset_index(drop=True)
    for c in out.columns:
        if c != "options" and out[c].dtype == object:
            out[c] = out[c].astype("string")
    out["question_id"] = out["question_id"].astype(str)
    out["kept_by"] = pd.array(result.kept_by[result.kept].astype(str), dtype="string")
    return out


# ---------------------------------------------------------------------------------------------- figures
def _figures(result, folder: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    s = result.summary
    ms = result.model_scores
    out = {}
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    full = 100 * ms["accuracy_full"].to_numpy(float)
    cur = 100 * ms["accuracy_curated"].to_numpy(float)
    ho = 100 * ms["accuracy_curated_heldout"].to_numpy(float)
    ax.scatter(full, cur, color=BLUE, s=28, label=f"selected with every model (rho {s['spearman_rho']:.3f})", zorder=3)
    if np.isfinite(ho).any():
        rho = s.get("heldout_spearman_rho")
        ax.scatter(full, ho, facecolor="none", edgecolor=ORANGE, s=46, zorder=2,
                   label=f"held out from the selection (fold mean rho {rho:.3f})" if rho is not None else "held out")
    lo, hi = np.nanmin(np.r_[full, cur, ho]), np.nanmax(np.r_[full, cur, ho])
    ax.plot([lo, hi], [lo, hi], color=GREY, lw=0.8, ls="--", zorder=1)
    ax.set_xlabel("accuracy on the whole pool (%)")
    ax.set_ylabel("accuracy on the curated set (%)")
    ax.set_title(f"Ranking preservation: {s['n_before']:,} -> {s['n_after']:,} items")
    ax.legend(fontsize=8, loc="lower right", frameon=False)
    save_png(fig, folder / "ranking_preservation.png")
    out["ranking_preservation"] = "figures/ranking_preservation.png"

    fig, axes = plt.subplots(1, 3, figsize=(9.6, 3.4))
    labels = ("SD of model accuracies", "mean item point-biserial", "significant model pairs")
    for ax, key, lab in zip(axes, ("sd", "point_biserial", "significant_pairs"), labels):
        b, a = s["discrimination_before"].get(key), s["discrimination_after"].get(key)
        vals = [np.nan if v is None else v for v in (b, a)]
        ax.bar([0, 1], vals, color=[GREY, BLUE], width=0.6)
        ax.set_xticks([0, 1], ["full pool", "curated"])
        ax.set_title(lab, fontsize=9)
        ch = s["discrimination_change"].get(key)
        if ch is not None:
            ax.text(1, vals[1], f"{100 * ch:+.0f}%", ha="center", va="bottom", fontsize=9)
    fig.suptitle("Discrimination before and after curation", fontsize=10)
    fig.tight_layout()
    save_png(fig, folder / "discrimination.png")
    out["discrimination"] = "figures/discrimination.png"
    return out


# ---------------------------------------------------------------------------------------------- card
def _card_context(result, files: dict[str, list[str]], figures: dict[str, str]) -> dict:
    from ..escape import md_inline
    from ..fmt import ci, fmt_num, md_table, pct
    from .filters import DOUBTED

    s = result.summary
    stages = s["stage_order"]
    rows = []
    for st in stages:
        rows.append([st.replace("_", " "), fmt_num(s["flagged_by_stage"][st]), fmt_num(s["removed_by_stage"][st])])
    if "selection" in s["removed_by_stage"]:
        rows.append(["final selection", "", fmt_num(s["removed_by_stage"]["selection"])])
    pipeline = md_table(["stage (in order)", "items flagged", "items removed"], rows)
    ov = s["stage_overlaps"]
    overlaps = md_table([""] + [x.replace("_", " ") for x in stages],
                        [[a.replace("_", " ")] + [fmt_num(ov[a][b]) for b in stages] for a in stages])

    def r3(x):
        return "n/a" if x is None else f"{x:.3f}"

    def ci3(p):
        return "" if not p or p[0] is None else f" [{p[0]:.3f}, {p[1]:.3f}]"

    ranking = [["in pool (selected with every model)", r3(s["spearman_rho"]) + ci3(s["spearman_rho_ci"]),
                r3(s["kendall_tau"]) + ci3(s.get("kendall_tau_ci"))]]
    if s.get("heldout_spearman_rho") is not None:
        ranking.append([f"held out ({s['heldout_design']['folds']}-fold over models, mean)",
                        r3(s["heldout_spearman_rho"]) + ci3(s["heldout_spearman_rho_ci"]),
                        r3(s["heldout_kendall_tau"]) + ci3(s.get("heldout_kendall_tau_ci"))])
    nh = s.get("newest_heldout") or {}
    if nh.get("spearman_rho") is not None:
        ranking.append([f"newest {len(nh['test_models'])} models held out", r3(nh["spearman_rho"]), r3(nh["kendall_tau"])])
    for name, b in (s.get("baselines") or {}).items():
        if "spearman_rho" not in b:  # leave-one-model-out figures: their own table
            continue
        extra = (f" (95% of draws: [{b['spearman_rho_interval'][0]:.3f}, {b['spearman_rho_interval'][1]:.3f}])"
                 if "spearman_rho_interval" in b else "")
        ranking.append([f"baseline: {name.replace('_', ' ')}, same size, held out", r3(b.get("spearman_rho")) + extra,
                        r3(b.get("kendall_tau"))])
    ranking_table = md_table(["set", "Spearman rho [95% CI]", "Kendall tau [95% CI]"], ranking, ["l", "r", "r"])
    disc = md_table(["measure", "full pool", "curated", "change"],
                    [[lab, fmt_num(s["discrimination_before"][k]), fmt_num(s["discrimination_after"][k]),
                      f"{100 * s['discrimination_change'][k]:+.0f}%" if s["discrimination_change"][k] is not None else "n/a"]
                     for k, lab in (("sd", "SD of model accuracies"), ("point_biserial", "mean item point-biserial"),
                                    ("significant_pairs", "share of model pairs significantly different"))])
    vd = s["image_dependency"]
    vis = ""
    if vd.get("computed"):
        vis = md_table(["", "full pool", "curated"],
                       [["blind-solvable share", pct(vd["before"]["blind_solvable_share"]), pct(vd["after"]["blind_solvable_share"])],
                        ["mean gain from the image", pct(vd["before"]["mean_gain_from_image"]),
                         pct(vd["after"]["mean_gain_from_image"])]])
    junk = [[pct(j["fraction"], 0), fmt_num(j["n_junk"]), pct(j["junk_survival"]),
             # what a selection blind to junk keeps: the share of the pool (junk included) the selection keeps
             pct(j["n_after"] / j["n_pool_with_junk"]) if j.get("n_pool_with_junk") else "n/a",
             r3(j["heldout_spearman_rho"]) + ci3(j["heldout_spearman_rho_ci"])
             if j.get("heldout_spearman_rho") is not None else md_inline(j.get("heldout_not_presented") or "n/a", 200)]
            for j in s.get("junk") or []]
    junk_table = md_table(["junk injected", "junk items", "survived curation", "kept at random (the pool share kept)",
                           "held-out rho vs clean pool"], junk)
    se = s.get("score_estimation") or {}
    thresholds = md_table(["threshold", "value"], [[md_inline(k), md_inline(v)] for k, v in s["thresholds"].items()])
    ch = s.get("selection_choice") or {}
    def _margin(t):
        m, e = t.get("margin_over_default"), t.get("margin_over_default_se")
        return "n/a" if m is None else f"{m:+.3f} ({e:.3f})"

    choice_table = md_table(["candidate (stages / method)", "items", "inner held-out pair tau",
                             "margin over the default (SE)", "SD of accuracies"],
                            [[md_inline(t["candidate"]), fmt_num(t["n_items"]), r3(t.get("inner_tau_mean")),
                              _margin(t), r3(t.get("sd_selecting_models"))] for t in ch.get("candidates") or []],
                            ["l", "r", "r", "r", "r"]) if ch.get("candidates") else ""
    lomo = s.get("heldout_lomo") or {}
    err = lomo.get("accuracy_error_points") or [None] * len(lomo.get("models", []))
    lomo_table = md_table(["left-out model", "rank on the whole pool", "rank on the curated set", "displacement",
                           "accuracy error (points)", "selection"],
                          [[md_inline(m, 60), f"{a:g}", f"{b:g}", f"{d:g}", "n/a" if e is None else f"{e:.2f}",
                            md_inline(c)] for m, a, b, d, e, c in
                           zip(lomo.get("models", []), lomo.get("rank_full", []), lomo.get("rank_curated", []),
                               lomo.get("rank_displacement", []), err, lomo.get("selections", []))],
                          ["l", "r", "r", "r", "r", "l"]) if lomo else ""
    by = se.get("by_estimator") or {}
    score_table = md_table(["estimator", "MAE (points) [95% CI over models]"],
                           [[md_inline(k), f"{v['mae_points']:.2f} [{v['mae_points_ci'][0]:.2f}, {v['mae_points_ci'][1]:.2f}]"]
                            for k, v in by.items()], ["l", "r"]) if by else ""
    evidence = "; ".join(f"{md_inline(k.replace('_', ' '))}: {md_inline(v, 300)}" for k, v in (s.get("stage_evidence") or {}).items())
    bench = result.frame.meta.get("benchmark") or (result.frame.meta.get("dataset") or {}).get("name") or "the input benchmark"
    from ..frame.validate import empty_runs_note
    from ..readers.named_roles import named_roles_note

    return {
        "bench": md_inline(bench), "n_before": fmt_num(s["n_before"]), "n_after": fmt_num(s["n_after"]),
        "reduction": pct(s["reduction"]), "pipeline": pipeline, "overlaps": overlaps, "ranking": ranking_table,
        "versus_random": md_inline(s.get("versus_random") or "", 400), "discrimination": disc, "visual": vis,
        "junk": junk_table, "score": se,
        "score_ci": (f"[{se['mae_points_ci'][0]:.2f}, {se['mae_points_ci'][1]:.2f}]" if se.get("mae_points_ci") else "n/a"),
        "score_by": ", ".join(f"{md_inline(k)} {v:.2f}" for k, v in (se.get("mae_points_by_estimator") or {}).items()), "score_mae": fmt_num(se.get("mae_points")) if se.get("mae_points") is not None else None,
        "thresholds": thresholds, "statement": s["statement"],
        "verdict": md_inline(s.get("versus_random") or "not measured", 600),
        "choice_statement": md_inline(ch.get("statement") or "", 900), "choice_table": choice_table,
        "design_why": md_inline((s.get("heldout_design") or {}).get("why") or "", 600),
        "lomo": lomo_table, "score_table": score_table, "evidence": evidence,
        "doubted": s["removed_by_stage"].get(DOUBTED),
        "in_pool_note": md_inline(s.get("in_pool_interval_note") or "", 400),
        "score_versus": md_inline(se.get("versus_random") or "", 300),
        "irt_notes": md_inline("; ".join(x for x in se.get("irt_not_eligible_because") or [] if x), 600), "figures": figures, "files": files,
        "selection": s["selection"], "method": md_inline(s["selection"].get("method") or "none"),
        "models": ", ".join(md_inline(m, 60) for m in s["models"]), "n_models": len(s["models"]),
        "named_roles": md_inline(named_roles_note(s.get("named_roles")) or "", 600),
        "left_out": md_inline("; ".join(x for x in (left_out_note(s), empty_runs_note(s.get("empty_runs"))) if x),
                              1500),
        "ci": ci, "seed": s["seeds"]["seed"], "version": __version__,
        "leader": ", ".join(md_inline(m, 60) for m in s.get("heldout_leader_changes_on_drop") or []) or "none",
    }


def left_out_note(s: dict) -> str | None:
    """The models left out of the ranking pool for covering few items (``summary.models_left_out``), in one
    sentence for the console and the card (names are input text: escape where it lands); None when none was."""
    gone = s.get("models_left_out") or []
    if not gone:
        return None
    names = "; ".join(f"{g['model']} (known on {int(g['items_known']):,} of {int(s['n_before']):,} items)"
                      for g in gone[:10]) + (f"; and {len(gone) - 10:,} more" if len(gone) > 10 else "")
    return ("models left out of the rankings for covering few items (a run stopped early or a subset), so that no "
            f"model is ranked on a handful of items: {names}")


_SPLITS = {"test": "test"}
_NAMES = {"test": "default"}


def card_header(result, files: dict[str, list[str]]) -> dict:
    lic = str((result.frame.meta.get("dataset") or {}).get("license") or "other").lower()
    bench = yaml_text(result.frame.meta.get("benchmark") or "benchmark")
    return {"license": lic, "tags": ["benchaudit", "curated-benchmark", "evaluation", "vision-language-models"],
            "configs": hub_configs(files, default="test", splits=_SPLITS, names=_NAMES),
            "pretty_name": f"benchaudit curated: {bench}"}


def write_curation(result, out: str | os.PathLike, *, command_line: list[str], inputs: list[dict],
                   figures: bool = True) -> Path:
    removed = result.removed.copy()
    for c in removed.columns:
        removed[c] = removed[c].astype("string")
    findings = result.findings.copy()
    for c in findings.columns:
        if findings[c].dtype == object:
            findings[c] = findings[c].astype("string")
    configs = {"test": curated_table(result), "removed": removed, "findings": findings,
               "models": result.model_scores}
    with output_folder(out, command="curate",
                       inputs=[r.get("path") for r in inputs or [] if isinstance(r, dict)]) as f:
        for name, df in configs.items():
            f.config(name, df)
        figs = _figures(result, f.folder("figures")) if figures else {}
        f.json("summary.json", {"curation": result.summary})
        f.card(card_header(result, f.files), template=str(_template()), splits=_SPLITS, names=_NAMES,
               **_card_context(result, f.files, figs))
        f.manifest(command_line=command_line, inputs=inputs, timings=result.timings,
                   fields={"config": result.config.as_dict(), "seeds": result.summary["seeds"],
                           "n_before": result.summary["n_before"], "n_after": result.summary["n_after"]})
    return Path(out).resolve()
