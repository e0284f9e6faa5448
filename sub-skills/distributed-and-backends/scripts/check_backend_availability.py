#!/usr/bin/env python3
"""Which distributed / precision backends can this Python environment use?

Standard library only.  The default tier imports nothing it reports on;
--probe and --include-cuda import in child processes with a timeout.
Run with --help for the tiers, the --require vocabulary and the exit codes.
The implementation lives in the ``availability`` package beside this file.
"""

import os
import sys

sys.dont_write_bytecode = True  # never write anything, not even our own .pyc files
_HERE = os.path.dirname(os.path.abspath(__file__))
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from availability.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
