"""Checks every input file passes before a reader opens it, and the translation of low-level failures
into one-line :class:`InputError` messages naming the file.

* :func:`check_input_path`: what kind of thing is at the path (missing, dangling symlink, symlink loop,
  permission denied, FIFO/socket/device, folder, too long a name) -- one clear line for each.
* :func:`check_text_head`: NUL bytes in a text file: UTF-16/32 without a byte-order mark, or binary data.
* :func:`check_zip_container`: the ONE guard run before any xlsx parse, whatever engine parses it:
  member count, decompressed-size and compression-ratio limits, every XML part parsed with
  ``defusedxml`` (no DTDs, entities or external references; malformed XML refused), and the header
  row of the first sheet checked for duplicate column names (pandas would silently rename the second
  ``answer`` to ``answer.1``).
* :func:`reading`: a context manager / decorator turning ``OSError``, ``RecursionError``, oversized
  integers, ``MemoryError`` and parser exceptions raised while reading one file into an ``InputError``.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import zipfile
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import BenchauditError, InputError

# xlsx limits: a real evaluation sheet of 100k rows is ~100 MB of XML, compressed 5-15x.
XLSX_MAX_MEMBERS = 10_000
XLSX_MAX_TOTAL_BYTES = 2 << 30  # decompressed, all members
XLSX_MAX_MEMBER_BYTES = 1 << 30
XLSX_MAX_RATIO = 200  # decompressed / compressed, for members above XLSX_RATIO_MIN_BYTES
XLSX_RATIO_MIN_BYTES = 4 << 20
XLSX_MEMORY_FACTOR = 6  # peak bytes of a parsed sheet per byte of its XML (engine + DataFrame), roughly
XLSX_FULL_PARSE_BYTES = 8 << 20  # parts up to this size are parsed with defusedxml; larger ones scanned
TEXT_EXTENSIONS = (".csv", ".tsv", ".json", ".jsonl", ".txt")

_KIND = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFSOCK: "a socket", stat.S_IFCHR: "a character device",
         stat.S_IFBLK: "a block device"}


def _oserror_text(e: OSError) -> str:
    code = e.errno
    if code == errno.ELOOP:
        return "a symlink loop (too many levels of symbolic links)"
    if code in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if code == errno.ENAMETOOLONG:
        return "the file name is too long"
    if code == errno.ENOTDIR:
        return "a component of the path is not a folder"
    if code == errno.EISDIR:
        return "this is a folder, not a file"
    if code == errno.ENOENT:
        return "no such file or folder"
    if code == errno.EIO:
        return "input/output error while reading"
    return f"cannot read it ({e.strerror or type(e).__name__})"


def check_input_path(path: str, *, allow_dir: bool = True) -> str | None:
    """Raise a one-line :class:`InputError` unless ``path`` is a readable regular file (or a folder when
    ``allow_dir``). Returns ``"dir"`` for a folder, else None."""
    p = str(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        if os.path.islink(p):
            raise InputError(f"a dangling symlink (it points to {os.readlink(p)!r}, which does not exist)",
                             file=p) from None
        raise InputError("no such file or folder", file=p) from None
    except OSError as e:
        raise InputError(_oserror_text(e), file=p) from None
    except ValueError as e:  # embedded NUL byte
        raise InputError(f"not a usable path ({e})", file=repr(p)) from None
    if stat.S_ISDIR(st.st_mode):
        if not allow_dir:
            raise InputError("this is a folder, not a file", file=p)
        if not os.access(p, os.R_OK | os.X_OK):
            raise InputError("permission denied (the folder cannot be listed)", file=p)
        return "dir"
    if not stat.S_ISREG(st.st_mode):
        kind = _KIND.get(stat.S_IFMT(st.st_mode), "not a regular file")
        raise InputError(f"this is {kind}, not a regular file; refusing to read it", file=p)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        os.close(fd)
    except OSError as e:
        raise InputError(_oserror_text(e), file=p) from None
    return None


def skip_reason(path: str) -> str | None:
    """For a file found inside a folder: why it cannot be read (skipped with this reason), else None."""
    try:
        check_input_path(path, allow_dir=False)
    except InputError as e:
        return e.detail
    return None


def check_text_head(path: str, head: bytes) -> None:
    """Refuse text files holding NUL bytes: UTF-16/32 without a byte-order mark, or binary data."""
    if not head or b"\x00" not in head:
        return
    sample = head[:4096]
    even = sample[0::2].count(0)
    odd = sample[1::2].count(0)
    half = max(1, len(sample) // 2)
    if odd > 0.3 * half and even < 0.05 * half:
        enc = "UTF-16-LE"
    elif even > 0.3 * half and odd < 0.05 * half:
        enc = "UTF-16-BE"
    elif sample.count(0) > 0.6 * len(sample):
        enc = "UTF-32"
    else:
        line = head[: head.index(b"\x00")].count(b"\n") + 1
        raise InputError(f"the file holds NUL bytes (the first on line {line}): it is binary data, not UTF-8 text",
                         file=path, row=line - 1 if line > 1 else None)
    raise InputError(f"the file looks like {enc} text without a byte-order mark; save it as UTF-8 and try again",
                     file=path)


# ---------------------------------------------------------------------------------------- xlsx
def _xml_tag(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _xml_error(e: BaseException, name: str, path: str) -> InputError | None:
    """The one-line InputError for an exception raised while parsing the XML part ``name`` (None: other)."""
    from xml.etree.ElementTree import ParseError
    from xml.parsers.expat import ExpatError

    from defusedxml import DefusedXmlException

    if isinstance(e, DefusedXmlException):
        return InputError(f"the workbook part {name} uses forbidden XML features ({type(e).__name__}); "
                          "refusing to parse it", file=path)
    if isinstance(e, (ParseError, ExpatError)):
        return InputError(f"the workbook part {name} is not well-formed XML ({e})", file=path)
    if isinstance(e, (zipfile.BadZipFile, EOFError, zipfile.LargeZipFile, zlib.error, OSError)):
        return InputError(f"the workbook is damaged ({name}: {e})", file=path)
    if isinstance(e, (ValueError, RuntimeError, NotImplementedError)):  # encrypted / unsupported compression
        return InputError(f"the workbook part {name} cannot be read ({e})", file=path)
    return None


def _iter_xml(zf: zipfile.ZipFile, name: str, path: str):
    """Stream the elements of one XML part through defusedxml; malformed or hostile XML -> InputError."""
    from defusedxml.ElementTree import iterparse

    try:
        with zf.open(name) as fh:
            for _ev, el in iterparse(fh, events=("end",)):
                yield el
    except Exception as e:  # noqa: BLE001 (translated, or re-raised as it is)
        err = _xml_error(e, name, path)
        if err is None:
            raise
        raise err from None


def _check_xml(zf: zipfile.ZipFile, name: str, path: str) -> None:
    """Parse one XML part with expat, building nothing (C speed: no Python call per element), under
    defusedxml's rules: entity declarations and external references are refused with defusedxml's own
    exceptions; malformed XML -> InputError. Same verdicts as streaming it through :func:`_iter_xml`."""
    from xml.parsers import expat

    from defusedxml import EntitiesForbidden, ExternalReferenceForbidden

    def entity_decl(ent, _is_param, value, base, sysid, pubid, notation):
        raise EntitiesForbidden(ent, value, base, sysid, pubid, notation)

    def unparsed_entity_decl(ent, base, sysid, pubid, notation):
        raise EntitiesForbidden(ent, None, base, sysid, pubid, notation)

    def external_ref(context, base, sysid, pubid):
        raise ExternalReferenceForbidden(context, base, sysid, pubid)

    parser = expat.ParserCreate()
    parser.EntityDeclHandler = entity_decl
    parser.UnparsedEntityDeclHandler = unparsed_entity_decl
    parser.ExternalEntityRefHandler = external_ref
    try:
        with zf.open(name) as fh:
            parser.ParseFile(fh)
    except Exception as e:  # noqa: BLE001 (translated, or re-raised as it is)
        err = _xml_error(e, name, path)
        if err is None:
            raise
        raise err from None


def _first_sheet(zf: zipfile.ZipFile, names: set[str], path: str) -> str | None:
    rid = None
    if "xl/workbook.xml" in names:
        for el in _iter_xml(zf, "xl/workbook.xml", path):
            if _xml_tag(el.tag) == "sheet":
                rid = next((v for k, v in el.attrib.items() if _xml_tag(k) == "id"), None)
                break
    if rid and "xl/_rels/workbook.xml.rels" in names:
        for el in _iter_xml(zf, "xl/_rels/workbook.xml.rels", path):
            if _xml_tag(el.tag) == "Relationship" and el.get("Id") == rid:
                target = el.get("Target") or ""
                target = target.lstrip("/")
                if not target.startswith("xl/"):
                    target = "xl/" + target
                if target in names:
                    return target
    sheets = sorted(n for n in names if n.startswith("xl/worksheets/") and n.endswith(".xml"))
    return "xl/worksheets/sheet1.xml" if "xl/worksheets/sheet1.xml" in names else (sheets[0] if sheets else None)


def _header_cells(zf: zipfile.ZipFile, sheet: str, path: str) -> list[tuple[str, str]]:
    """The first non-empty row of ``sheet`` as (kind, value): kind 's' = shared-string index, else text.
    Parsing stops at that row."""
    it = _iter_xml(zf, sheet, path)
    try:
        for el in it:
            tag = _xml_tag(el.tag)
            if tag == "sheetData":
                break
            if tag != "row":
                continue
            cells: list[tuple[str, str]] = []
            for c in el:
                if _xml_tag(c.tag) != "c":
                    continue
                t = c.get("t")
                if t == "inlineStr":
                    cells.append(("t", "".join(x.text or "" for x in c.iter() if _xml_tag(x.tag) == "t")))
                else:
                    v = next((x.text for x in c if _xml_tag(x.tag) == "v"), None)
                    if v is not None:
                        cells.append(("s" if t == "s" else "t", v))
            if any(k == "s" or v.strip() for k, v in cells):
                return cells
            el.clear()
    finally:
        it.close()
    return []


def _shared_strings(zf: zipfile.ZipFile, names: set[str], path: str, upto: int) -> list[str]:
    """The first ``upto + 1`` shared strings (parsing stops there)."""
    out: list[str] = []
    if "xl/sharedStrings.xml" not in names or upto < 0:
        return out
    it = _iter_xml(zf, "xl/sharedStrings.xml", path)
    try:
        for el in it:
            if _xml_tag(el.tag) == "si":
                out.append("".join(x.text or "" for x in el.iter() if _xml_tag(x.tag) == "t"))
                el.clear()
                if len(out) > upto:
                    break
    finally:
        it.close()
    return out


def _scan_for_dtd(zf: zipfile.ZipFile, name: str, path: str) -> None:
    """Large parts are not parsed twice: the engine parses them, and this scan first refuses any DTD or
    entity declaration in them (what defusedxml refuses). A part that is not plain UTF-8 XML is parsed
    with defusedxml instead."""
    tail = b""
    first = True
    try:
        with zf.open(name) as fh:
            while True:
                chunk = fh.read(1 << 20)
                if not chunk:
                    break
                if first:
                    first = False
                    if not chunk.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<"):
                        for el in _iter_xml(zf, name, path):
                            el.clear()
                        return
                buf = tail + chunk
                if b"<!DOCTYPE" in buf or b"<!ENTITY" in buf:
                    raise InputError(f"the workbook part {name} uses forbidden XML features (a DTD or entity "
                                     "declaration); refusing to parse it", file=path)
                tail = buf[-16:]
    except (zipfile.BadZipFile, EOFError, zlib.error, OSError) as e:
        raise InputError(f"the workbook is damaged ({name}: {e})", file=path) from None


def check_zip_container(path: str, *, check_header: bool = True) -> None:
    """The guard every .xlsx passes before any parser (openpyxl, calamine, ...) sees it.

    Limits: part count, decompressed size (total and per part) and expansion ratio, read from the zip
    directory and enforced while decompressing. XML: every part up to ``XLSX_FULL_PARSE_BYTES`` is
    parsed with defusedxml (well-formed, no DTD, no entities, no external references); larger parts
    (the sheet and shared strings of big sheets) are scanned for DTD/entity declarations, and the
    engine's own parse errors become one-line InputErrors. The header row of the first sheet is read
    (parsing stops there) and duplicate column names are refused.
    """
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile:
        raise InputError("not a readable .xlsx workbook (not a zip container)", file=path) from None
    except OSError as e:
        raise InputError(_oserror_text(e), file=path) from None
    with zf:
        infos = zf.infolist()
        if len(infos) > XLSX_MAX_MEMBERS:
            raise InputError(f"the workbook has {len(infos):,} parts (limit {XLSX_MAX_MEMBERS:,}); refusing it",
                             file=path)
        total = 0
        for info in infos:
            if info.flag_bits & 0x1:
                raise InputError("the workbook is encrypted; save an unencrypted copy", file=path)
            total += info.file_size
            if info.file_size > XLSX_MAX_MEMBER_BYTES or total > XLSX_MAX_TOTAL_BYTES:
                raise InputError(f"the workbook decompresses to more than {XLSX_MAX_TOTAL_BYTES >> 30} GiB "
                                 f"({info.filename}); refusing it (zip bomb?)", file=path)
            if info.file_size > XLSX_RATIO_MIN_BYTES and info.file_size > XLSX_MAX_RATIO * max(1, info.compress_size):
                raise InputError(f"the workbook part {info.filename} expands "
                                 f"{info.file_size / max(1, info.compress_size):,.0f}x (limit {XLSX_MAX_RATIO}x); "
                                 "refusing it (zip bomb?)", file=path)
        from ..bounds import available_memory

        need = XLSX_MEMORY_FACTOR * total
        if need > available_memory():
            raise InputError(f"the workbook decompresses to {total / 2**20:,.0f} MiB and would need about "
                             f"{need / 2**30:.1f} GiB of memory to read, more than is available; export it as "
                             ".parquet or .tsv", file=path)
        names = {i.filename for i in infos}
        if "[Content_Types].xml" not in names or not any(n.startswith("xl/") for n in names):
            raise InputError("not an .xlsx workbook (no xl/ part or [Content_Types].xml); save it as .xlsx",
                             file=path)
        for info in sorted(infos, key=lambda i: i.filename):
            if not info.filename.endswith((".xml", ".rels", ".vml")):
                continue
            if info.file_size <= XLSX_FULL_PARSE_BYTES:
                _check_xml(zf, info.filename, path)
            else:
                _scan_for_dtd(zf, info.filename, path)
        sheet = _first_sheet(zf, names, path)
        if sheet is None:
            raise InputError("the workbook has no worksheet", file=path)
        if not check_header:
            return
        cells = _header_cells(zf, sheet, path)
        idx = [int(v) for k, v in cells if k == "s" and v.strip().isdigit()]
        shared = _shared_strings(zf, names, path, max(idx) if idx else -1)
    header = []
    for k, v in cells:
        if k == "s":
            i = int(v) if v.strip().isdigit() else -1
            v = shared[i] if 0 <= i < len(shared) else ""
        if str(v).strip():
            header.append(str(v).strip())
    seen: set[str] = set()
    for name in header:
        if name in seen:
            from ..escape import show_id

            raise InputError(f"duplicate column name {show_id(name)} in the header row; rename one of them",
                             file=path, column=name)
        seen.add(name)


# ---------------------------------------------------------------------------------------- translation
F = TypeVar("F", bound=Callable[..., Any])


def as_input_error(e: BaseException, path: str) -> InputError | None:
    """The one-line InputError for an exception raised while reading ``path`` (None: not an input fault)."""
    if isinstance(e, BenchauditError):
        return None
    if isinstance(e, OSError):
        return InputError(_oserror_text(e), file=path)
    if isinstance(e, RecursionError):
        return InputError("the data is nested too deeply to read (JSON nesting depth limit)", file=path)
    if isinstance(e, MemoryError):
        return InputError("the file needs more memory than is available to read", file=path)
    msg = str(e)
    if isinstance(e, ValueError) and "digits" in msg and "int" in msg:
        return InputError("a number has more than 4300 digits (integer size limit)", file=path)
    if isinstance(e, UnicodeError):
        return InputError(f"not valid UTF-8 text ({type(e).__name__})", file=path)
    mod = type(e).__module__ or ""
    if isinstance(e, (ValueError, TypeError, KeyError, IndexError, OverflowError, zipfile.BadZipFile, EOFError,
                      zlib.error)) \
            or mod.startswith(("pyarrow", "pandas", "openpyxl", "python_calamine", "xml", "defusedxml")):
        first = (msg.strip().splitlines() or [type(e).__name__])[0][:300]
        return InputError(f"cannot read the file ({type(e).__name__}: {first})", file=path)
    return None


def reading(path_arg: int | str = 0) -> Callable[[F], F]:
    """Decorator: exceptions of a reader call become one-line InputErrors naming the file (the argument
    at position/name ``path_arg``)."""

    def deco(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                path = kwargs.get(path_arg) if isinstance(path_arg, str) else (
                    args[path_arg] if len(args) > path_arg else None)
                err = as_input_error(e, str(path))
                if err is None:
                    raise
                raise err from None

        return wrapper  # type: ignore[return-value]

    return deco


__all__ = ["check_input_path", "skip_reason", "check_text_head", "check_zip_container", "as_input_error",
           "reading"]


# ---------------------------------------------------------------------------------------- JSON
class _DuplicateKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict:
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


def json_loads(text: str, path: str, *, row: int | None = None, where: str = "") -> Any:
    """``json.loads`` with the failures a hostile file can cause turned into one-line InputErrors:
    syntax errors, duplicate keys (a second ``answer`` would silently win), integers over 4300 digits
    and nesting deeper than the interpreter's recursion limit."""
    import json

    from ..escape import show_id

    try:
        return json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as e:
        raise InputError(f"{where}duplicate key {show_id(e.key)} in a JSON object (a duplicate column name)",
                         file=path, row=row, column=e.key) from None
    except json.JSONDecodeError as e:
        what = e.msg.removesuffix(" at")  # "Unterminated string starting at" + " at column": one "at"
        if row is not None:
            msg = f"line {row} is not valid JSON ({what} at column {e.colno})"
        else:
            msg = f"not valid JSON ({what} at line {e.lineno}, column {e.colno})"
        raise InputError(msg, file=path, row=row) from None
    except RecursionError:
        raise InputError(f"{where}JSON nested too deeply (more levels than the reader allows)", file=path,
                         row=row) from None
    except ValueError as e:  # int digit limit (sys.set_int_max_str_digits)
        raise InputError(f"{where}a JSON number is too long ({str(e).splitlines()[0][:120]})", file=path,
                         row=row) from None


# ---------------------------------------------------------------------------------------- Parquet
# Columns the readers treat as one scalar per row (under their public names, after --map). A list or
# struct there (e.g. an answer stored as {"text": ...}) is refused with the column named; other columns
# (options, option_logprobs, media) may hold lists.
SCALAR_COLUMNS = frozenset({"question_id", "id", "index", "qid", "doc_id", "question", "answer", "gold", "target",
                            "model", "arm", "prediction", "hit", "hit_exact", "category", "hint", "answer_type",
                            "judge", "extracted", "score", "n_options"})


def check_parquet_schema(schema, path: str, column_map: dict[str, str] | None = None) -> None:
    """Refuse duplicate column names and nested types in scalar columns, before any data is read."""
    import pyarrow as pa

    from ..escape import show_id

    names = list(schema.names)
    seen: set[str] = set()
    for n in names:
        if n in seen:
            raise InputError(f"duplicate column name {show_id(n)}; rename one of them", file=path, column=n)
        seen.add(n)
    cmap = column_map or {}
    for field in schema:
        public = cmap.get(field.name, field.name)
        t = field.type
        if public in SCALAR_COLUMNS and (pa.types.is_nested(t) or pa.types.is_dictionary(t)
                                         and pa.types.is_nested(t.value_type)):
            raise InputError(f"column {show_id(field.name)} holds {t} values; it must hold one text or number "
                             "per row", file=path, column=field.name)
        base = t.value_type if pa.types.is_dictionary(t) else t
        if public in SCALAR_COLUMNS and (pa.types.is_binary(base) or pa.types.is_large_binary(base)
                                         or pa.types.is_fixed_size_binary(base)):
            # raw bytes: read as text they became "b'full'" (an unknown arm), and bytes that are not UTF-8 would
            # be replaced silently where a CSV with the same bytes is refused
            raise InputError(f"column {show_id(field.name)} holds raw bytes ({t}, no UTF-8 annotation); write it as "
                             "a string column", file=path, column=field.name)
