"""The bundle version for --version of triage_log.py and fr_dump.py (one VERSION file, one lookup)."""
from __future__ import annotations

import os


def bundle_version() -> str:
    """The bundle version from the one VERSION file at the bundle root (beside the router SKILL.md),
    found by walking up from this file; 'unknown' when the scripts were copied out of the bundle."""
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(7):
        if os.path.isfile(os.path.join(here, "VERSION")) and os.path.isfile(os.path.join(here, "SKILL.md")):
            try:
                with open(os.path.join(here, "VERSION"), encoding="utf-8") as fh:
                    return fh.read().strip() or "unknown"
            except OSError:
                return "unknown"
        if os.path.dirname(here) == here:
            break
        here = os.path.dirname(here)
    return "unknown"
