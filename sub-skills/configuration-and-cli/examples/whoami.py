"""Report what topology `accelerate launch` actually produced (Accelerate 1.15.0).

Run it through the same launch command you plan to train with, e.g.

    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 \
        --main_process_port 29536 sub-skills/configuration-and-cli/examples/whoami.py

Every started process prints one JSON line (and, with --out DIR, also writes
DIR/proc-<pid>.json): process_index, num_processes, distributed_type, backend,
device, and the launcher variables it saw. Two processes that each report
num_processes 1 mean the launch started independent copies, not one job.

Exit codes: 0 success; 2 bad command-line arguments; 1 (or the launcher's
non-zero code) when training or a collective fails.
"""
from __future__ import annotations

import argparse
import json
import os

from accelerate import Accelerator, PartialState

ENV_KEYS = (
    "ACCELERATE_USE_CPU", "ACCELERATE_MIXED_PRECISION", "ACCELERATE_DYNAMO_BACKEND",
    "LOCAL_RANK", "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "OMP_NUM_THREADS",
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", help="also write proc-<pid>.json into this directory")
    parser.add_argument(
        "--first", choices=("accelerator", "partial_state"), default="accelerator",
        help="what the script creates first; partial_state shows the pitfall: PartialState() "
        "ignores ACCELERATE_USE_CPU, and the Accelerator created after it inherits its state",
    )
    args = parser.parse_args()
    if args.first == "partial_state":
        PartialState()  # pitfall: fixes the topology before ACCELERATE_USE_CPU is read
    # Accelerator() reads ACCELERATE_USE_CPU (through AcceleratorState); PartialState() does not.
    state = Accelerator()
    report = {
        "pid": os.getpid(),
        "process_index": state.process_index,
        "num_processes": state.num_processes,
        "distributed_type": str(state.distributed_type),
        "backend": state.state.backend,
        "device": str(state.device),
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
    }
    print(json.dumps(report, sort_keys=True), flush=True)
    if args.out:
        with open(os.path.join(args.out, f"proc-{os.getpid()}.json"), "w") as fh:
            json.dump(report, fh, sort_keys=True)


if __name__ == "__main__":
    main()
