"""Bundle version for ``--version`` (standard library only).

The version lives in ONE place: the ``VERSION`` file at the bundle root (the
folder that holds the router ``SKILL.md``). Helpers read it at run time by
walking up from their own file; an installed copy (the pre-commit hook's
environment, built by ``pyproject.toml``, which takes its version from the same
file) falls back to the installed distribution's metadata.
"""
from __future__ import annotations

import os

DISTRIBUTION = "pytorch-distributed-training"
# The pinned library versions whose behaviour this validator mirrors (also printed in --output json).
VERIFIED_AGAINST = "accelerate 1.15.0, deepspeed 0.19.8, torch 2.13.0, PyYAML 6.0"


def bundle_version() -> str:
    """The bundle version from the VERSION file, else the installed distribution, else 'unknown'."""
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(6):
        path = os.path.join(here, "VERSION")
        if os.path.isfile(path) and os.path.isfile(os.path.join(here, "SKILL.md")):
            try:
                with open(path, encoding="utf-8") as f:
                    return f.read().strip() or "unknown"
            except OSError:
                break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version(DISTRIBUTION)
        except PackageNotFoundError:
            return "unknown"
    except ImportError:  # pragma: no cover - Python < 3.8
        return "unknown"


def version_line(prog: str) -> str:
    """What ``PROG --version`` prints."""
    return f"{prog} {bundle_version()} ({DISTRIBUTION} bundle; checks mirror {VERIFIED_AGAINST})"
