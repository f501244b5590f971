"""`benchaudit push` uploads only the regular files inside DIR that manifest.json lists, each matching its
sha256; anything else stops the push with one line before any network call."""

from __future__ import annotations

import json
import os
import shutil

import pytest


def _manifest(d):
    return json.loads((d / "manifest.json").read_text())


def _save(d, m):
    (d / "manifest.json").write_text(json.dumps(m))


def _first_data(d):
    return next(p for p in sorted((d / "data").iterdir()))


def _token_link(d, home):
    tok = home / ".cache" / "huggingface" / "token"
    tok.parent.mkdir(parents=True, exist_ok=True)
    tok.write_text("hf_CanaryToken0123456789abcdefXYZ")
    (d / "figures").mkdir(exist_ok=True)
    os.symlink(tok, d / "figures" / "leak.png")


def _listed_symlink(d, home):
    """The symlink is listed in the manifest with the right hash of its target: still refused."""
    _token_link(d, home)
    from audit_hub.hub.folders import sha256_file

    m = _manifest(d)
    m["outputs"].append({"path": "figures/leak.png", "bytes": 1, "sha256": sha256_file(d / "figures" / "leak.png")})
    _save(d, m)


def _replace_with_symlink(d, home):
    f = _first_data(d)
    target = home / "elsewhere.parquet"
    shutil.copy(f, target)
    f.unlink()
    os.symlink(target, f)


SETUPS = {
    "symlink_to_token": (_token_link, "symlink"),
    "listed_symlink_to_token": (_listed_symlink, "symlink"),
    "listed_file_replaced_by_symlink": (_replace_with_symlink, "symlink"),
    "symlinked_folder": (lambda d, h: os.symlink(h, d / "extra_dir"), "symlink"),
    "fifo": (lambda d, h: os.mkfifo(d / "data" / "pipe"), "not a regular file"),
    "unlisted_file": (lambda d, h: (d / "notes.txt").write_text("private"), "not listed"),
    "unlisted_hidden_file": (lambda d, h: (d / ".env").write_text("SECRET=1"), "not listed"),
    "modified_listed_file": (lambda d, h: _first_data(d).write_bytes(b"tampered"), "sha256"),
    "missing_listed_file": (lambda d, h: _first_data(d).unlink(), "missing|no such file"),
    "manifest_without_outputs": (lambda d, h: _save(d, {**_manifest(d), "outputs": []}), "lists no output"),
    "manifest_path_traversal": (lambda d, h: _save(d, {**_manifest(d), "outputs": [
        *_manifest(d)["outputs"], {"path": "../secret", "sha256": "0" * 64}]}), "invalid output entry"),
    "manifest_not_json": (lambda d, h: (d / "manifest.json").write_text("{"), "manifest"),
    "manifest_symlink": (lambda d, h: ((h / "m.json").write_text((d / "manifest.json").read_text()),
                                       (d / "manifest.json").unlink(),
                                       os.symlink(h / "m.json", d / "manifest.json")), "manifest"),
    "readme_missing": (lambda d, h: (d / "README.md").unlink(), "missing"),
}


@pytest.mark.parametrize("label", sorted(SETUPS))
def test_push_refuses(ws, previous_report, label):
    setup, fragment = SETUPS[label]
    d = ws.root / "report"
    shutil.copytree(previous_report, d)
    home = ws.root.parent / "home"
    setup(d, home)
    before = ws.snap()
    res = ws.cli("push", "report", "--repo-id", "org/name")
    ws.check_refused(res, before, out=None)
    assert any(f in res.error_lines[0] for f in fragment.split("|")), res


@pytest.mark.parametrize("repo_id", ["../etc", "org/na me", "org/name/extra", "org--x/y", ""])
def test_push_refuses_bad_repo_ids(ws, previous_report, repo_id):
    shutil.copytree(previous_report, ws.root / "report")
    before = ws.snap()
    res = ws.cli("push", "report", "--repo-id", repo_id)
    ws.check_refused(res, before, out=None)


def test_report_files_accepts_an_untouched_report(previous_report):
    from audit_hub.hub.publish import report_files

    files = report_files(previous_report)
    assert "manifest.json" in files and "README.md" in files and all(p.is_file() for p in files.values())
