"""Hostile and odd input files: every failure is one InputError line naming the file, exit 2, no
traceback, no output folder, nothing touched; look-alike identifiers are shown escaped."""

from __future__ import annotations

import io
import os
import zipfile

import pytest

Q_HEADER = "question_id,question,options,answer,category"


def _xlsx_bytes(rows: list[list]) -> bytes:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    for r in rows:
        ws.append(r)
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


def _rezip(data: bytes, replace: dict[str, bytes | None], add: dict[str, bytes] | None = None,
           compress: int = zipfile.ZIP_DEFLATED) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compress) as dst:
        for info in src.infolist():
            body = replace.get(info.filename, src.read(info.filename))
            if body is None:
                continue
            dst.writestr(info.filename, body)
        for k, v in (add or {}).items():
            dst.writestr(k, v)
    return buf.getvalue()


GOOD_Q_ROWS = [["question_id", "question", "options", "answer"], ["q0", "x?", '["a", "b"]', "A"],
               ["q1", "y?", '["a", "b"]', "B"]]
GOOD_XLSX = None


def good_xlsx() -> bytes:
    global GOOD_XLSX
    if GOOD_XLSX is None:
        GOOD_XLSX = _xlsx_bytes(GOOD_Q_ROWS)
    return GOOD_XLSX


def _bomb() -> bytes:
    big = b"<row>" + b"0" * (40 << 20) + b"</row>"  # 40 MiB of XML in ~40 KB: a 1000x expansion
    return _rezip(good_xlsx(), {"xl/worksheets/sheet1.xml": big})


BILLION_LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;">]>'
                  b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
                  b'<row r="1"><c r="A1" t="inlineStr"><is><t>&lol2;</t></is></c></row></sheetData></worksheet>')
XXE = (b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>'
       b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><si><t>&xxe;</t></si></sst>')

# (file name, content bytes, expected fragment of the one error line). Used as --questions.
QUESTION_FILES = {
    "csv_duplicate_column": ("q.csv", f"{Q_HEADER},answer\nq0,x,[],A,c,B\n".encode(), "duplicate"),
    "csv_utf16le_bom": ("q.csv", "\ufeffquestion_id,answer\nq0,A\n".encode("utf-16-le"), "UTF-16"),
    "csv_utf16be_bom": ("q.csv", "\ufeffquestion_id,answer\nq0,A\n".encode("utf-16-be"), "UTF-16"),
    "csv_utf16le_no_bom": ("q.csv", "question_id,answer\nq0,A\n".encode("utf-16-le"), "UTF-16"),
    "csv_utf16be_no_bom": ("q.csv", "question_id,answer\nq0,A\n".encode("utf-16-be"), "UTF-16"),
    "csv_utf32_no_bom": ("q.csv", "question_id,answer\nq0,A\n".encode("utf-32-le"), "UTF-32"),
    "csv_binary_nul": ("q.csv", b"question_id,answer\nq0,\x00\x01\x02A\n", "NUL"),
    "csv_latin1": ("q.csv", "question_id,question,answer\nq0,caf\xe9,A\n".encode("latin-1"), "UTF-8"),
    "csv_header_only": ("q.csv", f"{Q_HEADER}\n".encode(), "no data rows"),
    "csv_empty": ("q.csv", b"", "empty"),
    "csv_ragged": ("q.csv", f"{Q_HEADER}\nq0,x,[],A,c,extra,more\n".encode(), "fields"),
    "csv_no_id_column": ("q.csv", b"foo,bar\n1,2\n", "question ID"),
    "csv_cyrillic_lookalike_column": ("q.csv", "question_id,\u0430nswer\nq0,A\n".encode(), "\\u0430"),
    "csv_control_char_column": ("q.csv", b"question_id,ans\x1bwer\nq0,A\n", "\\x1b"),
    "csv_options_not_list": ("q.csv", f"{Q_HEADER}\nq0,x,{{not json,A,c\n".encode(), "options"),
    "jsonl_huge_integer": ("q.jsonl", b'{"question_id": "q0", "answer": ' + b"9" * 5000 + b"}\n", "number"),
    "jsonl_deep_nesting": ("q.jsonl", b'{"question_id": "q0", "answer": "A", "x": ' + b"[" * 100000
                           + b"]" * 100000 + b"}\n", "nested"),
    "jsonl_duplicate_key": ("q.jsonl", b'{"question_id": "q0", "answer": "A", "answer": "B"}\n', "duplicate"),
    "jsonl_bad_line": ("q.jsonl", b'{"question_id": "q0", "answer": "A"}\n{"question_id": \n', "line 2"),
    "jsonl_not_object": ("q.jsonl", b'[1, 2, 3]\n', "expected an object"),
    "jsonl_blank_only": ("q.jsonl", b"\n\n  \n", "no JSON lines"),
    "jsonl_utf16_no_bom": ("q.jsonl", '{"question_id": "q0", "answer": "A"}\n'.encode("utf-16-be"), "UTF-16"),
    "json_deep_nesting": ("q.json", b"[" * 200000 + b"]" * 200000, "nested"),
    "json_huge_integer": ("q.json", b'[{"question_id": "q0", "answer": ' + b"1" * 6000 + b"}]", "number"),
    "json_duplicate_key": ("q.json", b'[{"question_id": "q0", "answer": "A", "answer": "C"}]', "duplicate"),
    "json_scalar": ("q.json", b"42", "not a table"),
    "json_list_of_numbers": ("q.json", b"[1, 2]", "not an object"),
    "json_truncated": ("q.json", b'[{"question_id": "q0"', "not valid JSON"),
    "xlsx_duplicate_answer_column": ("q.xlsx", None, "duplicate"),
    "xlsx_malformed_sheet_xml": ("q.xlsx", None, "not well-formed"),
    "xlsx_zip_bomb": ("q.xlsx", None, "zip bomb"),
    "xlsx_billion_laughs": ("q.xlsx", None, "forbidden XML"),
    "xlsx_external_entity": ("q.xlsx", None, "forbidden XML"),
    "xlsx_not_a_zip": ("q.xlsx", b"this is not a workbook", "zip"),
    "xlsx_truncated_zip": ("q.xlsx", None, "xlsx"),
    "xlsx_zip_without_workbook": ("q.xlsx", None, "not an .xlsx"),
    "xlsx_too_many_parts": ("q.xlsx", None, "parts"),
    "parquet_garbage": ("q.parquet", b"PAR1garbagePAR1", "Parquet"),
    "parquet_list_question": ("q.parquet", None, "question"),
    "parquet_struct_answer": ("q.parquet", None, "answer"),
    "parquet_duplicate_column": ("q.parquet", None, "duplicate"),
    "pickle_refused": ("q.pkl", b"\x80\x04K\x01.", "pickle"),
    "unknown_extension": ("q.exe", b"MZ", "unknown file type"),
}


def _build(label: str, content: bytes | None) -> bytes:
    if content is not None:
        return content
    if label == "xlsx_duplicate_answer_column":
        return _xlsx_bytes([["question_id", "question", "answer", "answer"], ["q0", "x?", "A", "B"]])
    if label == "xlsx_malformed_sheet_xml":
        return _rezip(good_xlsx(), {"xl/worksheets/sheet1.xml": b"<worksheet><sheetData><row>"})
    if label == "xlsx_zip_bomb":
        return _bomb()
    if label == "xlsx_billion_laughs":
        return _rezip(good_xlsx(), {"xl/worksheets/sheet1.xml": BILLION_LAUGHS})
    if label == "xlsx_external_entity":
        return _rezip(good_xlsx(), {}, add={"xl/sharedStrings.xml": XXE})
    if label == "xlsx_truncated_zip":
        return good_xlsx()[: len(good_xlsx()) // 2]
    if label == "xlsx_zip_without_workbook":
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("hello.txt", "hi")
        return buf.getvalue()
    if label == "xlsx_too_many_parts":
        return _rezip(good_xlsx(), {}, add={f"xl/media/p{i}.bin": b"" for i in range(10_050)},
                      compress=zipfile.ZIP_STORED)
    if label.startswith("parquet_"):
        import pyarrow as pa
        import pyarrow.parquet as pq

        if label == "parquet_list_question":
            t = pa.table({"question_id": ["q0", "q1"], "question": [["a", "b"], ["c"]], "answer": ["A", "B"]})
        elif label == "parquet_struct_answer":
            t = pa.table({"question_id": ["q0", "q1"], "question": ["x", "y"],
                          "answer": [{"k": 1}, {"k": 2}]})
        else:
            t = pa.Table.from_arrays([pa.array(["q0"]), pa.array(["A"]), pa.array(["B"])],
                                     names=["question_id", "answer", "answer"])
        buf = io.BytesIO()
        pq.write_table(t, buf)
        return buf.getvalue()
    raise AssertionError(label)


@pytest.mark.parametrize("label", sorted(QUESTION_FILES))
def test_hostile_questions_file(ws, label):
    name, content, fragment = QUESTION_FILES[label]
    p = ws.root / "inputs" / name
    p.write_bytes(_build(label, content))
    before = ws.snap()
    res = ws.cli("audit", "--questions", f"inputs/{name}", "--runs", str(ws.runs), "--out", "report",
                 "--calibration-sims", "0", "--n-permutations", "19", "--no-figures")
    ws.check_refused(res, before)
    line = res.error_lines[0]
    assert name in line, line
    assert fragment.lower() in line.lower(), line
    assert "np.float64" not in line


RUN_HEADER = "question_id,model,arm,prediction,hit"
RUN_FILES = {
    "runs_inf_hit": ("r.csv", f"{RUN_HEADER}\nq0,alpha,full,A,inf\n".encode(), "hit"),
    "runs_duplicate_column": ("r.csv", f"{RUN_HEADER},hit\nq0,alpha,full,A,1,0\n".encode(), "duplicate"),
    "runs_jsonl_duplicate_hit": ("r.jsonl", b'{"question_id": "q0", "model": "alpha", "arm": "full", '
                                 b'"prediction": "A", "hit": 1, "hit": 0}\n', "duplicate"),
    "runs_jsonl_huge_int": ("r.jsonl", b'{"question_id": "q0", "model": "alpha", "arm": "full", '
                            b'"prediction": "A", "hit": ' + b"7" * 4500 + b"}\n", "number"),
    # a run that stopped while writing its log: the last line cut short, no newline at its end
    "runs_jsonl_cut_short": ("r.jsonl", b'{"question_id": "q0", "model": "alpha", "arm": "full", "prediction": "A"}\n'
                             b'{"question_id": "q1", "model": "alpha", "arm": "full", "predic',
                             "row 2: line 2 is not valid JSON (Unterminated string starting at column 56); it is the "
                             "last line and has no newline at its end: the file was cut short"),
    "runs_unknown_question": ("r.csv", f"{RUN_HEADER}\nzzz,alpha,full,A,1\n".encode(), "zzz"),
    "runs_cyrillic_lookalike_id": ("r.csv", f"{RUN_HEADER}\nq\u04300,alpha,full,A,1\n".encode(), "\\u0430"),
    "runs_bad_arm": ("r.csv", f"{RUN_HEADER}\nq0,alpha,sideways,A,1\n".encode(), "arm"),
    "runs_utf16_no_bom": ("r.csv", f"{RUN_HEADER}\nq0,alpha,full,A,1\n".encode("utf-16-le"), "UTF-16"),
    "runs_xlsx_duplicate": ("r.xlsx", None, "duplicate"),
}


@pytest.mark.parametrize("label", sorted(RUN_FILES))
def test_hostile_runs_file(ws, label):
    name, content, fragment = RUN_FILES[label]
    if content is None:
        content = _xlsx_bytes([["question_id", "model", "arm", "prediction", "hit", "hit"],
                               ["q0", "alpha", "full", "A", 1, 0]])
    p = ws.root / "inputs" / name
    p.write_bytes(content)
    before = ws.snap()
    res = ws.cli("audit", "--questions", str(ws.questions), "--runs", f"inputs/{name}", "--out", "report",
                 "--calibration-sims", "0", "--n-permutations", "19", "--no-figures")
    ws.check_refused(res, before)
    line = res.error_lines[0]
    assert fragment.lower() in line.lower(), line
    assert "np.float64" not in line and "np.int64" not in line


# ------------------------------------------------------------------------------ what is at the path
def _fifo(ws, name="pipe.csv"):
    os.mkfifo(ws.root / "inputs" / name)
    return f"inputs/{name}"


PATHS = {
    "fifo_questions": (lambda ws: _fifo(ws), "questions", "FIFO"),
    "fifo_runs": (lambda ws: _fifo(ws), "runs", "FIFO"),
    "dangling_symlink_questions": (lambda ws: os.symlink("nowhere.csv", ws.root / "inputs" / "d.csv")
                                   or "inputs/d.csv", "questions", "dangling"),
    "dangling_symlink_runs": (lambda ws: os.symlink("nowhere.csv", ws.root / "inputs" / "d.csv")
                              or "inputs/d.csv", "runs", "dangling"),
    "symlink_loop_questions": (lambda ws: (os.symlink("b.csv", ws.root / "inputs" / "a.csv"),
                                          os.symlink("a.csv", ws.root / "inputs" / "b.csv")) and "inputs/a.csv",
                               "questions", "loop"),
    "symlink_loop_runs": (lambda ws: (os.symlink("b.csv", ws.root / "inputs" / "a.csv"),
                                     os.symlink("a.csv", ws.root / "inputs" / "b.csv")) and "inputs/a.csv",
                          "runs", "loop"),
    "missing_questions": (lambda ws: "inputs/none.csv", "questions", "no such file"),
    "missing_runs": (lambda ws: "inputs/none.csv", "runs", "no such file"),
    "char_device_runs": (lambda ws: "/dev/null", "runs", "device"),
    "folder_as_questions": (lambda ws: (ws.root / "inputs" / "sub").mkdir() or (ws.root / "inputs" / "sub" / "a.txt")
                            .write_text("x") and "inputs/sub", "questions", "folder"),
    "empty_runs_folder": (lambda ws: (ws.root / "inputs" / "emptydir").mkdir() or "inputs/emptydir", "runs", "empty"),
    "glob_matching_nothing": (lambda ws: "inputs/*.nothing", "runs", "matches no files"),
    "url_with_credentials_as_questions": (lambda ws: "https://bob:CanaryPassw0rd!x@example.com/q.csv",
                                          "questions", "***"),
}


@pytest.mark.parametrize("label", sorted(PATHS))
def test_odd_input_paths(ws, label):
    make, role, fragment = PATHS[label]
    spec = make(ws)
    before = ws.snap()
    q = spec if role == "questions" else str(ws.questions)
    r = spec if role == "runs" else str(ws.runs)
    res = ws.cli("audit", "--questions", q, "--runs", r, "--out", "report", "--calibration-sims", "0",
                 "--no-figures")
    ws.check_refused(res, before)
    assert fragment.lower() in res.error_lines[0].lower(), res


def test_fifo_inside_a_runs_folder_is_skipped_not_read(ws):
    os.mkfifo(ws.root / "inputs" / "zz_pipe.csv")
    os.symlink("missing.csv", ws.root / "inputs" / "zz_dangling.csv")
    os.remove(ws.questions)
    os.rename(ws.runs, ws.root / "inputs" / "runs.csv")
    from .conftest import write_benchmark

    q, _ = write_benchmark(ws.root / "qs")
    res = ws.cli("audit", "--questions", str(q), "--runs", "inputs", "--out", "report", "--calibration-sims", "0",
                 "--n-permutations", "19", "--no-figures")
    assert res.rc == 0, res


@pytest.mark.parametrize("where", ["check", "open"])
def test_permission_denied_is_one_line(ws, monkeypatch, where):
    """EACCES simulated (the suite may run as root, for whom chmod does not deny reads)."""
    import audit_hub.readers.input_guard as ig

    real_open = os.open

    def deny(path, *a, **k):
        if str(path).endswith("runs.csv"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr(ig.os, "open", deny)
    before = ws.snap()
    res = ws.cli(*ws.audit_args("report"))
    ws.check_refused(res, before)
    assert "permission denied" in res.error_lines[0] and "runs.csv" in res.error_lines[0]


def test_output_permission_denied_is_one_line(ws, monkeypatch):
    import audit_hub.hub.folders as io_utils

    def deny(*a, **k):
        raise PermissionError(13, "Permission denied", k.get("dir"))

    monkeypatch.setattr(io_utils.tempfile, "mkdtemp", deny)
    before = ws.snap()
    res = ws.cli(*ws.audit_args("report"))
    ws.check_refused(res, before)
    assert "Permission denied" in res.error_lines[0]


@pytest.mark.parametrize("sheet,fragment", [(BILLION_LAUGHS, "forbidden XML"),
                                            (b"<worksheet><sheetData><row><c><v>1</v></c>", "xlsx")])
def test_large_workbook_parts_are_scanned_not_parsed_twice(ws, monkeypatch, sheet, fragment):
    """Parts above the full-parse size go to the engine after a DTD/entity scan; the engine's parse
    error is still one line."""
    import audit_hub.readers.input_guard as ig

    monkeypatch.setattr(ig, "XLSX_FULL_PARSE_BYTES", 64)
    (ws.root / "inputs" / "big.xlsx").write_bytes(_rezip(good_xlsx(), {"xl/worksheets/sheet1.xml": sheet}))
    before = ws.snap()
    res = ws.cli("audit", "--questions", "inputs/big.xlsx", "--runs", str(ws.runs), "--out", "report")
    ws.check_refused(res, before)
    assert fragment in res.error_lines[0], res


def test_workbook_too_big_for_memory_is_refused_before_parsing(ws, monkeypatch):
    import audit_hub.bounds as limits

    monkeypatch.setattr(limits, "available_memory", lambda: 1000)
    (ws.root / "inputs" / "w.xlsx").write_bytes(good_xlsx())
    before = ws.snap()
    res = ws.cli("audit", "--questions", "inputs/w.xlsx", "--runs", str(ws.runs), "--out", "report")
    ws.check_refused(res, before)
    assert "memory" in res.error_lines[0], res


@pytest.mark.parametrize("command", ["tst", "prune"])
@pytest.mark.parametrize("label", ["xlsx_duplicate_answer_column", "jsonl_deep_nesting", "csv_utf16be_no_bom",
                                   "parquet_struct_answer", "xlsx_zip_bomb"])
def test_other_commands_read_through_the_same_guards(ws, command, label):
    name, content, fragment = QUESTION_FILES[label]
    (ws.root / "inputs" / name).write_bytes(_build(label, content))
    before = ws.snap()
    res = ws.cli(command, "--questions", f"inputs/{name}", "--out", "out_dir")
    ws.check_refused(res, before, out="out_dir")
    assert fragment.lower() in res.error_lines[0].lower(), res


@pytest.mark.parametrize("damage", ["compressed_page", "truncated_chunk"])
def test_a_damaged_row_group_behind_a_repeated_dictionary_is_refused(ws, damage):
    """A runs file as pandas writes a categorical question ID (its dictionary repeated in every row group),
    with a later group's data page damaged: the page decoder refuses the chunk, pyarrow reads it and fails,
    and the audit stops with one line naming the file (nothing partial, nothing touched)."""
    import pandas as pd
    import pyarrow.parquet as pq

    r = pd.read_csv(ws.runs, dtype=str)
    r["question_id"] = r["question_id"].astype("category")
    p = ws.root / "inputs" / "runs_cat.parquet"
    r.to_parquet(p, row_group_size=max(2, len(r) // 4))
    meta = pq.ParquetFile(p).metadata
    assert meta.num_row_groups >= 3
    col = meta.row_group(2).column(list(r.columns).index("question_id"))
    raw = bytearray(p.read_bytes())
    if damage == "compressed_page":  # 24 bytes of the first data page (its header and body start) overwritten
        at = col.data_page_offset + 12
        raw[at:at + 24] = b"\xff" * 24
    else:  # everything after the first data page's first bytes zeroed (the footer's sizes unchanged)
        at = col.data_page_offset + 4
        raw[at:col.dictionary_page_offset + col.total_compressed_size] = \
            b"\x00" * (col.dictionary_page_offset + col.total_compressed_size - at)
    p.write_bytes(bytes(raw))
    before = ws.snap()
    res = ws.cli("audit", "--questions", str(ws.questions), "--runs", "inputs/runs_cat.parquet", "--out", "report",
                 "--calibration-sims", "0", "--n-permutations", "19", "--no-figures")
    ws.check_refused(res, before)
    assert "runs_cat.parquet" in res.error_lines[0] and "not a readable Parquet file" in res.error_lines[0], \
        res.error_lines
    # (the same file undamaged audits: checked by hand, exit 0)
