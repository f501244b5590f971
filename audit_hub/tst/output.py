"""Writers for ``benchaudit tst`` and ``benchaudit prune``: Hub-layout report folders and the pruned set.

Both write the same layout as ``benchaudit audit`` (``README.md`` card whose YAML ``configs`` point at
``data/<config>-*.parquet``, ``summary.json``, ``manifest.json``) through
:func:`audit_hub.hub.folders.write_hub_folder` inside :func:`audit_hub.hub.folders.atomic_dir`, so a failed
run never leaves a partial folder. ``prune`` also writes ``pruned_benchmark/``: the kept questions as
a Hub dataset folder (publishable with ``benchaudit push``) whose card says how it was made.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..escape import md_inline
from ..hub.folders import atomic_dir, to_jsonable, write_hub_folder


def yaml_configs(configs: list[tuple[str, str, str]], extra: str = "") -> str:
    """YAML front matter: ``configs`` = [(config_name, split, path glob)]; the first is the default."""
    lines = ["---", "configs:"]
    for i, (name, split, path) in enumerate(configs):
        lines += [f"- config_name: {name}", "  data_files:", f"  - split: {split}", f"    path: {path}"]
        if i == 0:
            lines.append("  default: true")
    lines += ["tags:", "- benchaudit", "- test-set-stress-test"]
    if extra:
        lines.append(extra.rstrip("\n"))
    lines.append("---")
    return "\n".join(lines) + "\n"


def _pct(x: Any) -> str:
    return "n/a" if x is None or (isinstance(x, float) and not np.isfinite(x)) else f"{100 * float(x):.1f}"


def _ci(pair: Any) -> str:
    if not pair or pair[0] is None:
        return ""
    return f" [{_pct(pair[0])}, {_pct(pair[1])}]"


def _md_table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in rows:
        out.append("| " + " | ".join(md_inline(x, 200) for x in r) + " |")  # cells hold input-derived names
    return "\n".join(out)


def _versions() -> dict:
    import sklearn

    return {"benchaudit": __version__, "python": platform.python_version(), "numpy": np.__version__,
            "pandas": pd.__version__, "scikit-learn": sklearn.__version__}


def source_paths(frame) -> list[str]:
    """Local paths of the frame's inputs (the output folder may never be or contain one)."""
    return [str(s["path"]) for s in getattr(frame, "sources", []) or [] if isinstance(s, dict) and s.get("path")]


def manifest(frame, command_line: list[str] | None, params: dict) -> dict:
    return {"tool": "benchaudit", "command": list(command_line or []), "inputs": list(getattr(frame, "sources", [])),
            "versions": _versions(), "params": params}


# ---------------------------------------------------------------------------------------- TsT
def tst_questions_table(frame, result) -> pd.DataFrame:
    """Per-question report rows: question facts + the TsT columns (question-code order)."""
    q = frame.questions
    base = pd.DataFrame({"question_id": q["question_id"].astype(str).to_numpy(),
                         "category": q["category"].astype(str).to_numpy(),
                         "answer_type": q["answer_type"].astype(str).to_numpy(),
                         "n_options": q["n_options"].astype(np.int16).to_numpy()})
    pq = result.per_question.reset_index(drop=True)
    return pd.concat([base, pq.drop(columns=["question_id"])], axis=1)


def _fmt_pts(x: Any) -> str:
    return "n/a" if x is None else f"{100 * float(x):+.1f} pts"


def _null_text(b: dict) -> str:
    from ..fmt import fmt_p

    if b.get("p_value") is None:
        return "null not run"
    lo, hi = (f"{100 * float(x):+.1f}" for x in b["excess_ci"])
    return (f"null test {_pct(b['test_statistic'])}% vs {_pct(b['null_mean'])}% ± {_pct(b['null_sd'])} | excess "
            f"{_fmt_pts(b['excess'])} [{lo}, {hi}] | p = {fmt_p(b['p_value'])}")


def summary_lines(summary: dict) -> list[str]:
    """The printed summary of ``benchaudit tst``: a header, one line per format, one combined line."""
    p = summary["params"]
    nn = summary["null"]["n_permutations"]
    out = [f"TsT-RF on {summary['n_questions']} questions ({summary['n_scored']} scored; k={p['k']}, "
           f"{p['repeats']} repeats, seed {p['seed']}; null: {nn} label permutations within category x format x "
           f"K{', groups kept' if p['group_column'] else ''})"]
    for f, b in summary["by_format"].items():
        what = "accuracy" if f == "choice" else "MRA"
        line = (f"  {f:<7} n={b['n']:<6} {what} {_pct(b['accuracy'])}%{_ci(b['accuracy_ci'])} | {_null_text(b)} | "
                f"chance {_pct(b['chance'])}% | majority {_pct(b['majority_baseline'])}%")
        if f == "choice" and b.get("ece_before") is not None:
            line += (f" | P(gold) {_pct(b['mean_p_gold'])}% (raw {_pct(b['mean_p_gold_raw'])}%), "
                     f"ECE {_pct(b['ece_before'])}% -> {_pct(b['ece_after'])}%")
        out.append(line)
    if len(summary["by_format"]) > 1:
        out.append(f"  {'all':<7} n={summary['n_scored']:<6} score {_pct(summary['accuracy'])}%"
                   f"{_ci(summary['accuracy_ci'])} | {_null_text(summary)} | chance {_pct(summary['chance'])}% | "
                   f"majority {_pct(summary['majority_baseline'])}%  (n-weighted over the same questions)")
    if nn:
        out.append(f"  (accuracy/MRA: full run, {p['repeats']} repeats x {p['n_estimators']} trees; null test: the same "
                   f"pipeline on repeat 0's folds with {p['null_trees']}-tree forests, on the observed answers vs "
                   f"{nn} permutations; excess = null test - null mean)")
    return out


def _format_table(summary: dict) -> str:
    from ..fmt import fmt_p

    rows = []
    items = list(summary["by_format"].items())
    if len(items) > 1:
        items.append(("all (n-weighted)", {**summary, "n": summary["n_scored"]}))
    for f, b in items:
        rows.append([f, b["n"], f"{_pct(b['accuracy'])}{_ci(b['accuracy_ci'])}", _pct(b.get("test_statistic")),
                     "n/a" if b.get("null_mean") is None else f"{_pct(b['null_mean'])} ± {_pct(b['null_sd'])}",
                     _fmt_pts(b.get("excess")), fmt_p(b.get("p_value")), _pct(b["chance"]),
                     _pct(b["majority_baseline"])])
    return _md_table(["format", "n", "accuracy / MRA %", "test statistic %", "null mean ± sd %", "excess",
                      "p", "chance %", "majority %"], rows)


def tst_card_section(summary: dict | None) -> str:
    """The TsT-RF block of the audit card (``benchaudit audit --tst``): the per-format table."""
    if not summary or not summary.get("by_format"):
        return ""
    nul = summary["null"]
    cal = summary.get("calibration") or {}
    lines = [_format_table(summary), "",
             f"A text-only random forest trained on k-1 folds of this test set, scored on the held-out fold. "
             f"Excess = test statistic minus the mean of {nul['n_permutations']} label permutations within "
             "category x format x K (the null keeps each stratum's answer frequencies; the majority column shows "
             "what they alone give); p one-sided. The `all` row is n-weighted over the same questions."]
    if cal.get("ece_before") is not None:
        lines.append(f"Per-question s(x) (`tst_s`) is calibrated out of fold ({cal['method']}): expected "
                     f"calibration error {_pct(cal['ece_before'])}% raw -> {_pct(cal['ece_after'])}%.")
    return "\n".join(lines)


def _reliability_table(cal: dict) -> str:
    rows = []
    for b0, b1 in zip(cal["reliability_before"], cal["reliability_after"]):
        if b0["n"] == 0 and b1["n"] == 0:
            continue
        rows.append([f"{b0['lo']:.1f}-{b0['hi']:.1f}", b0["n"], _pct(b0["confidence"]), _pct(b0["accuracy"]),
                     b1["n"], _pct(b1["confidence"]), _pct(b1["accuracy"])])
    return _md_table(["confidence bin", "n raw", "raw conf %", "raw acc %", "n calibrated", "calibrated conf %",
                      "calibrated acc %"], rows)


def fig_reliability(cal: dict, out: Path) -> str | None:
    """``figures/tst_reliability.png``: accuracy against confidence per bin, raw and calibrated."""
    from ..hub.figures import pyplot_agg, save_png

    if not cal or not cal.get("reliability_before"):
        return None
    plt = pyplot_agg()
    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.plot([0, 1], [0, 1], color="#9a9a9a", lw=1, ls="--", label="perfect calibration")
    for key, color, label in (("reliability_before", "#e07b24", f"raw (ECE {_pct(cal['ece_before'])}%)"),
                              ("reliability_after", "#3b6ea8", f"calibrated (ECE {_pct(cal['ece_after'])}%)")):
        bins = [b for b in cal[key] if b["n"] > 0]
        ax.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], marker="o", color=color, label=label)
    ax.set_xlim(0, 1), ax.set_ylim(0, 1)
    ax.set_xlabel("confidence (largest P over the options)")
    ax.set_ylabel("TsT accuracy in the bin")
    ax.set_title("TsT-RF reliability (out of fold)")
    ax.legend(loc="upper left", fontsize=8, frameon=False)
    rel = "figures/tst_reliability.png"
    save_png(fig, out / rel)
    return rel


def tst_card(summary: dict, llm: dict | None = None, figures: dict | None = None) -> str:
    from ..fmt import md_escape

    figures = figures or {}
    p = summary["params"]
    nul = summary["null"]
    rows = [[md_escape(c["category"], 60), c["n_scored"], _pct(c["accuracy"]), _pct(c["mean_p_gold"]),
             _pct(c["chance"]), _pct(c["majority_baseline"])] for c in summary["per_category"]]
    imp = [[md_escape(d["group"], 60), "" if d["drop_mean_p_gold"] is None else f"{d['drop_mean_p_gold']:.4f}",
            "" if d["drop_numeric_mra"] is None else f"{d['drop_numeric_mra']:.4f}"]
           for d in summary["feature_importances"]]
    folds = summary.get("folds", {})
    fold_rows = [[name, _pct(h["accuracy"]), _pct(h["mean_p_gold"])] for name, h in folds.items()]
    text = [
        yaml_configs([("questions", "train", "data/questions-*.parquet"),
                       ("per_category", "train", "data/per_category-*.parquet"),
                       ("feature_importances", "train", "data/feature_importances-*.parquet")]),
        "# Test-set Stress-Test (TsT-RF)\n",
        "A random forest that sees only the question text and the answer options was trained on "
        f"k-1 of k = {p['k']} folds of this test set and scored the held-out fold, {p['repeats']} times with "
        f"fold seeds {p['fold_seeds']}. A held-out score above what the permutation null reaches means the "
        "test set's own regularities let a blind model answer. Label-conditioned features (how often an "
        "option text was gold, gold-position frequencies, typical gold values) are learned on the training "
        "folds only, so these are designer-side audit statistics, not a model's blind ability.\n",
        "## Headline: excess over the permutation null, per format\n",
        _format_table(summary), "",
        f"- **excess** = test statistic minus the null mean; **p** one-sided, (1 + #null >= observed) / "
        f"(N + 1) with N = {nul['n_permutations']} label permutations.",
        f"- the null assumes: {nul['assumes']}. It keeps each stratum's gold-position (numeric: gold-value) "
        "frequencies, so a p-value below alpha means the text predicts the answer beyond them; the majority "
        "column shows what those frequencies alone give.",
        f"- test statistic: {nul['statistic']}.",
        "- accuracy / MRA: mean over repeats (interval: Wald over questions, which ignores fold-fitting "
        "variance; the excess interval, ± 1.96 null sd, includes it). Chance: 1/K for choice questions; "
        "for numeric questions the out-of-fold MRA of the training median of the question's category. "
        "The `all` row combines the formats n-weighted over the same questions.",
        f"- questions scored: {summary['n_scored']} of {summary['n_questions']} "
        f"({summary['n_choice']} choice, {summary['n_numeric']} numeric; free-form not scored)",
        f"- group column: {md_escape(p['group_column'], 60) if p['group_column'] else '(none: every question its own group)'}\n",
    ]
    cal = summary.get("calibration") or {}
    if cal.get("reliability_before"):
        text += ["## Calibrated s(x)\n",
                 f"s(x) for a choice question is its out-of-fold P(gold), calibrated ({cal['method']}); the map "
                 f"used {cal['fitted_on']}. Mean P(gold): raw {_pct(cal['mean_p_gold_raw'])}%, calibrated "
                 f"{_pct(cal['mean_p_gold_calibrated'])}%. Expected calibration error ({cal['ece_definition']}): "
                 f"**{_pct(cal['ece_before'])}% raw -> {_pct(cal['ece_after'])}% calibrated**.\n"]
        if figures.get("reliability"):
            text += [f"![Reliability of TsT-RF P(gold)]({figures['reliability']})\n"]
        text += [_reliability_table(cal), ""]
    if len(fold_rows) > 1:
        text += ["## Grouped vs ungrouped folds\n", _md_table(["folds", "accuracy %", "mean P(gold) %"], fold_rows),
                 ""]
    text += ["## Per category\n", _md_table(["category", "n scored", "TsT acc / MRA %", "mean P(gold) %", "chance %",
                                             "majority %"], rows), ""]
    text += ["## Feature-group permutation importances\n",
             "Drop in held-out mean raw P(gold) (choice) or MRA (numeric) when a feature group's columns "
             "are permuted (repeat 0). Not Gini importances.\n",
             _md_table(["group", "drop P(gold)", "drop MRA"], imp), ""]
    if llm:
        text += ["## TsT-LLM\n", f"- model: {md_escape(llm.get('model'), 80)}",
                 f"- zero-shot mean P(gold): {_pct(llm.get('zero_shot_mean_p_gold'))}%",
                 f"- TsT (LoRA, k-fold) mean P(gold): {_pct(llm.get('tst_mean_p_gold'))}%",
                 f"- ΔTsT: {_pct(llm.get('delta_tst'))} points\n"]
    text += ["## Columns of `questions`\n",
             "- `tst_s`: s(x), calibrated out-of-fold P(gold) (numeric: MRA), mean over repeats; `tst_s_raw`: "
             "before calibration",
             "- `tst_chance`: 1/K (numeric: out-of-fold MRA of the category's training median); "
             "`tst_s_minus_chance` = `tst_s` - `tst_chance`",
             "- `tst_pred`, `tst_correct` (tie-aware, mean over repeats), `tst_mra`, `tst_majority`, `tst_format`\n",
             f"Made with benchaudit {__version__}; seeds and parameters are in `summary.json`.\n"]
    return "\n".join(text)


def write_tst_report(frame, result, out: str | os.PathLike, *, command_line: list[str] | None = None,
                     llm: Any = None) -> Path:
    """Write the ``benchaudit tst`` folder; returns its path."""
    summary = {"tst": result.summary}
    configs = {"questions": tst_questions_table(frame, result),
               "per_category": pd.DataFrame(result.summary["per_category"]),
               "feature_importances": pd.DataFrame(result.summary["feature_importances"],
                                                   columns=["group", "drop_mean_p_gold", "drop_numeric_mra"])}
    llm_summary = None
    if llm is not None:
        llm_summary = llm.summary
        summary["tst_llm"] = llm.summary
        q = configs["questions"]
        lpq = llm.per_question.set_index("question_id")
        for c in lpq.columns:
            q[c] = lpq[c].reindex(q["question_id"]).to_numpy()
    with atomic_dir(out, command="tst", inputs=source_paths(frame)) as tmp:
        figures = {}
        rel = fig_reliability(result.summary.get("calibration") or {}, Path(tmp))
        if rel:
            figures["reliability"] = rel
        write_hub_folder(tmp, configs, tst_card(result.summary, llm_summary, figures), to_jsonable(summary),
                         manifest(frame, command_line, result.summary["params"]))
    return Path(out)


# ---------------------------------------------------------------------------------------- prune
def prune_card(res, frame, tst_summary: dict | None) -> str:
    s = res.settings
    gap_rows = []
    if res.gap is not None:
        for r in res.gap.to_dict(orient="records"):
            gap_rows.append([r["model"], _pct(r["vision_original"]), _pct(r["blind_original"]),
                             _pct(r["gap_original"]), _pct(r["vision_pruned"]), _pct(r["blind_pruned"]),
                             _pct(r["gap_pruned"]),
                             f"{_pct(r['gap_random_mean'])} ± {_pct(r['gap_random_sd'])}",
                             f"{_pct(r['gap_random_min'])} to {_pct(r['gap_random_max'])}"])
    trace = res.trace
    cats = res.removed.groupby("category").size() if len(res.removed) else pd.Series(dtype=int)
    all_cats = frame.questions["category"].astype(str).value_counts().sort_index()
    cat_rows = [[c, int(n), int(cats.get(c, 0)), _pct(cats.get(c, 0) / n), int(n - cats.get(c, 0))]
                for c, n in all_cats.items()]
    text = [
        yaml_configs([("questions", "train", "data/questions-*.parquet"),
                       ("removed", "train", "data/removed-*.parquet"),
                       ("kept", "train", "data/kept-*.parquet"),
                       ("trace", "train", "data/trace-*.parquet")]
                     + ([("gap", "train", "data/gap-*.parquet")] if res.gap is not None else [])),
        "# Iterative Bias Pruning (IBP): an audit selection\n",
        "IBP repeatedly ran TsT-RF on the remaining questions and removed those a text-only random forest "
        "scored highest above chance. The removed questions are an *audit selection* to inspect: another "
        "diagnostic, allocation or seed would select a different set. This is not \"the\" debiased "
        "benchmark.\n",
        f"- allocation: {s['allocation']}; budgets: {s['budgets']} ({s['budget_source']})",
        f"- step: {s['step']} per iteration; threshold: {s['threshold']}; floors per category: {s['floors']}",
        f"- ranking: {s['score']}; ties: {s['tie_break']}",
        f"- TsT settings: {s['tst']}",
        f"- removed {s['n_removed']} of {s['n_questions']} questions in {len(trace)} TsT runs; "
        f"stop reasons: {res.stop_reasons}",
        f"- random-removal baseline: {s['random_seeds']} seeds ({s['random_seed_rule']}), same number per "
        "group, same floors\n",
    ]
    if gap_rows:
        text += ["## Vision-blind gap (accuracy %, full minus blind)\n",
                 _md_table(["model", "vision", "blind", "gap", "vision pruned", "blind pruned", "gap pruned",
                            "gap random (mean ± sd)", "gap random range"], gap_rows), ""]
    if res.tst_after:
        rows = [[k, _pct(v.get("accuracy")), _pct(v.get("mean_p_gold")), _pct(v.get("mean_s_minus_chance"))]
                for k, v in res.tst_after.items() if "error" not in v]
        text += ["## TsT-RF after pruning vs random removal\n",
                 _md_table(["set", "TsT acc %", "mean P(gold) %", "mean s-chance (pts)"], rows), ""]
    text += ["## Removal by category\n", _md_table(["category", "original", "removed", "removed %", "kept"],
                                                    cat_rows), ""]
    text += ["`pruned_benchmark/` holds the kept questions as a Hugging Face dataset folder.\n",
             f"Made with benchaudit {__version__}; every setting and seed is in `summary.json`.\n"]
    return "\n".join(text)


def pruned_card(res, frame, source: str) -> str:
    s = res.settings
    return "\n".join([
        yaml_configs([("default", "test", "data/test-*.parquet")]),
        "# Pruned benchmark (benchaudit IBP audit selection)\n",
        f"The questions of {md_inline(source, 200)} that Iterative Bias Pruning kept: {s['n_kept']} of {s['n_questions']} "
        f"({s['n_removed']} removed). IBP repeatedly ran TsT-RF (a random forest on the question text and "
        "options only, k-fold on the test set itself) and removed the questions it scored highest above "
        "chance.\n",
        "This is an audit selection, not \"the\" debiased benchmark: another diagnostic, allocation or seed "
        "selects a different set. Report scores on it beside scores on the original set.\n",
        "## How it was made\n",
        "```json",
        __import__("json").dumps(to_jsonable({"settings": s, "stop_reasons": res.stop_reasons}), indent=2),
        "```",
        f"\nbenchaudit {__version__}. Removed IDs, in removal order, are in the parent report's `removed` config.\n",
    ])


def write_prune_report(frame, res, out: str | os.PathLike, *, command_line: list[str] | None = None,
                       source: str = "<questions>") -> Path:
    """Write the ``benchaudit prune`` folder (report + ``pruned_benchmark/``); returns its path."""
    from .prune import as_dict

    q = frame.questions
    removed_order = pd.Series(res.removed["order"].to_numpy(), index=res.removed["question_id"].astype(str))
    removed_iter = pd.Series(res.removed["iteration"].to_numpy(), index=res.removed["question_id"].astype(str))
    ids = q["question_id"].astype(str)
    questions = pd.DataFrame({
        "question_id": ids.to_numpy(), "category": q["category"].astype(str).to_numpy(),
        "answer_type": q["answer_type"].astype(str).to_numpy(),
        "tst_s": res.first_scores["tst_s"].to_numpy(),
        "tst_s_minus_chance": res.first_scores["tst_s_minus_chance"].to_numpy(),
        "ibp_removed": ~res.keep_mask,
        "ibp_removal_order": removed_order.reindex(ids).astype("Int64").to_numpy(),
        "ibp_removal_iteration": removed_iter.reindex(ids).astype("Int64").to_numpy(),
    })
    trace = res.trace.copy()
    if "removed_ids" in trace.columns:
        trace["removed_ids"] = trace["removed_ids"].apply(lambda v: [str(x) for x in v])
    kept = pd.DataFrame({"question_id": res.kept_ids})
    configs = {"questions": questions, "removed": res.removed, "kept": kept, "trace": trace}
    if res.gap is not None:  # an empty config would be a Parquet file `datasets` cannot load
        configs["gap"] = res.gap
    summary = {"prune": as_dict(res)}
    kept_q = frame.questions_table()[res.keep_mask].reset_index(drop=True)
    with atomic_dir(out, command="prune", inputs=source_paths(frame)) as tmp:
        write_hub_folder(tmp, configs, prune_card(res, frame, None), to_jsonable(summary),
                         manifest(frame, command_line, res.settings))
        write_hub_folder(Path(tmp) / "pruned_benchmark", {"test": kept_q}, pruned_card(res, frame, source),
                         to_jsonable({"prune": as_dict(res)}), manifest(frame, command_line, res.settings))
    return Path(out)
