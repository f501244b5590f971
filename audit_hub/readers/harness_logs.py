"""Which harness wrote a log, from the file alone: lm-evaluation-harness samples (``.jsonl`` records or,
before 0.4.3, a ``.json`` array), inspect_ai logs (``.eval`` archives, ``.json`` logs), lighteval
``--save-details`` parquet files and OpenCompass prediction/result files. :func:`read_harness_file`
is the one hook :mod:`.dispatch` calls before its generic table readers."""

from __future__ import annotations

from .cells import ReadResult, ext_of
from .fileio import peek_json_line

#: extensions that are no table but may be a harness log (read here, never by the table readers)
LOG_EXTENSIONS = (".eval",)


def read_harness_file(path: str, *, arm: str, model: str | None, metric: str | None) -> ReadResult | str | None:
    """The file read by its harness's reader, a reason to skip it (a file another one is read with), or None
    when no harness reader recognises it."""
    from . import inspect_logs, lighteval, lm_eval, opencompass

    ext = ext_of(path)
    if ext == ".eval":
        return inspect_logs.read_log(path, arm=arm, model=model, metric=metric)
    if ext == ".jsonl":
        if lm_eval.is_lm_eval_json_array(path):
            return lm_eval.read_samples(path, arm=arm, model=model, metric=metric)
        rec = peek_json_line(path)
        if rec is not None and lm_eval.is_lm_eval_record(rec):
            return lm_eval.read_samples(path, arm=arm, model=model, metric=metric)
        return None
    if ext == ".parquet":
        from .fileio import parquet_column_names

        if lighteval.is_lighteval_details(parquet_column_names(path)):
            return lighteval.read_details(path, arm=arm, model=model, metric=metric)
        return None
    if ext == ".json":
        if lm_eval.is_lm_eval_json_array(path):
            return lm_eval.read_samples(path, arm=arm, model=model, metric=metric)
        if inspect_logs.is_inspect_json(path):
            return inspect_logs.read_log(path, arm=arm, model=model, metric=metric)
        if opencompass.is_predictions(path):
            return opencompass.read_predictions(path, arm=arm, model=model, metric=metric)
        if opencompass.is_results(path):
            return "OpenCompass results file (its verdicts are read with the predictions file)"
    return None
