"""Parse Fails/Passes examples out of the DeepSpeed / cross-file rule docstrings.

Convention (see backend_validator/rules/_ds.py): ``Fails:`` then fenced blocks,
``Passes:`` then fenced blocks (```json for DeepSpeed rules; ```yaml then ```json for cross
rules); optional ``Oracle: consumer=X world_size=N`` and ``Effect: <expr>`` lines.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))

_FENCE = re.compile(r"```(json|yaml)\n(.*?)```", re.S)


def _dedent(block: str) -> str:
    import textwrap
    return textwrap.dedent(block)


def parse(doc: str) -> dict:
    doc = _dedent(doc)
    out = {"consumer": None, "world_size": None, "effect": None}
    m = re.search(r"^\s*Oracle:(.*)$", doc, re.M)
    if m:
        for kv in m.group(1).split():
            k, _, v = kv.partition("=")
            out[k] = int(v) if k == "world_size" else v  # also deepspeed-world=yaml (cross rules)
    m = re.search(r"^\s*Effect:\s*(.+)$", doc, re.M)
    if m:
        out["effect"] = m.group(1).strip()
    i, j = doc.find("Fails:"), doc.find("Passes:")
    if i < 0 or j < 0:
        raise ValueError("docstring lacks Fails:/Passes:")
    for name, part in (("fails", doc[i:j]), ("passes", doc[j:])):
        blocks = {lang: _dedent(body) for lang, body in _FENCE.findall(part)}
        out[name] = blocks
    return out


def load_rules():
    from backend_validator import core, rules
    rules.load_all()  # rule modules load by family; the deepspeed family also lives in consumer_rules
    return {rid: r for rid, r in core.REGISTRY.items() if r.family in ("deepspeed", "cross")}
