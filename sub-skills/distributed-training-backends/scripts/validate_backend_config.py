#!/usr/bin/env python3
"""Statically validate Accelerate launch configs and DeepSpeed JSON before spending cluster time.

Standard library + PyYAML only; never imports accelerate, torch or deepspeed. Run with --help for
usage, exit codes and input limits; the rules are listed in ../references/validator-rules.md.
"""
import os
import sys

try:  # the C module itself: signal.py wraps it in enums, which costs start time (bench_validator.py)
    import _signal as signal
except ImportError:  # pragma: no cover - an interpreter without it
    import signal

# A reader that stops early (`... | head`) ends us quietly, like any Unix filter.
if hasattr(signal, "SIGPIPE"):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend_validator.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
