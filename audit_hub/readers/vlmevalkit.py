"""VLMEvalKit files: prediction sheets, judged sheets, yes/no ``auxmatch`` sheets, dataset TSVs.

File names (what VLMEvalKit writes into ``outputs/{model}/[T{date}_G{commit}/]``):

* ``{model}_{dataset}.xlsx|tsv|csv|json`` -- prediction sheet: the dataset columns (``index``,
  ``question``, ``hint``, ``A``..``D``, ``answer`` (gold), ``category``, ``l2-category``,
  ``split``) plus ``prediction``;
* ``{model}_{dataset}_{judge}_result.xlsx`` -- judged MCQ sheet: adds ``hit`` (0/1) and ``log``;
  the judge comes from the file name (``openai`` = chatgpt-0125, ``gpt4`` = gpt-4-0125,
  ``gpt-4o-mini``, ``exact_matching``, ...);
* ``{model}_{dataset}_auxmatch.xlsx`` -- judged yes/no sheet: adds ``extracted`` (Yes/No/Unknown)
  and ``score`` (bool);
* ``{model}_{dataset}_{judge}.xlsx`` with ``res`` (and maybe ``hit``) -- judge-extraction sheets
  (MathVista and friends).

Splitting ``{model}_{dataset}``: both parts may contain underscores (``MMBench_DEV_EN``,
``llava_v1.5_7b``). The rule, in order: (1) an explicit ``model`` argument; (2) the dataset name
given as a hint (``--dataset``, or the stem of the questions file, e.g. ``MMBench_DEV_EN.tsv``)
found as ``_{dataset}`` in the stem; (3) a parent or grandparent folder whose name is a prefix
``{folder}_`` of the stem (VLMEvalKit's ``outputs/{model}/`` layout); (4) a list of well-known
VLMEvalKit dataset names (longest match); (5) a stem with exactly one underscore. Otherwise the
reader raises and asks for ``--dataset``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pandas as pd

from ..columns import arrow_strings
from ..errors import InputError
from .cells import (
    ReadResult,
    as_arrow_str,
    bool_to_int8,
    constant_categorical,
    pick_id_column,
    same_cells,
    stem_of,
    to_str_series,
)
from .generic import normalise_questions
from .vlmevalkit_rules import yes_no

KNOWN_DATASETS: tuple[str, ...] = (
    "MMBench_DEV_EN", "MMBench_DEV_CN", "MMBench_TEST_EN", "MMBench_TEST_CN", "MMBench_DEV_EN_V11",
    "MMBench_DEV_CN_V11", "MMBench_TEST_EN_V11", "MMBench_TEST_CN_V11", "MMBench", "MMBench_CN", "CCBench",
    "MMStar", "MME", "POPE", "HallusionBench", "SEEDBench_IMG", "SEEDBench2", "SEEDBench2_Plus", "AI2D_TEST",
    "AI2D_TEST_NO_MASK", "MMMU_DEV_VAL", "MMMU_TEST", "MathVista_MINI", "MathVision", "MathVision_MINI",
    "MathVerse_MINI", "RealWorldQA", "ScienceQA_TEST", "ScienceQA_VAL", "OCRBench", "MMVet", "LLaVABench",
    "TextVQA_VAL", "ChartQA_TEST", "DocVQA_VAL", "InfoVQA_VAL", "BLINK", "MMT-Bench_VAL", "MMT-Bench_ALL",
    "MMT-Bench_VAL_MI", "Q-Bench1_VAL", "A-Bench_VAL", "MMStar_MINI", "VStarBench", "HRBench4K", "HRBench8K",
    "CV-Bench-2D", "CV-Bench-3D", "MMVP", "NaturalBench", "R-Bench", "MUIRBench", "MMIU", "LogicVista",
    "WeMath", "DynaMath", "OlympiadBench", "AMBER", "VizWiz", "GQA_TestDev_Balanced", "MMERealWorld",
)
#: judge names that contain an underscore (everything else is the last ``_`` segment)
KNOWN_JUDGES_WITH_UNDERSCORE: tuple[str, ...] = ("exact_matching",)
#: a judge or rule sheet's per-question verdict, in the order looked for: ``hit`` (MCQ judges), ``score`` (MMVet's
#: ``_{judge}.xlsx``, the video sets' ``_score.xlsx``), ``eval_score`` (the VQA sets' ``_results.xlsx``)
VERDICT_COLUMNS: tuple[str, ...] = ("hit", "score", "eval_score")
#: file-name suffixes of rule-scored sheets, beside ``{model}_{dataset}.xlsx`` (``ImageVQADataset`` writes
#: ``_results``, ``VideoMME`` and its kin ``_score``)
SCORE_SHEET_SUFFIXES: tuple[str, ...] = ("score", "results")
#: the columns a sheet needs for its runs (the rest only describe the questions)
RUN_COLUMNS = frozenset({"index", "question_id", "g_index", "prediction", "hit", "log", "extracted", "score", "res",
                         "eval_score", "answer"})  # (the gold ``answer`` tells a Y/N sheet, read by VLMEvalKit's yes/no rule)
JUDGE_MODELS = {"openai": "chatgpt-0125 (gpt-3.5-turbo-0125)", "gpt4": "gpt-4-0125"}


@dataclass
class SheetName:
    model: str
    dataset: str | None
    kind: str  # "sheet" | "judged" | "auxmatch" | "extract"
    judge: str | None


def _split_judge(rest: str) -> tuple[str, str]:
    """``{dataset}_{judge}`` -> (dataset, judge) without knowing the dataset."""
    for j in KNOWN_JUDGES_WITH_UNDERSCORE:
        if rest.endswith("_" + j):
            return rest[: -len(j) - 1], j
    if "_" not in rest:
        return "", rest
    head, _, judge = rest.rpartition("_")
    return head, judge


def _find_dataset(core: str, dataset: str) -> int:
    """Start of ``_{dataset}`` in ``core`` when followed by end or ``_``; -1 if absent."""
    needle = "_" + dataset
    pos = core.rfind(needle)
    while pos >= 0:
        end = pos + len(needle)
        if end == len(core) or core[end] == "_":
            return pos
        pos = core.rfind(needle, 0, pos)
    return -1


def parse_sheet_name(path: str, *, dataset_hint: str | None = None, model: str | None = None) -> SheetName:
    """Model, dataset, sheet kind and judge from a VLMEvalKit file name (see module docstring)."""
    stem = stem_of(path)
    if stem.endswith("_auxmatch"):
        kind, core = "auxmatch", stem[: -len("_auxmatch")]
    elif stem.endswith("_result"):
        kind, core = "judged", stem[: -len("_result")]
    else:
        kind, core = "sheet", stem

    def finish(model_name: str, dataset: str | None, rest: str) -> SheetName:
        rest = rest.strip("_")
        if kind == "judged":
            return SheetName(model_name, dataset, kind, rest or "unknown")
        if kind == "auxmatch":
            return SheetName(model_name, dataset, kind, rest or "auxmatch")
        if rest:
            return SheetName(model_name, dataset, "extract", rest)
        return SheetName(model_name, dataset, kind, None)

    hints = [dataset_hint] if dataset_hint else []
    if model is not None:
        if core.startswith(model + "_"):
            rest = core[len(model) + 1:]
        else:
            rest = core
        for d in hints + sorted(KNOWN_DATASETS, key=len, reverse=True):
            p = _find_dataset("_" + rest, d)
            if p == 0:
                return finish(model, d, rest[len(d):])
        if kind == "sheet":
            return SheetName(model, rest or None, "sheet", None)
        ds, judge = _split_judge(rest)
        return finish(model, ds or None, judge)
    for d in hints:
        p = _find_dataset(core, d)
        if p > 0:
            return finish(core[:p], d, core[p + 1 + len(d):])
    parent = os.path.dirname(os.path.abspath(path))
    for folder in (os.path.basename(parent), os.path.basename(os.path.dirname(parent))):
        if folder and core.startswith(folder + "_") and len(core) > len(folder) + 1:
            rest = core[len(folder) + 1:]
            for d in sorted(KNOWN_DATASETS, key=len, reverse=True):
                if rest == d or rest.startswith(d + "_"):
                    return finish(folder, d, rest[len(d):])
            if kind == "sheet":
                return SheetName(folder, rest, "sheet", None)
            ds, judge = _split_judge(rest)
            return finish(folder, ds or None, judge)
    best = None
    for d in sorted(KNOWN_DATASETS, key=len, reverse=True):
        p = _find_dataset(core, d)
        if p > 0:
            best = (p, d)
            break
    if best is not None:
        p, d = best
        return finish(core[:p], d, core[p + 1 + len(d):])
    work = core
    judge = None
    if kind == "judged":
        work, judge = _split_judge(core)
    if work.count("_") == 1:
        m, d = work.split("_")
        if kind == "judged":
            return SheetName(m, d, kind, judge)
        return finish(m, d, "")
    raise InputError(
        f"cannot tell the model name from the dataset name in {os.path.basename(path)!r} "
        "(VLMEvalKit names files {model}_{dataset}...; both may contain '_'); pass the dataset name "
        "with --dataset (e.g. --dataset MMBench_DEV_EN), or add a model column to the file", file=path)


def is_vlmevalkit_sheet(columns) -> bool:
    cols = set(columns)
    return "prediction" in cols and ("index" in cols or "question_id" in cols)


def read_sheet(df: pd.DataFrame, path: str, *, arm: str = "full", dataset_hint: str | None = None,
               model: str | None = None, with_questions: bool = True) -> ReadResult:
    """One VLMEvalKit prediction/judged/auxmatch sheet (already read by ``read_table``).

    ``with_questions=False`` skips building the questions table the sheet carries (faster)."""
    name = parse_sheet_name(path, dataset_hint=dataset_hint, model=model)
    if name.kind == "sheet" and name.dataset:  # {model}_{dataset}_score / _results of a dataset not in the list
        suffix = next((x for x in SCORE_SHEET_SUFFIXES if name.dataset.endswith("_" + x)), None)
        if suffix is not None and any(c in df.columns for c in VERDICT_COLUMNS):
            name = SheetName(name.model, name.dataset[: -len(suffix) - 1], "extract", suffix)
    notes: list[str] = []
    n = len(df)
    idcol = "index" if "index" in df.columns else pick_id_column(df.columns)
    if idcol is None:
        raise InputError("missing column 'index' (the question ID of VLMEvalKit sheets)", file=path,
                         column="index")
    if "prediction" not in df.columns:
        raise InputError(f"missing column 'prediction'; found {[c for c in df.columns if c != 'source_row']}",
                         file=path, column="prediction")
    runs = pd.DataFrame({
        "question_id": to_str_series(df[idcol], strip=True).to_numpy(dtype=object),
        "model": constant_categorical(name.model, n),
        "arm": constant_categorical(arm, n),
        "prediction": as_arrow_str(df["prediction"]).array,
    })
    answer = pd.Series(arrow_strings([None] * n))
    hit = None
    kind = "vlmevalkit-sheet"
    if name.kind == "judged":
        kind = "vlmevalkit-judged"
        if "hit" not in df.columns:
            raise InputError("a judged sheet (*_result.xlsx) must have a 'hit' column; found "
                             f"{[c for c in df.columns if c != 'source_row']}", file=path, column="hit")
        hit = bool_to_int8(df["hit"])
    elif name.kind == "auxmatch":
        kind = "vlmevalkit-auxmatch"
        for c in ("extracted", "score"):
            if c not in df.columns:
                raise InputError(f"a yes/no sheet (*_auxmatch.xlsx) must have an {c!r} column", file=path, column=c)
        ext = to_str_series(df["extracted"], strip=True)
        low = ext.str.lower()
        answer = pd.Series(arrow_strings([v if v in ("yes", "no") else None for v in low.tolist()]))
        hit = bool_to_int8(df["score"])
    elif name.kind == "extract":
        verdict = next((c for c in VERDICT_COLUMNS if c in df.columns), None)
        if verdict is not None or "res" in df.columns:
            kind = "vlmevalkit-extract"
            if "res" in df.columns:
                answer = as_arrow_str(df["res"]).reset_index(drop=True)
            if verdict is not None:
                hit, note = _verdict(df[verdict], verdict)
                if note:
                    notes.append(note)
        else:  # e.g. {model}_{dataset}_{variant}.xlsx: a plain prediction sheet of a dataset variant
            name = SheetName(name.model, f"{name.dataset}_{name.judge}", "sheet", None)
    if name.kind != "extract" and _is_yes_no_gold(df):
        # VLMEvalKit's Y/N datasets: the exact arm reads the prediction with VLMEvalKit's own yes/no rule
        # ("Unknown" when it cannot, kept unparseable); the judged arm is the sheet's ``score``
        answer = pd.Series(arrow_strings([yes_no(p) or "Unknown" if p is not None else None
                                          for p in as_arrow_str(df["prediction"]).tolist()]))
    runs["answer"] = answer.array
    if hit is not None:
        runs["hit"] = hit.reset_index(drop=True).array
    runs["source_file"] = constant_categorical(path, n)
    runs["source_row"] = df["source_row"].to_numpy()
    judges = {name.model: name.judge} if name.judge and hit is not None else {}
    questions = None
    if with_questions and "answer" in df.columns:
        qdf = df.drop(columns=["prediction"] + [c for c in ("hit", "log", "extracted", "score", "res", "eval_score",
                                                            "eval_gt", "eval_pred", "eval_match")
                                                if c in df.columns])
        if idcol != "question_id" and "question_id" in qdf.columns:
            qdf = qdf.drop(columns=["question_id"])
        questions = _sheet_questions(qdf, path)
    return ReadResult(path=path, kind=kind, runs=runs, questions=questions, judges=judges, rows=n,
                      info={"model": name.model, "dataset": name.dataset, "judge": name.judge, "harness": "VLMEvalKit",
                            "harness_version": "not recorded in VLMEvalKit's output files",
                            **({"notes": notes} if notes else {})},
                      benchmark=name.dataset)


# The question table of the last sheet read (its cells, and what normalise_questions made of them): a
# VLMEvalKit folder holds one sheet per model, each repeating the same question columns.
_LAST_QUESTIONS: tuple[pd.DataFrame, pd.DataFrame] | None = None
_REUSE_MAX_ROWS = 200_000


def _sheet_questions(qdf: pd.DataFrame, path: str) -> pd.DataFrame:
    """``normalise_questions(qdf, path)``; when ``qdf`` holds the same cells as the previous sheet's
    (:func:`~audit_hub.readers.cells.same_cells`), that result with this file as ``source_file``."""
    global _LAST_QUESTIONS
    last = _LAST_QUESTIONS
    if last is not None and same_cells(qdf, last[0]):
        out = last[1].copy()
        out["source_file"] = path
        return out
    out = normalise_questions(qdf, path)
    _LAST_QUESTIONS = (qdf, out.copy()) if len(qdf) <= _REUSE_MAX_ROWS else None
    return out


def _verdict(col: pd.Series, name: str) -> tuple[pd.Series | None, str | None]:
    """A judge or rule sheet's per-question score as a 0/1 verdict; (None, why) when it gives partial credit (MMVet's
    GPT score 0-1, the relaxed or ANLS ``eval_score`` of the VQA sets): the judged arm needs 0/1 verdicts."""
    if name == "hit" or pd.api.types.is_bool_dtype(col.dtype):
        return bool_to_int8(col), None
    vals = pd.to_numeric(col, errors="coerce")
    bad = col.notna() & vals.isna()
    known = vals.dropna()
    if not bad.any() and known.isin((0, 1)).all():
        return pd.Series(pd.array(vals.round().astype("Int8"), dtype="Int8"), index=col.index), None
    why = "partial credit (scores between 0 and 1)" if not bad.any() and known.between(0, 1).all() else \
        "values that are not 0 or 1"
    return None, (f"its '{name}' column holds {why}, not a right/wrong verdict: no judged arm from it, only the "
                  "answers")


def _is_yes_no_gold(df: pd.DataFrame) -> bool:
    """The sheet's gold ``answer`` column holds only Yes/No (a VLMEvalKit Y/N dataset)."""
    if "answer" not in df.columns or len(df) == 0:
        return False
    gold = to_str_series(df["answer"], strip=True)
    return bool(gold.notna().all() and gold.str.lower().isin(("yes", "no")).all())


def read_dataset_tsv(df: pd.DataFrame, path: str) -> pd.DataFrame:
    """A VLMEvalKit dataset TSV (``index, image, question, hint, A.., answer, category, l2-category``)."""
    return normalise_questions(df, path)


__all__ = ["parse_sheet_name", "read_sheet", "read_dataset_tsv", "is_vlmevalkit_sheet", "KNOWN_DATASETS",
           "SheetName"]
