"""Reproduction coverage: every id named in a `reproduces` mark exists, and together they cover
at least COVERAGE of the catalog.

The ids are collected statically (ast) from every test file under tests/failure_triage, both
decorators (@pytest.mark.reproduces("id", ...)) and marks in pytest.param(..., marks=...), so a
reproduction counts only when a test that runs the library carries it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CATALOG = HERE.parents[1] / "sub-skills" / "failure-triage" / "catalog"
COVERAGE = 1 / 3


def reproduced_ids() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(HERE.rglob("test_*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "reproduces":
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        found.setdefault(arg.value, set()).add(path.name)
                    elif isinstance(arg, ast.Name):
                        # pytest.param(..., marks=pytest.mark.reproduces(sig)) inside a comprehension over a
                        # module-level dict of string ids: resolve the dict's values
                        for value in _dict_values_bound_to(tree, arg.id):
                            found.setdefault(value, set()).add(path.name)
    return found


def _dict_values_bound_to(tree: ast.Module, name: str) -> list[str]:
    """String values of module-level dicts iterated as `for _, <name> in D.items()`."""
    out = []
    dicts = {t.id: n.value for n in tree.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Dict)
             for t in n.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.comprehension) and isinstance(node.iter, ast.Call) \
                and isinstance(node.iter.func, ast.Attribute) and node.iter.func.attr == "items" \
                and isinstance(node.iter.func.value, ast.Name) and node.iter.func.value.id in dicts \
                and isinstance(node.target, ast.Tuple) and len(node.target.elts) == 2 \
                and isinstance(node.target.elts[1], ast.Name) and node.target.elts[1].id == name:
            d = dicts[node.iter.func.value.id]
            out += [v.value for v in d.values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return out


def catalog_ids() -> set[str]:
    ids = set()
    for path in CATALOG.glob("*.yaml"):
        ids |= {e["id"] for e in yaml.safe_load(path.read_text(encoding="utf-8")) or []}
    return ids


def test_every_reproduced_id_is_in_the_catalog():
    ids = catalog_ids()  # once: in the comprehension's condition it re-read the catalog per id (~70 s)
    missing = {i: sorted(f) for i, f in reproduced_ids().items() if i not in ids}
    assert not missing, f"reproduces() names ids the catalog lacks: {missing}"


def test_reproductions_cover_the_required_share_of_the_catalog():
    ids = catalog_ids()
    covered = set(reproduced_ids()) & ids
    assert len(covered) >= COVERAGE * len(ids), f"{len(covered)} of {len(ids)} entries reproduced"


def test_the_collector_sees_both_mark_styles():
    found = reproduced_ids()
    assert "accelerate-launch-child-failed" in found          # decorator
    assert "accelerate-load-state-missing-dir" in found        # pytest.param marks over EXPECTED
    assert "deepspeed-amp-section-removed" in found
