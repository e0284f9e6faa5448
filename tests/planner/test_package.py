"""The planner's structure (DEVELOPERS.md): one package (backend_planner) under a thin
plan_backend.py, no module over 1000 lines, and no import cycle between its modules, counting
imports inside functions too (a lazy import still makes a cycle)."""
from __future__ import annotations

import ast

from _planner_helpers import PLANNER, SCRIPTS

PACKAGE = SCRIPTS / "backend_planner"
MODULES = sorted(p.stem for p in PACKAGE.glob("*.py"))


def package_imports(name: str) -> set[str]:
    """Modules of backend_planner that module `name` imports anywhere in its body."""
    tree = ast.parse((PACKAGE / f"{name}.py").read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:                             # from .x import y / from . import x
                found.update([node.module.split(".")[0]] if node.module else [a.name for a in node.names])
            elif node.level == 0 and (node.module or "").startswith("backend_planner"):
                parts = node.module.split(".")
                found.update(parts[1:2] or [a.name for a in node.names])
            else:
                assert node.level == 0, (name, ast.dump(node))   # nothing reaches above the package
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("backend_planner."):
                    found.add(a.name.split(".")[1])
    return found & set(MODULES)


def test_the_package_has_the_expected_modules():
    assert set(MODULES) == {"__init__", "common", "shapes", "memory", "strategies", "emit", "report", "cli"}


def test_no_module_over_1000_lines():
    sizes = {m: len((PACKAGE / f"{m}.py").read_text(encoding="utf-8").splitlines()) for m in MODULES}
    assert max(sizes.values()) <= 1000, sizes
    assert max(sizes.values()) <= 400, sizes        # the split's goal: far below the limit


def test_no_import_cycle():
    graph = {m: package_imports(m) for m in MODULES}
    assert graph["cli"] >= {"strategies", "emit", "report"}, graph       # the scan sees real imports
    state: dict[str, int] = {}

    def visit(m, path):
        if state.get(m) == 1:
            raise AssertionError("import cycle: " + " -> ".join(path + [m]))
        if state.get(m) == 2:
            return
        state[m] = 1
        for dep in sorted(graph[m]):
            visit(dep, path + [m])
        state[m] = 2

    for m in MODULES:
        visit(m, [])


def test_cycle_detector_catches_a_function_level_import(tmp_path, monkeypatch):
    """The scan counts an import inside a function: a fake package with one proves it."""
    fake = tmp_path / "backend_planner"
    fake.mkdir()
    (fake / "a.py").write_text("from .b import x\n")
    (fake / "b.py").write_text("def f():\n    from .a import y\n    return y\n")
    monkeypatch.setattr(f"{__name__}.PACKAGE", fake)
    monkeypatch.setattr(f"{__name__}.MODULES", ["a", "b"])
    assert package_imports("a") == {"b"} and package_imports("b") == {"a"}


def test_entry_script_is_thin():
    """plan_backend.py only sets up the path and signals and calls backend_planner.cli.main."""
    text = PLANNER.read_text(encoding="utf-8")
    tree = ast.parse(text)
    froms = [n for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [(n.module, [a.name for a in n.names]) for n in froms] == [("backend_planner.cli", ["main"])]
    assert not [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]
    assert len(text.splitlines()) <= 40
