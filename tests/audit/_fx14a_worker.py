"""Probe for tests/audit/test_reprepare_clip_dynamic_batches.py (accelerate 1.15.0, torch 2.13.0, CPU).

Run with `python _fx14a_worker.py OUT` (one process, distributed_type NO) or under
`accelerate launch --multi_gpu --num_processes 2` (MULTI_CPU DDP over gloo). Writes OUT/<tag>.json.
Parts: (a) what accelerator._models holds after prepare and after re-preparing the returned model,
and which files save_state writes; (b, 2 ranks) clip_grad_norm_ on mixed DTensor / plain gradients;
(c, 2 ranks) a batch sampler without batch_size under even_batches True / False.
"""
import json
import math
import sys
from pathlib import Path

import torch
from accelerate import Accelerator, DataLoaderConfiguration

OUT = Path(sys.argv[1])


def names(acc, net, ret):
    return ["original" if m is net else "returned" if m is ret else type(m).__name__ for m in acc._models]


def part_reprepare(out):
    acc = Accelerator(cpu=True)
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    m1, opt = acc.prepare(net, opt)
    r = {"distributed_type": str(acc.distributed_type), "returned_type": type(m1).__name__,
         "returned_is_original": m1 is net, "models_after_first": names(acc, net, m1)}
    r["returned_in_models_after_first"] = m1 in acc._models  # a `model in accelerator._models` guard
    r["returned_marked"] = getattr(m1, "_is_accelerate_prepared", False)
    d_one = OUT / f"state_one_{acc.num_processes}"  # saved while one model is registered
    acc.save_state(str(d_one))
    acc.wait_for_everyone()
    m2 = acc.prepare(m1)
    r["again_is_same_object"] = m2 is m1
    r["again_type"] = type(m2).__name__
    r["models_after_again"] = names(acc, net, m1)
    d = OUT / f"state_{acc.num_processes}"
    acc.save_state(str(d))
    acc.wait_for_everyone()
    r["state_files"] = sorted(p.name for p in d.iterdir() if p.name.startswith("model"))
    from safetensors.torch import load_file
    r["state_keys"] = {p.name: sorted(load_file(str(p))) for p in d.iterdir()
                       if p.name.startswith("model") and p.name.endswith(".safetensors")}
    try:
        acc.load_state(str(d_one))
        r["load_one_model_ckpt"] = "ok"
    except Exception as e:  # noqa: BLE001
        r["load_one_model_ckpt"] = f"{type(e).__name__}: {e}"[:300]
    out["reprepare"] = r
    return acc


def part_clip(out, acc):
    from torch.distributed.tensor import DTensor, Shard, distribute_tensor, init_device_mesh
    mesh = init_device_mesh("cpu", (acc.num_processes,))
    w = torch.nn.Parameter(distribute_tensor(torch.zeros(4, 2), mesh, [Shard(0)]))
    b = torch.nn.Parameter(torch.zeros(2))

    def set_grads():
        w.grad = distribute_tensor(torch.ones(4, 2), mesh, [Shard(0)])  # full-gradient norm^2 = 8
        b.grad = torch.tensor([3.0, 4.0])                                # norm^2 = 25 (same on every rank)

    r = {}
    set_grads()
    try:
        torch.nn.utils.clip_grad_norm_([w, b], 1.0)
        r["torch_mixed"] = "ok"
    except Exception as e:  # noqa: BLE001
        r["torch_mixed"] = f"{type(e).__name__}: {e}"[:300]
    set_grads()
    try:
        torch.nn.utils.clip_grads_with_norm_([w, b], 1.0, torch.tensor(5.0))
        r["torch_with_norm_mixed"] = "ok"
    except Exception as e:  # noqa: BLE001
        r["torch_with_norm_mixed"] = f"{type(e).__name__}: {e}"[:300]
    set_grads()
    total = acc.clip_grad_norm_([w, b], 1.0)
    r["acc_total_type"] = type(total).__name__
    r["acc_total"] = float(total)
    r["expected_global"] = math.sqrt(33.0)
    r["local_shard_only"] = math.sqrt(4.0 + 25.0)
    r["w_grad_after"] = w.grad.full_tensor().tolist()
    r["b_grad_after"] = b.grad.tolist()
    r["w_grad_is_dtensor"] = isinstance(w.grad, DTensor)
    out["clip"] = r


class TokenBudgetBatches:
    """A batch sampler with no batch_size attribute: 5 batches of sizes 3, 1, 2, 3, 1."""
    batches = [[0, 1, 2], [3], [4, 5], [6, 7, 8], [9]]

    def __iter__(self):
        return iter([list(b) for b in self.batches])

    def __len__(self):
        return len(self.batches)


def part_dynamic(out):
    from accelerate.state import GradientState
    data = list(range(10))
    r = {}
    for even in (True, False):
        GradientState._reset_state()
        acc = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(even_batches=even))
        dl = torch.utils.data.DataLoader(data, batch_sampler=TokenBudgetBatches())
        try:
            pdl = acc.prepare(dl)
            got, rem = [], None
            for batch in pdl:
                got.append(batch.tolist())
                rem = acc.gradient_state.remainder
            r[str(even)] = {"wrapper": type(pdl).__name__, "sampler": type(pdl.batch_sampler).__name__,
                            "len": len(pdl), "batches": got, "remainder_last": rem}
        except Exception as e:  # noqa: BLE001
            r[str(even)] = f"{type(e).__name__}: {e}"[:300]
    out["dynamic"] = r


def main():
    out = {}
    acc = part_reprepare(out)
    if acc.num_processes > 1:
        part_clip(out, acc)
        part_dynamic(out)
    tag = f"rank{acc.process_index}" if acc.num_processes > 1 else "single"
    (OUT / f"{tag}.json").write_text(json.dumps(out))
    acc.wait_for_everyone()


if __name__ == "__main__":
    main()
