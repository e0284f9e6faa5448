"""One rank of the per-backend checkpoint matrix (_backend_ckpt_matrix.py).

usage: python _backend_ckpt_probe.py save BACKEND ROOT    train 3 steps, save_state after each step
       python _backend_ckpt_probe.py load BACKEND ROOT    fresh weights, load_state(), compare, then load
                                                          every other backend's folder (cross)
       python _backend_ckpt_probe.py load1 BACKEND ROOT   the same load at world size 1 (2 -> 1 ranks)

BACKEND: ddp | single | zero2 | zero3 | fsdp1_full | fsdp1_sharded | fsdp2. The Accelerator has
ProjectConfiguration(project_dir=ROOT/BACKEND, automatic_checkpoint_naming=True, total_limit=2). Every
write is recorded per rank (open/io.open in a write mode, torch.save's zip writer, safetensors,
os.rename), so the matrix says which rank wrote which file. Writes ROOT/out/<mode>-<backend>-rank<r>.json
after every stage (a hang still leaves the stages before it).

On this CPU host: DDP is Accelerator(cpu=True) under the launcher's variables (MULTI_CPU, gloo);
DeepSpeed is Accelerator(deepspeed_plugin=...) with DS_ACCELERATOR=cpu and the gloo stand-in of
_handoff_probe.py (a GPU host takes the same branch with nccl); FSDP is Accelerator(cpu=True) with
AcceleratorState's distributed_type and fsdp_plugin forced to FSDP afterwards (accelerate only picks FSDP
on a device branch), so prepare/save_state/load_state/get_state_dict run their real FSDP code on gloo.
accelerate 1.15.0, torch 2.13.0, deepspeed 0.19.8.
"""
from __future__ import annotations

import builtins
import contextlib
import importlib
import io
import json
import logging
import os
import sys
import warnings
from pathlib import Path

MODE, BACKEND, ROOT = sys.argv[1], sys.argv[2], Path(sys.argv[3])
OPT_FIRST = BACKEND.endswith("_optfirst")   # FSDP1 with the optimizer built before prepare (one prepare call)
warnings.simplefilter("ignore")
logging.disable(logging.WARNING)
BACKENDS = ("ddp", "single", "zero2", "zero3", "fsdp1_full", "fsdp1_sharded", "fsdp2")

import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _toy_models import Counter  # noqa: E402

RANK = int(os.environ.get("RANK", "0"))
WRITES: list = []
RES: dict = {}
OUTF = ROOT / "out" / f"{MODE.replace(':', '-')}-{BACKEND}-rank{RANK}.json"


def dump():
    OUTF.parent.mkdir(parents=True, exist_ok=True)
    OUTF.write_text(json.dumps(RES, indent=1, sort_keys=True))


def _rel(p) -> str:
    p = os.path.abspath(os.fspath(p))
    base = str(ROOT / BACKEND)
    return os.path.relpath(p, base) if p.startswith(base) else os.path.relpath(p, str(ROOT))


def mine() -> list:
    """This rank's writes since WRITES was cleared, without the probe's own JSON."""
    return sorted({w for w in WRITES if not w.startswith(("../out", "out/"))})


def _record_writes():
    real_open, real_io_open, real_rename = builtins.open, io.open, os.rename

    def op(f, mode="r", *a, **k):
        if isinstance(f, (str, os.PathLike)) and any(c in mode for c in "wax+"):
            WRITES.append(_rel(f))
        return real_open(f, mode, *a, **k)

    def iop(f, mode="r", *a, **k):
        if isinstance(f, (str, os.PathLike)) and any(c in mode for c in "wax+"):
            WRITES.append(_rel(f))
        return real_io_open(f, mode, *a, **k)

    def ren(a, b, *x, **k):
        WRITES.append(_rel(b))
        return real_rename(a, b, *x, **k)

    builtins.open, io.open, os.rename = op, iop, ren
    import torch.serialization as ts
    real_zip = ts._open_zipfile_writer

    def zw(name):
        if isinstance(name, (str, os.PathLike)):
            WRITES.append(_rel(name))
        return real_zip(name)

    ts._open_zipfile_writer = zw
    import safetensors.torch as st
    real_ser = st.serialize_file

    def ser(t, filename, *a, **k):
        WRITES.append(_rel(filename))
        return real_ser(t, filename, *a, **k)

    st.serialize_file = ser


def _gloo_stand_in():
    """As _handoff_probe._gpu_stand_in: the no-device branch gets backend gloo, so the DeepSpeed branch
    of AcceleratorState (not cpu=True) initialises a real process group on this CPU host."""
    from accelerate.state import PartialState
    real = PartialState._prepare_backend

    def prep(self, cpu=False, sagemaker_dp=False, backend=None):
        got, dt = real(self, cpu, sagemaker_dp, backend)
        return ("gloo" if got is None and not cpu and int(os.environ.get("LOCAL_RANK", -1)) != -1 else got), dt

    PartialState._prepare_backend = prep


class Tied(nn.Module):
    """Embedding and head share one weight (a tied LM head), plus an untied middle layer."""

    def __init__(self, tie: bool = True):
        super().__init__()
        self.emb, self.mid = nn.Embedding(16, 4), nn.Linear(4, 4)
        self.head = nn.Linear(4, 16, bias=False)
        if tie:
            self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.mid(self.emb(x)))


def build(backend: str, seed: int):
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration
    pc = ProjectConfiguration(project_dir=str(ROOT / backend), automatic_checkpoint_naming=True, total_limit=2)
    if backend.startswith("zero"):
        importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
        _gloo_stand_in()
        from accelerate.utils import DeepSpeedPlugin
        zero = {"stage": int(backend[-1])}
        if zero["stage"] == 3:
            zero["stage3_gather_16bit_weights_on_model_save"] = True
        ws = int(os.environ.get("WORLD_SIZE", "1"))
        plugin = DeepSpeedPlugin(hf_ds_config={
            "train_micro_batch_size_per_gpu": 2, "train_batch_size": 2 * ws, "gradient_accumulation_steps": 1,
            "zero_optimization": zero, "zero_allow_untested_optimizer": True})
        acc = Accelerator(deepspeed_plugin=plugin, project_config=pc)
    else:
        acc = Accelerator(cpu=True, project_config=pc)
        if backend.startswith("fsdp"):
            from accelerate import FullyShardedDataParallelPlugin
            from accelerate.state import AcceleratorState, PartialState
            from accelerate.utils import DistributedType
            ver = 2 if backend == "fsdp2" else 1
            sdt = "SHARDED_STATE_DICT" if backend != "fsdp1_full" else "FULL_STATE_DICT"
            if ver == 1:
                # FULL_STATE_DICT with offload_to_cpu=True on a CPU module keeps views of the flat parameter,
                # freed after the gather ("setStorage ... storage of size 0"); on a GPU the offload copies.
                # The CPU run gathers without the offload (the tensors land on CPU either way)
                # (save_fsdp_model sets offload_to_cpu=True itself at 2 ranks, so the attribute is pinned)
                from torch.distributed.fsdp import FullOptimStateDictConfig, FullStateDictConfig
                for cls in (FullStateDictConfig, FullOptimStateDictConfig):
                    cls.__setattr__ = lambda self, k, v: object.__setattr__(
                        self, k, False if k == "offload_to_cpu" else v)
            plugin = FullyShardedDataParallelPlugin(fsdp_version=ver, state_dict_type=sdt)
            # both singletons: a later AcceleratorState() copies PartialState's fields back over its own
            AcceleratorState._shared_state["distributed_type"] = DistributedType.FSDP
            PartialState._shared_state["distributed_type"] = DistributedType.FSDP
            AcceleratorState._shared_state["fsdp_plugin"] = plugin
            if ver == 1:   # accelerate passes device_id=self.device (cuda:N on a GPU host); FSDP1 rejects
                # device_id=cpu against its CPU compute device, so the CPU run drops it (None)
                import torch.distributed.fsdp._init_utils as iu
                real_dev = iu._get_device_from_device_id
                iu._get_device_from_device_id = lambda d, *a, _r=real_dev: (
                    None if torch.device(d).type == "cpu" else _r(d, *a))
                # FULL_STATE_DICT with offload_to_cpu=True on a CPU module keeps views of the flat parameter,
                # freed after the gather ("setStorage ... storage of size 0"); on a GPU the offload copies.
                # The CPU run gathers without the offload (the tensors land on CPU either way)
    torch.manual_seed(0)   # the same seed in every run (the sampler's seed is taken at prepare)
    model = Tied()
    if seed:   # a resumed run: other starting weights, so a load that does nothing shows
        g = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(torch.randn(p.shape, generator=g))
    if backend.startswith("fsdp1") and not OPT_FIRST:   # FSDP1: the optimizer must see the wrapped model's params
        model = acc.prepare(model)
    opt = torch.optim.AdamW(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    dl = torch.utils.data.DataLoader(torch.arange(16), batch_size=2, shuffle=True)
    counter = Counter()
    model, opt, dl, sched = acc.prepare(model, opt, dl, sched)
    acc.register_for_checkpointing(counter)
    return acc, model, opt, dl, sched, counter


def step(acc, model, opt, sched, x):
    torch.rand(3)   # the global RNG moves every step (as dropout would)
    out = model(x)
    acc.backward(out.float().pow(2).mean())
    opt.step()
    sched.step()
    opt.zero_grad()


def fingerprint(acc, model):
    """Full weights on rank 0 through get_state_dict (collective for FSDP and ZeRO-3)."""
    sd = acc.get_state_dict(model)
    if not sd:
        return None
    return round(float(sum(v.float().sum() for k, v in sd.items() if torch.is_tensor(v))), 4)


def _opt_local(opt):
    """This rank's optimizer state (sum of each state tensor, step counts apart), a diagnosis column."""
    try:
        st = opt.optimizer.state
        return {k: round(float(sum(v[k].float().sum() for v in st.values() if k in v)), 4)
                for k in ("step", "exp_avg", "exp_avg_sq")}
    except Exception as e:  # noqa: BLE001  (DeepSpeed keeps its own structure)
        return type(e).__name__


FIXED = torch.tensor([1, 2])   # the continuation batch: the same on every rank and world size


def continuation(acc, model, opt, dl, sched, it=None):
    """What the run sees next: weights, lr, RNG draw, next batch (the running iterator IT when saving;
    skip_first_batches(dl, 3) after loading), weights after one fixed step."""
    c = {"weights": fingerprint(acc, model), "lr": round(sched.get_last_lr()[0], 6), "opt_local": _opt_local(opt),
         "rand": round(float(torch.rand(1)), 6)}
    if it is not None:
        c["next_batch"] = next(it).tolist()
    else:
        # the resume pattern for a map-style DataLoader (save_state stores no position for it)
        c["next_batch_skip3"] = next(iter(acc.skip_first_batches(dl, 3))).tolist()
    step(acc, model, opt, sched, FIXED.to(acc.device))
    c["weights_after_fixed_step"] = fingerprint(acc, model)
    return c


def _err(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    msg = f"{type(e).__name__}: {(lines[0] if lines else '')[:200]}"
    if not lines:   # a bare assert: name where it was raised
        import traceback
        fr = traceback.extract_tb(e.__traceback__)[-1]
        pkg = fr.filename.split("site-packages/")[-1]
        msg += f"(in {pkg}::{fr.name})"
    return msg


def _state_dict_view(acc, model):
    sd = acc.get_state_dict(model)
    if not sd:
        return repr(sd)
    v = next(iter(sd.values()))
    return {"n_keys": len(sd), "keys": sorted(sd), "emb_type": type(sd["emb.weight"]).__name__ if "emb.weight" in sd
            else type(v).__name__, "emb_shape": list(sd["emb.weight"].shape) if "emb.weight" in sd else None}


def do_save():
    acc, model, opt, dl, sched, counter = build(BACKEND, seed=0)
    RES["setup"] = {"distributed_type": str(acc.distributed_type).split(".")[-1], "num_processes": acc.num_processes,
                    "model_type": type(model).__name__, "opt_type": type(opt.optimizer).__name__,
                    "sched_type": type(sched).__name__}
    RES["weights_initial"] = fingerprint(acc, model)
    dump()
    # output_dir with automatic naming: ignored
    ignored = ROOT / BACKEND / "my_dir"
    it = iter(dl)
    listings = []
    for i in range(3):
        batch = next(it)
        RES.setdefault("batches", []).append(batch.tolist())
        step(acc, model, opt, sched, batch.to(acc.device))
        if i == 0:
            RES["weights_after_1_step"] = fingerprint(acc, model)
        counter.n += 1
        WRITES.clear()
        acc.save_state(str(ignored) if i == 0 else None)
        acc.wait_for_everyone()
        RES.setdefault("writes", []).append(mine())
        listings.append(sorted(os.listdir(ROOT / BACKEND / "checkpoints")))
        dump()
    RES["my_dir_created"] = ignored.exists()
    RES["checkpoints_after_each_save"] = listings
    RES["step_attr"] = acc.step
    RES["save_iteration"] = acc.save_iteration
    last = ROOT / BACKEND / "checkpoints" / "checkpoint_2"
    RES["files"] = sorted(str(p.relative_to(last)) for p in last.rglob("*") if p.is_file())
    RES["continuation"] = continuation(acc, model, opt, dl, sched, it)
    dump()
    # exports: unwrap_model, get_state_dict, save_model
    try:
        RES["unwrap_type"] = type(acc.unwrap_model(model)).__name__
        RES["unwrap_param"] = {k: f"{type(p).__name__}{list(p.shape)}" for k, p in
                               acc.unwrap_model(model).named_parameters()}
    except Exception as e:  # noqa: BLE001
        RES["unwrap_type"] = _err(e)
    try:
        RES["get_state_dict"] = _state_dict_view(acc, model)
    except Exception as e:  # noqa: BLE001
        RES["get_state_dict"] = _err(e)
    dump()
    exp = ROOT / BACKEND / "export"
    WRITES.clear()
    try:
        acc.save_model(model, str(exp))
        RES["save_model"] = "ok"
    except Exception as e:  # noqa: BLE001
        RES["save_model"] = _err(e)
    acc.wait_for_everyone()
    RES["save_model_writes"] = mine()
    if exp.exists():
        RES["export_files"] = sorted(os.listdir(exp))
        f = exp / "model.safetensors"
        if f.exists():
            from safetensors import safe_open
            with safe_open(str(f), "pt") as h:
                RES["export_keys"] = {k: list(h.get_slice(k).get_shape()) for k in h.keys()}
    dump()


def do_load():
    acc, model, opt, dl, sched, counter = build(BACKEND, seed=123)
    RES["setup"] = {"distributed_type": str(acc.distributed_type).split(".")[-1], "num_processes": acc.num_processes}
    dump()
    src = ROOT / BACKEND / "checkpoints"
    if MODE.startswith("cross:"):
        RES["cross"] = {}
        _cross(acc, MODE.split(":", 1)[1])
        return
    if MODE == "load_init":   # the FSDP1 work-around: optimizer state created before load_state
        from torch.distributed.checkpoint.state_dict import _init_optim_state
        _init_optim_state(opt.optimizer)
    try:
        if MODE == "load":
            acc.load_state()        # automatic naming: the highest checkpoint_<n>
        elif MODE == "load1_noopt":   # DeepSpeed at another world size: weights only
            acc.load_state(str(src / "checkpoint_2"), load_optimizer_states=False)
        else:
            acc.load_state(str(src / "checkpoint_2"))
        RES["load"] = "ok"
    except BaseException as e:  # noqa: BLE001  (DCP's CheckpointException is a BaseException)
        RES["load"] = _err(e)
    dump()
    RES["counter"] = counter.n
    RES["step_attr"] = acc.step
    RES["save_iteration"] = acc.save_iteration
    if RES["load"] == "ok":
        RES["continuation"] = continuation(acc, model, opt, dl, sched)
    dump()
    if MODE != "load":
        return
    # a save after resuming: which folder does automatic naming pick?
    try:
        acc.save_state()
        RES["save_after_load"] = "ok"
    except Exception as e:  # noqa: BLE001
        RES["save_after_load"] = _err(e)
    acc.wait_for_everyone()
    RES["checkpoints_after_save"] = sorted(os.listdir(src))
    dump()
    # every other backend's folder, loaded into this backend's prepared objects (FSDP: one process each)
    RES["cross"] = {}
    if not BACKEND.startswith("fsdp"):
        for other in (*BACKENDS, "parent"):
            if other != BACKEND and not _cross(acc, other):
                break


def _cross(acc, other: str) -> bool:
    # "parent": the run's own checkpoints/ folder instead of a checkpoint_<n> inside it
    folder = ROOT / BACKEND / "checkpoints" if other == "parent" else ROOT / other / "checkpoints" / "checkpoint_2"
    try:
        acc.load_state(str(folder))
        RES["cross"][other] = "no exception"
    except BaseException as e:  # noqa: BLE001  (DCP's CheckpointException is a BaseException)
        RES["cross"][other] = _err(e)
    dump()
    try:
        acc.wait_for_everyone()
    except Exception as e:  # noqa: BLE001
        RES["cross"][other] += f" (barrier: {_err(e)})"
        return False
    return True


if __name__ == "__main__":
    _record_writes()
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            do_save() if MODE == "save" else do_load()
    except BaseException as e:  # noqa: BLE001
        import traceback
        RES["fatal"] = _err(e)
        RES["fatal_at"] = [f"{f.filename.split('site-packages/')[-1]}::{f.name}"
                           for f in traceback.extract_tb(e.__traceback__)][-6:]
    dump()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
