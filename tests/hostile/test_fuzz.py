"""Property tests: for every reader, arbitrary bytes or structures give a valid audit frame or an
InputError, never another exception; the answer parser never raises on any text. Sized for CI
(a few seconds each, derandomised so a failure reproduces)."""

from __future__ import annotations

import io
import json
import os
import tempfile
import zipfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit_hub.errors import InputError

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

EXTS = (".csv", ".tsv", ".jsonl", ".json", ".parquet", ".xlsx")


def _questions_or_input_error(data: bytes, ext: str) -> None:
    """Questions through the public entry points: load_questions -> AuditFrame."""
    from audit_hub.frame.core import AuditFrame
    from audit_hub.readers.ingest import load_questions

    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "q" + ext)
        with open(p, "wb") as fh:
            fh.write(data)
        try:
            q = load_questions(p)
            AuditFrame.from_tables(q, None, questions_source=p)
        except InputError as e:
            assert str(e).strip()  # a message to show; the CLI makes it one escaped line
            return


def _runs_or_input_error(data: bytes, ext: str, questions_path: str) -> None:
    from audit_hub.readers.ingest import build_frame

    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "runs" + ext)
        with open(p, "wb") as fh:
            fh.write(data)
        try:
            build_frame(questions_path, [p])
        except InputError:
            return


@pytest.fixture(scope="module")
def qfile(tmp_path_factory):
    from .conftest import write_benchmark

    q, _ = write_benchmark(tmp_path_factory.mktemp("fuzzq"), n=4)
    return str(q)


@pytest.mark.parametrize("ext", EXTS)
@FUZZ
@given(data=st.binary(max_size=2048))
def test_arbitrary_bytes_as_questions(ext, data):
    _questions_or_input_error(data, ext)


@pytest.mark.parametrize("ext", [".csv", ".jsonl", ".json"])
@FUZZ
@given(data=st.binary(max_size=1024))
def test_arbitrary_bytes_as_runs(qfile, ext, data):
    _runs_or_input_error(data, ext, qfile)


JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                        st.text(max_size=20))
JSON_VALUE = st.recursive(JSON_SCALAR, lambda c: st.one_of(st.lists(c, max_size=4),
                                                           st.dictionaries(st.text(max_size=8), c, max_size=4)),
                          max_leaves=12)
KEYS = st.sampled_from(["question_id", "id", "question", "options", "answer", "category", "hint", "model", "arm",
                        "prediction", "hit", "answer_type", "x"])
RECORD = st.dictionaries(KEYS, JSON_VALUE, min_size=1, max_size=8)


@FUZZ
@given(recs=st.lists(RECORD, min_size=1, max_size=6))
def test_arbitrary_json_records_as_questions(recs):
    jl = "\n".join(json.dumps(r) for r in recs).encode()
    _questions_or_input_error(jl, ".jsonl")
    _questions_or_input_error(json.dumps(recs).encode(), ".json")


@FUZZ
@given(recs=st.lists(RECORD, min_size=1, max_size=6))
def test_arbitrary_json_records_as_runs(qfile, recs):
    _runs_or_input_error("\n".join(json.dumps(r) for r in recs).encode(), ".jsonl", qfile)


CELL = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)


@FUZZ
@given(header=st.lists(st.one_of(KEYS, CELL), min_size=1, max_size=6),
       rows=st.lists(st.lists(CELL, max_size=7), max_size=5))
def test_arbitrary_csv_tables(header, rows):
    import csv

    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(header)
    w.writerows(rows)
    _questions_or_input_error(buf.getvalue().encode("utf-8", "surrogatepass"), ".csv")


ARROW_TYPES = ["string", "int64", "float64", "bool", "list_string", "struct", "binary", "null", "list_int"]


def _arrow_column(kind: str, n: int, draw_text):
    import pyarrow as pa

    vals = [draw_text(i) for i in range(n)]
    if kind == "string":
        return pa.array(vals)
    if kind == "int64":
        return pa.array(list(range(n)), pa.int64())
    if kind == "float64":
        return pa.array([float("inf")] + [1.5] * (n - 1), pa.float64())
    if kind == "bool":
        return pa.array([i % 2 == 0 for i in range(n)])
    if kind == "list_string":
        return pa.array([[v, v] for v in vals])
    if kind == "list_int":
        return pa.array([[1, 2]] * n)
    if kind == "struct":
        return pa.array([{"t": v} for v in vals])
    if kind == "binary":
        return pa.array([v.encode("utf-8", "surrogatepass") for v in vals], pa.binary())
    return pa.nulls(n)


@FUZZ
@given(cols=st.dictionaries(KEYS, st.sampled_from(ARROW_TYPES), min_size=1, max_size=6),
       n=st.integers(1, 4), texts=st.lists(CELL, min_size=4, max_size=4))
def test_arbitrary_parquet_schemas(cols, n, texts):
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({name: _arrow_column(kind, n, lambda i: texts[i]) for name, kind in cols.items()})
    buf = io.BytesIO()
    pq.write_table(table, buf)
    _questions_or_input_error(buf.getvalue(), ".parquet")


@pytest.fixture(scope="module")
def xlsx_bytes():
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["question_id", "question", "options", "answer"])
    ws.append(["q0", "x?", '["a", "b"]', "A"])
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


@FUZZ
@given(pos=st.integers(0, 10_000), val=st.integers(0, 255), cut=st.integers(0, 10_000))
def test_mutated_xlsx(xlsx_bytes, pos, val, cut):
    b = bytearray(xlsx_bytes)
    b[pos % len(b)] = val
    _questions_or_input_error(bytes(b), ".xlsx")
    _questions_or_input_error(xlsx_bytes[: cut % len(xlsx_bytes)], ".xlsx")


@FUZZ
@given(sheet=st.binary(max_size=600))
def test_arbitrary_sheet_xml_inside_a_valid_zip(xlsx_bytes, sheet):
    src = zipfile.ZipFile(io.BytesIO(xlsx_bytes))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as dst:
        for info in src.infolist():
            dst.writestr(info.filename, sheet if info.filename == "xl/worksheets/sheet1.xml" else src.read(info))
    _questions_or_input_error(buf.getvalue(), ".xlsx")


@FUZZ
@given(text=st.one_of(st.none(), st.text(max_size=300)),
       options=st.one_of(st.none(), st.lists(st.text(max_size=15), max_size=6)),
       kind=st.sampled_from(["mc", "yesno", "numeric", "free"]))
def test_answer_parser_never_raises(text, options, kind):
    from audit_hub.answers import extract_answer

    try:
        out = extract_answer(text, options, kind)
    except InputError:
        return
    assert out is None or isinstance(out, str)
