"""inspect_ai eval logs: ``.eval`` archives (a zip: ``header.json`` with the eval spec and results,
``samples/<id>_epoch_<n>.json`` one per sample) and ``.json`` logs (one object: ``version``,
``status``, ``eval``, ``results``, ``samples``). Fixtures written by inspect_ai's own code are in
``tests/fixtures/inspect_ai/real``.

Reading: when ``inspect_ai`` is installed (the ``inspect`` extra), its own ``read_eval_log`` parses
the file; otherwise the documented format is read here (both containers, log schema version 1 and
2). Nothing in a log is executed: it is JSON (inside a zip for ``.eval``), parsed as data only, the
archive's sizes checked before anything is decompressed.

Mapping (per sample):

* question ID: ``id`` (a log with several epochs per sample is refused: the audit reads one answer
  per question);
* question: the text of ``input`` (a string, or the text parts of its chat messages; image parts are
  counted, not read); options: ``choices``; gold: ``target`` (the first, when a list);
  ``metadata``'s scalar ``category``/``subject``/``subcategory`` become the category columns;
* prediction: ``output.completion`` (else the text of the first output choice);
* verdict: the value of one scorer in ``scores`` (schema 2) or ``score`` (schema 1) -- the scorer
  named by ``metric=``, else the log's headline scorer (``results.headline``), else the first in
  ``results.scores``. ``C``/``I``/``N`` (and true/false, yes/no, 1/0) are 1/0/0, as inspect's
  ``value_to_float`` reads them; a scorer with partial credit gives no verdict (the exact arm only);
* model: ``eval.model`` (file names do not carry it); benchmark: ``eval.task``; the harness version:
  ``eval.packages.inspect_ai``.
"""

from __future__ import annotations

import os
import re
import zipfile
from typing import Any

from ..errors import InputError
from ..escape import show_id
from .cells import ReadResult, cell_to_str
from .fileio import json_head, load_json_document
from .sample_rows import Sample, binary_verdict, result_from_samples

KIND = "inspect-ai-log"
MAX_MEMBERS = 1_000_000
MAX_TOTAL_BYTES = 4 << 30
MAX_MEMBER_BYTES = 1 << 30
MAX_RATIO = 500
RATIO_MIN_BYTES = 4 << 20
#: inspect_ai's value_to_float for text values
_TEXT_VALUES = {"c": 1, "i": 0, "n": 0, "true": 1, "false": 0, "yes": 1, "no": 0, "correct": 1, "incorrect": 0}
_SAMPLE_MEMBER = re.compile(r"^samples/.+\.json$")


def is_inspect_json(path: str) -> bool:
    """A ``.json`` whose first object keys are an inspect_ai log's (``version`` and ``eval``/``status``)."""
    head = json_head(path)
    if not head.startswith(b"{"):
        return False
    text = head[:2000]
    return b'"version"' in text and (b'"eval"' in text or b'"status"' in text) and b'"samples"' not in text[:20]


def is_inspect_eval(path: str) -> bool:
    return path.lower().endswith(".eval")


ZIP_ZSTANDARD = 93  # the zip compression method newer inspect_ai releases write


def _zstd_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: str) -> bytes:
    """A zstd-compressed member (Python's zipfile reads it only from 3.14): its raw bytes from the local
    header, decompressed with ``zstandard`` (capped at the declared size) and checked against the CRC."""
    import struct
    import zlib

    try:
        import zstandard
    except ImportError:
        raise InputError("this .eval log is zstd-compressed (inspect_ai's newer format); install the "
                         "'zstandard' package (or inspect-ai) to read it", file=path) from None
    fp = zf.fp
    fp.seek(info.header_offset)
    head = fp.read(30)
    if len(head) < 30 or head[:4] != b"PK\x03\x04":
        raise InputError(f"the archive member {info.filename} has no local header", file=path)
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    fp.seek(info.header_offset + 30 + name_len + extra_len)
    data = fp.read(info.compress_size)
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(data, read_across_frames=True)
        raw = reader.read(info.file_size + 1)
    except zstandard.ZstdError as e:
        raise InputError(f"the archive member {info.filename} is not valid zstd data ({e})", file=path) from None
    if len(raw) != info.file_size or zlib.crc32(raw) != info.CRC:
        raise InputError(f"the archive member {info.filename} is damaged (size or CRC differ)", file=path)
    return raw


def _zip_json(zf: zipfile.ZipFile, name: str, path: str) -> Any:
    info = zf.getinfo(name)
    if info.compress_type == ZIP_ZSTANDARD and not hasattr(zipfile, "ZIP_ZSTANDARD"):
        raw = _zstd_member(zf, info, path)
    else:
        try:
            with zf.open(name) as fh:
                raw = fh.read(MAX_MEMBER_BYTES + 1)
        except NotImplementedError:
            raise InputError(f"the archive member {name} uses a compression method this Python cannot read "
                             f"({info.compress_type})", file=path) from None
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise InputError(f"the archive member {name} cannot be read ({e})", file=path) from None
    return load_json_document(f"{path}!{name}", raw)


def _open_archive(path: str) -> zipfile.ZipFile:
    """The ``.eval`` zip, opened after its directory passed the limits (members, sizes, expansion)."""
    try:
        zf = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError):
        raise InputError("not a readable inspect_ai .eval log (not a zip archive)", file=path) from None
    infos = zf.infolist()
    total = 0
    for info in infos:
        why = None
        total += info.file_size
        if len(infos) > MAX_MEMBERS:
            why = f"the archive has {len(infos):,} members (limit {MAX_MEMBERS:,})"
        elif info.flag_bits & 0x1:
            why = "the archive is encrypted"
        elif info.file_size > MAX_MEMBER_BYTES or total > MAX_TOTAL_BYTES:
            why = (f"the archive decompresses to more than {MAX_TOTAL_BYTES >> 30} GiB ({info.filename}); "
                   "refusing it (zip bomb?)")
        elif info.file_size > RATIO_MIN_BYTES and info.file_size > MAX_RATIO * max(1, info.compress_size):
            why = f"the archive member {info.filename} expands more than {MAX_RATIO}x; refusing it (zip bomb?)"
        if why:
            zf.close()
            raise InputError(why, file=path)
    return zf


def _read_archive(path: str) -> dict:
    """The documented ``.eval`` layout -> the same dict as a ``.json`` log."""
    with _open_archive(path) as zf:
        infos = zf.infolist()
        names = [i.filename for i in infos]
        if "header.json" in names:
            log = _zip_json(zf, "header.json", path)
        elif "_journal/start.json" in names:
            raise InputError("the inspect_ai log is incomplete (no header.json: the eval did not finish); "
                             "rerun or recover it with inspect's log tools", file=path)
        else:
            raise InputError("not an inspect_ai .eval log (no header.json inside the archive)", file=path)
        if not isinstance(log, dict):
            raise InputError("header.json is not a JSON object", file=f"{path}!header.json")
        samples = []
        for name in names:
            if _SAMPLE_MEMBER.match(name):
                s = _zip_json(zf, name, path)
                if not isinstance(s, dict):
                    raise InputError("the sample is not a JSON object", file=f"{path}!{name}")
                s["_member"] = name
                samples.append(s)
        log["samples"] = samples
    return log


def _read_with_inspect(path: str) -> dict | None:
    """inspect_ai's own reader, when installed (None otherwise)."""
    import importlib.util

    if os.environ.get("BENCHAUDIT_NO_INSPECT_READER") or importlib.util.find_spec("inspect_ai") is None:
        return None
    try:
        from inspect_ai.log import read_eval_log
    except Exception:  # noqa: BLE001 - a broken install: fall back to the documented format
        return None
    try:
        log = read_eval_log(path)
    except Exception as e:  # noqa: BLE001 - one clear line whatever inspect raises
        first = str(e).splitlines()[0][:200] if str(e) else ""
        raise InputError(f"inspect_ai cannot read the log ({type(e).__name__}: {first})", file=path) from None
    return log.model_dump(mode="json", exclude_none=True)


def load_log(path: str) -> tuple[dict, str]:
    """(the log as a dict, which reader read it)."""
    if is_inspect_eval(path):
        _open_archive(path).close()  # the limits hold whichever reader decompresses it
    got = _read_with_inspect(path)
    if got is not None:
        return got, "inspect_ai.log.read_eval_log"
    if is_inspect_eval(path):
        return _read_archive(path), "benchaudit (documented .eval format)"
    log = load_json_document(path)
    if not isinstance(log, dict) or "eval" not in log:
        raise InputError("not an inspect_ai log (no 'eval' object)", file=path, column="eval")
    return log, "benchaudit (documented .json format)"


def _text(content: Any) -> tuple[str, int]:
    """Message content -> (its text, how many images it holds)."""
    if content is None:
        return "", 0
    if isinstance(content, str):
        return content, 0
    if isinstance(content, list):
        texts, images = [], 0
        for part in content:
            if isinstance(part, dict):
                t = part.get("type")
                if t == "text" and isinstance(part.get("text"), str):
                    texts.append(part["text"])
                elif t in ("image", "video", "audio"):
                    images += 1
            elif isinstance(part, str):
                texts.append(part)
        return "\n".join(texts), images
    return str(content), 0


def _input_text(inp: Any) -> tuple[str, int]:
    if isinstance(inp, list):
        texts, images = [], 0
        for m in inp:
            if isinstance(m, dict) and m.get("role", "user") == "user":
                t, k = _text(m.get("content"))
                if t:
                    texts.append(t)
                images += k
        return "\n".join(texts), images
    return _text(inp)


def _completion(output: Any) -> str | None:
    if not isinstance(output, dict):
        return None
    if isinstance(output.get("completion"), str) and output["completion"]:
        return output["completion"]
    choices = output.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        msg = choices[0].get("message") or {}
        t, _ = _text(msg.get("content") if isinstance(msg, dict) else None)
        return t or None
    return cell_to_str(output.get("completion"))


def _value(v: Any) -> Any:
    if isinstance(v, str):
        return _TEXT_VALUES.get(v.strip().lower(), "non-binary")
    return binary_verdict(v)


def _scores(sample: dict, single: str = "score") -> dict:
    """Scorer name -> score; a schema-1 sample's one ``score`` is named ``single`` (its scorer's name, as
    inspect_ai's own reader names it when it upgrades the log)."""
    if isinstance(sample.get("scores"), dict):
        return sample["scores"]
    if isinstance(sample.get("score"), dict):  # schema 1: one scorer
        return {single: sample["score"]}
    return {}


def _scorer_names(log: dict) -> list[str]:
    res = log.get("results") or {}
    names = []
    head = res.get("headline") if isinstance(res, dict) else None
    if isinstance(head, dict) and isinstance(head.get("score") or head.get("scorer"), str):
        names.append(head.get("score") or head.get("scorer"))
    for s in (res.get("scores") or []) if isinstance(res, dict) else []:
        if isinstance(s, dict) and isinstance(s.get("name"), str):
            names.append(s["name"])
    scorer = res.get("scorer") if isinstance(res, dict) else None  # schema 1
    if isinstance(scorer, dict) and isinstance(scorer.get("name"), str):
        names.append(scorer["name"])
    return list(dict.fromkeys(names))


def harness_accuracy(log: dict, scorer: str) -> float | None:
    """The ``accuracy`` inspect_ai reported for ``scorer`` in the log's results (None if absent)."""
    res = log.get("results") or {}
    for s in res.get("scores") or []:
        if s.get("name") == scorer:
            m = (s.get("metrics") or {}).get("accuracy")
            return None if m is None else float(m["value"])
    if isinstance(res.get("metrics"), dict) and "accuracy" in res["metrics"]:  # schema 1 (one scorer)
        return float(res["metrics"]["accuracy"]["value"])
    return None


def read_log(path: str, *, arm: str = "full", model: str | None = None, metric: str | None = None) -> ReadResult:
    """One inspect_ai log -> runs (one row per sample) and the questions it carries."""
    log, reader = load_log(path)
    ev = log.get("eval") if isinstance(log.get("eval"), dict) else {}
    status = log.get("status")
    samples_in = log.get("samples") or []
    if not samples_in:
        why = f" (status {status!r})" if status not in (None, "success") else ""
        raise InputError(f"the inspect_ai log has no samples{why}; was it written with --no-log-samples?",
                         file=path, column="samples")
    scorers = _scorer_names(log)
    if metric:
        scorer = metric
    elif scorers:
        scorer = scorers[0]
    else:
        first = next((s for s in samples_in if _scores(s)), None)
        scorer = next(iter(_scores(first))) if first else None
    single = scorer or "score"
    epochs = {s.get("epoch", 1) for s in samples_in}
    if len(epochs) > 1:
        raise InputError(f"the log has {len(epochs)} epochs per sample; the audit reads one answer per question "
                         "(run the eval with --epochs 1)", file=path, column="epoch")
    out: list[Sample] = []
    non_binary = False
    for i, s in enumerate(samples_in, start=1):
        where = s.get("_member")
        if "id" not in s:
            raise InputError(f"sample {i} has no id", file=path + (f"!{where}" if where else ""), row=i, column="id")
        qid = cell_to_str(s["id"])
        sc = _scores(s, single)
        if metric and sc and metric not in sc:
            raise InputError(f"scorer {show_id(metric)} not in the log; scorers: {sorted(sc)}", file=path, row=i,
                             column="scores")
        hit = None
        if scorer is not None and isinstance(sc.get(scorer), dict):
            v = _value(sc[scorer].get("value"))
            if v == "non-binary":
                non_binary = True
            else:
                hit = v
        question, n_images = _input_text(s.get("input"))
        target = s.get("target")
        if isinstance(target, list):
            target = target[0] if target else None
        fields: dict[str, Any] = {"question": question, "answer": cell_to_str(target)}
        if isinstance(s.get("choices"), list) and s["choices"]:
            fields["options"] = [cell_to_str(c) or "" for c in s["choices"]]
        meta = s.get("metadata") if isinstance(s.get("metadata"), dict) else {}
        for src, dst in (("category", "category"), ("subject", "category"), ("subcategory", "l2_category"),
                         ("l2_category", "l2_category")):
            v = meta.get(src)
            if isinstance(v, str | int) and dst not in fields:
                fields[dst] = str(v)
        if n_images:
            fields["n_images"] = n_images
        out.append(Sample(qid, _completion(s.get("output")), hit, i, fields))
    model_name = model or cell_to_str(ev.get("model")) or "model"
    task = cell_to_str(ev.get("task")) or "task"
    task = task.rsplit("/", 1)[-1]
    packages = ev.get("packages") if isinstance(ev.get("packages"), dict) else {}
    version = packages.get("inspect_ai")
    info = {"task": task, "harness": "inspect_ai", "harness_version": version, "log_schema": log.get("version"),
            "log_reader": reader, "metric": None if non_binary else scorer, "status": status}
    return result_from_samples(path, KIND, out, model=model_name, arm=arm,
                               judge=f"inspect_ai:{scorer}" if scorer and not non_binary else None, info=info,
                               with_hit=not non_binary)
