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
from ..escape import plain_text, safe_link
from ..fmt import ci, fmt_num, fmt_p, isnum, md_escape, md_table, pct, pp
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
def dataset_info_for(folder: Path, files: dict[str, list[str]]) -> list[dict]:
    """``dataset_info`` YAML entries (features, splits, sizes) read back from the written Parquet files."""
    import pyarrow.parquet as pq
    from datasets import DatasetInfo, Features, SplitDict, SplitInfo

    infos = []
    for name, paths in files.items():
        schema = pq.read_schema(folder / paths[0])
        n_rows = sum(pq.ParquetFile(folder / p).metadata.num_rows for p in paths)
        n_bytes = sum((folder / p).stat().st_size for p in paths)
        mem = sum(pq.ParquetFile(folder / p).metadata.row_group(i).total_byte_size
                  for p in paths for i in range(pq.ParquetFile(folder / p).metadata.num_row_groups))
        splits = SplitDict()
        splits.add(SplitInfo(name="train", num_bytes=int(mem), num_examples=int(n_rows)))
        info = DatasetInfo(features=Features.from_arrow_schema(schema), splits=splits,
                           download_size=int(n_bytes), dataset_size=int(mem))
        d = info._to_yaml_dict()
        infos.append({"config_name": name, **d})
    return infos


def card_header(result: Any, files: dict[str, list[str]]) -> dict:
    """The card's YAML fields that come from the audit (the ``DatasetCardData`` keyword arguments but
    ``dataset_info``, which is read back from the written files by :func:`finish_card`)."""
    meta = result.frame.meta
    ds = meta.get("dataset") or {}
    lic = str(ds.get("license") or "other").lower()
    n = result.frame.n_questions
    size = ("n<1K" if n < 1_000 else "1K<n<10K" if n < 10_000 else "10K<n<100K" if n < 100_000
            else "100K<n<1M" if n < 1_000_000 else "1M<n<10M")
    bench = plain_text(meta.get("benchmark") or ds.get("name") or "benchmark", 100)
    configs = [{"config_name": name, "data_files": [{"split": "train", "path": f"data/{name}-*.parquet"}],
                **({"default": True} if name == "questions" else {})} for name in files]
    return dict(license=lic, pretty_name=f"benchaudit report: {bench}", tags=list(TAGS), size_categories=[size],
                configs=configs)


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
                 fmt_num(vd.get("n_items")), pct(vd.get("zero_gain_share")), ci(vd.get("share_ci")),
                 pct(vd.get("null_mean")), pp(vd.get("excess")), ci(vd.get("excess_ci"), "pp"),
                 fmt_p(vd.get("p_value"))]]
        lomo = vd.get("leave_one_model_out") or []
        if isinstance(lomo, dict):
            lomo = lomo.get("rows") or lomo.get("results") or []
        for r in lomo:
            if not isinstance(r, dict):
                continue
            rows.append([f"without {md_escape(r.get('dropped_model', r.get('model', '?')), 60)}",
                         fmt_num(r.get("n_items")), pct(r.get("zero_gain_share")), ci(r.get("share_ci")),
                         pct(r.get("null_mean")), pp(r.get("excess")), ci(r.get("excess_ci"), "pp"),
                         fmt_p(r.get("p_value"))])
        out["vd"] = md_table(["Model pool", "Items", "Observed", "95% CI", "Null mean", "Excess", "Excess 95% CI",
                              "p"], rows)
        raw = [float(r["zero_gain_share"]) for r in lomo if isinstance(r, dict) and isnum(r.get("zero_gain_share"))]
        exc = [float(r["excess"]) for r in lomo if isinstance(r, dict) and isnum(r.get("excess"))]
        if len(raw) >= 2 and len(exc) >= 2:
            out["lomo_spread"] = (f"Across leave-one-model-out pools the raw share spans {100 * (max(raw) - min(raw)):.1f} pp "
                                  f"and the excess {100 * (max(exc) - min(exc)):.1f} pp.")
        frag = vd.get("fragile")
        if frag is None and isinstance(vd.get("leave_one_model_out"), dict):
            frag = vd["leave_one_model_out"].get("fragile")
        if frag is not None:
            reason = md_escape(vd.get("fragile_reason") or "", 300)
            out["fragile"] = ("**Fragile**: the conclusion changes when one model is left out" + (f" ({reason})" if reason else "")
                              + ".") if frag else "The conclusion is stable when any one model is left out."
        decomp = vd.get("diagonal_decomposition") or vd.get("excess_by_cell")
        if isinstance(decomp, dict):
            parts = [f"{k}: {pp(v)}" for k, v in decomp.items() if isnum(v)]
            if parts:
                out["decomp"] = "Excess by diagonal cell (f = b): " + ", ".join(parts[:8]) + "."
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
        out["multiplicity"] = md_table(
            ["Detector", "p", "p (Holm)"],
            [[k, fmt_p(v.get("p_value")), fmt_p(v.get("p_holm"))] for k, v in mult.items()], ["l", "r", "r"])
    return out


def _role_rows(summary_df: pd.DataFrame, role: str, primary: bool = True) -> pd.DataFrame:
    """The summary-table rows of the headline statistic of the detector playing ``role``."""
    name = detectors.by_role(role)
    if name is None:
        return summary_df.iloc[:0]
    return _table_rows(summary_df, name, detectors.get(name).headline_statistic, primary)


def _per_category(result: Any, summary_df: pd.DataFrame) -> str:
    vd = _role_rows(summary_df, "image_gain")
    vd = vd[vd["category"] != "(all)"] if len(vd) else vd
    ce = _role_rows(summary_df, "label_conflict")
    ce = ce[ce["category"] != "(all)"] if len(ce) else ce
    cats = list(dict.fromkeys(list(vd["category"]) + list(ce["category"])))
    if not cats:
        return ""
    vdi = vd.drop_duplicates("category").set_index("category") if len(vd) else None
    cei = ce.drop_duplicates("category").set_index("category") if len(ce) else None
    rows = []
    for c in cats:
        v = vdi.loc[c] if vdi is not None and c in vdi.index else None
        e = cei.loc[c] if cei is not None and c in cei.index else None
        n_items = v["n_items"] if v is not None else (e["n_items"] if e is not None else None)
        ce_txt = "n/a"
        if e is not None:
            est = e["estimate"]
            if str(e["statistic"]).endswith("share") and isnum(est) and isnum(e["n_items"]):
                ce_txt = f"{round(float(est) * float(e['n_items'])):,} ({pct(est)})"
            else:
                ce_txt = fmt_num(est)
        rows.append((float(v["excess"]) if v is not None and isnum(v["excess"]) else -np.inf, [
            md_escape(c, 50), fmt_num(n_items),
            pct(v["estimate"]) if v is not None else "n/a", pct(v["null_mean"]) if v is not None else "n/a",
            pp(v["excess"]) if v is not None else "n/a", fmt_p(v["p_adjusted"]) if v is not None else "n/a",
            ce_txt]))
    rows.sort(key=lambda t: -t[0])
    return md_table(["Category", "Items", "Zero-gain share", "Null mean", "Excess", "p (BH)", "Unanimous non-gold"],
                    [r for _, r in rows])


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
        rows.append([md_escape(frame.models[mm], 50), ("full", "blind")[a], fmt_num(n_both[k]), fmt_num(n_dis[k]),
                     pct(n_dis[k] / n_both[k]) if n_both[k] else "n/a", pct(unparsed[k] / n_all[k])])
    out["per_model"] = md_table(["Model", "Arm", "Items scored both ways", "Judge != exact match", "Share",
                                 "Unparseable answers"], rows)
    total_dis = int(n_dis.sum())
    if total_dis:
        top = int(np.argmax(n_dis))
        out["top"] = (f"{total_dis:,} (model, item) scores differ between the judge and exact matching; "
                      f"{md_escape(frame.models[top % frame.n_models], 50)} ({('full', 'blind')[top // frame.n_models]} arm) "
                      f"accounts for {100 * n_dis[top] / total_dis:.0f}% of them.")
    a = _role_rows(summary_df, "image_gain", True)
    b = _role_rows(summary_df, "image_gain", False)
    if len(a) and len(b):
        m2 = a[["category", "estimate"]].drop_duplicates("category").merge(
            b[["category", "estimate"]].drop_duplicates("category"), on="category", suffixes=("_judge", "_exact"))
        if len(m2):
            diff = (m2["estimate_judge"] - m2["estimate_exact"]).abs()
            out["max_shift"] = (f"Zero-gain shares move by at most {100 * float(diff.max()):.1f} pp between the judged "
                                f"and the exact-match correctness (largest in {md_escape(m2['category'].iloc[int(diff.values.argmax())], 50)}).")
    jd = result.judge_dependence or {}
    ov = jd.get("overall") if isinstance(jd, dict) else None
    if isinstance(ov, dict) and isnum(ov.get("hit")) and isnum(ov.get("hit_exact")):
        txt = (f"Overall zero-gain share: {pct(ov['hit'])} judged vs {pct(ov['hit_exact'])} with exact matching")
        if isnum(ov.get("excess_hit")) and isnum(ov.get("excess_exact")):
            txt += (f"; excess over the null {pp(ov['excess_hit'])} (p = {fmt_p(ov.get('p_hit'))}) vs "
                    f"{pp(ov['excess_exact'])} (p = {fmt_p(ov.get('p_exact'))})")
        changes = jd.get("conclusion_changes")
        if changes is not None:
            txt += (". **The conclusion changes with the scoring rule.**" if changes
                    else ". The conclusion does not change with the scoring rule.")
        out["overall"] = txt
    if isinstance(jd, dict) and jd.get("note"):
        out["note"] = str(jd["note"])
    return out


def _calibration(result: Any) -> str:
    cal = result.calibration or {}
    rows = []
    for name, c in cal.items():
        if not isinstance(c, dict):
            continue
        ooc = c.get("out_of_calibration")
        status = ("**out of calibration**" if ooc else "within calibration" if ooc is not None
                  else "descriptive (no nominal rate)")
        rows.append([name, pct(c.get("fpr")), ci(c.get("fpr_ci")) if c.get("fpr_ci") else "", pct(c.get("nominal")),
                     fmt_num(c.get("n_sims")), status, md_escape(c.get("note", ""), 160)])
    from .stat_notes import calibration_lead

    lead = calibration_lead(cal)
    table = md_table(["Detector", "False-positive rate", "95% CI", "Nominal", "Simulations", "Status", "Note"], rows,
                     ["l", "r", "r", "r", "r", "l", "l"])
    return (lead + "\n\n" + table) if lead and rows else table


def _severe(questions: pd.DataFrame, n: int = N_SEVERE_SHOWN) -> str:
    from ..severity import RANK

    q = questions
    r = q["severity"].map(RANK).to_numpy()
    sel = np.flatnonzero(r >= RANK["medium"])
    if not len(sel):
        return ""
    order = np.lexsort((np.arange(len(sel)), -q["n_flags"].to_numpy()[sel], -r[sel]))
    rows = []
    for i in sel[order][:n]:
        row = q.iloc[i]
        rows.append([f"`{md_escape(row['question_id'], 40)}`", md_escape(row.get("category", ""), 30), row["severity"],
                     row["suggested_action"], md_escape(row.get("question", ""), 90),
                     md_escape(row.get("answer", ""), 20), md_escape(row["rationale"], 220)])
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
            status = "skipped: " + md_escape(result.skipped.get(name, "not run"), 100)
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
        txt += "; excluded: " + ", ".join(f"{md_escape(k, 80)} ({fmt_num(v)})" for k, v in exc.items())
    return txt


def _limitations(result: Any) -> list[str]:
    s = result.summary
    lims = [
        "Every flag is a **candidate** for review, not a verdict: the detectors read model behaviour, and a model "
        "pool can be collectively wrong for reasons unrelated to the item.",
        "The zero-gain share depends on the model pool (it rises mechanically with fewer models); read the "
        "excess over the item-matched permutation null and the leave-one-model-out rows, not the raw share.",
        "Zero gain is heterogeneous: items that every model gets wrong with and without the image also have zero "
        "gain; only the blind-solvable cell is evidence of text-answerability.",
    ]
    pool = s.get("pool") or {}
    if pool.get("pool_level"):
        lims.append("Full and blind arms come from different models, so visual dependence is compared at pool "
                    "level, not per model: a stronger or weaker blind model shifts every item. " + md_escape(pool.get("note") or "", 600))
    if s.get("primary_field") == "hit_exact":
        lims.append("No judged correctness was supplied; all judge-dependent results use exact matching of the "
                    "extracted answer, which under-credits free-form answers a parser cannot read.")
    cal = result.calibration or {}
    bad = [k for k, v in cal.items() if isinstance(v, dict) and v.get("out_of_calibration")]
    if bad:
        lims.append("Out of calibration on simulated null benchmarks with this benchmark's option counts and model "
                    "accuracies: " + ", ".join(bad) + ". Treat their p-values and flag counts with caution.")
    for name, reason in (result.skipped or {}).items():
        lims.append(f"`{name}` was skipped: {md_escape(reason, 300)}.")
    for note in result.frame.meta.get("notes", []) or []:
        lims.append(str(note))
    unparsed = result.frame.meta.get("unparsed_options") or {}
    if unparsed.get("n"):
        ids = ", ".join(md_escape(x, 40) for x in unparsed.get("question_ids", [])[:10])
        lims.append(f"{unparsed['n']:,} question(s) have a letter gold but options that could not be read "
                    f"(audited as non-multiple-choice, --allow-unparsed-options): {ids}"
                    + (" ..." if unparsed["n"] > 10 else "") + ".")
    circ = result.frame.meta.get("circular") or {}
    if circ.get("n_groups"):
        lims.append(f"CircularEval: {circ['n_copies']:,} option-shifted copies were read as {circ['n_groups']:,} "
                    "questions; a question is right only when every copy is right and readable, in both the "
                    "judged and the exact-match arm (the per-copy rows are in circular_copies.parquet).")
    gd = circ.get("gold_disagreement") or {}
    if gd.get("n_groups"):
        names = ", ".join(md_escape(g.get("group_id"), 40) for g in gd.get("groups", [])[:10])
        lims.append(f"Input defect: in {gd['n_groups']:,} CircularEval group(s) the option-shifted copies disagree on "
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
    judge_names = sorted({md_escape(v, 60) for v in judges.values()}) if isinstance(judges, dict) else []
    sev_counts = questions["severity"].value_counts()
    act_counts = questions["suggested_action"].value_counts()
    cats = questions["category"].nunique(dropna=True) if "category" in questions else 0
    rev = ds.get("revision") or ds.get("commit") or ds.get("resolved_commit")
    rev = md_escape(rev, 80) if rev else rev
    bench = md_escape(meta.get("benchmark") or ds.get("name") or "the benchmark", 100)
    # Every input-derived string is escaped here, once, for the Markdown body (links only to the Hub).
    ds = {"split": md_escape(ds["split"], 60) if ds.get("split") else None,
          "repo": md_escape(ds.get("repo") or ds.get("url") or "", 120) or None,
          "url": safe_link(ds.get("url")),
          "license": md_escape(ds["license"], 60) if ds.get("license") else None}
    full = [md_escape(m, 60) for m in full]
    blind = [md_escape(m, 60) for m in blind]
    headline = _headline(result)
    lede = []
    for spec in detectors.specs():
        line = getattr(spec.load(), "lede_line", None)
        sm = s.get(spec.name) or {}
        if line is not None and sm and not sm.get("skipped"):
            lede.append(line(sm))
    n_med = int((questions["severity"].map({lv: i for i, lv in enumerate(LEVELS)}) >= 2).sum())
    lede.append(f"{n_med:,} of {len(questions):,} questions have a finding at medium severity or above.")
    return {
        "bench": bench,
        "dataset": ds,
        "revision": rev,
        "n_questions": f"{frame.n_questions:,}",
        "n_categories": cats,
        "full_models": full,
        "blind_models": blind,
        "pool_note": md_escape((s.get("pool") or {}).get("note", ""), 600),
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
        "skipped": {k: md_escape(v, 300) for k, v in (result.skipped or {}).items()},
    }


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
    from huggingface_hub import DatasetCard, DatasetCardData

    data = DatasetCardData(**header, dataset_info=dataset_info_for(Path(folder), files))
    card = DatasetCard.from_template(data, template_path=template, **ctx)
    text = str(card)
    text = re.sub(r"\n{3,}", "\n\n", text)
    if not text.endswith("\n"):
        text += "\n"
    DatasetCard(text)  # parses the YAML header; raises on a malformed card
    return text
