"""One gloo rank, DS_ACCELERATOR=cpu (deepspeed 0.19.8, accelerate 1.15.0): which optimizer wrapper
and gradient-accumulation dtype the engine picks per ZeRO stage, who steps a learning-rate
scheduler, and what Accelerate fills into "auto" keys and mixed precision for a DeepSpeed plugin
(the half of the Transformers Trainer hand-off that runs without transformers). Prints RESULT <json>.
"""
import json
import os
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

import torch

import deepspeed
import deepspeed.comm.torch  # noqa: F401

# the CPU accelerator JIT-builds a shared-memory op otherwise (minutes); gloo is all this needs
sys.modules["deepspeed.comm.torch"].build_shm_op = lambda: None
from deepspeed.accelerator import get_accelerator  # noqa: E402

deepspeed.init_distributed(dist_backend="gloo")
WORK = Path(sys.argv[1])
out = {"bf16_supported": bool(get_accelerator().is_bf16_supported())}


def err(exc):
    return {"raises": type(exc).__name__, "msg": str(exc)[:300]}


def case(name):
    def deco(fn):
        try:
            out[name] = fn()
        except Exception as exc:  # recorded, the test names what failed
            out[name] = {"probe_error": err(exc), "tb": traceback.format_exc()[-800:]}
        return fn
    return deco


def engine(cfg, model=None, **kw):
    model = model or torch.nn.Linear(8, 8)
    base = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True}
    base.update(cfg)
    opt = kw.pop("optimizer", None) or torch.optim.SGD(model.parameters(), lr=0.1)
    return deepspeed.initialize(model=model, optimizer=opt, config=base, **kw)


# ---------------------------------------------------------------- gradient accumulation dtype
@case("grad_accum")
def _():
    r = {}
    for stage in (0, 1, 2, 3):
        for accum in (None, "fp32"):
            cfg = {"bf16": {"enabled": True}, "zero_optimization": {"stage": stage}}
            if accum:
                cfg["data_types"] = {"grad_accum_dtype": accum}
            key = f"stage{stage}_{accum or 'default'}"
            try:
                eng = engine(cfg)[0]
                opt = eng.optimizer
                r[key] = {"optimizer": type(opt).__name__,
                          "accum_dtype": str(getattr(opt, "gradient_accumulation_dtype", None)),
                          "separate": getattr(opt, "use_separate_grad_accum", None)}
            except Exception as exc:
                r[key] = err(exc)
    return r


# ---------------------------------------------------------------- who steps the scheduler
@case("sched_engine")
def _():
    """A torch scheduler handed to deepspeed.initialize: the engine steps it in engine.step();
    calling scheduler.step() in the loop as well steps it twice per optimizer step."""
    r = {}
    for manual in (False, True):
        m = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(m.parameters(), lr=1.0)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        eng, _, _, ds_sched = deepspeed.initialize(model=m, optimizer=opt, lr_scheduler=sched,
                                                   config={"train_micro_batch_size_per_gpu": 1})
        for _ in range(3):
            eng.backward(eng(torch.ones(1, 2)).sum())
            eng.step()
            if manual:
                sched.step()
        r["manual" if manual else "engine_only"] = {"same_object": ds_sched is sched, "last_epoch": sched.last_epoch,
                                                    "lr": opt.param_groups[0]["lr"]}
    # with gradient accumulation the engine steps it once per boundary, not per micro-batch
    m = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    eng = deepspeed.initialize(model=m, optimizer=opt, lr_scheduler=sched,
                               config={"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2})[0]
    for _ in range(4):
        eng.backward(eng(torch.ones(1, 2)).sum())
        eng.step()
    r["gas2_four_micro_batches"] = sched.last_epoch
    return r


# ---------------------------------------------------------------- Accelerate side
def stub_transformers():
    """The transformers stand-in (tests/_transformers_stub.py) reporting the pinned 5.25.0."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _transformers_stub import install
    install(WORK / "stub", "5.25.0")


stub_transformers()
from accelerate import Accelerator, DeepSpeedPlugin  # noqa: E402
from accelerate.state import AcceleratorState, GradientState  # noqa: E402
from accelerate.utils import DummyOptim  # noqa: E402


def reset():
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()


class WithConfig(torch.nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.lin = torch.nn.Linear(hidden, hidden)
        self.config = SimpleNamespace(hidden_size=hidden)

    def forward(self, x):
        return self.lin(x)


def loader():
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(4, 16)), batch_size=2)


@case("acc_hidden_auto")
def _():
    r = {}
    for stage in (2, 3):
        reset()
        zero = {"stage": stage, "reduce_bucket_size": "auto"}
        if stage == 3:
            zero.update(stage3_prefetch_bucket_size="auto", stage3_param_persistence_threshold="auto")
        cfg = {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": zero}  # no gradient_accumulation_steps
        plugin = DeepSpeedPlugin(hf_ds_config=cfg)
        acc = Accelerator(deepspeed_plugin=plugin)
        model = WithConfig()
        acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), loader())
        z = acc.deepspeed_config["zero_optimization"]
        r[f"stage{stage}"] = {k: z.get(k) for k in ("reduce_bucket_size", "stage3_prefetch_bucket_size",
                                                     "stage3_param_persistence_threshold")}
        r[f"stage{stage}"]["gradient_accumulation_steps"] = acc.deepspeed_config["gradient_accumulation_steps"]
    reset()
    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config={
        "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2, "reduce_bucket_size": "auto"}}))
    bare = torch.nn.Linear(16, 16)
    try:
        acc.prepare(bare, torch.optim.SGD(bare.parameters(), lr=0.1))
        r["no_config"] = "ok"
    except Exception as exc:
        r["no_config"] = err(exc)
    return r


@case("acc_precision")
def _():
    """What the Trainer hands Accelerate: a DeepSpeed config whose fp16/bf16 'auto' the Trainer already
    filled from TrainingArguments.bf16/fp16, plus mixed_precision from ACCELERATE_MIXED_PRECISION."""
    r = {}
    for label, bf16 in (("filled_false", False), ("still_auto", "auto"), ("absent", None)):
        reset()
        cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}
        if bf16 is not None:
            cfg["bf16"] = {"enabled": bf16}
            cfg["fp16"] = {"enabled": False if bf16 is False else "auto"}
        acc = Accelerator(mixed_precision="bf16", deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=cfg))
        r[label] = {"accelerator": acc.mixed_precision,
                    "bf16_enabled": acc.state.deepspeed_plugin.deepspeed_config["bf16"]["enabled"]}
    return r


@case("acc_sched")
def _():
    """accelerator.prepare(scheduler) under DeepSpeed: a torch scheduler stays with Accelerate; one of
    DeepSpeed's own schedule classes goes to the engine and the returned wrapper's step() is a no-op."""
    from deepspeed.runtime.lr_schedules import WarmupLR
    r = {}
    for label in ("torch_steplr", "ds_warmuplr"):
        reset()
        acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config={
            "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 1}}))
        model = torch.nn.Linear(16, 16)
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        sched = (torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) if label == "torch_steplr"
                 else WarmupLR(opt, warmup_min_lr=0.0, warmup_max_lr=1.0, warmup_num_steps=10, warmup_type="linear"))
        eng, popt, pdl, psched = acc.prepare(model, opt, loader(), sched)
        for (x,) in pdl:
            acc.backward(eng(x).sum())
            popt.step()
            psched.step()
            popt.zero_grad()
        r[label] = {"wrapper": type(psched).__name__, "engine_has_it": eng.lr_scheduler is sched,
                    "last_epoch": sched.last_batch_iteration if label == "ds_warmuplr" else sched.last_epoch}
    return r


@case("fsdp_trainer_plugin")
def _():
    """The dict transformers 5.25.0 TrainingArguments._process_fsdp_args builds for fsdp=True with an
    empty fsdp_config (training_args.py ~2826-2862), given to the real plugin under an accelerate
    FSDP config's environment: explicit fields win, the unset ones come from the environment."""
    import os
    from accelerate.utils import FullyShardedDataParallelPlugin
    trainer_args = {"fsdp_version": 2, "auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "cpu_ram_efficient_loading": False,
                    "state_dict_type": "FULL_STATE_DICT", "reshard_after_forward": True}
    env = {"FSDP_VERSION": "1", "FSDP_STATE_DICT_TYPE": "SHARDED_STATE_DICT", "FSDP_AUTO_WRAP_POLICY": "SIZE_BASED_WRAP",
           "FSDP_CPU_RAM_EFFICIENT_LOADING": "true", "FSDP_OFFLOAD_PARAMS": "true", "FSDP_ACTIVATION_CHECKPOINTING": "true"}
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        p = FullyShardedDataParallelPlugin(**trainer_args)
        return {"version": p.fsdp_version, "state_dict_type": str(p.state_dict_type).split(".")[-1],
                "auto_wrap": getattr(p.auto_wrap_policy, "__name__", str(p.auto_wrap_policy)),
                "cpu_ram_efficient_loading": p.cpu_ram_efficient_loading,
                "offload": type(p.cpu_offload).__name__, "activation_checkpointing": p.activation_checkpointing}
    finally:
        os.environ.clear()
        os.environ.update(saved)


@case("trainer_gas_plugin")
def _():
    """The Trainer hands Accelerate GradientAccumulationPlugin(num_steps=1) (transformers 5.25.0
    trainer.py ~825); the launcher's ACCELERATE_GRADIENT_ACCUMULATION_STEPS is then never read."""
    import os
    from accelerate.utils import GradientAccumulationPlugin
    os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = "4"
    try:
        reset()
        with_plugin = Accelerator(cpu=True, gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=1))
        r = {"with_plugin": with_plugin.gradient_accumulation_steps}
        reset()
        r["without_plugin"] = Accelerator(cpu=True).gradient_accumulation_steps
        return r
    finally:
        del os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"]
        reset()


print("RESULT " + json.dumps(out, default=str), flush=True)
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
