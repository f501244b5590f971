"""The package's structure: the layer order (each layer imports only its own layer or lower ones; imports
inside functions count), no import circles, no imports of another module's private names, and no detector
named outside ``detectors/`` (the registry owns them)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "audit_hub"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _resolve(mod: str, is_pkg: bool, level: int, target: str | None) -> str:
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def import_edges() -> dict[str, set[str]]:
    """module -> the audit_hub modules it imports anywhere in its body (functions included)."""
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, path in MODULES.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(mod, is_pkg, node.level, node.module) if node.level else (node.module or "")
                if base == "audit_hub" and all(a.name == "__version__" for a in node.names):
                    continue  # the version constant of the package root, readable from every layer
                # ``from pkg import sub`` imports the submodule pkg.sub; ``from pkg import name`` imports pkg
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in MODULES]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            for t in targets:
                if t in MODULES and t != mod:
                    edges[mod].add(t)
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import circle as a list of modules, or None (iterative depth-first search)."""
    state: dict[str, int] = {}
    for root in sorted(edges):
        if state.get(root):
            continue
        stack = [(root, iter(sorted(edges[root])))]
        path = [root]
        state[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
                path.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(sorted(edges[nxt]))))
                path.append(nxt)
    return None


def test_the_cycle_finder_finds_a_planted_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_edges_count_imports_inside_functions():
    edges = import_edges()
    # frame imports the answer code space only inside AuditFrame.answer_code_vector
    assert "audit_hub.answers.codes" in edges["audit_hub.frame.core"]
    assert "audit_hub.detectors" in edges["audit_hub.engine.run"]


def test_no_import_circles():
    cycle = find_cycle(import_edges())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_every_import_of_the_package_names_an_existing_module():
    """A stale import of a moved module must fail here (an editable install elsewhere could satisfy it)."""
    missing = []
    for mod, path in MODULES.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                missing += [f"{mod}: import {a.name}" for a in node.names
                            if a.name.startswith("audit_hub") and a.name not in MODULES]
            elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("audit_hub")):
                base = _resolve(mod, is_pkg, node.level, node.module) if node.level else node.module
                if base not in MODULES:
                    missing.append(f"{mod}: from {'.' * node.level}{node.module or ''} import ...")
    assert not missing, missing


def test_no_imports_of_private_names_across_modules():
    bad = []
    for mod, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("audit_hub")):
                bad += [f"{mod}: from {'.' * node.level}{node.module or ''} import {a.name}" for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")]
    assert not bad, bad


def test_no_detector_is_named_outside_detectors():
    from audit_hub import detectors

    pattern = re.compile(r"\b(" + "|".join(detectors.names()) + r")\b")
    hits = []
    for mod, path in MODULES.items():
        if mod.startswith("audit_hub.detectors") or mod.startswith("audit_hub.metric_modules"):
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{path.relative_to(PKG.parent)}:{i}: {line.strip()}")
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("name", ["LETTERS", "ANSWER_TYPES", "ARMS", "MISSING"])
def test_schema_constants_are_defined_once(name):
    where = [mod for mod, path in MODULES.items()
             if re.search(rf"^_?{name}\s*(:[^=]*)?=", path.read_text(encoding="utf-8"), re.M)]
    assert where == ["audit_hub.schema"], where


# ------------------------------------------------------------------------------------------- layers
# Bottom to top. A module belongs to the layer of its subpackage; the top-level modules other than the
# face are the shared vocabulary (errors, schema, columns, severity, fmt, escape, scrub, bounds, clock).
LAYERS = ["vocabulary", "hub", "stats", "answers", "frame", "readers", "detectors", "blind", "tst", "engine",
          "report", "curate", "metrics", "api", "commands", "face"]
RANK = {name: i for i, name in enumerate(LAYERS)}


def layer_of(mod: str) -> str:
    parts = mod.split(".")
    if mod == "audit_hub" or parts[-1] == "__main__" or parts[1:] == ["cli"]:
        return "face"  # the package root (lazy library entry points), `benchaudit`, `python -m ...`
    if len(parts) == 2 and parts[1] not in RANK:
        return "vocabulary"
    return parts[1]


def test_every_module_has_a_known_layer():
    unknown = sorted(m for m in MODULES if layer_of(m) not in RANK)
    assert not unknown, f"modules outside the layer table (add their package to LAYERS): {unknown}"


def test_the_top_level_is_the_vocabulary_and_the_face():
    top = sorted(m.split(".")[1] for m in MODULES if m.count(".") == 1 and (PKG / f"{m.split('.')[1]}.py").exists())
    assert top == ["__main__", "api", "bounds", "cli", "clock", "columns", "errors", "escape", "fmt", "schema",
                   "scrub", "severity"], top


def test_each_layer_imports_only_its_own_layer_or_lower_ones():
    bad = [f"{m} ({layer_of(m)}) imports {t} ({layer_of(t)})"
           for m, targets in import_edges().items() for t in sorted(targets)
           if RANK[layer_of(t)] > RANK[layer_of(m)]]
    assert not bad, "\n".join(bad)


def test_the_layer_check_catches_an_upward_import():
    assert RANK[layer_of("audit_hub.readers.ingest")] < RANK[layer_of("audit_hub.detectors")]
    assert layer_of("audit_hub.blind.__main__") == "face" and layer_of("audit_hub.schema") == "vocabulary"
    assert layer_of("audit_hub.hub.folders") == "hub" and RANK["hub"] < RANK["readers"] < RANK["engine"]


def test_architecture_doc_names_existing_modules():
    """docs/architecture.md names modules by path; each must exist (a move must update the doc)."""
    doc = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:audit_hub/)?[a-z_]+(?:/[a-z_]+)*\.py)`", doc))
    assert len(named) >= 40
    repo = PKG.parent

    def exists(n: str) -> bool:  # a package module, a repository path (tests/...), or a metric module's file
        return ((PKG / n.removeprefix("audit_hub/")).exists() or (repo / n).exists()
                or any((d / n).exists() for d in (repo / "metrics").iterdir() if d.is_dir()))

    missing = sorted(n for n in named if not exists(n))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
    folders = set(re.findall(r"\| `([a-z_]+)/` \|", doc))
    assert folders and not sorted(f for f in folders if not (PKG / f).is_dir()), folders
    # every subpackage is in the doc's layer table
    assert {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()} - {"data"} <= folders
