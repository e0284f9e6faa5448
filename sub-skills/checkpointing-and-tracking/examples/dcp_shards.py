"""Write a sharded torch.distributed.checkpoint (DCP) folder from two ranks, in the layout
Accelerate 1.15.0 uses for FSDP SHARDED_STATE_DICT saves, so `accelerate merge-weights` can be
tried without GPUs.

FSDP itself does not run on CPU through Accelerate (the launcher's FSDP settings are ignored
and the job is plain MULTI_CPU data parallel), so this script calls
torch.distributed.checkpoint.save the way accelerate.utils.fsdp_utils.save_fsdp_model does:
state dict wrapped as {"model": ...}, written to <out>/pytorch_model_fsdp_0/ by all ranks.
It also writes the same weights with accelerator.save_model to <out>/reference/ for comparison.

    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 \
        --main_process_port 29537 \
        sub-skills/checkpointing-and-tracking/examples/dcp_shards.py --out /tmp/dcp
    accelerate merge-weights /tmp/dcp/pytorch_model_fsdp_0 /tmp/dcp/merged

Exit codes: 0 success; 2 bad command-line arguments; 1 (or the launcher's
non-zero code) when training or a collective fails.
"""
from __future__ import annotations

import argparse
import json
import os

import torch
import torch.distributed.checkpoint as dist_cp

from accelerate import Accelerator
from accelerate.utils import set_seed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args()

    accelerator = Accelerator()
    set_seed(3)
    model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 2)))
    state = accelerator.unwrap_model(model).state_dict()

    ckpt_dir = os.path.join(args.out, "pytorch_model_fsdp_0")
    dist_cp.save(state_dict={"model": state}, storage_writer=dist_cp.FileSystemWriter(ckpt_dir))
    accelerator.wait_for_everyone()
    accelerator.save_model(model, os.path.join(args.out, "reference"))
    if accelerator.is_main_process:
        with open(os.path.join(args.out, "dcp_files.json"), "w") as fh:
            json.dump(sorted(os.listdir(ckpt_dir)), fh)
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
