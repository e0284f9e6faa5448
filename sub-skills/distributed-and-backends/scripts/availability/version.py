"""Bundle version for ``--version`` (standard library only).

The version lives in ONE place, the ``VERSION`` file at the bundle root (beside
the router ``SKILL.md``); every helper reads it at run time by walking up from
its own file, so a release changes one line.
"""

import os

# The pinned library versions whose facts this checker mirrors (references/versions.md).
MIRRORS = "accelerate 1.15.0, deepspeed 0.19.8, torch 2.13.0, DALLE-pytorch 1.6.6 (repository 58c1e1a)"


def bundle_version():
    """The VERSION file's content, or 'unknown' when the script was copied out of the bundle."""
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(6):
        path = os.path.join(here, "VERSION")
        if os.path.isfile(path) and os.path.isfile(os.path.join(here, "SKILL.md")):
            try:
                with open(path, encoding="utf-8") as f:
                    return f.read().strip() or "unknown"
            except OSError:
                return "unknown"
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return "unknown"


def version_line(prog):
    """What ``PROG --version`` prints."""
    return "%s %s (pytorch-distributed-training bundle; facts mirror %s)" % (prog, bundle_version(), MIRRORS)
