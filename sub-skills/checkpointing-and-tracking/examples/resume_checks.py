"""Checkpoint, resume mid-epoch and track with Accelerate 1.15.0, checkable by a test.

Run twice, as two separate launches (the second is a fresh process group):

    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 \
        --main_process_port 29534 \
        sub-skills/checkpointing-and-tracking/examples/resume_checks.py --phase save --out /tmp/ckpt
    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 \
        --main_process_port 29535 \
        sub-skills/checkpointing-and-tracking/examples/resume_checks.py --phase resume --out /tmp/ckpt

Phase "save" trains two epochs without interruption, calling save_state() three
times in epoch 0 (automatic naming, total_limit=2, so checkpoint_0 is deleted),
and records a fingerprint of weights, optimizer, scheduler, custom object and
RNG state at the last save, plus the final weights. Phase "resume" seeds
differently, calls load_state() (latest checkpoint), records the same
fingerprint, skips the batches already seen with skip_first_batches(), finishes
training, and records the final weights. Each rank writes
<out>/<phase>_rank<N>.json; the main process also writes JSON Lines metrics
through the custom tracker in json_tracker.py and a safetensors export with
save_model().

Exit codes: 0 success; 2 bad command-line arguments; 1 (or the launcher's
non-zero code) when training or a collective fails.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.utils import ProjectConfiguration, set_seed

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import json_tracker  # noqa: E402,F401  (registers the "jsonl" tracker)

EPOCHS = 2
SAVE_AFTER = (1, 3, 5)   # global step numbers (1-based) at which epoch 0 saves
RESUME_FROM_STEP = 5     # the newest checkpoint (checkpoint_2) holds step 5


class StepCounter:
    """A custom object checkpointed through register_for_checkpointing."""

    def __init__(self):
        self.steps = 0

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]


def digest(obj) -> str:
    h = hashlib.sha256()
    if isinstance(obj, torch.Tensor):
        h.update(obj.detach().cpu().contiguous().numpy().tobytes())
    else:
        h.update(repr(obj).encode())
    return h.hexdigest()[:16]


def fingerprint(accelerator, model, optimizer, scheduler, counter) -> dict:
    params = accelerator.unwrap_model(model).state_dict()
    opt_state = optimizer.state_dict()["state"]
    return {
        "weights": {k: digest(v) for k, v in params.items()},
        "optimizer": {
            str(k): {n: digest(t) for n, t in v.items()} for k, v in opt_state.items()
        },
        "scheduler_last_lr": scheduler.get_last_lr(),
        "counter": counter.steps,
        "torch_rng": digest(torch.get_rng_state()),
        "python_rng": digest(random.getstate()),
        "numpy_rng": digest(np.random.get_state()[1]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--phase", choices=("save", "resume"), required=True)
    parser.add_argument("--out", required=True, help="project directory (checkpoints, logs, results)")
    parser.add_argument(
        "--loader-generator", choices=("own", "global"), default="own",
        help="own (default): DataLoader gets its own torch.Generator; global: none, so every "
        "iter() draws from the global torch RNG and a mid-epoch resume diverges after load_state",
    )
    args = parser.parse_args()

    project = ProjectConfiguration(
        project_dir=args.out,
        logging_dir=os.path.join(args.out, "logs"),
        automatic_checkpoint_naming=True,
        total_limit=2,
    )
    accelerator = Accelerator(
        project_config=project,
        log_with="jsonl",
        dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True, data_seed=7),
    )
    # Different seeds on purpose: the resumed run must get its RNG state from the checkpoint.
    set_seed(0 if args.phase == "save" else 999)

    g = torch.Generator().manual_seed(11)
    data = TensorDataset(torch.randn(24, 4, generator=g), torch.randn(24, 1, generator=g))
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.3), torch.nn.Linear(8, 1))
    if args.phase == "resume":
        torch.nn.init.zeros_(model[0].weight)  # prove the weights come from the checkpoint
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    # Own generator: creating an iterator then draws its base seed from it, not from the
    # global torch RNG, so a resumed run consumes the global RNG exactly like the original.
    own = torch.Generator().manual_seed(5) if args.loader_generator == "own" else None
    train_dl = DataLoader(data, batch_size=2, shuffle=True, generator=own)
    model, optimizer, train_dl, scheduler = accelerator.prepare(model, optimizer, train_dl, scheduler)
    counter = StepCounter()
    accelerator.register_for_checkpointing(counter)
    accelerator.init_trackers("resume_demo", config={"lr": 1e-2, "phase": args.phase})

    result: dict = {
        "rank": accelerator.process_index,
        "num_processes": accelerator.num_processes,
        "batches_per_epoch": len(train_dl),
    }
    start_step = 0
    if args.phase == "resume":
        accelerator.load_state()  # no path: newest folder under <project_dir>/checkpoints
        result["at_checkpoint"] = fingerprint(accelerator, model, optimizer, scheduler, counter)
        start_step = counter.steps
        # load_state does not restore ProjectConfiguration.iteration: continue the numbering
        # ourselves, or the next save_state() reuses checkpoint_0.
        newest = max(int(n.rsplit("_", 1)[1]) for n in os.listdir(os.path.join(args.out, "checkpoints")))
        accelerator.project_configuration.iteration = newest + 1
    result["checkpoints_on_disk"] = sorted(os.listdir(os.path.join(args.out, "checkpoints"))) \
        if os.path.isdir(os.path.join(args.out, "checkpoints")) else []

    loss_fn = torch.nn.MSELoss()
    model.train()
    for epoch in range(EPOCHS):
        train_dl.set_epoch(epoch)
        batches_done = start_step - epoch * len(train_dl)
        loader = train_dl
        if 0 < batches_done < len(train_dl):
            loader = accelerator.skip_first_batches(train_dl, batches_done)  # resume mid-epoch
        elif batches_done >= len(train_dl):
            continue
        for x, y in loader:
            loss = loss_fn(model(x), y)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            counter.steps += 1
            accelerator.log({"loss": accelerator.reduce(loss.detach(), "mean").item()}, step=counter.steps)
            if args.phase == "save" and epoch == 0 and counter.steps in SAVE_AFTER:
                accelerator.save_state()
                if counter.steps == RESUME_FROM_STEP:
                    result["at_checkpoint"] = fingerprint(accelerator, model, optimizer, scheduler, counter)
                    result["checkpoint_files"] = sorted(
                        os.listdir(os.path.join(args.out, "checkpoints", "checkpoint_2"))
                    ) if accelerator.is_main_process else []

    result["final"] = fingerprint(accelerator, model, optimizer, scheduler, counter)
    if args.phase == "resume":
        accelerator.save_state()  # checkpoint_3; total_limit=2 then removes checkpoint_1
        accelerator.wait_for_everyone()
        result["checkpoints_after_final_save"] = sorted(os.listdir(os.path.join(args.out, "checkpoints")))
    export_dir = os.path.join(args.out, f"export_{args.phase}")
    accelerator.wait_for_everyone()
    accelerator.save_model(model, export_dir)  # main process writes model.safetensors
    with open(os.path.join(args.out, f"{args.phase}_rank{accelerator.process_index}.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    accelerator.end_training()  # closes trackers, then destroys the process group


if __name__ == "__main__":
    main()
