"""Training-loop patterns for Accelerate 1.15.0, written so a test can check them.

Launch on CPU with two ranks (gloo) from the repository root:

    ACCELERATE_USE_CPU=1 accelerate launch --multi_gpu --num_processes 2 \
        --main_process_port 29533 \
        sub-skills/training-loop-integration/examples/loop_checks.py --out /tmp/loop

Each rank writes <out>/rank<N>.json. What it exercises:
  * Accelerator created first, before models/data touch a device;
  * prepare() of model, optimizer and dataloaders in one call;
  * accumulate() + backward() over K micro-batches versus one full-batch step;
  * clip_grad_norm_() only when sync_gradients is True;
  * autocast(), unwrap_model(), print(), main_process_first(),
    split_between_processes(), set_seed(), gather_for_metrics() with an
    uneven last batch, DataLoaderConfiguration.

Exit codes: 0 success; 2 bad command-line arguments; 1 (or the launcher's
non-zero code) when training or a collective fails.
"""
from __future__ import annotations

import argparse
import copy
import json
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

from accelerate import Accelerator, DataLoaderConfiguration
from accelerate.utils import set_seed

K = 2              # gradient accumulation steps
MICRO_BATCH = 4    # per process
TRAIN_SAMPLES = 16  # 2 ranks x K micro-batches x 4 = exactly one optimizer step
EVAL_SAMPLES = 13  # not divisible by 2 ranks x 4: the last batch is uneven
LR = 0.1


def make_train_data() -> TensorDataset:
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(TRAIN_SAMPLES, 3, generator=g, dtype=torch.float64)
    y = x @ torch.tensor([[1.5], [-2.0], [0.5]], dtype=torch.float64) + 0.1
    return TensorDataset(x, y)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", required=True, help="directory for rank<N>.json")
    args = parser.parse_args()

    # 1. Create the Accelerator before anything else (it initialises the process group).
    accelerator = Accelerator(
        gradient_accumulation_steps=K,
        dataloader_config=DataLoaderConfiguration(even_batches=True),
    )
    rank = accelerator.process_index
    result: dict = {
        "rank": rank,
        "num_processes": accelerator.num_processes,
        "distributed_type": str(accelerator.distributed_type),
        "device": str(accelerator.device),
    }

    # 2. set_seed: identical on every rank by default, rank-dependent with device_specific=True.
    set_seed(42)
    result["seed_same"] = torch.rand(1).item()
    set_seed(42, device_specific=True)
    result["seed_device_specific"] = torch.rand(1).item()
    set_seed(0)

    # 3. main_process_first: rank 0 runs the block first (e.g. builds a cache), the others after.
    marker = os.path.join(args.out, "cache_marker.txt")
    with accelerator.main_process_first():
        if accelerator.is_main_process:
            with open(marker, "w") as fh:
                fh.write("built by rank 0\n")
        result["marker_seen_inside_block"] = os.path.exists(marker)

    # 4. split_between_processes: rank 0 gets the first share, rank 1 the rest.
    with accelerator.split_between_processes(list(range(5))) as share:
        result["split_share"] = list(share)

    # 5. prepare everything in one call; keep an untouched copy as the full-batch reference.
    model = torch.nn.Linear(3, 1).double()
    reference = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)  # constant LR
    train_dl = DataLoader(make_train_data(), batch_size=MICRO_BATCH, shuffle=False)
    eval_dl = DataLoader(torch.arange(EVAL_SAMPLES, dtype=torch.float64), batch_size=4)
    model, optimizer, train_dl, eval_dl, scheduler = accelerator.prepare(
        model, optimizer, train_dl, eval_dl, scheduler
    )
    result["wrapped_type"] = type(model).__name__
    result["prepared_types"] = [type(o).__name__ for o in (optimizer, train_dl, scheduler)]
    result["unwrapped_type"] = type(accelerator.unwrap_model(model)).__name__
    result["train_batches_per_rank"] = len(train_dl)

    # 6. accumulate + backward: the optimizer only steps when sync_gradients is True.
    loss_fn = torch.nn.MSELoss()
    sync_flags = []
    grad_norm = None
    model.train()
    for x, y in train_dl:
        with accelerator.accumulate(model):
            with accelerator.autocast():
                loss = loss_fn(model(x), y)
            accelerator.backward(loss)
            sync_flags.append(accelerator.sync_gradients)
            if accelerator.sync_gradients:
                grad_norm = accelerator.clip_grad_norm_(model.parameters(), max_norm=1e9).item()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
    result["sync_flags"] = sync_flags
    # The prepared scheduler steps num_processes times per real optimizer step (split_batches=False).
    result["scheduler_last_epoch"] = scheduler.scheduler.last_epoch

    # Reference: one plain step on the whole (K x world size times larger) batch, no Accelerate.
    ref_opt = torch.optim.SGD(reference.parameters(), lr=LR)
    full = make_train_data().tensors
    ref_loss = loss_fn(reference(full[0]), full[1])
    ref_loss.backward()
    ref_norm = torch.linalg.vector_norm(
        torch.cat([p.grad.flatten() for p in reference.parameters()])
    ).item()
    ref_opt.step()
    trained = accelerator.unwrap_model(model)
    result["accum_max_abs_diff"] = max(
        (a - b).abs().max().item() for a, b in zip(trained.parameters(), reference.parameters())
    )
    result["clip_grad_norm"] = grad_norm
    result["reference_grad_norm"] = ref_norm

    # 7. gather_for_metrics drops the samples that even_batches duplicated in the last batch.
    seen, seen_plain = [], 0
    for batch in eval_dl:
        seen.extend(accelerator.gather_for_metrics(batch).tolist())
        seen_plain += accelerator.gather(batch).numel()
    result["gathered_for_metrics"] = seen
    result["gathered_plain_count"] = seen_plain

    # 8. print() writes once (main process only).
    accelerator.print("LOOP_CHECKS_PRINTED_ONCE")

    with open(os.path.join(args.out, f"rank{rank}.json"), "w") as fh:
        json.dump(result, fh, indent=1)
    accelerator.wait_for_everyone()
    accelerator.end_training()  # also destroys the process group


if __name__ == "__main__":
    main()
