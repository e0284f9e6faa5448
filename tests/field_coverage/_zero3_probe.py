"""Runs under `torchrun --nproc_per_node 2` with DS_ACCELERATOR=cpu (gloo). Each rank records what
ZeRO-3 does to parameters, gathering, saving and Accelerate's DeepSpeed path, and rank 0 writes
the observations as JSON to the path in argv[1] (read by test_zero3_parameters.py)."""
import json
import os
import sys
import tempfile
from pathlib import Path

# transformers 5.25.0 is installed (requirements-test.txt): hide it before anything imports it, so
# section 5 shows Accelerate's DeepSpeed path where transformers is absent (the installed case is
# run in-process by test_transformers_trainer_cpu.py::test_accelerate_deepspeed_weakref_with_transformers)
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _transformers_stub import hidden, hide  # noqa: E402

hide()

import torch  # noqa: E402
import deepspeed  # noqa: E402
import torch.distributed as dist  # noqa: E402

deepspeed.init_distributed(dist_backend="gloo")
RANK = dist.get_rank()
OUT = {}


def cfg(**zero):
    return {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
            "zero_optimization": {"stage": 3, **zero},
            "optimizer": {"type": "SGD", "params": {"lr": 0.1}}}


def shapes(sd):
    return {k: list(v.shape) for k, v in sd.items()}


def every_rank(value):
    got = [None] * dist.get_world_size()
    dist.all_gather_object(got, value)
    return got


# 1. construction under zero.Init
torch.manual_seed(0)
with deepspeed.zero.Init(config_dict_or_path=cfg()):
    lin = torch.nn.Linear(5, 3)
w = lin.weight
OUT["init"] = {"shape": list(w.shape), "numel": w.numel(), "ds_shape": list(w.ds_shape),
               "ds_numel": w.ds_numel, "status": w.ds_status.name,
               "local_shard_numel": every_rank(w.ds_tensor.numel())}

# 2. gathering, and writes with and without modifier_rank
with deepspeed.zero.GatheredParameters([w]):
    OUT["gathered_shape"] = every_rank(list(w.shape))
    before = float(w.sum())
OUT["after_exit_shape"] = list(w.shape)
with deepspeed.zero.GatheredParameters([w], modifier_rank=None):
    if RANK == 0:
        w.data.fill_(7.0)
with deepspeed.zero.GatheredParameters([w]):
    OUT["write_modifier_none"] = every_rank(round(float(w.sum()) - before, 6))
with deepspeed.zero.GatheredParameters([w], modifier_rank=0):
    if RANK == 0:
        w.data.fill_(1.0)
with deepspeed.zero.GatheredParameters([w]):
    OUT["write_modifier_0"] = every_rank(float(w.sum()))

with deepspeed.zero.Init(config_dict_or_path=cfg(enable_sanity_checks=True)):
    lin2 = torch.nn.Linear(5, 3)
def sanity(write):
    try:
        with deepspeed.zero.GatheredParameters([lin2.weight], modifier_rank=None):
            if RANK == 0:
                write(lin2.weight)
        return None
    except RuntimeError as e:
        return str(e)


def through_data(p):
    p.data.add_(1.0)


def in_place(p):
    with torch.no_grad():
        p.add_(1.0)


OUT["sanity_data_write_error"] = sanity(through_data)
OUT["sanity_in_place_error"] = sanity(in_place)

# 3. a model built without zero.Init is partitioned by deepspeed.initialize
plain = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 1))
OUT["plain_before_initialize"] = list(plain[0].weight.shape)
eng, _, _, _ = deepspeed.initialize(model=plain, model_parameters=plain.parameters(), config=cfg())
OUT["plain_after_initialize"] = list(eng.module[0].weight.shape)
loss = eng(torch.ones(2, 5)).sum()
eng.backward(loss)
eng.step()
OUT["forward_ok"] = bool(torch.isfinite(loss))
OUT["persist_flags"] = sorted({bool(p.ds_persist) for p in eng.module.parameters()})
OUT["module_state_dict_small_params"] = shapes(eng.module.state_dict())
big = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 1))
eng0, _, _, _ = deepspeed.initialize(model=big, model_parameters=big.parameters(),
                                     config=cfg(stage3_param_persistence_threshold=0))
loss = eng0(torch.ones(2, 5)).sum()
eng0.backward(loss)
eng0.step()
OUT["module_state_dict"] = every_rank(shapes(eng0.module.state_dict()))

# 4. getting weights out
tmp = tempfile.mkdtemp() if RANK == 0 else None
tmp = every_rank(tmp)[0]
OUT["save_16bit_flag_off"] = eng.save_16bit_model(os.path.join(tmp, "off"))
OUT["save_16bit_flag_off_file"] = os.path.exists(os.path.join(tmp, "off", "pytorch_model.bin"))
sd16 = eng._zero3_consolidated_16bit_state_dict()
OUT["consolidated_per_rank"] = every_rank(shapes(sd16) if sd16 else sd16)
eng.save_checkpoint(os.path.join(tmp, "ckpt"))
dist.barrier()
if RANK == 0:
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint
    fp32 = get_fp32_state_dict_from_zero_checkpoint(os.path.join(tmp, "ckpt"))
    OUT["zero_to_fp32"] = {k: [list(v.shape), str(v.dtype)] for k, v in fp32.items()}

on = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 1))
eng_on, _, _, _ = deepspeed.initialize(model=on, model_parameters=on.parameters(),
                                       config=cfg(stage3_gather_16bit_weights_on_model_save=True))
OUT["save_16bit_flag_on"] = eng_on.save_16bit_model(os.path.join(tmp, "on"))
dist.barrier()
if RANK == 0:
    sd = torch.load(os.path.join(tmp, "on", "pytorch_model.bin"), weights_only=True)
    OUT["save_16bit_flag_on_file"] = shapes(sd)

# 5. Accelerate's DeepSpeed path
from accelerate import Accelerator
from accelerate.utils import DeepSpeedPlugin
from accelerate.utils.imports import is_transformers_available

p = DeepSpeedPlugin(zero_stage=3)
OUT["accelerate_zero3_init_flag_default"] = p.zero3_init_flag
OUT["transformers_available"] = is_transformers_available()
OUT["transformers_hidden"] = hidden()
try:
    p.set_deepspeed_weakref()
    OUT["weakref_error"] = None
    from transformers.integrations import is_deepspeed_zero3_enabled
    OUT["transformers_sees_zero3"] = is_deepspeed_zero3_enabled()
except Exception as e:  # accelerate raises a bare Exception without transformers
    OUT["weakref_error"] = str(e)

try:
    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=3, zero3_init_flag=False))
    OUT["accelerator_error"] = None
except Exception as e:  # without transformers: importlib.metadata.PackageNotFoundError
    OUT["accelerator_error"] = f"{type(e).__name__}: {e}"
    # Forcing past it: the weak reference only tells Transformers' from_pretrained about ZeRO-3;
    # nothing below loads a Transformers model, so a no-op lets the real prepare/get_state_dict run.
    from accelerate.state import AcceleratorState, GradientState
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    DeepSpeedPlugin.set_deepspeed_weakref = lambda self: None
    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=3, zero3_init_flag=False))
OUT["accelerate_distributed_type"] = str(acc.distributed_type)
m1, m2 = torch.nn.Linear(5, 3), torch.nn.Linear(5, 3)
try:
    acc.prepare(m1, m2, torch.optim.SGD(m1.parameters(), lr=0.1))
    OUT["two_models_error"] = None
except AssertionError as e:
    OUT["two_models_error"] = str(e)
# get_state_dict on the engines built above (it reads the plugin's stage and the engine's flag)
acc.deepspeed_config = acc.state.deepspeed_plugin.deepspeed_config  # what _prepare_deepspeed sets
try:
    acc.get_state_dict(eng)
    OUT["get_state_dict_error"] = None
except ValueError as e:
    OUT["get_state_dict_error"] = str(e)
full = acc.get_state_dict(eng_on)
OUT["get_state_dict_flag_on"] = every_rank(shapes(full) if full else full)
# save_model on EVERY rank (s5-fd-11): the gather is collective; rank 0 gets the dict and writes,
# the others get None and accelerate 1.15.0 returns before touching it (no AttributeError)
try:
    acc.save_model(eng_on, os.path.join(tmp, "export"))
    err = None
except Exception as e:  # what older accelerate raised on the None dict
    err = f"{type(e).__name__}: {e}"
OUT["save_model_every_rank_errors"] = every_rank(err)
dist.barrier()
OUT["save_model_files"] = sorted(os.listdir(os.path.join(tmp, "export")))

# save_state / load_state hooks under DeepSpeed (the diffusers save_model_hook pattern): the engine has
# already written its checkpoint when the save hook runs, so `weights` is empty; the load hook gets no models
OUT["accelerate_models_before_hooks"] = len(acc._models)
m3 = torch.nn.Linear(5, 3)
# the forced Accelerator above counts 1 process (no accelerate launcher env): state the batch for 2 ranks
acc.state.deepspeed_plugin.deepspeed_config.update(train_batch_size=2, train_micro_batch_size_per_gpu=1,
                                                   gradient_accumulation_steps=1)
e3, o3 = acc.prepare(m3, torch.optim.SGD(m3.parameters(), lr=0.1))
hook_calls = {}
acc.register_save_state_pre_hook(lambda models, weights, d: hook_calls.update(save=[len(models), len(weights)]))
acc.register_load_state_pre_hook(lambda models, d: hook_calls.update(load=[len(models)]))
acc.save_state(os.path.join(tmp, "state"))
acc.load_state(os.path.join(tmp, "state"))
OUT["ds_state_hooks"] = every_rank(hook_calls)
dist.barrier()
OUT["ds_state_files"] = sorted(os.listdir(os.path.join(tmp, "state")))

# a frozen reference/reward model through deepspeed.initialize with no optimizer, per stage
OUT["no_optimizer_engine"] = {}
for stage in (0, 1, 2, 3):
    ref = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 1)).requires_grad_(False)
    conf = {"train_micro_batch_size_per_gpu": 1,
            "zero_optimization": {"stage": stage, "stage3_param_persistence_threshold": 0}}
    try:
        ref_eng = deepspeed.initialize(model=ref, config=conf)[0]
        with torch.no_grad():
            ref_eng(torch.ones(2, 5))
        OUT["no_optimizer_engine"][str(stage)] = {"optimizer": type(ref_eng.optimizer).__name__,
                                                   "weight_shape": list(ref_eng.module[0].weight.shape)}
    except AssertionError as e:
        OUT["no_optimizer_engine"][str(stage)] = {"error": str(e)}

# generation inside a training loop: one gather of the whole model, then several forwards
gen = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 1))
gen_eng = deepspeed.initialize(model=gen, model_parameters=gen.parameters(),
                               config=cfg(stage3_param_persistence_threshold=0))[0]
gp = list(gen_eng.module.parameters())
with deepspeed.zero.GatheredParameters(gen_eng.module.parameters()):  # a generator is accepted
    gathered = [p.ds_status.name for p in gp]
    with torch.no_grad():
        gen_eng.module(torch.ones(1, 5))
    after_fwd = [p.ds_status.name for p in gp]
OUT["gather_all_then_forward"] = {"gathered": sorted(set(gathered)), "after_forward": sorted(set(after_fwd))}
from deepspeed.runtime.zero import unwrap_model_for_generation  # noqa: E402
with unwrap_model_for_generation(gen_eng) as unwrapped:
    with torch.no_grad():
        for _ in range(3):
            unwrapped.module(torch.ones(1, 5))
    during = sorted({p.ds_status.name for p in gp})
OUT["unwrap_for_generation"] = {"after_3_forwards": during, "after_exit_shapes": [list(p.shape) for p in gp]}
gen_eng.backward(gen_eng(torch.ones(2, 5)).sum())
gen_eng.step()
OUT["unwrap_for_generation"]["train_step_after"] = [list(p.shape) for p in gp]
with deepspeed.zero.GatheredParameters(gen_eng.module.state_dict()):  # a dict iterates its keys
    OUT["gather_state_dict_noop"] = [list(p.shape) for p in gp]
import copy  # noqa: E402

ref_copy = copy.deepcopy(gen_eng.module)  # a reference model made by copying the partitioned policy
OUT["deepcopy_partitioned"] = {"shapes": [list(p.shape) for p in ref_copy.parameters()],
                               "zero_params": [hasattr(p, "ds_id") for p in ref_copy.parameters()]}

# frozen parameters under non-reentrant activation checkpointing (the LoRA case): the recompute in
# backward must see them whole; deepspeed 0.19.8 keeps them gathered through it
from torch.utils.checkpoint import checkpoint  # noqa: E402


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm, self.lin = torch.nn.LayerNorm(16), torch.nn.Linear(16, 16)

    def forward(self, x):
        return self.lin(self.norm(x))


class _Ckpt(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList([_Block(), _Block()])

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)
        return x


ck = _Ckpt()
seen = []
for b in ck.blocks:
    b.norm.requires_grad_(False)
    b.norm.register_forward_hook(lambda m, i, o: seen.append(list(m.weight.shape)))
ck_eng = deepspeed.initialize(model=ck, model_parameters=[p for p in ck.parameters() if p.requires_grad],
                              config=cfg(stage3_param_persistence_threshold=0))[0]
try:
    ck_eng.backward(ck_eng(torch.randn(2, 16)).sum())
    ck_eng.step()
    OUT["frozen_ckpt"] = {"error": None, "norm_shapes_seen": seen}
except Exception as e:  # the CheckpointError of older releases
    OUT["frozen_ckpt"] = {"error": f"{type(e).__name__}: {str(e)[:200]}", "norm_shapes_seen": seen}

# ---- what each node writes in save_checkpoint (deepspeed-multinode-runners.md) ----
# Two "nodes" of one process each: LOCAL_RANK=0 on both ranks (read by the engine at initialize), and
# each rank saves under its own directory, standing for the same path on each node's own disk.
saved_local_rank = os.environ.get("LOCAL_RANK")
os.environ["LOCAL_RANK"] = "0"
node_root = os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), f"node{RANK}")
OUT["node_saves"] = {}
for stage in (2, 3):
    for node_local in (False, True):
        torch.manual_seed(0)
        m = torch.nn.Linear(8, 8)
        conf = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True,
                "zero_optimization": {"stage": stage}, "optimizer": {"type": "SGD", "params": {"lr": 0.1}},
                "checkpoint": {"use_node_local_storage": node_local}}
        eng = deepspeed.initialize(model=m, model_parameters=m.parameters(), config=conf)[0]
        eng.backward(eng(torch.randn(1, 8)).sum())
        eng.step()
        save_dir = os.path.join(node_root, f"s{stage}_{'local' if node_local else 'one_copy'}")
        eng.save_checkpoint(save_dir)
        files = sorted(os.path.relpath(os.path.join(d, f), save_dir) for d, _, fs in os.walk(save_dir) for f in fs)
        OUT["node_saves"][f"stage{stage}_node_local_{str(node_local).lower()}"] = every_rank(files)
if saved_local_rank is None:
    os.environ.pop("LOCAL_RANK", None)
else:
    os.environ["LOCAL_RANK"] = saved_local_rank

if RANK == 0:
    with open(sys.argv[1], "w") as f:
        json.dump(OUT, f, indent=1, sort_keys=True)
dist.barrier()
# Leave the group before interpreter exit: in one suite run out of several (machine under load),
# rank 1 died of SIGABRT ("terminate called without an active exception"), apparently after the barrier,
# during teardown with the group still alive.
dist.destroy_process_group()
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
