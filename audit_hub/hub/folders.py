"""Output folders: the safety checks of ``--out``, atomic writing and swapping, hashing and JSON.

The content of an output folder goes through :mod:`audit_hub.hub.output`; this module owns the folder itself."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------- output folders
# An output folder DIR is written to a hidden temporary sibling and swapped into place. Temporary and
# retired folders carry the writer's pid and a hash of DIR's name, so a later run recognises those left by
# a killed run (dead pid) and removes them, or restores the old output when the kill came between the
# two renames of the fallback path. Names stay short whatever DIR's length (NAME_MAX is 255 bytes).
_TMP_RE = r"^\.(?P<stem>.{{0,40}})\.ba-(?P<kind>tmp|old)-{h}-(?P<pid>\d+)(?:-[a-z0-9_]+)?$"
MANIFEST = "manifest.json"
_MANIFEST_MAX_BYTES = 64 << 20


def _name_hash(name: str) -> str:
    return hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]


def _temp_name(target: Path, kind: str) -> str:
    stem = target.name[:40]
    return f".{stem}.ba-{kind}-{_name_hash(target.name)}-{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _show_path(p: str | os.PathLike) -> str:
    s = str(p)
    return s if s.isascii() and s.isprintable() else ascii(s)


def manifest_command(folder: Path) -> str | None:
    """The benchaudit command that wrote ``folder`` according to its manifest (None if not an output)."""
    m = folder / MANIFEST
    try:
        if m.is_symlink() or not m.is_file() or m.stat().st_size > _MANIFEST_MAX_BYTES:
            return None
        data = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("tool") != "benchaudit":
        return None
    if isinstance(data.get("output_of"), str):
        return data["output_of"]
    if isinstance(data.get("command"), str):
        return data["command"]
    cl = data.get("command_line") if isinstance(data.get("command_line"), list) else data.get("command")
    if isinstance(cl, list) and len(cl) > 1 and isinstance(cl[1], str):
        return cl[1]
    return None


def _inputs_resolved(inputs) -> list[Path]:
    out = []
    for spec in inputs or ():
        if not spec:
            continue
        s = str(spec)
        cands = [s]
        if any(ch in s for ch in "*?["):
            import glob

            cands = glob.glob(s, recursive=True)[:10_000]
        for c in cands:
            try:
                if os.path.lexists(c):
                    out.append(Path(os.path.realpath(c)))
            except (OSError, ValueError):
                continue
    return out


def check_output_target(target: str | os.PathLike, *, command: str | None = None, inputs=(),
                        recognise=None, what: str = "--out") -> Path:
    """Refuse every output location that is not safe to replace; return the real path to write.

    Refused (``OutputError``, nothing touched): ``/``, the home folder, the current folder or a folder
    containing it, any input file or folder or a folder containing an input (``inputs``: paths or globs),
    a symlink whose target is any of these, an existing non-folder (regular file, FIFO, device), a name
    longer than the file system allows, a path under a regular file, and a non-empty folder that is not a
    previous output of the same ``command`` (recognised by its ``manifest.json``, or by ``recognise``).
    """
    from ..errors import OutputError

    raw = Path(target).expanduser()
    shown = _show_path(target)
    try:
        real = Path(os.path.realpath(raw))
    except (OSError, ValueError) as e:
        raise OutputError(f"{what} {shown}: not a usable path ({e})") from None
    for part in real.parts:
        if len(os.fsencode(part)) > 255:
            raise OutputError(f"{what} {shown}: a path component is longer than 255 bytes (the file system limit)")
    link = f" (a symlink to {_show_path(real)})" if raw.is_symlink() else ""
    protected = {Path("/"): "the root folder", Path(os.path.realpath(Path.home())): "your home folder"}
    try:
        cwd = Path(os.path.realpath(os.getcwd()))
        protected.setdefault(cwd, "the current folder")
    except OSError:
        cwd = None
    for p, label in protected.items():
        if real == p:
            raise OutputError(f"{what} {shown}{link} is {label}; refusing to replace it (choose a new folder name)")
    if cwd is not None and real in cwd.parents:
        raise OutputError(f"{what} {shown}{link} contains the current folder; refusing to replace it")
    for inp in _inputs_resolved(inputs):
        if real == inp:
            raise OutputError(f"{what} {shown}{link} is an input ({_show_path(inp)}); refusing to overwrite it")
        if real in inp.parents:
            raise OutputError(f"{what} {shown}{link} contains the input {_show_path(inp)}; refusing to replace it")
    for anc in real.parents:
        if os.path.lexists(anc) and not anc.is_dir():
            raise OutputError(f"{what} {shown}: {_show_path(anc)} is a file, not a folder")
    if os.path.lexists(real):
        if not real.is_dir():
            raise OutputError(f"{what} {shown}{link} exists and is not a folder; refusing to replace it")
        try:
            entries = [e for e in os.listdir(real)]
        except OSError as e:
            raise OutputError(f"{what} {shown}: cannot read the existing folder ({e.strerror})") from None
        if entries:
            ok = recognise(real) if recognise is not None else (
                command is not None and manifest_command(real) == command)
            if not ok:
                which = f"`benchaudit {command}`" if command else "benchaudit"
                raise OutputError(f"{what} {shown}{link} is a non-empty folder that is not a previous output of "
                                  f"{which}; refusing to replace it (choose a new or empty folder)")
    return real


def cleanup_stale(target: Path) -> list[str]:
    """Remove temporary folders of killed runs beside ``target``; restore a retired old output when a
    kill left none at ``target``. Returns what was done (for tests and messages)."""
    import re

    done: list[str] = []
    parent = target.parent
    rx = re.compile(_TMP_RE.format(h=_name_hash(target.name)), re.S)
    try:
        names = os.listdir(parent)
    except OSError:
        return done
    for name in sorted(names):
        m = rx.match(name)
        if not m or _pid_alive(int(m.group("pid"))):
            continue
        p = parent / name
        if p.is_symlink() or not p.is_dir():
            continue
        if m.group("kind") == "old" and not os.path.lexists(target):
            os.rename(p, target)
            done.append(f"restored {target.name} from {name}")
        else:
            shutil.rmtree(p, ignore_errors=True)
            done.append(f"removed {name}")
    return done


def _renameat2(a: Path, b: Path, flag: int) -> int | None:
    """Linux ``renameat2(a, b, flag)``: 0 when done, else the errno; None where the system lacks the call
    (not Linux, no libc symbol, or a kernel / file system that refuses the flag)."""
    import ctypes
    import errno as _errno
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd = -100
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flag) == 0:
        return 0
    err = ctypes.get_errno()
    if err in (_errno.ENOSYS, _errno.EINVAL, getattr(_errno, "ENOTSUP", 95), _errno.EOPNOTSUPP):
        return None
    return err


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (renameat2 RENAME_EXCHANGE); False where unsupported."""
    err = _renameat2(a, b, 2)
    if err is None or err == 0:
        return err == 0
    raise OSError(err, os.strerror(err), str(b))


def _finalise(tmp: Path, command: str | None) -> None:
    """Before the swap: no links or special files, credentials scrubbed from text files (the manifests'
    hashes kept true), every manifest stamped with ``output_of``, and no secret in any byte of any file.

    A folder may hold reports with manifests of their own (an index of reports): each manifest is
    updated, deepest first, so that a parent's record of a child's manifest stays true."""
    from ..errors import OutputError
    from ..scrub import find_secret, find_secret_in_file, known_secrets, scrub

    secrets = bool(known_secrets())
    changed: set[str] = set()
    manifests: list[str] = []
    for p in sorted(tmp.rglob("*")):
        rel = p.relative_to(tmp).as_posix()
        if p.is_symlink() or not (p.is_dir() or p.is_file()):
            p.unlink()
            raise OutputError(f"internal: the output {rel} is not a regular file; nothing written")
        if p.is_dir():
            continue
        if p.name == MANIFEST:
            manifests.append(rel)
            continue
        if p.suffix in (".md", ".json", ".txt", ".yaml", ".yml", ".csv", ".tsv", ".jsonl"):
            text = p.read_text(encoding="utf-8", errors="surrogateescape")
            clean = scrub(text)
            if clean != text:
                p.write_text(clean, encoding="utf-8", errors="surrogateescape")
                changed.add(rel)
        if secrets:
            var = find_secret_in_file(p)
            if var:
                raise OutputError(f"refusing to write {rel}: it would contain the value of ${var} (an input "
                                  "carries the credential); nothing written")
    for rel in sorted(manifests, key=lambda r: (-r.count("/"), r)):
        m = tmp / rel
        base = rel[: -len(MANIFEST)]  # "" or "sub/"
        try:
            data = json.loads(m.read_text(encoding="utf-8"))
        except ValueError:
            data = None
        if isinstance(data, dict):
            if isinstance(data.get("outputs"), list):
                for rec in data["outputs"]:
                    if isinstance(rec, dict) and isinstance(rec.get("path"), str) and base + rec["path"] in changed:
                        f = tmp / (base + rec["path"])
                        rec["sha256"], rec["bytes"] = sha256_file(f), f.stat().st_size
            if command is not None:
                data["output_of"] = command
            m.write_text(dump_json(data), encoding="utf-8")
            changed.add(rel)
        if secrets and find_secret(m.read_bytes()):
            raise OutputError(f"refusing to write {rel}: it would contain a credential; nothing written")


@contextlib.contextmanager
def atomic_dir(target: str | os.PathLike, *, overwrite: bool = True, command: str | None = None,
               inputs=(), recognise=None, what: str = "--out") -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on success it replaces ``target`` atomically.

    ``target`` must pass :func:`check_output_target` (never the current folder, home, ``/``, an input,
    a file, or a non-empty folder other than a previous output of ``command``). On any exception
    (including a signal) the temporary folder and any parent folders this call created are removed and
    ``target`` is left exactly as it was. The swap is one ``renameat2(RENAME_EXCHANGE)`` where the
    system has it, so ``target`` always holds the complete old or the complete new output; elsewhere
    a kill between the two renames leaves the old output in a retired sibling that the next run restores.
    File-system failures (disk full, read-only, permission, name too long) raise one-line ``OutputError``.
    """
    from ..errors import OutputError

    real = check_output_target(target, command=command, inputs=inputs, recognise=recognise, what=what)
    shown = _show_path(target)
    if real.exists() and not overwrite:
        raise OutputError(f"{what} {shown} exists")
    created: list[Path] = []
    tmp: Path | None = None
    try:
        for anc in reversed([real.parent, *real.parent.parents]):
            if not os.path.lexists(anc):
                anc.mkdir()
                created.append(anc)
        cleanup_stale(real)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_name(real, "tmp") + "-", dir=real.parent))
    except OSError as e:
        _remove_created(created)
        raise OutputError(f"cannot create the output folder {shown}: {e.strerror or e}") from None
    try:
        yield tmp
        _finalise(tmp, command)
        pause_hook()
        _commit(tmp, real, lambda p: _replaceable(p, command, recognise),
                lambda: OutputError(f"{what} {shown} appeared or changed while benchaudit"
                                    f"{' ' + command if command else ''} ran and is not a previous output of it; "
                                    "it was left as it is and nothing was written (choose a new folder and "
                                    "rerun)"))
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        _remove_created(created)
        if isinstance(e, OSError):
            raise OutputError(f"cannot write the output folder {shown}: {e.strerror or e}"
                              + (f" ({_show_path(e.filename)})" if getattr(e, "filename", None) else "")
                              + "; nothing written") from None
        raise


PAUSE_ENV = "BENCHAUDIT_TEST_PAUSE_BEFORE_SWAP"  # test hook: "SECONDS" or "SECONDS:MARKER_FILE"


def pause_hook() -> None:
    """Test hook (tests/hostile/test_races.py): sleep just before an output is swapped into place (or an
    in-place output is checked again and opened), after touching MARKER_FILE, so a test can make a folder
    at ``--out`` at that moment. Unset in normal use."""
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    import time

    seconds, _, marker = spec.partition(":")
    if marker:
        Path(marker).touch()
    time.sleep(float(seconds))


def staging_dir(target: str | os.PathLike, *, command: str | None = None, inputs=()) -> Path | None:
    """A temporary folder beside ``target`` for output written before :func:`atomic_dir` opens (named like
    its temporary folders, so a killed run's leftover is removed by the next run's clean-up); None when
    ``target``'s parent does not exist yet or cannot be written. The caller moves the files into the
    :func:`atomic_dir` folder and removes this one."""
    real = check_output_target(target, command=command, inputs=inputs)
    if not real.parent.is_dir():
        return None
    try:
        return Path(tempfile.mkdtemp(prefix=_temp_name(real, "tmp") + "-", dir=real.parent))
    except OSError:
        return None


def _remove_created(created: list[Path]) -> None:
    for d in reversed(created):
        with contextlib.suppress(OSError):
            d.rmdir()


def _replaceable(p: Path, command: str | None, recognise) -> bool:
    """At the swap: ``p`` (what is at the target now) may be replaced: an empty folder or a previous
    output of ``command`` -- the rule :func:`check_output_target` applied at the start."""
    try:
        if p.is_symlink() or not p.is_dir():
            return False
        if not os.listdir(p):
            return True
    except OSError:
        return False
    return bool(recognise(p)) if recognise is not None else (command is not None and manifest_command(p) == command)


def _rename_noreplace(a: Path, b: Path) -> bool | None:
    """Rename ``a`` to ``b`` only if nothing is at ``b`` (renameat2 RENAME_NOREPLACE, atomic): True when
    done, False when something is there, None where the system lacks it."""
    import errno as _errno

    err = _renameat2(a, b, 1)
    if err is None or err == 0:
        return None if err is None else True
    if err == _errno.EEXIST:
        return False
    raise OSError(err, os.strerror(err), str(b))


def _commit(tmp: Path, real: Path, replaceable=None, refused=None) -> None:
    """Swap ``tmp`` into ``real`` with signals held off, then delete the old output.

    The check of what is at ``real`` holds at the moment of the swap: when nothing is there, the rename
    fails if something appeared meanwhile (RENAME_NOREPLACE); otherwise what was there is swapped out
    atomically into ``tmp``'s place and checked there with ``replaceable``; when it is not replaceable
    (a folder the user made at ``--out`` during the run) it is swapped straight back, untouched, and
    ``refused()`` is raised.

    Signals: during the swap SIGINT/SIGTERM only record themselves (a handler that records replaces the
    process's for those instants; blocking them in this thread would not do, as a process-directed signal is
    taken by any thread that does not block it and its Python handler then runs here all the same). One that
    came undoes the swap (the old output, or nothing, at ``real`` again) and is then passed to the handler it
    was meant for; :class:`Interrupted` is raised if that handler does not raise. A signal whose Interrupted
    was swallowed before the swap (:func:`~audit_hub.errors.signal_received`) stops it too."""
    from ..errors import Interrupted, signal_received

    if (sig := signal_received()) is not None:  # a signal whose Interrupted was lost on the way here
        raise Interrupted(sig)
    got: list[int] = []
    old_handlers = _record_signals(got)
    retired: Path | None = None
    swapped = False
    try:
        done = _rename_noreplace(tmp, real) if not os.path.lexists(real) else False
        if done is None:  # no RENAME_NOREPLACE: a plain rename fails on a non-empty folder or a file
            try:
                os.rename(tmp, real)
                done = True
            except OSError:
                if not os.path.lexists(real):
                    raise
                done = False
        if not done:
            if _exchange(tmp, real):
                if replaceable is not None and not replaceable(tmp):  # tmp holds what was at real
                    if not _exchange(tmp, real):
                        raise OSError("cannot swap back")  # pragma: no cover (it just worked)
                    raise refused() if refused is not None else FileExistsError(str(real))
                retired = tmp
            else:
                retired = real.parent / _temp_name(real, "old")
                os.rename(real, retired)
                if replaceable is not None and not replaceable(retired):
                    os.rename(retired, real)
                    raise refused() if refused is not None else FileExistsError(str(real))
                try:
                    os.rename(tmp, real)
                except OSError:
                    os.rename(retired, real)
                    retired = None
                    raise
        swapped = True
    finally:
        # entering this Python function first lets a signal the C level has already caught be recorded
        _restore_signals(old_handlers)
    if swapped and got:
        _undo_swap(tmp, real, retired)
        _redeliver(got[-1], old_handlers)
        raise Interrupted(got[-1])
    if retired is not None:
        shutil.rmtree(retired, ignore_errors=True)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Inside the block SIGINT/SIGTERM only record themselves (main thread; elsewhere nothing changes); one that
    came is passed on when the block ends: to the handler it was meant for (the CLI's raises Interrupted), else
    :class:`~audit_hub.errors.Interrupted` is raised. For a few instants that must not be cut in two (a folder
    made and handed to its owner)."""
    from ..errors import Interrupted

    got: list[int] = []
    old = _record_signals(got)
    try:
        yield
    finally:
        _restore_signals(old)
    if got:
        _redeliver(got[-1], old)
        raise Interrupted(got[-1])


def _record_signals(got: list[int]) -> dict | None:
    """Replace the SIGINT/SIGTERM handlers (main thread only; ignored signals stay ignored) by one that appends
    the signal to ``got``; the previous handlers, or None where none was replaced."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    old = {}
    try:
        for s in (signal.SIGINT, signal.SIGTERM):
            h = signal.getsignal(s)
            if h is not signal.SIG_IGN and h is not None:
                old[s] = signal.signal(s, lambda signum, frame: got.append(int(signum)))
    except (ValueError, OSError):  # pragma: no cover (main thread checked above)
        _restore_signals(old)
        return None
    return old


def _restore_signals(old: dict | None) -> None:
    import signal

    for s, h in (old or {}).items():
        signal.signal(s, h)


def _undo_swap(tmp: Path, real: Path, retired: Path | None) -> None:
    """Put back what was at ``real`` before the swap: nothing (the new output goes back to ``tmp``), the old
    output exchanged into ``tmp`` (exchanged back), or the old output in a retired sibling (it returns)."""
    if retired is None:
        os.rename(real, tmp)
    elif retired == tmp:
        if not _exchange(tmp, real):
            raise OSError("cannot swap back")  # pragma: no cover (it just worked)
    else:
        os.rename(real, tmp)
        os.rename(retired, real)


def _redeliver(signum: int, old: dict | None) -> None:
    """The recorded signal, passed to the handler it was meant for: a Python handler is called (the CLI's raises
    Interrupted, Python's default SIGINT handler KeyboardInterrupt); otherwise (SIG_DFL, a handler not set from
    Python) this returns and the caller raises Interrupted."""
    h = (old or {}).get(signum)
    if callable(h):
        h(signum, None)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write a file via a temporary sibling and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while True:
            b = fh.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def to_jsonable(obj: Any) -> Any:
    """Convert numpy / pandas scalars and containers to plain JSON types (NaN -> None)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, (np.floating, float)):
        v = float(obj)
        return None if math.isnan(v) or math.isinf(v) else v
    if obj is None or isinstance(obj, (str, int, bool)):
        return obj
    try:
        import pandas as pd
        if obj is pd.NA or obj is pd.NaT:
            return None
    except ImportError:  # pragma: no cover
        pass
    return str(obj)


def dump_json(obj: Any) -> str:
    """JSON text of ``obj`` (numpy -> plain types, NaN -> null) with every credential scrubbed."""
    from ..scrub import scrub_obj

    return json.dumps(scrub_obj(to_jsonable(obj)), indent=2, sort_keys=False, allow_nan=False) + "\n"


def card_configs(folder: str | os.PathLike) -> dict[str, str]:
    """``{config: split}`` of the ``configs`` a folder's dataset card declares (``README.md`` YAML header), in
    card order; the split is the config's first ``data_files`` split (``train`` when none is named)."""
    from huggingface_hub import DatasetCard

    card = DatasetCard.load(Path(folder) / "README.md")
    out: dict[str, str] = {}
    for c in card.data.to_dict().get("configs") or []:
        if not c.get("config_name"):
            continue
        files = c.get("data_files") or []
        first = files[0] if isinstance(files, list) and files else {}
        out[str(c["config_name"])] = str(first.get("split") or "train") if isinstance(first, dict) else "train"
    return out
