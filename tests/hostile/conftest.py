"""Shared machinery of the hostile-input corpus.

Every case runs the real CLI entry point (``audit_hub.cli.main`` in-process, or ``python -m audit_hub.cli``
in a subprocess where a signal, a file-size limit or file permissions are involved) inside a fresh
workspace, with canary credentials in the environment, and checks the promises of docs/safety.md:
the exit code, exactly one ``error:`` line and no traceback, no output folder, nothing touched outside
``--out``, and no canary secret in any byte of stdout, stderr or any file in the workspace.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CANARIES = {
    "HF_TOKEN": "hf_CanaryToken0123456789abcdefXYZ",
    "OPENAI_API_KEY": "sk-canaryOpenAIkey0123456789abcdef",
    "MY_SERVICE_TOKEN": "canary-service-token-7781",
    "JUDGE_API_KEY": "canary-judge-key-99812",
}
CANARY_PASSWORD = "CanaryPassw0rd!x"
CANARY_ENV = {**CANARIES, "HF_ENDPOINT": f"https://alice:{CANARY_PASSWORD}@127.0.0.1:9",
              "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1"}
SECRETS = [*CANARIES.values(), CANARY_PASSWORD]

N_Q = 12
MODELS = ("alpha", "beta", "gamma")


def write_benchmark(folder: Path, *, models=MODELS, n=N_Q, qname: str = "questions.csv",
                    rname: str = "runs.csv") -> tuple[Path, Path]:
    """A small generic-layout benchmark: questions.csv + runs.csv (full and blind arms)."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    q = ["question_id,question,options,answer,category"]
    for i in range(n):
        q.append(f'q{i},What is item {i}?,"[""red"", ""green"", ""blue"", ""black""]",{"ABCD"[i % 4]},'
                 f'{"cat" + str(i % 2)}')
    (folder / qname).write_text("\n".join(q) + "\n", encoding="utf-8")
    r = ["question_id,model,arm,prediction,hit"]
    for m in models:
        for arm in ("full", "blind"):
            for i in range(n):
                hit = int(rng.random() < (0.7 if arm == "full" else 0.4))
                pred = "ABCD"[i % 4] if hit else "ABCD"[(i + 1) % 4]
                mm = m.replace('"', '""')
                r.append(f'q{i},"{mm}",{arm},{pred},{hit}')
    (folder / rname).write_text("\n".join(r) + "\n", encoding="utf-8")
    return folder / qname, folder / rname


def snapshot(root: Path, exclude: Path | None = None) -> dict[str, tuple]:
    """Every entry under ``root`` (not following symlinks) with its type, size and content hash."""
    out: dict[str, tuple] = {}
    ex = os.path.abspath(exclude) if exclude is not None else None
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        if ex is not None and os.path.abspath(dirpath) == ex:
            dirnames[:] = []
            continue
        dirnames[:] = [d for d in dirnames if ex is None or os.path.abspath(os.path.join(dirpath, d)) != ex]
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if ex is not None and os.path.abspath(p) == ex:
                continue
            st = os.lstat(p)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            elif os.path.isfile(p):
                with open(p, "rb") as fh:
                    out[rel] = ("file", st.st_size, hashlib.sha256(fh.read()).hexdigest())
            else:
                out[rel] = ("special", st.st_mode)
    return out


def all_bytes(root: Path) -> bytes:
    chunks = []
    for dirpath, _, filenames in os.walk(root, followlinks=False):
        for f in filenames:
            p = os.path.join(dirpath, f)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as fh:
                    chunks.append(fh.read())
    return b"\n".join(chunks)


def assert_no_secret(*texts: str | bytes) -> None:
    for t in texts:
        b = t if isinstance(t, bytes) else t.encode("utf-8", "surrogateescape")
        for s in SECRETS:
            assert s.encode() not in b, f"secret {s[:8]}... leaked"


class Result:
    def __init__(self, rc: int, out: str, err: str):
        self.rc, self.out, self.err = rc, out, err

    @property
    def error_lines(self) -> list[str]:
        return [ln for ln in self.err.splitlines() if ln.startswith(("error:", "internal error"))]

    def __repr__(self) -> str:
        return f"Result(rc={self.rc}, out={self.out[-500:]!r}, err={self.err[-1500:]!r})"


class Workspace:
    """A temporary folder that is the current directory, with a benchmark under ``inputs/``."""

    def __init__(self, root: Path, capsys, monkeypatch):
        self.root = root
        self.capsys = capsys
        self.monkeypatch = monkeypatch
        self.questions, self.runs = write_benchmark(root / "inputs")

    def cli(self, *args: str) -> Result:
        from audit_hub.cli import main

        self.capsys.readouterr()
        rc = main([str(a) for a in args])
        cap = self.capsys.readouterr()
        return Result(rc, cap.out, cap.err)

    def sub(self, *args: str, timeout: float = 300, preexec=None, env: dict | None = None, **kw) -> Result:
        e = dict(os.environ)
        e.update(env or {})
        e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
        p = subprocess.run([sys.executable, "-m", "audit_hub.cli", *map(str, args)], cwd=self.root,
                           capture_output=True, text=True, timeout=timeout, env=e, preexec_fn=preexec, **kw)
        return Result(p.returncode, p.stdout, p.stderr)

    def audit_args(self, out: str | Path = "report", *extra: str) -> list[str]:
        return ["audit", "--questions", str(self.questions), "--runs", str(self.runs), "--out", str(out),
                "--calibration-sims", "0", "--n-permutations", "19", "--no-figures", *extra]

    def snap(self, out: str | Path | None = None) -> dict:
        return snapshot(self.root, exclude=(self.root / out) if out is not None else None)

    def check_refused(self, res: Result, before: dict, out: str | Path | None = "report", *, code: int = 2,
                      out_existed: bool = False, usage: bool = False) -> None:
        """The promises for a refused command."""
        assert res.rc == code, res
        assert "Traceback" not in res.err and "Traceback" not in res.out, res
        assert len(res.error_lines) == 1, res
        if not usage:
            assert all(ln.startswith(("error:", "internal error", "interrupted")) or not ln.strip()
                       for ln in res.err.splitlines()), res
        assert_no_secret(res.out, res.err, all_bytes(self.root))
        after = self.snap(None)
        if out is not None and not out_existed:
            p = self.root / out
            assert not os.path.lexists(p) or before.get(os.path.relpath(p, self.root)) == after.get(
                os.path.relpath(p, self.root)), "output folder appeared"
        assert after == before, _diff(before, after)
        leftovers = [n for n in after if ".ba-tmp-" in n or ".ba-old-" in n]
        assert not leftovers, leftovers


def _diff(a: dict, b: dict) -> str:
    keys = sorted(set(a) | set(b))
    return "; ".join(f"{k}: {a.get(k)} -> {b.get(k)}" for k in keys if a.get(k) != b.get(k))[:2000]


@pytest.fixture
def ws(tmp_path, capsys, monkeypatch) -> Workspace:
    for k, v in CANARY_ENV.items():
        monkeypatch.setenv(k, v)
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    return Workspace(root, capsys, monkeypatch)


@pytest.fixture(scope="session")
def previous_report(tmp_path_factory) -> Path:
    """One real `benchaudit audit` output, made once and copied by the cases that need one."""
    root = tmp_path_factory.mktemp("prev")
    q, r = write_benchmark(root / "inputs")
    out = root / "report"
    from audit_hub.cli import main

    rc = main(["audit", "--questions", str(q), "--runs", str(r), "--out", str(out), "--calibration-sims", "0",
               "--n-permutations", "19", "--no-figures"])
    assert rc == 0
    assert json.loads((out / "manifest.json").read_text())["output_of"] == "audit"
    return out


def command_args(ws, command: str, out: str) -> list[str]:
    """The arguments of a small, fast run of ``command`` (audit, tst, prune, curate) writing ``out``."""
    if command == "audit":
        return ws.audit_args(out)
    if command == "tst":
        return ["tst", "--questions", str(ws.questions), "--out", out, "--k", "2", "--repeats", "1",
                "--n-estimators", "5"]
    if command == "prune":
        return ["prune", "--questions", str(ws.questions), "--out", out, "--budget", "2", "--k", "2",
                "--repeats", "1", "--n-estimators", "5", "--random-seeds", "2"]
    if command == "curate":
        return ["curate", "-q", str(ws.root / "pool" / "questions.parquet"), "-r", str(ws.root / "pool" / "runs.parquet"),
                "--target-size", "60", "--n-boot", "50", "--score-budget", "0", "--junk", "0", "--out", out]
    raise AssertionError(command)
