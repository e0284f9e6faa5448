#!/usr/bin/env python3
"""Statically validate Accelerate launch configs and DeepSpeed JSON before spending cluster time.

Standard library + PyYAML only; never imports accelerate, torch or deepspeed. Run with --help for
usage, exit codes and input limits; the rules are listed in ../references/validator-rules.md.
"""
import gc
import os
import sys

# Start-up cost without bytecode (benchmarks/bench_validator.py --instructions): a run allocates most of
# its objects compiling and importing the helper modules, which triggers many automatic collections that
# free nothing (about 5M of some 350M instructions); collections still run, only less often.
gc.set_threshold(20000, 20, 20)

try:  # the C module itself: signal.py wraps it in enums, which costs start time (bench_validator.py)
    import _signal as signal
except ImportError:  # pragma: no cover - an interpreter without it
    import signal

# A reader that stops early (`... | head`) ends us quietly, like any Unix filter.
if hasattr(signal, "SIGPIPE"):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend_validator.cli import main  # noqa: E402


def _exit(rc) -> None:
    """Exit as sys.exit(rc) would. When this file is the program itself (python validate_backend_config.py
    ...), without tearing the interpreter down: freeing every module and object at exit was 15M
    instructions of a DeepSpeed-file check (bench_validator.py --instructions), and nothing here needs it
    (no atexit handlers, threads, temporary files; output files are closed where written). The exit
    status is sys.exit's: None 0, an int itself, other values printed and 1; 120 when flushing the output
    fails, as at interpreter exit. Run any other way (runpy from another program, an interpreter without
    sys.orig_argv) it raises SystemExit as usual."""
    argv = getattr(sys, "orig_argv", None)
    if not argv or len(argv) <= len(sys.argv) or argv[len(argv) - len(sys.argv):] != sys.argv or \
            os.path.realpath(sys.argv[0]) != os.path.realpath(__file__):
        sys.exit(rc)
    if rc is None:
        rc = 0
    elif not isinstance(rc, int):
        print(rc, file=sys.stderr)
        rc = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            rc = 120
    os._exit(rc & 0xFF)


if __name__ == "__main__":
    _exit(main())
