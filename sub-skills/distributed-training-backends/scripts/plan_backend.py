#!/usr/bin/env python3
"""Plan a distributed-training backend from model size and hardware, before anything is queued.

Ranks DDP, DeepSpeed ZeRO-1/2/3 (+ CPU/NVMe offload), FSDP1, FSDP2 and HSDP by per-GPU memory and
can write the recommended Accelerate config. Standard library only; never imports torch,
accelerate or deepspeed; never downloads. Run with --help for usage and exit codes; the arithmetic
is in ../references/memory-planning.md, the code in the backend_planner package.
"""
import os
import signal
import sys

# A reader that stops early (`... | head`) ends us quietly, like any Unix filter.
if hasattr(signal, "SIGPIPE"):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from backend_planner.cli import main  # noqa: E402

if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.stderr.write("plan_backend.py: interrupted\n")
        sys.exit(130)
