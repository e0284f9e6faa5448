"""Rule modules. A module here registers its rules in core.REGISTRY when it is imported.

Modules are imported by rule family, when core.run_rules first runs that family
(:func:`load_family`), or all at once by :func:`load_all` (--list-rules, SARIF, the generated
reference, tests). So a plain file check never compiles the launch rules and a torchrun command
never compiles the DeepSpeed rules: that is most of the start-up time when no bytecode is cached
(PYTHONDONTWRITEBYTECODE=1). The families a module registers are read from its source
(``family="..."`` in its @rule calls), so a new rule module still needs nothing else edited.
"""
import importlib
import os
import re

from .. import core

_HERE = os.path.dirname(os.path.abspath(__file__))
_FAMILY = re.compile(r'\bfamily="([a-z]+)"')
_loaded = set()  # families whose modules are imported
_by_family = None  # family -> module names, sorted (the order the rules register in)


def _modules():
    return sorted(f[:-3] for f in os.listdir(_HERE) if f.endswith(".py") and not f.startswith("_"))


def _families():
    global _by_family
    if _by_family is None:
        found = {}
        for m in _modules():
            with open(os.path.join(_HERE, m + ".py"), encoding="utf-8") as fh:
                for fam in sorted(set(_FAMILY.findall(fh.read()))):
                    found.setdefault(fam, []).append(m)
        _by_family = found
    return _by_family


def load_family(family: str) -> None:
    """Import every module that registers rules of ``family`` (once)."""
    if family in _loaded:
        return
    _loaded.add(family)
    for m in _families().get(family, ()):
        importlib.import_module(f"{__name__}.{m}")


def load_all() -> None:
    """Import every rule module (the whole registry)."""
    for m in _modules():
        importlib.import_module(f"{__name__}.{m}")
    _loaded.update(core.FAMILIES)


core.FAMILY_LOADER = load_family
