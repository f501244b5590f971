"""Packaging metadata that installs without setuptools warnings (issue 27).

The package list in pyproject.toml is explicit (``packages.find`` cannot apply the two package-dir
mappings of metrics/ and cards/), so this test keeps it complete: every folder that ships is listed,
else setuptools prints "Package would be ignored" for it (and for a new layer package, leaves it out of
the wheel). The wheel itself was built and installed with ``pip install --quiet`` (no output) in a
scratch venv; building here would need the network-isolated build backend, so the test checks the
metadata that caused each warning."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _shipped_folders() -> set[str]:
    """Package names of every folder that ships: audit_hub's subfolders with Python or data files, the
    evaluate module folders under metrics/ and the templates folder cards/."""
    out = {"audit_hub", "audit_hub.metric_modules", "audit_hub.templates"}
    for d in (ROOT / "audit_hub").rglob("*"):
        if d.is_dir() and d.name != "__pycache__" and any(f.is_file() for f in d.iterdir()):
            out.add(".".join(d.relative_to(ROOT).parts))
    for d in (ROOT / "metrics").iterdir():
        if d.is_dir() and d.name != "__pycache__" and any(f.suffix == ".py" for f in d.iterdir()):
            out.add(f"audit_hub.metric_modules.{d.name}")
    return out


def test_every_shipped_folder_is_a_listed_package():
    st = _pyproject()["tool"]["setuptools"]
    listed = set(st["packages"])
    missing = sorted(_shipped_folders() - listed)
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {missing}"
    stale = sorted(p for p in listed - _shipped_folders())
    assert not stale, f"listed but not on disk: {stale}"
    assert st["package-dir"] == {"audit_hub.metric_modules": "metrics", "audit_hub.templates": "cards"}


def test_license_is_an_spdx_string():
    proj = _pyproject()
    assert proj["project"]["license"] == "Apache-2.0"  # a table is deprecated (setuptools >= 77 warns)
    req = " ".join(proj["build-system"]["requires"])
    assert "setuptools>=77" in req  # the first setuptools that reads an SPDX license string
