"""One process, launched the way plain `torchrun --nproc_per_node 1` would (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR/PORT in the environment, no `accelerate launch`), on CPU.

Prints one JSON line:
- what `Accelerator` makes of a torchrun-style environment with a default_config.yaml under HF_HOME
  (the file asks for fp16) and `ACCELERATE_USE_CPU=true`: distributed type and mixed precision,
  then the same with `ACCELERATE_MIXED_PRECISION=bf16` in the environment (a second child);
- torch FSDP1 with an optimizer built from the module's parameters *before* wrapping, for
  `use_orig_params` False and True: did one step change the weights the wrapped model uses, and did
  the optimizer's tensors receive gradients;
- `accelerate launch --cpu -m pkg.mod --x 1` parsed by the real parser and turned into the simple launcher's
  command, and the same with `--no_python` added.
"""
from __future__ import annotations

import json
import sys
import warnings

warnings.filterwarnings("ignore")

import torch  # noqa: E402


def accelerator_facts():
    from accelerate import Accelerator

    acc = Accelerator()
    return {"distributed_type": str(acc.distributed_type).split(".")[-1], "mixed_precision": acc.mixed_precision,
            "num_processes": acc.num_processes}


def fsdp1_facts():
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    out = {}
    for orig in (False, True):
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 1))
        opt = torch.optim.SGD(net.parameters(), lr=0.5)  # built before wrapping
        wrapped = FSDP(net, device_id=torch.device("cpu"), use_orig_params=orig)
        before = [p.detach().clone() for p in wrapped.parameters()]
        wrapped(torch.ones(2, 4)).sum().backward()
        opt.step()
        out[str(orig)] = {
            "weights_changed": any(not torch.equal(a, b) for a, b in zip(before, wrapped.parameters())),
            "optimizer_tensors_got_grad": any(p.grad is not None for g in opt.param_groups for p in g["params"]),
        }
    return out


def save_hook_facts():
    """save_state/load_state pre-hooks on the non-DeepSpeed path (here MULTI_CPU): the hook gets every
    prepared model and one state dict per model; popping one keeps save_state from writing that file."""
    import os
    import tempfile

    from accelerate import Accelerator

    acc = Accelerator()
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    a, b, _ = acc.prepare(a, b, torch.optim.SGD(a.parameters(), lr=0.1))
    seen = {}

    def save_hook(models, weights, output_dir):
        seen["save"] = [len(models), len(weights), type(weights[0]).__name__]
        weights.pop()  # the diffusers pattern: the hook wrote this model itself

    acc.register_save_state_pre_hook(save_hook)
    acc.register_load_state_pre_hook(lambda models, input_dir: seen.update(load=len(models)))
    d = tempfile.mkdtemp()
    acc.save_state(d)
    files = sorted(f for f in os.listdir(d) if f.startswith("model"))
    try:
        acc.load_state(d)
        load_error = None
    except Exception as exc:  # noqa: BLE001 - recorded
        load_error = f"{type(exc).__name__}: {str(exc)[:160]}"
    return {**seen, "model_files": files, "load_error": load_error}


def frozen_half_module_facts():
    """mixed_precision=bf16: a frozen helper cast to bf16 and never prepared (the diffusers VAE/text encoder)
    gets no autocast; fed an fp32 tensor it fails, under accelerator.autocast() it runs; a prepared
    model's output is converted back to fp32."""
    from accelerate import Accelerator

    acc = Accelerator()
    frozen = torch.nn.Linear(4, 4).to(torch.bfloat16).requires_grad_(False)
    trained = acc.prepare(torch.nn.Linear(4, 4))
    x = torch.ones(2, 4)
    try:
        frozen(x)
        plain = "ran"
    except RuntimeError as exc:
        plain = f"RuntimeError: {exc}"
    with acc.autocast():
        under = str(frozen(x).dtype)
    return {"plain_call": plain, "under_autocast": under, "prepared_output": str(trained(x).dtype)}


def reentrant_frozen_ddp_facts():
    """DDP (the one gloo rank Accelerator() set up) over a LoRA-shaped block checkpointed with
    use_reentrant=True behind a frozen embedding: two iterations per find_unused_parameters value."""
    import warnings as _w

    from torch import nn
    from torch.utils.checkpoint import checkpoint

    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _toy_models import LoraBlock as Lora

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.blk, self.head = nn.Embedding(10, 4).requires_grad_(False), Lora(), nn.Linear(4, 1)

        def forward(self, ids):
            return self.head(checkpoint(self.blk, self.emb(ids), use_reentrant=True))

    out = {}
    with _w.catch_warnings():
        _w.simplefilter("ignore")
        for unused in (False, True):
            ddp = torch.nn.parallel.DistributedDataParallel(Net(), find_unused_parameters=unused)
            steps = []
            for _ in range(2):
                try:
                    ddp(torch.tensor([[1, 2, 3]])).sum().backward()
                    steps.append(["ok", ddp.module.blk.a.weight.grad is not None])
                except RuntimeError as exc:
                    steps.append(["error", str(exc)[:80]])
            out[str(unused)] = steps
    return out


def module_flag_facts():
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_simple_launcher_cmd_env

    args, _, _ = _validate_launch_command(launch_command_parser().parse_args(["--cpu", "-m", "pkg.mod", "--x", "1"]))
    cmd, _ = prepare_simple_launcher_cmd_env(args)
    out = {"cmd_tail": [("PYTHON" if c == sys.executable else c) for c in cmd]}
    both, _, _ = _validate_launch_command(launch_command_parser().parse_args(["--cpu", "-m", "--no_python", "pkg.mod"]))
    try:
        prepare_simple_launcher_cmd_env(both)
        out["module_and_no_python"] = "accepted"
    except ValueError as exc:
        out["module_and_no_python"] = str(exc)
    return out


if __name__ == "__main__":
    facts = {"accelerator": accelerator_facts()}
    if facts["accelerator"]["mixed_precision"] == "bf16":
        facts["frozen_half"] = frozen_half_module_facts()
    if "--fsdp1" in sys.argv:
        facts["fsdp1"] = fsdp1_facts()
        facts["module"] = module_flag_facts()
        facts["save_hooks"] = save_hook_facts()
        facts["reentrant_frozen_ddp"] = reentrant_frozen_ddp_facts()
    print(json.dumps(facts))
