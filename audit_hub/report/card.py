"""Render the report's dataset card (``README.md``) from the Jinja template in ``cards/``.

The YAML header is built with :class:`huggingface_hub.DatasetCardData` and carries ``configs`` and
``dataset_info`` (features, ``num_examples``, sizes) for every config, read back from the Parquet
files actually written, so the card always matches the files. The body is computed here as plain
strings and small tables; the template only lays them out.
"""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .. import detectors
from ..engine.per_model import unreadable_note
from ..escape import md_code, md_inline, safe_link
from ..fmt import ci, count, fmt_num, fmt_p, isnum, md_table, pct, pct_pair, pp
from ..frame.validate import duplicate_runs_note, empty_runs_note
from ..hub.card import configs as hub_configs
from ..hub.card import dataset_info, render, yaml_text
from ..schema import ARM_DESCRIPTIONS, ARMS
from ..severity import DESCRIPTIONS, LEVELS
from .tables import ACTION_RULES, ACTIONS, judge_disagreement_counts

TEMPLATE_NAME = "audit_card.md.j2"
TAGS = ["benchaudit", "benchmark-audit", "evaluation", "vision-language-models", "data-quality"]
N_SEVERE_SHOWN = 15

# ---------------------------------------------------------------------------------------------- template
def template_path() -> Path:
    """The card template: the packaged copy (``audit_hub/templates``), else the repository's ``cards/``."""
    pkg = Path(str(resources.files("audit_hub") / "templates" / TEMPLATE_NAME))
    if pkg.is_file():
        return pkg
    repo = Path(__file__).resolve().parents[2] / "cards" / TEMPLATE_NAME
    if repo.is_file():
        return repo
    raise FileNotFoundError(f"card template {TEMPLATE_NAME} not found in audit_hub/templates or cards/")


# ---------------------------------------------------------------------------------------------- YAML
def card_header(result: Any, files: dict[str, list[str]]) -> dict:
    """The card's YAML fields that come from the audit (the ``DatasetCardData`` keyword arguments but
    ``dataset_info``, which is read back from the written files by :func:`finish_card`)."""
    meta = result.frame.meta
    ds = meta.get("dataset") or {}
    lic = str(ds.get("license") or "other").lower()
    n = result.frame.n_questions
    size = ("n<1K" if n < 1_000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000
            else "100K<n<1M" if n < 1_000_000 else "1M<n<10M")
    bench = yaml_text(meta.get("benchmark") or ds.get("name") or "benchmark", 100)
    return dict(license=lic, pretty_name=f"benchaudit report: {bench}", tags=list(TAGS), size_categories=[size],
                configs=hub_configs(files, default="questions"))


# ---------------------------------------------------------------------------------------------- body
def _table_rows(summary_df: pd.DataFrame, detector: str, statistic_like: str, primary: bool = True) -> pd.DataFrame:
    t = summary_df[(summary_df["detector"] == detector) & (summary_df["primary"] == primary)]
    st = t["statistic"].astype(str)
    exact = t[st == statistic_like]
    return exact if len(exact) else t[st.str.contains(statistic_like, regex=False)]


def _headline(result: Any) -> dict:
    s = result.summary
    gain = detectors.by_role("image_gain")
    vd = (s.get(gain) or {}) if gain else {}
    out: dict[str, Any] = {"vd": None, "lomo": [], "others": []}
    if vd and not vd.get("skipped"):
        rows = [["All models" + (" (pool level)" if vd.get("pool_level") else ""),
                 fmt_num(vd.get("n_items")), pct(vd.get("zero_gain_share")),
                 ci(vd.get("share_ci"), estimate=vd.get("zero_gain_share")), pct(vd.get("null_mean")),
                 pp(vd.get("excess")), ci(vd.get("excess_ci"), "pp", vd.get("excess")),
                 fmt_p(vd.get("p_value"), vd.get("n_permutations"))]]
        lomo = vd.get("leave_one_model_out") or []
        if isinstance(lomo, dict):
            lomo = lomo.get("rows") or lomo.get("results") or []
        for r in lomo:
            if not isinstance(r, dict):
                continue
            rows.append([f"without {md_inline(r.get('dropped_model', r.get('model', '?')), 60)}",
                         fmt_num(r.get("n_items")), pct(r.get("zero_gain_share")),
                         ci(r.get("share_ci"), estimate=r.get("zero_gain_share")), pct(r.get("null_mean")),
                         pp(r.get("excess")),
                         ci(r.get("excess_ci"), "pp", r.get("excess")) if r.get("excess_ci") is not None else "—",
                         fmt_p(r.get("p_value"), vd.get("n_permutations"))])
        out["vd"] = md_table(["Model pool", "Items", "Observed", "95% CI", "Null mean", "Excess", "Excess 95% CI",
                              "p"], rows)
        raw = [float(r["zero_gain_share"]) for r in lomo if isinstance(r, dict) and isnum(r.get("zero_gain_share"))]
        exc = [float(r["excess"]) for r in lomo if isinstance(r, dict) and isnum(r.get("excess"))]
        if len(raw) >= 2 and len(exc) >= 2:
            out["lomo_spread"] = (f"Across leave-one-model-out pools the raw share spans {pp(max(raw) - min(raw))[1:]} "
                                  f"and the excess {pp(max(exc) - min(exc))[1:]}"
                                  + (" (the excess interval is bootstrapped for the whole pool only: — in the other "
                                     "rows)" if any(isinstance(r, dict) and r.get("excess_ci") is None for r in lomo)
                                     else "") + ".")
            if vd.get("leave_one_model_out_null"):
                out["lomo_spread"] += f" Their p-values: {vd['leave_one_model_out_null']}."
        frag = vd.get("fragile")
        if frag is None and isinstance(vd.get("leave_one_model_out"), dict):
            frag = vd["leave_one_model_out"].get("fragile")
        if frag is not None:
            reason = md_inline(vd.get("fragile_reason") or "", 300)
            out["fragile"] = ("**Fragile**: the conclusion changes when one model is left out" + (f" ({reason})" if reason else "")
                              + ".") if frag else "The conclusion is stable when any one model is left out."
        decomp_fn = getattr(detectors.get(gain).load(), "decomposition_line", None)
        decomp = decomp_fn(vd) if decomp_fn else ""
        if decomp:
            out["decomp"] = decomp
        out["vd_summary"] = vd
        notes_fn = getattr(detectors.get(gain).load(), "headline_notes", None)
        notes = notes_fn(vd) if notes_fn else []
        if notes:
            out["decomp"] = "\n\n".join(([out["decomp"]] if out.get("decomp") else []) + notes)
    for spec in detectors.specs():
        line = getattr(spec.load(), "card_line", None)
        sm = s.get(spec.name) or {}
        if line is not None and sm and not sm.get("skipped"):
            txt = line(sm)
            if txt:  # a detector may have nothing to add (e.g. no design-label check asked for)
                out["others"].append(txt)
    mult = (s.get("multiplicity") or {}).get("tests") or {}
    if mult:
        cal = s.get("calibration") or {}
        out["multiplicity"] = md_table(
            ["Detector", "p", "p (Holm)", "Calibration on this benchmark's nulls"],
            [[k, fmt_p(v.get("p_value")), fmt_p(v.get("p_holm")),
              calibration_word(cal[k]) if isinstance(cal.get(k), dict) else "not run"] for k, v in mult.items()],
            ["l", "r", "r", "l"])
    return out


def _role_rows(summary_df: pd.DataFrame, role: str, primary: bool = True) -> pd.DataFrame:
    """The summary-table rows of the headline statistic of the detector playing ``role``."""
    name = detectors.by_role(role)
    if name is None:
        return summary_df.iloc[:0]
    return _table_rows(summary_df, name, detectors.get(name).headline_statistic, primary)


def _per_category(result: Any, summary_df: pd.DataFrame) -> dict:
    """{"intro", "table"} of the per-category section (both empty without a per-category row). ``Items`` is the
    category's questions in the benchmark (the zero-gain share's own count beside it where it compared fewer);
    without the image-gain detector (no blind runs) its columns are left out and the rows go by the unanimous
    non-gold share, not by an excess no row has."""
    vd = _role_rows(summary_df, "image_gain")
    vd = vd[vd["category"] != "(all)"] if len(vd) else vd
    ce = _role_rows(summary_df, "label_conflict")
    ce = ce[ce["category"] != "(all)"] if len(ce) else ce
    cats = list(dict.fromkeys(list(vd["category"]) + list(ce["category"])))
    if not cats:
        return {"intro": "", "table": "", "figure_alt": ""}
    vdi = vd.drop_duplicates("category").set_index("category") if len(vd) else None
    cei = ce.drop_duplicates("category").set_index("category") if len(ce) else None
    sizes = result.frame.questions["category"].astype(str).value_counts()
    rows = []
    for c in cats:
        v = vdi.loc[c] if vdi is not None and c in vdi.index else None
        e = cei.loc[c] if cei is not None and c in cei.index else None
        size = int(sizes.get(str(c), 0))
        items = fmt_num(size)
        if v is not None and isnum(v["n_items"]) and int(v["n_items"]) != size:
            items += f" ({fmt_num(v['n_items'])} compared)"
        ce_txt, ce_share = "n/a", -1.0
        if e is not None:
            est = e["estimate"]
            if str(e["statistic"]).endswith("share") and isnum(est) and isnum(e["n_items"]):
                # the share's own denominator: the category's items with enough parseable answers
                ce_txt = f"{round(float(est) * float(e['n_items'])):,} of {fmt_num(e['n_items'])} ({pct(est)})"
                ce_share = float(est)
            else:
                ce_txt = fmt_num(est)
        gain = [pct(v["estimate"]) if v is not None else "n/a", pct(v["null_mean"]) if v is not None else "n/a",
                pp(v["excess"]) if v is not None else "n/a", fmt_p(v["p_adjusted"]) if v is not None else "n/a"]
        key = (float(v["excess"]) if v is not None and isnum(v["excess"]) else -np.inf) if vdi is not None \
            else ce_share
        rows.append((key, [md_inline(c, 50), items] + (gain if vdi is not None else []) + [ce_txt]))
    rows.sort(key=lambda t: -t[0])
    cols = ["Category", "Items"] + (["Zero-gain share", "Null mean", "Excess", "p (BH)"] if vdi is not None else []) \
        + ["Unanimous non-gold (of eligible items)"]
    if vdi is not None:
        intro = "Sorted by zero-gain excess (p-values Benjamini-Hochberg adjusted across categories)."
    else:
        intro = ("Sorted by the share of unanimous non-gold answers; no zero-gain columns: "
                 f"`{detectors.by_role('image_gain')}` did not run (no blind runs).")
    alt = ("Per-category zero-gain excess and consensus errors" if vdi is not None and cei is not None
           else "Per-category zero-gain excess" if vdi is not None else "Per-category unanimous non-gold answers")
    return {"intro": intro, "table": md_table(cols, [r for _, r in rows]), "figure_alt": alt}


def _judge(result: Any, summary_df: pd.DataFrame) -> dict:
    out: dict[str, Any] = {}
    frame = result.frame
    r = frame.runs
    h, e = r["hit"].to_numpy(), r["hit_exact"].to_numpy()
    both = (h >= 0) & (e >= 0)
    if not both.any():
        out["text"] = ("Only one correctness field is available (" + str(result.primary_field) + "), so judge "
                       "dependence could not be measured.")
        return out
    c = judge_disagreement_counts(frame)
    n_both, n_dis, n_all, unparsed = c["n_both"], c["n_dis"], c["n_all"], c["unparsed"]
    rows = []
    for k in np.flatnonzero(n_all):
        a, mm = divmod(int(k), frame.n_models)
        rows.append([md_inline(frame.models[mm], 50), ARMS[a], fmt_num(n_both[k]), fmt_num(n_dis[k]),
                     pct(n_dis[k] / n_both[k]) if n_both[k] else "n/a", pct(unparsed[k] / n_all[k])])
    out["per_model"] = md_table(["Model", "Arm", "Items scored both ways", "Judge != exact match", "Share",
                                 "Unparseable answers"], rows)
    total_dis = int(n_dis.sum())
    if total_dis:
        top = int(np.argmax(n_dis))
        out["top"] = (f"{total_dis:,} (model, item) scores differ between the judge and exact matching; "
                      f"{md_inline(frame.models[top % frame.n_models], 50)} ({ARMS[top // frame.n_models]} arm) "
                      f"accounts for {pct(n_dis[top] / total_dis)} of them.")
    a = _role_rows(summary_df, "image_gain", True)
    b = _role_rows(summary_df, "image_gain", False)
    if len(a) and len(b):
        m2 = a[["category", "estimate"]].drop_duplicates("category").merge(
            b[["category", "estimate"]].drop_duplicates("category"), on="category", suffixes=("_judge", "_exact"))
        if len(m2):
            diff = (m2["estimate_judge"] - m2["estimate_exact"]).abs()
            out["max_shift"] = (f"Zero-gain shares move by at most {pp(float(diff.max()))[1:]} between the judged "
                                f"and the exact-match correctness (largest in {md_inline(m2['category'].iloc[int(diff.values.argmax())], 50)}).")
    jd = result.judge_dependence or {}
    ov = jd.get("overall") if isinstance(jd, dict) else None
    if isinstance(ov, dict) and isnum(ov.get("hit")) and isnum(ov.get("hit_exact")):
        txt = (f"Overall zero-gain share: {pct(ov['hit'])} judged vs {pct(ov['hit_exact'])} with exact matching")
        if isnum(ov.get("excess_hit")) and isnum(ov.get("excess_exact")):
            B = getattr(getattr(result, "config", None), "n_permutations", None)
            txt += (f"; excess over the null {pp(ov['excess_hit'])} (p = {fmt_p(ov.get('p_hit'), B)}) vs "
                    f"{pp(ov['excess_exact'])} (p = {fmt_p(ov.get('p_exact'), B)})")
        changes = jd.get("conclusion_changes")
        if changes is not None:
            txt += (". **The conclusion changes with the scoring rule.**" if changes
                    else ". The conclusion does not change with the scoring rule.")
        out["overall"] = txt
    if isinstance(jd, dict) and jd.get("note"):
        out["note"] = md_inline(jd["note"], 1000)
    if isinstance(jd, dict) and jd.get("exact_only"):
        out["intro"] = ("The full arm was scored both ways on identical predictions: with the harness's judged "
                        "correctness and with exact matching of the extracted answer.")
    return out


def null_capped_lines(fvn: dict) -> list[str]:
    """One line per detector whose flags the calibration's defect-free simulations explain (``summary.json``
    ``flags_vs_null``): they count toward the overall severity at low at most."""
    out = []
    for name, c in fvn.items():
        sc = c.get("chance_categories") or {}
        if sc.get("capped_at") and not c.get("capped_at"):
            cats = sc["categories"]
            shown = ", ".join(md_inline(x, 60) for x in cats[:6]) + (f" and {len(cats) - 6} more" if len(cats) > 6 else "")
            out.append(f"`{name}` flags {sc['n_flagged']:,} questions ({pct(sc['flag_rate'])} of their "
                       f"{sc['n_items']:,} items) in the {len(cats):,} categories this pool answers at chance "
                       f"({shown}), about as many as the calibration's simulations flag when "
                       f"every model answers there at chance with the golds right ({pct(sc['null_flag_rate'])} "
                       f"{ci(sc.get('null_flag_rate_ci'), estimate=sc['null_flag_rate'])} of those items in "
                       f"{sc.get('n_sims')} simulations: {pct(sc['null_share_of_flags'], 0)} of its flags there would "
                       f"appear without any defect), so those flags count at {sc['capped_at']} severity at most in "
                       f"the overall severity and the suggested actions; its other flags keep their level.")
        if not c.get("capped_at"):
            continue
        out.append(f"`{name}` flags {c['n_flagged']:,} questions ({pct(c['flag_rate'])}), about as many as on "
                   f"defect-free benchmarks like this one ({pct(c['null_flag_rate'])} "
                   f"{ci(c.get('null_flag_rate_ci'), estimate=c['null_flag_rate'])} of the items in {c.get('n_sims')} "
                   f"calibration simulations: {pct(c['null_share_of_flags'], 0)} of its flags would appear without "
                   f"any defect), so they count at {c['capped_at']} severity at most in the overall severity and "
                   f"the suggested actions; the column `{name}_severity` keeps the detector's own level.")
    return out


def _ci_upper(c: dict) -> float | None:
    """The upper end of a calibration entry's false-positive-rate interval, when it has one."""
    lo_hi = c.get("fpr_ci")
    return lo_hi[1] if isinstance(lo_hi, (list, tuple)) and len(lo_hi) == 2 and isnum(lo_hi[1]) else None


def calibration_word(c: dict) -> str:
    """A calibration entry's verdict in one word group: "out of calibration" (a test that holds at any number of
    simulations); "not decided" when the simulations cannot place the rate on either side of the verdict's
    margin (``decided`` False: the pooled interval reaches past it, or one regime's own rate is above it on too
    few simulations to call it out); "conservative" when the whole interval lies below the nominal rate (it flags
    fewer items than it expects to: findings are not inflated, but its power is lower than its nominal rate
    says); "within calibration" when the interval ends at or below the margin and no regime's rate is above
    it; "descriptive" without a nominal rate; "not applicable" where the detector expects no flag on this pool
    and raises none (a nominal rate of 0)."""
    ooc = c.get("out_of_calibration")
    if ooc:
        return "out of calibration"
    if ooc is None or not isnum(c.get("nominal")):
        return "descriptive"
    if float(c["nominal"]) == 0 and isnum(c.get("fpr")) and float(c["fpr"]) == 0:
        # a count-based detector that expects no flag on this pool and raises none (an item-rest test that needs
        # more models than the pool has): "within calibration" would be vacuous
        return "not applicable"
    if c.get("decided") is False:
        return "not decided"
    hi = _ci_upper(c)
    if hi is not None and float(hi) < float(c["nominal"]):
        return "conservative"
    return "within calibration"


def calibration_status(c: dict) -> str:
    """The calibration table's status: :func:`calibration_word`, with what decides it where it is not decided
    (the regime above the margin, or the pooled interval's end and the simulations the observed rate would
    need)."""
    from ..engine.calibration import MARGIN_HIGH

    word = calibration_word(c)
    if word == "out of calibration":
        return f"**{word}**"
    if word == "descriptive":
        return "descriptive (no nominal rate)"
    if word == "conservative":
        return "conservative (below nominal)"
    if word == "within calibration":
        return word
    if word == "not applicable":
        return "not applicable (it expects and raises no flag on this pool)"
    reg = c.get("undecided_regime")
    r = (c.get("regimes") or {}).get(reg) or {}
    if reg and isnum(r.get("fpr")) and isnum(r.get("nominal")):
        k = round(float(r["fpr"]) * int(r.get("n_runs") or 0)) if r.get("kind") == "p_value" else None
        rate, margin = pct_pair(r["fpr"], MARGIN_HIGH * float(r["nominal"]))
        return (f"not decided: in the {reg.replace('_', ' ')} regime its rate is {rate}"
                + (f" ({k} of {r['n_runs']} simulations)" if k is not None else "")
                + f", above the {margin} margin, on too few simulations to "
                  "call it out of calibration (`--calibration-sims`)")
    hi = _ci_upper(c)
    need = c.get("sims_to_decide")
    return (f"not decided: {fmt_num(c.get('n_sims'))} simulations leave rates up to {pct(hi)} possible "
            f"(out of calibration above {pct(MARGIN_HIGH * float(c['nominal']))})"
            + (f"; about {need:,} would decide it at the observed rate (`--calibration-sims`)"
               if isinstance(need, int) else ""))


def _calibration(result: Any) -> str:
    cal = result.calibration or {}
    rows = []
    for name, c in cal.items():
        if not isinstance(c, dict):
            continue
        status = calibration_status(c)
        worst = c.get("worst_regime")
        wr = (f"{worst.replace('_', ' ')}: {pct(c.get('worst_regime_fpr'))}"
              + (" (out of calibration)" if (c.get("regimes") or {}).get(worst, {}).get("out_of_calibration") else "")
              if worst else "")
        rows.append([name, pct(c.get("fpr")), ci(c.get("fpr_ci"), estimate=c.get("fpr")) if c.get("fpr_ci") else "",
                     pct(c.get("nominal")),
                     fmt_num(c.get("n_runs", c.get("n_sims"))), status, wr, md_inline(c.get("note", ""), 1000)])
    from .stat_notes import calibration_lead

    lead = calibration_lead(cal)
    table = md_table(["Detector", "False-positive rate", "95% CI", "Nominal", "Simulations", "Status", "Worst regime",
                      "Note"], rows, ["l", "r", "r", "r", "r", "l", "l", "l"])
    return (lead + "\n\n" + table) if lead and rows else table


def _severe(questions: pd.DataFrame, n: int = N_SEVERE_SHOWN) -> str:
    from ..severity import RANK

    q = questions
    r = q["severity"].map(RANK).to_numpy()
    sel = np.flatnonzero(r >= RANK["medium"])
    if not len(sel):
        return ""
    # within a level: the items more detectors put at it first, then the rarer finding (a unanimous non-gold
    # answer on 2 items before low agreement on 196: ties in file order hid the former), then file order
    n_at = np.zeros(len(q), np.int64)
    rarity = np.full(len(q), np.iinfo(np.int64).max)
    for spec in detectors.specs():
        col = f"{spec.name}_severity"
        if col not in q:
            continue
        own = q[col].map(RANK).fillna(0).to_numpy().astype(np.int64)
        at = own == r  # this detector gives the item its overall level
        n_at += at & (r >= RANK["medium"])
        counts = np.bincount(own, minlength=len(RANK))  # items at each level of this detector
        rarity = np.where(at, np.minimum(rarity, counts[own]), rarity)
    order = np.lexsort((np.arange(len(sel)), rarity[sel], -n_at[sel], -r[sel]))
    rows = []
    for i in sel[order][:n]:
        row = q.iloc[i]
        rows.append([md_code(row['question_id'], 40, cell=True), md_inline(row.get("category", ""), 30), row["severity"],
                     row["suggested_action"], md_inline(row.get("question", ""), 90),
                     md_inline(row.get("answer", ""), 20), md_inline(row["rationale"], 220)])
    return md_table(["Question", "Category", "Severity", "Action", "Question text", "Gold", "Evidence"], rows,
                    ["l"] * 7)


def _detector_table(result: Any) -> str:
    rows = []
    for spec in detectors.specs():
        name, signal, flags, judge_dep = spec.name, spec.signal, spec.finding, spec.judge_dependent
        if name in result.results:
            status = "ran"
            n_flag = int(result.results[name].per_question.get(f"is_{name}_issue", pd.Series([], dtype=bool)).sum())
        else:
            status = "skipped: " + md_inline(result.skipped.get(name, "not run"), 100)
            n_flag = None
        rows.append([f"`{name}`", signal, flags, "yes" if judge_dep else "no", status, fmt_num(n_flag),
                     _items_used(result, name)])
    return md_table(["Detector", "Signal", "Flags", "Judge-dependent", "Status", "Questions flagged",
                     "Items used (excluded)"], rows, ["l", "l", "l", "l", "l", "r", "l"])


def _items_used(result: Any, name: str) -> str:
    """``N of T`` and the exclusion reasons with their counts (every item accounted for)."""
    r = result.results.get(name)
    if r is None:
        return ""
    summ = r.summary or {}
    n = summ.get("n_items")
    exc = summ.get("excluded") or {}
    total = result.frame.n_questions
    txt = f"{fmt_num(n)} of {total:,}"
    if exc:
        txt += "; excluded: " + ", ".join(f"{md_inline(k, 80)} ({fmt_num(v)})" for k, v in exc.items())
    return txt


def _limitations(result: Any) -> list[str]:
    s = result.summary
    lims = [
        "Every flag is a **candidate** for review, not a verdict: the detectors read model behaviour, and a model "
        "pool can be collectively wrong for reasons unrelated to the item.",
    ]
    vd = s.get(detectors.by_role("image_gain")) or {}
    if vd and not vd.get("skipped"):  # the zero-gain caveats only where a zero-gain test ran
        lims += [
            "The zero-gain share depends on the model pool (it rises mechanically with fewer models); read the "
            "excess over the item-matched permutation null and the leave-one-model-out rows, not the raw share.",
            "Zero gain is heterogeneous: items that every model gets wrong with and without the image also have zero "
            "gain; only the blind-solvable cell is evidence of text-answerability.",
        ]
    pool = s.get("pool") or {}
    if pool.get("pool_level"):
        lims.append("Full and blind arms come from different models, so visual dependence is compared at pool "
                    "level, not per model: a stronger or weaker blind model shifts every item. "
                    + _sentence(md_inline(pool.get("note") or "", 600)))
    for key in ("truncation_note", "unfinished_note"):
        if pool.get(key):
            note = pool[key]
            lims.append(md_inline(note[:1].upper() + note[1:], 1200) + ".")
    if s.get("primary_field") == "hit_exact":
        lims.append("No judged correctness was supplied; all judge-dependent results use exact matching of the "
                    "extracted answer, which under-credits free-form answers a parser cannot read.")
    cal = result.calibration or {}
    bad = [k for k, v in cal.items() if isinstance(v, dict) and v.get("out_of_calibration")]
    if bad:
        lims.append("Out of calibration on simulated null benchmarks with this benchmark's option counts and model "
                    "accuracies: " + ", ".join(bad) + ". Treat their p-values and flag counts with caution.")
    open_ = [k for k, v in cal.items() if isinstance(v, dict) and v.get("decided") is False]
    if open_:
        n = next(v.get("n_sims") for k, v in cal.items() if k in open_)
        lims.append(f"Calibration not decided by the {fmt_num(n)} simulations for " + ", ".join(open_)
                    + ": their false-positive rate may be above the 1.5 x nominal margin (the calibration table says "
                    "where); their p-values are not shown to hold their level here. More simulations "
                    "(`--calibration-sims 400` or more) decide many of them.")
    for name, reason in (result.skipped or {}).items():
        lims.append(f"`{name}` was skipped: {md_inline(reason, 300)}.")
    for spec in detectors.specs():
        fn = getattr(spec.load(), "limitation_lines", None)
        sm = s.get(spec.name) or {}
        if fn is not None and sm and not sm.get("skipped"):
            lims.extend(fn(sm))
    for note in result.frame.meta.get("notes", []) or []:
        lims.append(md_inline(str(note), 1000))  # notes can name models (readers.named_roles): input text
    unparsed = result.frame.meta.get("unparsed_options") or {}
    if unparsed.get("n"):
        ids = ", ".join(md_inline(x, 40) for x in unparsed.get("question_ids", [])[:10])
        lims.append(f"{count(unparsed['n'], 'question')} {'has' if unparsed['n'] == 1 else 'have'} a letter gold but options that could not be read "
                    f"(audited as non-multiple-choice, --allow-unparsed-options): {ids}"
                    + (" ..." if unparsed["n"] > 10 else "") + ".")
    circ = result.frame.meta.get("circular") or {}
    if circ.get("n_groups"):
        lims.append(f"CircularEval: {circ['n_copies']:,} option-shifted copies were read as {circ['n_groups']:,} "
                    "questions; a question is right only when every copy is right and readable, in both the "
                    "judged and the exact-match arm (the per-copy rows are in circular_copies.parquet).")
    gd = circ.get("gold_disagreement") or {}
    if gd.get("n_groups"):
        names = ", ".join(md_inline(g.get("group_id"), 40) for g in gd.get("groups", [])[:10])
        lims.append(f"Input defect: in {count(gd['n_groups'], 'CircularEval group')} the option-shifted copies disagree on "
                    f"the gold option ({names}" + (" ..." if gd["n_groups"] > 10 else "") + "); each copy was scored "
                    "against its own gold, as the harness does (summary.json `circular.gold_disagreement`).")
    return lims


def build_context(result: Any, questions: pd.DataFrame, summary_df: pd.DataFrame, *, files: dict[str, list[str]],
                  figures: dict[str, str]) -> dict:
    """Everything the template shows, as strings and small Markdown tables."""
    frame = result.frame
    meta = frame.meta
    s = result.summary
    ds = meta.get("dataset") or {}
    full, blind = frame.models_in("full"), frame.models_in("blind")
    judges = meta.get("judges") or s.get("judges") or {}
    judge_names = sorted({md_inline(v, 200) for v in judges.values()}) if isinstance(judges, dict) else []
    sev_counts = questions["severity"].value_counts()
    act_counts = questions["suggested_action"].value_counts()
    cats = questions["category"].nunique(dropna=True) if "category" in questions else 0
    rev = ds.get("revision") or ds.get("commit") or ds.get("resolved_commit")
    rev = md_code(rev, 80, cell=True) if rev else rev
    bench = md_inline(meta.get("benchmark") or ds.get("name") or "the benchmark", 100)
    # Every input-derived string is escaped here, once, for the Markdown body (links only to the Hub).
    # the split once: not "MATH-Vision (test, 3,040 questions) (split `test`)" where the name already says it
    named = str(meta.get("benchmark") or ds.get("name") or "")
    shown_split = ds.get("split") and not re.search(rf"\b{re.escape(str(ds['split']))}\b", named)
    ds = {"split": md_code(ds["split"], 60, cell=True) if shown_split else None,
          "repo": md_inline(ds.get("repo") or ds.get("url") or "", 120) or None,
          "url": safe_link(ds.get("url")),
          "license": md_inline(ds["license"], 60) if ds.get("license") else None}
    full = [md_inline(m, 60) for m in full]
    blind = [md_inline(m, 60) for m in blind]
    headline = _headline(result)
    lede = []
    for spec in detectors.specs():
        line = getattr(spec.load(), "lede_line", None)
        sm = s.get(spec.name) or {}
        if line is not None and sm and not sm.get("skipped"):
            lede.append(line(sm))
    n_med = int((questions["severity"].map({lv: i for i, lv in enumerate(LEVELS)}) >= 2).sum())
    lede.append(f"{n_med:,} of {len(questions):,} questions have a finding at medium severity or above.")
    lede.extend(null_capped_lines(s.get("flags_vs_null") or {}))
    return {
        "bench": bench,
        "dataset": ds,
        "revision": rev,
        "n_questions": f"{frame.n_questions:,}",
        "n_categories": cats,
        "full_models": full,
        "blind_models": blind,
        "pool_note": md_inline((s.get("pool") or {}).get("note", ""), 600),
        "empty_runs_note": md_inline(" ".join(x for x in (empty_runs_note(s.get("empty_runs")),
                                                         duplicate_runs_note(s.get("duplicate_runs"))) if x), 2400),
        "judges": judge_names,
        "primary_field": "judged (`hit`)" if result.primary_field == "hit" else "exact match (`hit_exact`)",
        "seed": (result.config.seed if hasattr(result.config, "seed") else s.get("seed")),
        "n_permutations": getattr(result.config, "n_permutations", s.get("n_permutations")),
        "alpha": getattr(result.config, "alpha", s.get("alpha")),
        "version": s.get("benchaudit_version", ""),
        "lede": lede,
        "detector_table": _detector_table(result),
        "headline": headline,
        "per_category": _per_category(result, summary_df),
        "judge": _judge(result, summary_df),
        "calibration": _calibration(result),
        "tst": _tst_section(s.get("tst")),
        "per_model": per_model_section(s.get("per_model")),
        "arm_field": _arm_field_line(s.get("arm_comparison")),
        "severity_table": md_table(["Level", "Meaning", "Questions"],
                                   [[f"**{lv}**", DESCRIPTIONS[lv], fmt_num(int(sev_counts.get(lv, 0)))]
                                    for lv in reversed(LEVELS)], ["l", "l", "r"]),
        "action_table": md_table(["Action", "Rule (first match wins)", "Questions"],
                                 [[f"**{a}**", ACTION_RULES[a], fmt_num(int(act_counts.get(a, 0)))] for a in ACTIONS],
                                 ["l", "l", "r"]),
        "severe": _severe(questions),
        "limitations": _limitations(result),
        "figures": figures,
        "files": files,
        "detector_labels": {spec.name: spec.label for spec in detectors.specs()},
        "question_columns": [c for c in questions.columns],
        "skipped": {k: md_inline(v, 300) for k, v in (result.skipped or {}).items()},
    }


def _arm_field_line(arms: Any) -> str:
    """The card's line saying on which correctness field the full and blind arms were compared, and why."""
    if not isinstance(arms, dict) or not arms.get("field") or arms.get("why") == "no blind arm to compare with":
        return ""
    what = ("judged (`hit`) and exact match (`hit_exact`)" if arms.get("judged_too")
            else "exact match (`hit_exact`)" if arms["field"] == "hit_exact" else "judged (`hit`)")
    return f"{what}: {md_inline(arms.get('why', ''), 600)}"


def _sentence(text: str) -> str:
    """``text`` as a sentence: a capital first letter and a final period (empty stays empty)."""
    text = text.strip()
    if not text:
        return ""
    return text[:1].upper() + text[1:] + ("" if text.endswith((".", "!", "?")) else ".")


# ---------------------------------------------------------------------------------------------- per-model table
def _acc_cell(p: Any, pair: Any, n: Any) -> str:
    return f"{pct(p)} {ci(pair, estimate=p)}" if isnum(p) and n else "n/a"


def per_model_section(pm: Any) -> str:
    """The card's per-model section from ``summary['per_model']`` (:mod:`audit_hub.engine.per_model`): accuracy
    per model and arm, the image gain of each paired model, and MMStar's MG / ML with a base arm."""
    if not isinstance(pm, dict) or not pm.get("rows"):
        return ""
    level = int(round(100 * (1 - float(pm.get("alpha", 0.05)))))
    name = {"hit": "judged", "hit_exact": "exact match"}
    rows = [[md_inline(r["model"], 50), f"{md_inline(r['arm'], 10)}", fmt_num(r["n_items"]),
             _acc_cell(r.get("accuracy_judged"), r.get("accuracy_judged_ci"), r.get("n_judged")),
             _acc_cell(r.get("accuracy_exact"), r.get("accuracy_exact_ci"), r.get("n_exact")),
             pct(r.get("unparseable_share"))] for r in pm["rows"]]
    arms = sorted({r["arm"] for r in pm["rows"]}, key=lambda a: list(ARM_DESCRIPTIONS).index(a)
                  if a in ARM_DESCRIPTIONS else 99)
    full_models = {r["model"] for r in pm["rows"] if r["arm"] == "full"}
    blind_models = {r["model"] for r in pm["rows"] if r["arm"] == "blind"}
    desc = dict(ARM_DESCRIPTIONS)
    if blind_models and not blind_models & full_models:  # MATH-V, MathVista: text-only models, not reruns
        desc["blind"] = "text-only runs of other models, compared with the full arm at pool level"
    elif blind_models - full_models:
        desc["blind"] = "the same model with the image removed, or a text-only model's run"
    out = [f"Accuracy of each model in each arm ({', '.join(f'{a}: {desc.get(a, a)}' for a in arms)}), "
           f"with {level}% {pm.get('accuracy_interval', 'Wilson score interval')}s over the items scored in that field; "
           "an empty or unreadable answer counts as wrong and is also counted as unparseable.", "",
           md_table(["Model", "Arm", "Items", "Judged accuracy", "Exact-match accuracy", "Unparseable"], rows,
                    ["l", "l", "r", "r", "r", "r"])]
    unread = unreadable_note(pm.get("unreadable"))
    if unread:
        out += ["", f"**Unreadable runs.** {md_inline(unread, 1500)}."]
    gains = pm.get("gains") or []
    if gains:
        out += ["", f"**Image gain per model** (full - blind, on the items both arms scored; {level}% "
                f"{pm.get('gain_interval', '')}). Compared on {' and '.join(name.get(f, f) for f in pm.get('fields', []))}"
                + (f": {md_inline(pm['field_why'], 600)}." if pm.get("field_why") else "."), "",
                md_table(["Model", "Correctness", "Items", "With image", "Without image", "Image gain",
                          "Right only with / only without"],
                         [[md_inline(g["model"], 50), name.get(g["field"], g["field"]), fmt_num(g["n_items"]),
                           pct(g["accuracy_full"]), pct(g["accuracy_blind"]), f"{pp(g['gain'])} {ci(g['gain_ci'], 'pp', g['gain'])}",
                           f"{fmt_num(g['n_right_only_with_image'])} / {fmt_num(g['n_right_only_blind'])}"]
                          for g in gains], ["l", "l", "r", "r", "r", "r", "r"])]
    missing = pm.get("models_without_blind") or []
    if missing and any(r["arm"] == "blind" for r in pm["rows"]):
        out += ["", "Full-arm models without a paired blind run (no image gain): "
                + ", ".join(md_inline(m, 50) for m in missing[:20]) + (" ..." if len(missing) > 20 else "") + "."]
    mm = pm.get("mmstar") or []
    if mm:
        out += ["", "**Multimodal gain and leakage** as MMStar defines them (Chen et al. 2024, MMStar eval/README.md): "
                "MG = S_v - S_wv and ML = max(0, S_wv - S_t), where S_v is the model's score with the image (full arm), "
                "S_wv without it (blind arm) and S_t its language backbone's, text only (base arm). MG on the items "
                "the full and blind arms both scored, ML on those the blind and base arms both scored; "
                f"{level}% paired intervals (ML's clipped at 0 like the estimate).", "",
                md_table(["Model", "Correctness", "S_v", "S_wv", "S_t", "MG", "ML"],
                         [[md_inline(r["model"], 50), name.get(r["field"], r["field"]), pct(r["S_v"]), pct(r["S_wv"]),
                           pct(r["S_t"]), f"{pp(r['MG'])} {ci(r['MG_ci'], 'pp', r['MG'])}", f"{pp(r['ML'])} {ci(r['ML_ci'], 'pp', r['ML'])}"]
                          for r in mm], ["l", "l", "r", "r", "r", "r", "r"])]
    return "\n".join(out)


def _tst_section(tst_summary: Any) -> str:
    """TsT-RF per-format table (owned by :mod:`audit_hub.tst.output`), when ``--tst`` ran."""
    if not isinstance(tst_summary, dict):
        return ""
    from ..tst.output import tst_card_section

    return tst_card_section(tst_summary)


def render_card(result: Any, questions: pd.DataFrame, summary_df: pd.DataFrame, *, files: dict[str, list[str]],
                figures: dict[str, str], folder: Path, worker=None) -> str:
    """Render README.md: DatasetCardData YAML + the Jinja body. Validates that the YAML parses back.

    ``worker``: a started :class:`~audit_hub.engine.worker.WorkerProcess` whose process is free; the template is
    rendered there (it has imported ``datasets`` and ``huggingface_hub`` while this process audited), from
    the strings and tables computed here. The same text either way."""
    args = (card_header(result, files), build_context(result, questions, summary_df, files=files, figures=figures),
            files, str(folder), str(template_path()))
    return worker.call(finish_card, *args) if worker is not None else finish_card(*args)


def finish_card(header: dict, ctx: dict, files: dict[str, list[str]], folder: str, template: str) -> str:
    """The card's text from :func:`card_header`, :func:`build_context` and the written Parquet files."""
    return render(header, info=dataset_info(Path(folder), files), template=template, **ctx)
