"""`benchaudit metrics install` pins the modules of the installed version and obeys the output rules."""

from __future__ import annotations

import json

from audit_hub import __version__


def test_install_records_version_and_sha256_and_list_shows_them(ws):
    res = ws.cli("metrics", "install", "visual_dependency", "--cache-dir", "cache")
    assert res.rc == 0, res
    assert f"benchaudit {__version__}, sha256 " in res.out
    metas = list((ws.root / "cache").rglob("visual_dependency.json"))
    assert len(metas) == 1
    meta = json.loads(metas[0].read_text())
    assert meta["benchaudit_version"] == __version__ and meta["sha256"] == metas[0].parent.name
    res = ws.cli("metrics", "list", "--cache-dir", "cache")
    line = next(ln for ln in res.out.splitlines() if ln.startswith("benchaudit/visual_dependency"))
    assert "installed" in line and __version__ in line and meta["sha256"][:16] in line


def test_install_twice_replaces_its_own_module_folder(ws):
    assert ws.cli("metrics", "install", "visual_dependency", "--cache-dir", "cache").rc == 0
    res = ws.cli("metrics", "install", "visual_dependency", "--cache-dir", "cache")
    assert res.rc == 0, res


def test_install_refuses_a_foreign_folder_at_the_module_path(ws):
    assert ws.cli("metrics", "install", "visual_dependency", "--cache-dir", "cache").rc == 0
    folder = next((ws.root / "cache").rglob("visual_dependency.json")).parent
    for f in folder.iterdir():
        f.unlink()
    (folder / "mine.txt").write_text("not a module")
    before = ws.snap()
    res = ws.cli("metrics", "install", "visual_dependency", "--cache-dir", "cache")
    ws.check_refused(res, before, out=None)


def test_install_into_a_cache_under_a_regular_file_is_one_line(ws):
    (ws.root / "afile").write_text("x")
    before = ws.snap()
    res = ws.cli("metrics", "install", "visual_dependency", "--cache-dir", "afile/cache")
    ws.check_refused(res, before, out=None)
