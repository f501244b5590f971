"""The content of ``benchaudit tst`` and ``benchaudit prune`` outputs, written by the output layer.

Both have the layout of every output (``README.md`` card whose YAML ``configs`` point at
``data/<config>-*.parquet``, ``summary.json``, ``manifest.json`` of the one schema), written through
:func:`audit_hub.hub.output.output_folder`, so a failed run never leaves a partial folder. ``prune`` also
writes ``pruned_benchmark/``: the kept questions as a Hub dataset folder with a manifest of its own
(publishable with ``benchaudit push``) whose card says how it was made.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import __version__
from ..escape import md_inline
from ..fmt import ci, fmt_p, isnum, md_table, pct, plain, pp
from ..hub.card import configs as hub_configs
from ..hub.folders import to_jsonable
from ..hub.output import OutputFolder, output_folder
from ..readers.pairing import truncated_by_arm, truncation_note

TAGS = ["benchaudit", "test-set-stress-test"]


def _pct(x: Any) -> str:
    """A share as a percentage number without the sign (fmt.pct's digits), for columns headed '%'."""
    return pct(x)[:-1] if isnum(x) else "n/a"


def _ci(pair: Any, estimate: Any = None) -> str:
    return "" if not pair or pair[0] is None else " " + ci(pair, estimate=estimate)[:-1]


def _fmt_pts(x: Any) -> str:
    return "n/a" if x is None else pp(x).replace(" pp", " pts")


def _with_ci(x: Any, pair: Any) -> str:
    """A share with its interval when there is one: ``45.0% [40.0, 50.0]%``."""
    return pct(x) + (f" {ci(pair, estimate=x)}" if pair and pair[0] is not None else "")


def source_paths(frame) -> list[str]:
    """Local paths of the frame's inputs (the output folder may never be or contain one)."""
    return [str(s["path"]) for s in getattr(frame, "sources", []) or [] if isinstance(s, dict) and s.get("path")]


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


def _null_text(b: dict, n_permutations: int | None = None) -> str:
    """The null test first: the excess over the label-permutation null with its interval and p."""
    from ..fmt import fmt_p

    if b.get("p_value") is None:
        return "null not run"
    lo, hi = (f"{100 * float(x):+.1f}" for x in b["excess_ci"])
    return (f"excess over the null {_fmt_pts(b['excess'])} [{lo}, {hi}], p = {fmt_p(b['p_value'], n_permutations)} "
            f"(null test {_pct(b['test_statistic'])}% vs {_pct(b['null_mean'])}% ± {_pct(b['null_sd'])})")


def _chance_words(b: dict, what: str) -> str:
    """The score beside chance, in words: above / at / below chance (by the score's interval)."""
    from .rf import score_vs_chance

    acc, ch, c = b.get("accuracy"), b.get("chance"), b.get("accuracy_ci") or (None, None)
    score = f"{what} {_pct(acc)}%{_ci(c, acc)}"
    rel = score_vs_chance(b)
    if rel is None:
        return score
    return f"{score}, {rel} {_baseline_name(what)} ({_pct(ch)}%)"


def _baseline_name(what: str) -> str:
    # numeric questions: "chance" is the out-of-fold MRA of the category's training median, a fitted baseline (the
    # permutation null can sit below it: forests fitted to shuffled labels do worse than the median), so it is named
    return "the category-median baseline" if what == "MRA" else "chance"


def reading_words(b: dict, what: str, n_permutations: int | None = None) -> str | None:
    """One sentence for a format whose null test rejects while its score is not above chance (``reading`` is
    ``information_only``): the excess is not a shortcut. None otherwise."""
    from .rf import tst_reading

    if tst_reading(b) != "information_only":
        return None
    base = _baseline_name(what)
    head = (f"the text carries information on the answers (p = {fmt_p(b['p_value'], n_permutations)} against the "
            f"null), but the {what} is not above {base}")
    if b.get("null_mean") is not None and b["null_mean"] < b["chance"]:
        return (f"{head}: forests fitted to shuffled answers score below it ({_pct(b['null_mean'])}% vs "
                f"{_pct(b['chance'])}%), so the excess is what the text saves a forest from losing, not a shortcut "
                f"beyond {base}")
    return f"{head} (its interval reaches it), so there is no evidence of a shortcut beyond {base}"


#: below this share of the scored questions able to trade answers, the permutation null says little (named)
NULL_MIN_EXCHANGEABLE = 0.5


def null_warning(summary: dict) -> str | None:
    """One sentence when the label-permutation null could move the answers of fewer than half the scored
    questions (a group column whose groups fill their strata, or strata of one question): its p-value and excess
    then carry little information. None otherwise."""
    nul = summary.get("null") or {}
    n_ex, n = nul.get("n_exchangeable_questions"), summary.get("n_scored")
    if not nul.get("n_permutations") or n_ex is None or not n or n_ex >= NULL_MIN_EXCHANGEABLE * n:
        return None
    why = ("the groups of the group column fill their strata: few strata hold two groups or more"
           if (summary.get("params") or {}).get("group_column") else "most strata hold a single question")
    return (f"the permutation null could move the answers of only {n_ex:,} of {n:,} scored questions ({why}); "
            "its p-values and excesses carry little information")


def summary_lines(summary: dict) -> list[str]:
    """The printed summary of ``benchaudit tst``: a header, one line per format, one combined line. Each
    line leads with the excess over the null (the test), the score beside chance in words after it."""
    p = summary["params"]
    nn = summary["null"]["n_permutations"]
    null = (f"null: {nn} label permutations within category x format x K{', groups kept' if p['group_column'] else ''}"
            if nn else "no permutation null (--null-permutations 0): no p-values, no excess")
    out = [f"TsT-RF on {summary['n_questions']} questions ({summary['n_scored']} scored; k={p['k']}, "
           f"{p['repeats']} repeat{'s' if p['repeats'] != 1 else ''}, seed {p['seed']}; {null})"]
    warn = null_warning(summary)
    if warn:
        out.append(f"  warning: {warn}")
    for f, b in summary["by_format"].items():
        what = "accuracy" if f == "choice" else "MRA"
        line = (f"  {f:<7} n={b['n']:<6} {_null_text(b, nn)} | {_chance_words(b, what)} | "
                f"majority {_pct(b['majority_baseline'])}%")
        if f == "choice" and b.get("ece_before") is not None:
            line += (f" | P(gold) {pct(b['mean_p_gold'])} (raw {pct(b['mean_p_gold_raw'])}), "
                     f"ECE {pct(b['ece_before'])} -> {pct(b['ece_after'])}")
        out.append(line)
        words = reading_words(b, what, nn)
        if words:
            out.append(f"  {'':<7} ({words})")
    if len(summary["by_format"]) > 1:
        out.append(f"  {'all':<7} n={summary['n_scored']:<6} {_null_text(summary, nn)} | "
                   f"{_chance_words(summary, 'score')} | majority {_pct(summary['majority_baseline'])}%  "
                   "(n-weighted over the same questions)")
    if nn:
        out.append(f"  (accuracy/MRA: full run, {p['repeats']} repeats x {p['n_estimators']} trees; null test: the same "
                   f"pipeline on repeat 0's folds with {p['null_trees']}-tree forests, on the observed answers vs "
                   f"{nn} permutations; excess = null test - null mean)")
    return out


def _format_table(summary: dict) -> str:
    rows = []
    nn = (summary.get("null") or {}).get("n_permutations")
    items = list(summary["by_format"].items())
    if len(items) > 1:
        items.append(("all (n-weighted)", {**summary, "n": summary["n_scored"]}))
    for f, b in items:
        rows.append([f, b["n"], _with_ci(b['accuracy'], b['accuracy_ci']), pct(b.get("test_statistic")),
                     "n/a" if b.get("null_mean") is None else f"{pct(b['null_mean'])} ± {pct(b['null_sd'])}",
                     pp(b.get("excess")), fmt_p(b.get("p_value"), nn), pct(b["chance"]),
                     pct(b["majority_baseline"])])
    return md_table(["format", "n", "accuracy / MRA", "test statistic", "null mean ± sd", "excess",
                     "p", "chance", "majority"], rows)


def _reading_bullets(summary: dict) -> list[str]:
    """A card bullet per format whose null test rejects without a score above chance."""
    out = []
    nn = (summary.get("null") or {}).get("n_permutations")
    for f, b in summary.get("by_format", {}).items():
        words = reading_words(b, "accuracy" if f == "choice" else "MRA", nn)
        if words:
            out.append(f"- **{f}**: {words}.")
    return out


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
             "what they alone give); p one-sided. The `all` row is n-weighted over the same questions.",
             *_reading_bullets(summary)]
    if cal.get("ece_before") is not None:
        lines.append(f"Per-question s(x) (`tst_s`) is calibrated out of fold ({cal['method']}): expected "
                     f"calibration error {pct(cal['ece_before'])} raw -> {pct(cal['ece_after'])}.")
    return "\n".join(lines)


def _reliability_table(cal: dict) -> str:
    rows = []
    for b0, b1 in zip(cal["reliability_before"], cal["reliability_after"]):
        if b0["n"] == 0 and b1["n"] == 0:
            continue
        rows.append([f"{b0['lo']:.1f}-{b0['hi']:.1f}", b0["n"], pct(b0["confidence"]), pct(b0["accuracy"]),
                     b1["n"], pct(b1["confidence"]), pct(b1["accuracy"])])
    return md_table(["confidence bin", "n raw", "raw conf", "raw acc", "n calibrated", "calibrated conf",
                     "calibrated acc"], rows)


def fig_reliability(cal: dict, out: Path) -> str | None:
    """``figures/tst_reliability.png``: accuracy against confidence per bin, raw and calibrated."""
    from ..hub.figures import pyplot_agg, save_png

    if not cal or not cal.get("reliability_before"):
        return None
    plt = pyplot_agg()
    fig, ax = plt.subplots(figsize=(4.2, 4.0))
    ax.plot([0, 1], [0, 1], color="#9a9a9a", lw=1, ls="--", label="perfect calibration")
    for key, color, label in (("reliability_before", "#e07b24", f"raw (ECE {pct(cal['ece_before'])})"),
                              ("reliability_after", "#3b6ea8", f"calibrated (ECE {pct(cal['ece_after'])})")):
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


def llm_line(llm: dict) -> str:
    """The printed line of TsT-LLM (``tst --llm``): the same figures as the card's TsT-LLM section."""
    from ..escape import one_line

    return (f"TsT-LLM ({one_line(llm.get('model'), 200)}): mean P(gold) zero-shot "
            f"{pct(llm.get('zero_shot_mean_p_gold'))}, after k-fold LoRA {pct(llm.get('tst_mean_p_gold'))}; "
            f"ΔTsT {pp(llm.get('delta_tst'))}")


def tst_card(summary: dict, llm: dict | None = None, figures: dict | None = None) -> str:
    figures = figures or {}
    p = summary["params"]
    nul = summary["null"]
    rows = [[md_inline(c["category"], 60), c["n_scored"], pct(c["accuracy"]), pct(c["mean_p_gold"]),
             pct(c["chance"]), pct(c["majority_baseline"])] for c in summary["per_category"]]
    imp = [[md_inline(d["group"], 60), "" if d["drop_mean_p_gold"] is None else f"{d['drop_mean_p_gold']:.4f}",
            "" if d["drop_numeric_mra"] is None else f"{d['drop_numeric_mra']:.4f}"]
           for d in summary["feature_importances"]]
    folds = summary.get("folds", {})
    fold_rows = [[name, pct(h["accuracy"]), pct(h["mean_p_gold"])] for name, h in folds.items()]
    text = [
        "# Test-set Stress-Test (TsT-RF)\n",
        "A random forest that sees only the question text and the answer options was trained on "
        f"k-1 of k = {p['k']} folds of this test set and scored the held-out fold, {p['repeats']} times with "
        f"fold seeds {p['fold_seeds']}. A held-out score above what the permutation null reaches means the "
        "test set's own regularities let a blind model answer. Label-conditioned features (how often an "
        "option text was gold, gold-position frequencies, typical gold values) are learned on the training "
        "folds only, so these are designer-side audit statistics, not a model's blind ability.\n",
        ("## Headline: excess over the permutation null, per format\n" if nul["n_permutations"] else
         "## Headline: held-out scores per format (no permutation null: run with --null-permutations > 0 for "
         "p-values and the excess)\n"),
        _format_table(summary), "",
        *([f"- **excess** = test statistic minus the null mean; **p** one-sided, (1 + #null >= observed) / "
           f"(N + 1) with N = {nul['n_permutations']} label permutations."] if nul["n_permutations"] else []),
        *([f"- **Warning**: {null_warning(summary)}."] if null_warning(summary) else []),
        f"- the null assumes: {nul['assumes']}. It keeps each stratum's gold-position (numeric: gold-value) "
        "frequencies, so a p-value below alpha means the text predicts the answer beyond what a forest fitted to "
        "shuffled answers makes of them; the majority column shows what those frequencies alone give, and a "
        "shortcut is a score above chance as well.",
        *_reading_bullets(summary),
        f"- test statistic: {nul['statistic']}.",
        "- accuracy / MRA: mean over repeats (interval: Wald over questions, which ignores fold-fitting "
        "variance; the excess interval, ± 1.96 null sd, includes it). Chance: 1/K for choice questions; "
        "for numeric questions the out-of-fold MRA of the training median of the question's category. "
        "The `all` row combines the formats n-weighted over the same questions.",
        f"- questions scored: {summary['n_scored']} of {summary['n_questions']} "
        f"({summary['n_choice']} choice, {summary['n_numeric']} numeric; free-form not scored)",
        f"- group column: {md_inline(p['group_column'], 60) if p['group_column'] else '(none: every question its own group)'}\n",
    ]
    cal = summary.get("calibration") or {}
    if cal.get("reliability_before"):
        text += ["## Calibrated s(x)\n",
                 f"s(x) for a choice question is its out-of-fold P(gold), calibrated ({cal['method']}); the map "
                 f"used {cal['fitted_on']}. Mean P(gold): raw {pct(cal['mean_p_gold_raw'])}, calibrated "
                 f"{pct(cal['mean_p_gold_calibrated'])}. Expected calibration error ({cal['ece_definition']}): "
                 f"**{pct(cal['ece_before'])} raw -> {pct(cal['ece_after'])} calibrated**.\n"]
        if figures.get("reliability"):
            text += [f"![Reliability of TsT-RF P(gold)]({figures['reliability']})\n"]
        text += [_reliability_table(cal), ""]
    if len(fold_rows) > 1:
        text += ["## Grouped vs ungrouped folds\n", md_table(["folds", "accuracy", "mean P(gold)"], fold_rows),
                 ""]
    text += ["## Per category\n", md_table(["category", "n scored", "TsT acc / MRA", "mean P(gold)", "chance",
                                            "majority"], rows), ""]
    text += ["## Feature-group permutation importances\n",
             "Drop in held-out mean raw P(gold) (choice) or MRA (numeric) when a feature group's columns "
             "are permuted (repeat 0). Not Gini importances.\n",
             md_table(["group", "drop P(gold)", "drop MRA"], imp), ""]
    if llm:
        text += ["## TsT-LLM\n", f"- model: {md_inline(llm.get('model'), 80)}",
                 f"- zero-shot mean P(gold): {pct(llm.get('zero_shot_mean_p_gold'))}",
                 f"- TsT (LoRA, k-fold) mean P(gold): {pct(llm.get('tst_mean_p_gold'))}",
                 f"- ΔTsT: {pp(llm.get('delta_tst'))}\n"]
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
    with output_folder(out, command="tst", inputs=source_paths(frame)) as f:
        figures = {}
        rel = fig_reliability(result.summary.get("calibration") or {}, f.root)
        if rel:
            figures["reliability"] = rel
        for name, df in configs.items():
            f.config(name, df)
        f.json("summary.json", summary)
        f.card({"configs": hub_configs(f.files, default="questions"), "tags": TAGS},
               body=tst_card(result.summary, llm_summary, figures))
        f.manifest(command_line=command_line, inputs=list(getattr(frame, "sources", []) or []),
                   fields={"params": result.summary["params"]})
    return Path(out)


# ---------------------------------------------------------------------------------------- prune
def prune_card(res, frame, tst_summary: dict | None) -> str:
    s = res.settings
    gap_rows = []
    if res.gap is not None:
        for r in res.gap.to_dict(orient="records"):
            gap_rows.append([md_inline(r["model"], 60), f"{int(r['n_original']):,}", f"{int(r['n_pruned']):,}",
                             pct(r["vision_original"]), pct(r["blind_original"]),
                             pp(r["gap_original"]), pct(r["vision_pruned"]), pct(r["blind_pruned"]),
                             pp(r["gap_pruned"]),
                             f"{pp(r['gap_random_mean'])} ± {pp(r['gap_random_sd']).lstrip('+')}",
                             f"{pp(r['gap_random_min'])} to {pp(r['gap_random_max'])}"])
    trace = res.trace
    cats = res.removed.groupby("category").size() if len(res.removed) else pd.Series(dtype=int)
    all_cats = frame.questions["category"].astype(str).value_counts().sort_index()
    cat_rows = [[md_inline(c, 60), int(n), int(cats.get(c, 0)), pct(cats.get(c, 0) / n), int(n - cats.get(c, 0))]
                for c, n in all_cats.items()]
    text = [
        "# Iterative Bias Pruning (IBP): an audit selection\n",
        "IBP repeatedly ran TsT-RF on the remaining questions and removed those a text-only random forest "
        "scored highest above chance. The removed questions are an *audit selection* to inspect: another "
        "diagnostic, allocation or seed would select a different set. This is not \"the\" debiased "
        "benchmark.\n",
        f"- allocation: {md_inline(plain(s['allocation']), 60)}; budgets: {md_inline(plain(s['budgets']), 400)} "
        f"({md_inline(plain(s['budget_source']), 200)})",
        f"- step: {plain(s['step'])} per iteration; threshold: {md_inline(plain(s['threshold']), 60)}; floors per "
        f"category: {md_inline(plain(s['floors']), 400)}",
        f"- ranking: {md_inline(plain(s['score']), 200)}; ties: {md_inline(plain(s['tie_break']), 200)}",
        f"- TsT settings: {md_inline(plain(s['tst']), 400)}",
        f"- removed {plain(s['n_removed'])} of {plain(s['n_questions'])} questions in {len(trace)} TsT runs; "
        f"stop reasons: {md_inline(plain(res.stop_reasons), 400)}",
        f"- random-removal baseline: {s['random_seeds']} seeds ({s['random_seed_rule']}), same number per "
        "group, same floors\n",
    ]
    if gap_rows:
        cut = truncation_note(truncated_by_arm(frame.meta.get("pairing")))
        text += ["## Vision-blind gap (accuracy %, full minus blind)\n",
                 "Each model on the questions both of its arms scored (a blind run of part of the benchmark is "
                 "compared there only).\n",
                 md_table(["model", "items", "items pruned", "vision", "blind", "gap", "vision pruned", "blind pruned",
                           "gap pruned",
                            "gap random (mean ± sd)", "gap random range"], gap_rows), ""]
        text += [md_inline(cut[:1].upper() + cut[1:], 1200) + ".\n"] if cut else []
    if res.tst_after:
        rows = [[k, pct(v.get("accuracy")), pct(v.get("mean_p_gold")), pp(v.get("mean_s_minus_chance"))]
                for k, v in res.tst_after.items() if "error" not in v]
        text += ["## TsT-RF after pruning vs random removal\n",
                 md_table(["set", "TsT acc", "mean P(gold)", "mean s - chance"], rows), ""]
    text += ["## Removal by category\n", md_table(["category", "original", "removed", "removed %", "kept"],
                                                    cat_rows), ""]
    text += ["`pruned_benchmark/` holds the kept questions as a Hugging Face dataset folder.\n",
             f"Made with benchaudit {__version__}; every setting and seed is in `summary.json`.\n"]
    return "\n".join(text)


def pruned_card(res, frame, source: str) -> str:
    s = res.settings
    return "\n".join([
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
    summary = {"prune": as_dict(res), "truncated_prompts": truncated_by_arm(frame.meta.get("pairing"))}
    kept_q = frame.questions_table()[res.keep_mask].reset_index(drop=True)
    with output_folder(out, command="prune", inputs=source_paths(frame)) as f:
        # the pruned set first: the report's manifest then lists its files too
        pb = OutputFolder(f.folder("pruned_benchmark"), "prune")
        pb.config("test", kept_q)
        pb.json("summary.json", summary)
        pb.card({"configs": hub_configs(pb.files, default="test", splits={"test": "test"},
                                        names={"test": "default"}), "tags": [*TAGS, "pruned-benchmark"]},
                body=pruned_card(res, frame, source), splits={"test": "test"}, names={"test": "default"})
        pb.manifest(command_line=command_line, inputs=list(getattr(frame, "sources", []) or []),
                    fields={"kind": "pruned_benchmark", "params": res.settings}, started_at=f.started_at)
        for name, df in configs.items():
            f.config(name, df)
        f.json("summary.json", summary)
        f.card({"configs": hub_configs(f.files, default="questions"), "tags": TAGS}, body=prune_card(res, frame, None))
        f.manifest(command_line=command_line, inputs=list(getattr(frame, "sources", []) or []),
                   fields={"params": res.settings})
    return Path(out)
