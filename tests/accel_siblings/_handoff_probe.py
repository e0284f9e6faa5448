"""One rank of the hand-off matrix (_handoff_matrix.py).

usage: python _handoff_probe.py init CASE OUT     who initialises torch.distributed / deepspeed.comm
       python _handoff_probe.py prepare SETUP OUT  what Accelerator.prepare_model does per model state

`init`: runs the case's pre-steps (a user `init_process_group`, a user `deepspeed.init_distributed`), then
records every call of torch.distributed.init_process_group and deepspeed.comm.init_distributed made by
the constructor (PartialState, Accelerator or TrainingArguments), the state after it, and the world size a
DeepSpeedConfig built then sees (what deepspeed.zero.Init builds inside from_pretrained).
`prepare`: prepares one tiny model per state with a real Accelerator and records whether model.to ran,
the returned type, the parameter device, or the exception. Writes OUT/rank<r>.json.

accelerate 1.15.0, torch 2.13.0, deepspeed 0.19.8, transformers 5.25.0. The caller sets the launcher
variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT) or not, DS_ACCELERATOR=cpu and a private
TORCH_EXTENSIONS_DIR.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import logging
import os
import sys
import warnings
from pathlib import Path

MODE, NAME, OUT = sys.argv[1], sys.argv[2], Path(sys.argv[3])
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)

import torch  # noqa: E402
import torch.distributed as tdist  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))
CALLS: list = []


def _msg(e: BaseException) -> dict:
    return {"error": type(e).__name__, "message": (str(e).strip().splitlines() or [""])[0][:240]}


def _wrap_inits():
    """Record the init calls (the real functions still run)."""
    real_pg = tdist.init_process_group

    def pg(*a, **k):
        CALLS.append(f"torch.distributed.init_process_group(backend={k.get('backend', a[0] if a else None)})")
        return real_pg(*a, **k)

    tdist.init_process_group = pg
    import deepspeed.comm as dscomm
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None   # no CPU extension build
    real_ds = dscomm.init_distributed

    def ds(*a, **k):
        CALLS.append(f"deepspeed.comm.init_distributed(dist_backend={k.get('dist_backend', a[0] if a else None)})")
        return real_ds(*a, **k)

    dscomm.init_distributed = ds
    return dscomm


def _gpu_stand_in():
    """On a GPU host PartialState._prepare_backend returns ("nccl", MULTI_GPU) when LOCAL_RANK is set
    (accelerate/state.py:788-791); this CPU host has no device branch and returns backend None, which
    would skip the process group. Stand-in: "gloo" on the same branch, so the init path is the GPU one."""
    from accelerate.state import PartialState
    real = PartialState._prepare_backend

    def prep(self, cpu=False, sagemaker_dp=False, backend=None):
        got, dt = real(self, cpu, sagemaker_dp, backend)
        return ("gloo" if got is None and not cpu and int(os.environ.get("LOCAL_RANK", -1)) != -1 else got), dt

    PartialState._prepare_backend = prep


def init_case(case: str) -> dict:
    dscomm = _wrap_inits()
    _gpu_stand_in()
    import deepspeed
    pre, ctor = case.split(":")
    if pre == "user_pg":
        tdist.init_process_group("gloo")
    elif pre == "user_ds":
        deepspeed.init_distributed(dist_backend="gloo")
    CALLS.clear()
    res: dict = {}
    args = None
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            if ctor == "partial":
                from accelerate import PartialState
                st = PartialState()
            elif ctor == "partial_cpu":
                from accelerate import PartialState
                st = PartialState(cpu=True)
            elif ctor.startswith("acc_ds"):
                from accelerate import Accelerator
                from accelerate.utils import DeepSpeedPlugin
                st = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=3), cpu=ctor.endswith("_cpu")).state
            elif ctor == "targs_z3":
                from transformers import TrainingArguments
                args = TrainingArguments(output_dir="out", report_to="none", deepspeed={
                    "zero_optimization": {"stage": 3}, "train_batch_size": "auto",
                    "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"})
                st = args.distributed_state
            res.update(distributed_type=str(st.distributed_type).split(".")[-1], num_processes=st.num_processes,
                       backend=st.backend)
        except Exception as e:  # noqa: BLE001
            res.update(_msg(e))
    res["calls"] = list(CALLS)
    res["torch_initialized"] = tdist.is_initialized()
    res["torch_backend"] = tdist.get_backend() if tdist.is_initialized() else None
    res["ds_initialized"] = bool(dscomm.is_initialized())
    ws = int(os.environ.get("WORLD_SIZE", "1"))
    from deepspeed.runtime.config import DeepSpeedConfig
    cfg = (args.hf_deepspeed_config.config if args is not None else
           {"train_batch_size": 8 * ws, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1})
    res["ds_config_batch"] = f"{cfg['train_batch_size']} = {cfg['train_micro_batch_size_per_gpu']} x {cfg['gradient_accumulation_steps']} x {ws}"
    res["ds_config_world_size"] = DeepSpeedConfig({"train_micro_batch_size_per_gpu": 1}).world_size
    try:
        DeepSpeedConfig(dict(cfg))
        res["ds_config_check"] = "ok"
    except Exception as e:  # noqa: BLE001
        res["ds_config_check"] = _msg(e)["message"]
    return res


def _model(state: str):
    nn = torch.nn
    if state == "meta":
        with torch.device("meta"):
            return nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    m = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    if state.startswith("dtensor"):
        from torch.distributed.fsdp import fully_shard
        fully_shard(m)
    elif state == "device_map2":
        m.hf_device_map = {"0": "cpu", "1": "cpu"}
    elif state == "8bit_cpu":
        m.is_loaded_in_8bit, m.hf_device_map = True, {"": "cpu"}
    return m


STATES = {  # state: (model, prepare_model kwargs)
    "plain": ("plain", {}),
    "plain dp=False": ("plain", {"device_placement": False}),
    "plain eval": ("plain", {"evaluation_mode": True}),
    "meta": ("meta", {}),
    "meta eval": ("meta", {"evaluation_mode": True}),
    "dtensor": ("dtensor", {}),
    "dtensor dp=True": ("dtensor", {"device_placement": True}),
    "dtensor dp=False eval": ("dtensor", {"device_placement": False, "evaluation_mode": True}),
    "device_map2": ("device_map2", {}),
    "8bit_cpu": ("8bit_cpu", {}),
}


def prepare_setup(setup: str) -> dict:
    from accelerate import Accelerator
    out: dict = {}
    if not tdist.is_initialized():
        tdist.init_process_group("gloo")   # fully_shard needs a process group (world 1 in the 1-process setup)
    acc = Accelerator(cpu=True)
    out["_setup"] = {"distributed_type": str(acc.distributed_type).split(".")[-1], "num_processes": acc.num_processes}
    for name, (state, kw) in STATES.items():
        m = _model(state)
        moved = []
        real_to = m.to
        m.to = lambda *a, _r=real_to, **k: (moved.append(str(a[0] if a else k)), _r(*a, **k))[1]
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                got = acc.prepare_model(m, **kw)
            p = next(got.parameters())
            out[name] = {"to_called": bool(moved), "type": type(got).__name__,
                         "param": f"{type(p).__name__} on {p.device.type}"}
        except Exception as e:  # noqa: BLE001
            out[name] = dict(_msg(e), to_called=bool(moved))
    return out


def fsdp1_ram_efficient() -> dict:
    """torch FSDP1 with what accelerate installs for cpu_ram_efficient_loading (param_init_fn =
    to_empty(recurse=False), sync_module_states): rank 0 holds real weights (all 1.0), rank 1 builds the
    model on meta. Does the wrapped model hold rank 0's weights on every rank?"""
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    tdist.init_process_group("gloo")
    nn = torch.nn
    out = {}
    for sync in (True, False):
        if RANK == 0:
            m = nn.Sequential(nn.Linear(64, 64, bias=False))
            torch.nn.init.ones_(m[0].weight)
        else:
            with torch.device("meta"):
                m = nn.Sequential(nn.Linear(64, 64, bias=False))
        row = {"rank_param_before": next(m.parameters()).device.type}
        try:
            f = FSDP(m, sync_module_states=sync, device_id=torch.device("cpu"),
                     param_init_fn=lambda x: x.to_empty(device=torch.device("cpu"), recurse=False))
            with FSDP.summon_full_params(f):
                w = next(f.parameters()).detach().clone()
            row.update(param_after=w.device.type, full_weights_are_rank0s=bool(torch.all(w == 1.0)))
        except Exception as e:  # noqa: BLE001
            row.update(_msg(e))
        out[f"sync_module_states={sync}"] = row
    return out


if MODE == "init":
    result = init_case(NAME)
elif MODE == "prepare":
    result = prepare_setup(NAME)
else:
    result = fsdp1_ram_efficient()
OUT.mkdir(parents=True, exist_ok=True)
(OUT / f"rank{RANK}.json").write_text(json.dumps(result, indent=1, sort_keys=True))
if tdist.is_initialized():
    tdist.barrier()
    tdist.destroy_process_group()
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
