"""Structure of the helpers (DEVELOPERS.md "Structure"; issue 22): no import cycle in any helper package,
no helper module over 1000 lines.

The import graph is read with ``ast`` from every module under ``sub-skills/*/scripts/`` and ``scripts/``
(each such folder is a sys.path root, as the helpers run from there). Every import counts wherever it is
written, inside a function or a try block too, relative or absolute: an import deferred into a function
still ties the two modules together, it only hides the circle until the function runs.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Optional, Set

REPO = Path(__file__).resolve().parents[2]
MAX_LINES = 1000


def _roots() -> List[Path]:
    return sorted(p for p in REPO.glob("sub-skills/*/scripts") if p.is_dir()) + [REPO / "scripts"]


def _modules(root: Path) -> Dict[str, Path]:
    """Dotted module name (as imported from ``root``) -> file, for every .py module below root."""
    out: Dict[str, Path] = {}
    for f in sorted(root.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        parts = list(f.relative_to(root).with_suffix("").parts)
        # a module inside a folder counts only when every folder on the way is a package
        if any(not (root.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            out[".".join(parts)] = f
    return out


def _target(name: str, mods: Dict[str, Path]) -> Optional[str]:
    """The module an import of ``name`` runs (the longest known prefix), or None (stdlib, third party)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        cand = ".".join(parts[:i])
        if cand in mods:
            return cand
    return None


def import_graph(root: Path) -> Dict[str, Set[str]]:
    mods = _modules(root)
    graph: Dict[str, Set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        package = mod.split(".") if is_pkg else mod.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: List[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[:len(package) - (node.level - 1)] if node.level > 1 else package
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                # "from pkg import name": the submodule pkg.name when there is one, else pkg itself
                for a in node.names:
                    sub = f"{prefix}.{a.name}" if prefix else a.name
                    names.append(sub if sub in mods else prefix)
            for n in names:
                t = _target(n, mods) if n else None
                if t is not None and t != mod:
                    graph[mod].add(t)
    return graph


def cycles(graph: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components with more than one module (Tarjan), each as one circle's members."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on: Set[str] = set()
    out: List[List[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _circle(graph: Dict[str, Set[str]], comp: List[str]) -> str:
    """One concrete circle through the component, for the failure message: a -> b -> ... -> a."""
    members = set(comp)
    start = comp[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in graph[path[-1]] if w in members)
        back = [w for w in nxt if w == start]
        if back and len(path) > 1:
            return " -> ".join(path + [start])
        fresh = [w for w in nxt if w not in seen]
        if not fresh:
            return " -> ".join(path + [nxt[0] if nxt else "?"])
        path.append(fresh[0])
        seen.add(fresh[0])


def test_the_graph_reader_sees_imports_inside_functions_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import c\n")
    (pkg / "sub" / "c.py").write_text("def g():\n    try:\n        import pkg.a\n    except ImportError:\n        pass\n")
    (pkg / "d.py").write_text("from .sub.c import g\nimport json\n")
    g = import_graph(tmp_path)
    assert g["pkg.a"] == {"pkg.b"} and g["pkg.b"] == {"pkg.sub.c"} and g["pkg.sub.c"] == {"pkg.a"}
    assert g["pkg.d"] == {"pkg.sub.c"}
    found = cycles(g)
    assert found == [["pkg.a", "pkg.b", "pkg.sub.c"]]
    assert _circle(g, found[0]) == "pkg.a -> pkg.b -> pkg.sub.c -> pkg.a"


def test_no_import_cycle_in_any_helper():
    problems = []
    checked = 0
    for root in _roots():
        g = import_graph(root)
        checked += len(g)
        for comp in cycles(g):
            problems.append(f"{root.relative_to(REPO)}: {_circle(g, comp)} (members: {', '.join(comp)})")
    assert checked > 40  # the validator package alone has more modules than this
    assert not problems, "import cycles:\n" + "\n".join(problems)


def test_no_helper_module_over_1000_lines():
    files = [f for d in ("sub-skills", "scripts") for f in (REPO / d).rglob("*.py") if "__pycache__" not in f.parts]
    assert len(files) > 40
    long = sorted((n, str(f.relative_to(REPO))) for f in files
                  if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES)
    assert not long, "modules over 1000 lines: " + ", ".join(f"{p} ({n})" for n, p in long)


def test_the_validator_engine_sits_below_its_front_ends():
    """engine.py (parse, run the rule families, FileResult) reaches no front end, even through another
    module; launch/, formats.py and docs.py never import the command line."""
    root = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
    g = import_graph(root)
    fronts = {"backend_validator.cli", "backend_validator.launch.cli_launch", "backend_validator.formats",
              "backend_validator.docs", "validate_backend_config", "backend_validator.__main__"}
    reach, todo = set(), ["backend_validator.engine"]
    while todo:
        for w in g[todo.pop()]:
            if w not in reach:
                reach.add(w)
                todo.append(w)
    assert not reach & fronts, sorted(reach & fronts)
    users_of_cli = sorted(m for m, deps in g.items() if "backend_validator.cli" in deps)
    assert users_of_cli == ["backend_validator.__main__", "validate_backend_config"], users_of_cli
