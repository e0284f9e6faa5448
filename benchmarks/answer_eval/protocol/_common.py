"""Shared set-up of the eval-round helpers: the round's folder, the repository root, and one front door
that turns bad input into a one-line error.

Exit codes of every helper here: 0 done; 2 usage error or unreadable / malformed input (one line on stderr).
"""
import os
import subprocess
import sys
from pathlib import Path

import yaml

EVAL = os.environ.get("EVAL_DIR", "/work/s20")  # one round's folder: authors/, reviews/, answers/, logs/, bundle/
REPO_ROOT = str(Path(__file__).resolve().parents[3])


def run(main, doc):
    """Call main(argv); print doc for -h/--help; any bad-input error becomes one line and exit 2."""
    argv = sys.argv[1:]
    if argv[:1] in (["-h"], ["--help"]):
        print(doc.strip())
        sys.exit(0)
    name = Path(sys.argv[0]).name
    try:
        sys.exit(main(argv) or 0)
    except (OSError, yaml.YAMLError, KeyError, IndexError, ValueError, TypeError, AttributeError,
            AssertionError, UnicodeDecodeError, subprocess.SubprocessError) as e:
        print(f"{name}: error: {type(e).__name__}: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)


def fail(msg):
    """A usage or input error: one line on stderr, exit 2."""
    print(msg, file=sys.stderr)
    sys.exit(2)
