"""Single-process behaviour of the real `Accelerator`, plugins and CLI helpers on CPU, for the
claims ledger. Run by test_run_claims.py as one subprocess (argv[1]: an empty work directory);
prints one JSON object. Each key answers one question a reference makes a claim about.
"""
from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _probe_core import (  # noqa: E402,F401  (the environment is set up on import)
    WORK, Accelerator, AcceleratorState, AutocastKwargs, DeepSpeedPlugin, FullyShardedDataParallelPlugin, GradientAccumulationPlugin, GradientState, ProjectConfiguration, TorchDynamoPlugin, case, err, hidden, hide, nn, out, raises, reset, set_seed, torch,
)

# ------------------------------------------------------------------ precedence and defaults
@case("mixed_precision")
def _():
    r = {"default": Accelerator().mixed_precision}
    reset()
    os.environ["ACCELERATE_MIXED_PRECISION"] = "bf16"
    r["env_only"] = Accelerator().mixed_precision
    reset()
    os.environ["ACCELERATE_MIXED_PRECISION"] = "bf16"
    r["arg_over_env"] = Accelerator(mixed_precision="no").mixed_precision
    return r


@case("grad_accum_defaults")
def _():
    r = {"default": Accelerator().gradient_accumulation_steps}
    reset()
    os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = "3"
    r["env"] = Accelerator().gradient_accumulation_steps
    reset()
    r["plugin_and_steps"] = raises(lambda: Accelerator(gradient_accumulation_steps=2,
                                                      gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=2)))
    reset()
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = "auto"
    r["auto_from_env"] = raises(Accelerator)
    return r


@case("plugin_env_merge")
def _():
    os.environ.update({"ACCELERATE_DEEPSPEED_ZERO_STAGE": "3", "ACCELERATE_GRADIENT_CLIPPING": "0.5",
                       "FSDP_VERSION": "2", "FSDP_STATE_DICT_TYPE": "FULL_STATE_DICT",
                       "FSDP_RESHARD_AFTER_FORWARD": "false", "PARALLELISM_CONFIG_DP_SHARD_SIZE": "4"})
    ds = DeepSpeedPlugin(zero_stage=1, gradient_accumulation_steps=1)
    fs = FullyShardedDataParallelPlugin(state_dict_type="SHARDED_STATE_DICT")
    from accelerate import ParallelismConfig
    pc = ParallelismConfig()
    return {"ds_zero_stage_code": ds.zero_stage, "ds_clipping_env": ds.gradient_clipping,
            "fsdp_version_env": fs.fsdp_version, "fsdp_state_dict_code": fs.state_dict_type.name,
            "fsdp_reshard_env": fs.reshard_after_forward,
            "pc_dp_shard_env": pc.dp_shard_size, "pc_tp_default": pc.tp_size, "pc_cp_default": pc.cp_size}


# ------------------------------------------------------------------ accumulation on one process
@case("accumulate")
def _():
    acc = Accelerator(gradient_accumulation_steps=2)
    torch.manual_seed(0)
    net = nn.Linear(3, 1, bias=False)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    ds = torch.utils.data.TensorDataset(torch.ones(3, 3))
    model, opt, dl, sched = acc.prepare(net, opt, torch.utils.data.DataLoader(ds, batch_size=1), sched)
    flags, weights, grads, sched_steps, lrs = [], [], [], [], []
    w0 = float(net.weight.detach().sum())
    for (x,) in dl:  # 3 micro-batches with k=2: the last one is a dataloader-end sync
        with acc.accumulate(model):
            loss = model(x).sum()
            acc.backward(loss)
            grads.append(float(net.weight.grad.sum()))
            flags.append(acc.sync_gradients)
            opt.step()
            sched.step()
            opt.zero_grad()
            weights.append(float(net.weight.detach().sum()))
            sched_steps.append(sched.scheduler._step_count)
            lrs.append(opt.param_groups[0]["lr"])
    # plain loss.backward(): no division by k
    net2 = nn.Linear(3, 1, bias=False)
    net2.weight.data.copy_(torch.ones(1, 3))
    net2(torch.ones(1, 3)).sum().backward()
    r = {"flags": flags, "initial_weight": w0, "weights": weights, "grad_sums": grads, "sched_step_count": sched_steps, "lrs": lrs,
         "plain_backward_grad_sum": float(net2.weight.grad.sum())}
    acc.gradient_accumulation_steps = 3
    r["settable"] = acc.gradient_accumulation_steps
    return r


@case("adjust_scheduler_true")
def _():
    acc = Accelerator(gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=2, adjust_scheduler=True))
    net = nn.Linear(2, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    model, opt, sched = acc.prepare(net, opt, sched)
    counts = [sched.scheduler._step_count]
    for _ in range(2):
        with acc.accumulate(model):
            acc.backward(model(torch.ones(1, 2)).sum())
            opt.step()
            sched.step()
            opt.zero_grad()
            counts.append(sched.scheduler._step_count)
    return {"step_counts": counts, "plugin_kwargs": acc.gradient_state.plugin_kwargs,
            "state_adjust_scheduler": acc.gradient_state.adjust_scheduler}


@case("sync_each_batch")
def _():
    plugin = GradientAccumulationPlugin(num_steps=2, sync_each_batch=True)
    acc = Accelerator(gradient_accumulation_plugin=plugin)
    net = nn.Linear(2, 1)
    model = acc.prepare(net)
    flags = []
    for _ in range(3):
        with acc.accumulate(model):
            flags.append(acc.sync_gradients)
    return {"flags": flags, "sync_with_dataloader_default": GradientAccumulationPlugin(num_steps=2).sync_with_dataloader,
            "adjust_scheduler_default": GradientAccumulationPlugin(num_steps=2).adjust_scheduler}


# ------------------------------------------------------------------ autocast, compile, seeds
@case("autocast")
def _():
    r = {}
    acc = Accelerator(mixed_precision="no")
    with acc.autocast():
        r["no_enabled"] = torch.is_autocast_enabled("cpu")
    reset()
    acc = Accelerator(mixed_precision="bf16")
    r["bf16_state"] = acc.mixed_precision
    with acc.autocast():
        r["bf16_enabled"] = torch.is_autocast_enabled("cpu")
    with acc.autocast(autocast_handler=AutocastKwargs(enabled=False)):
        r["bf16_handler_off"] = torch.is_autocast_enabled("cpu")
    model = acc.prepare(nn.Linear(4, 4))
    y = model(torch.randn(2, 4))
    r["prepared_output_dtype"] = str(y.dtype)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        r["plain_autocast_dtype"] = str(nn.Linear(4, 4)(torch.randn(2, 4)).dtype)
    return r


@case("dynamo_both")
def _():
    return raises(lambda: Accelerator(dynamo_backend="eager", dynamo_plugin=TorchDynamoPlugin(backend="eager")))


@case("set_seed")
def _():
    Accelerator()
    torch.use_deterministic_algorithms(False)
    set_seed(1, deterministic=True)
    r = {"deterministic": torch.are_deterministic_algorithms_enabled()}
    torch.use_deterministic_algorithms(False)
    set_seed(1)
    a = torch.rand(1).item()
    set_seed(1, device_specific=True)  # process_index 0 adds 0
    r["device_specific_rank0_same"] = torch.rand(1).item() == a
    return r


# ------------------------------------------------------------------ checkpoint formats
@case("save_formats")
def _():
    acc = Accelerator()
    net = nn.Sequential(nn.Linear(32, 32), nn.Linear(32, 32))  # 4.2 KB each
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    model, opt = acc.prepare(net, opt)
    r = {}
    acc.save_state(str(WORK / "bin_state"), safe_serialization=False)
    r["unsafe_state_files"] = sorted(p.name for p in (WORK / "bin_state").iterdir())
    acc.save_model(model, str(WORK / "sharded"), max_shard_size="5KB")
    r["sharded_files"] = sorted(p.name for p in (WORK / "sharded").iterdir())
    acc.save_model(model, str(WORK / "sharded_bin"), max_shard_size="5KB", safe_serialization=False)
    r["sharded_bin_files"] = sorted(p.name for p in (WORK / "sharded_bin").iterdir())
    acc.save_model(model, str(WORK / "bin"), safe_serialization=False)
    r["bin_files"] = sorted(p.name for p in (WORK / "bin").iterdir())

    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4, bias=False)
            self.b = nn.Linear(4, 4, bias=False)
            self.b.weight = self.a.weight

    tied = acc.prepare(Tied())
    acc.save_model(tied, str(WORK / "tied"))
    from safetensors.torch import load_file
    r["tied_keys"] = sorted(load_file(str(WORK / "tied" / "model.safetensors")))
    # save_state drops the alias the same way; load_state restores through safetensors' load_model
    acc.save_state(str(WORK / "tied_state"))
    saved = tied.a.weight.detach().clone()
    with torch.no_grad():
        tied.a.weight.zero_()
    acc.load_state(str(WORK / "tied_state"))
    r["tied_state_keys"] = sorted(load_file(str(WORK / "tied_state" / "model_1.safetensors")))
    r["tied_load_state_ok"] = bool(torch.equal(tied.b.weight, saved)) and tied.a.weight is tied.b.weight
    r["tied_strict_plain_load"] = raises(
        lambda: Tied().load_state_dict(load_file(str(WORK / "tied_state" / "model_1.safetensors"))))
    with torch.device("meta"):
        meta = nn.Linear(2, 2)
    r["meta"] = raises(lambda: acc.save_model(meta, str(WORK / "meta")))
    return r


@case("logging_single")
def _():
    import logging
    from accelerate.logging import get_logger
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    log = get_logger("w2_single")  # no log_level, ACCELERATE_LOG_LEVEL unset
    log.logger.addHandler(Keep())
    reset()  # no PartialState yet
    before_state = raises(lambda: log.warning("x"))
    Accelerator()
    log.info("info without a level")
    log.warning("warning without a level")
    root = logging.getLogger()
    r = {"before_state": before_state, "seen": seen, "root_level": root.level, "root_handlers": len(root.handlers)}
    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        bare = get_logger("w2_bare", log_level="INFO")  # a level, but no handler anywhere
        bare.info("bare info")
        bare.warning("bare warning")
    r["bare_stderr"] = buf.getvalue().splitlines()
    root.setLevel(logging.WARNING)
    return r


@case("executable_batch_size")
def _():
    from accelerate.utils import find_executable_batch_size
    tried = []

    @find_executable_batch_size(starting_batch_size=128)
    def run(batch_size, limit):
        tried.append(batch_size)
        if batch_size > limit:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")  # the message torch gives
        return batch_size

    r = {"first": run(100), "tried": list(tried)}
    tried.clear()
    r["second"], r["tried_second"] = run(1000), list(tried)  # the reduced size is kept between calls
    r["explicit"] = raises(lambda: run(64, 100))

    @find_executable_batch_size(starting_batch_size=8)
    def other_error(batch_size):
        raise ValueError("not memory")
    r["other"] = raises(other_error)

    @find_executable_batch_size(starting_batch_size=2)
    def always(batch_size):
        raise RuntimeError("CUDA out of memory.")
    r["zero"] = raises(always)
    acc = Accelerator()
    net = nn.Linear(2, 2)
    model, opt = acc.prepare(net, torch.optim.SGD(net.parameters(), lr=0.1))
    r["models_before_free"] = len(acc._models)
    model, opt = acc.free_memory(model, opt)
    r["after_free"] = [model, opt, len(acc._models), len(acc._optimizers), acc.step]
    return r


@case("custom_objects")
def _():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _toy_models import Counter

    acc = Accelerator()
    r = {"bad_object": raises(lambda: acc.register_for_checkpointing(object()))}
    c = Counter()
    acc.register_for_checkpointing(c)
    c.n = 7
    acc.save_state(str(WORK / "custom"))
    r["files"] = sorted(p.name for p in (WORK / "custom").iterdir())
    c.n = 0
    acc.load_state(str(WORK / "custom"))
    r["restored"] = c.n
    acc.register_for_checkpointing(Counter())
    r["count_mismatch"] = raises(lambda: acc.load_state(str(WORK / "custom")))
    return r


@case("automatic_naming")
def _():
    pc = ProjectConfiguration(project_dir=str(WORK / "proj"), automatic_checkpoint_naming=True)
    acc = Accelerator(project_config=pc)
    acc.prepare(nn.Linear(2, 2))
    acc.save_state(str(WORK / "ignored_dir"))
    return {"ignored_dir_exists": (WORK / "ignored_dir").exists(),
            "checkpoints": sorted(p.name for p in (WORK / "proj" / "checkpoints").iterdir()),
            "iteration_after": acc.project_configuration.iteration,
            "logging_dir_default": ProjectConfiguration(project_dir="p").logging_dir}


@case("total_limit_without_naming")
def _():
    """s5-ck-01: total_limit=1 with automatic_checkpoint_naming off: explicit folders, none pruned."""
    acc = Accelerator(project_config=ProjectConfiguration(project_dir=str(WORK / "proj2"), total_limit=1))
    acc.prepare(nn.Linear(2, 2))
    for name in ("a", "b", "c"):
        acc.save_state(str(WORK / "explicit" / name))
    return {"folders": sorted(p.name for p in (WORK / "explicit").iterdir())}


# ------------------------------------------------------------------ trackers
@case("tracker_dir")
def _():
    from accelerate.tracking import GeneralTracker, register_tracker_class

    seen = {}

    class DirTracker(GeneralTracker):
        name = "audit_dir_tracker"
        requires_logging_directory = True

        def __init__(self, run_name, logging_dir, **kw):
            super().__init__()
            seen["args"] = [run_name, str(logging_dir), sorted(kw)]

        @property
        def tracker(self):
            return None

        def store_init_configuration(self, values):
            seen["config"] = values

        def log(self, values, step=None, **kw):
            pass

    register_tracker_class(DirTracker)
    r = {"no_dir": raises(lambda: Accelerator(log_with="audit_dir_tracker"))}
    reset()
    acc = Accelerator(log_with="audit_dir_tracker", project_config=ProjectConfiguration(project_dir=str(WORK / "t")))
    acc.init_trackers("proj", config={"lr": 1}, init_kwargs={"audit_dir_tracker": {"extra": 1}})
    r["constructed_with"] = seen.get("args")
    r["config_stored"] = seen.get("config")
    r["trackers"] = [t.name for t in acc.trackers]
    return r


# ------------------------------------------------------------------ FSDP plugin checks on CPU
@case("fsdp_plugin")
def _():
    from torch.distributed.fsdp import CPUOffload

    r = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True, backward_prefetch="BACKWARD_PRE")
    r["fsdp2_backward_prefetch"] = None if p.backward_prefetch is None else str(p.backward_prefetch)
    r["fsdp2_backward_prefetch_warned"] = any("backward_prefetch" in str(w.message) for w in caught)
    r["fsdp2_default_state_dict"] = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True
                                                                   ).state_dict_type.name
    r["fsdp1_default_state_dict"] = FullyShardedDataParallelPlugin().state_dict_type.name
    r["fsdp2_fsdp1_cpu_offload_object"] = raises(lambda: FullyShardedDataParallelPlugin(
        fsdp_version=2, reshard_after_forward=True, cpu_offload=CPUOffload(offload_params=True)))
    r["fsdp1_ac_offload"] = raises(lambda: FullyShardedDataParallelPlugin(activation_checkpointing_offload=True))
    r["fsdp1_ac_offload_with_ac"] = raises(lambda: FullyShardedDataParallelPlugin(
        activation_checkpointing=True, activation_checkpointing_offload=True))
    from torch.distributed.fsdp import MixedPrecision
    r["fsdp2_fsdp1_mixed_precision_object"] = raises(lambda: FullyShardedDataParallelPlugin(
        fsdp_version=2, reshard_after_forward=True, mixed_precision_policy=MixedPrecision(param_dtype=torch.bfloat16)))
    r["fsdp2_ac_offload_without_ac"] = raises(lambda: FullyShardedDataParallelPlugin(
        fsdp_version=2, reshard_after_forward=True, activation_checkpointing_offload=True))
    r["fsdp1_sync_module_states_on_cpu"] = raises(lambda: FullyShardedDataParallelPlugin(sync_module_states=True))
    r["fsdp2_local_state_dict"] = raises(lambda: FullyShardedDataParallelPlugin(
        fsdp_version=2, reshard_after_forward=True, state_dict_type="LOCAL_STATE_DICT"))
    r["invalid_wrap_policy"] = raises(lambda: FullyShardedDataParallelPlugin(auto_wrap_policy="LAYER_WRAP"))
    os.environ["FSDP_MIN_NUM_PARAMS"] = "1e8"
    r["min_num_params_1e8"] = raises(lambda: FullyShardedDataParallelPlugin(auto_wrap_policy="SIZE_BASED_WRAP"))
    del os.environ["FSDP_MIN_NUM_PARAMS"]
    os.environ.update({"FSDP_VERSION": "2", "FSDP_RESHARD_AFTER_FORWARD": "FULL_SHARD"})
    r["fsdp2_strategy_name_in_reshard"] = raises(FullyShardedDataParallelPlugin)
    return r


@case("fsdp2_mixed_precision_policy")
def _():
    """What `AcceleratorState` gives FSDP2 for mixed_precision bf16 (it calls set_mixed_precision(precision))."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    def dtypes(pol):
        return {k: str(getattr(pol, k)) for k in ("param_dtype", "reduce_dtype", "output_dtype")}

    r = {}
    p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True)
    r["unset_before_state"] = p.mixed_precision_policy is None
    p.set_mixed_precision("bf16")
    r["default_bf16"] = dtypes(p.mixed_precision_policy)
    mine = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True, mixed_precision_policy=mine)
    p.set_mixed_precision("bf16")
    r["own_policy_kept"] = p.mixed_precision_policy is mine
    p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True, mixed_precision_policy={
        "param_dtype": torch.bfloat16, "reduce_dtype": torch.float32, "output_dtype": torch.bfloat16})
    r["dict_policy"] = dtypes(p.mixed_precision_policy)
    r["dict_without_output_dtype"] = raises(lambda: FullyShardedDataParallelPlugin(
        fsdp_version=2, reshard_after_forward=True,
        mixed_precision_policy={"param_dtype": torch.bfloat16, "reduce_dtype": torch.float32}))
    p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True, mixed_precision_policy="fp16")
    r["string_policy"] = dtypes(p.mixed_precision_policy)
    return r


@case("context_parallel_pieces")
def _():
    """The CP pieces that run without a CP mesh: the attention-mask hook, its refusal, the balancer choice."""
    import types

    from accelerate.big_modeling import _attach_context_parallel_hooks
    from torch.distributed.tensor.experimental._context_parallel._load_balancer import (
        _create_default_load_balancer)

    seen = {}

    class Attn(nn.Module):
        def forward(self, x, attention_mask=None, is_causal=False):
            seen.update(mask_is_none=attention_mask is None, is_causal=is_causal)
            return x

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.self_attn = Attn()

        def forward(self, x):
            return self.self_attn(x, attention_mask=torch.ones(2, 2))

    r = {}
    m = Block()
    m.config = types.SimpleNamespace(layer_types=["full_attention"])
    _attach_context_parallel_hooks(m)
    m(torch.zeros(2))
    r["hooked_call"] = dict(seen)
    sw = Block()
    sw.config = types.SimpleNamespace(sliding_window=4096)
    r["sliding_window"] = raises(lambda: _attach_context_parallel_hooks(sw))
    r["balancer_8_over_2"] = type(_create_default_load_balancer(8, 2, "cpu")).__name__
    r["balancer_6_over_2"] = type(_create_default_load_balancer(6, 2, "cpu")).__name__
    return r


@case("fsdp2_wrap_policy_and_ac")
def _():
    """fsdp2_prepare_auto_wrap_policy / fsdp2_apply_ac with NO_WRAP and with a model lacking _no_split_modules."""
    import types

    from accelerate.utils.fsdp_utils import fsdp2_apply_ac, fsdp2_prepare_auto_wrap_policy

    def fake(plugin):
        return types.SimpleNamespace(state=types.SimpleNamespace(fsdp_plugin=plugin))

    def net():
        return nn.Sequential(nn.Sequential(nn.Linear(4, 4)), nn.Sequential(nn.Linear(4, 4)))

    r = {}
    p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True, activation_checkpointing=True)
    m = net()
    p.set_auto_wrap_policy(m)
    r["no_wrap_policy_is_none"] = fsdp2_prepare_auto_wrap_policy(p, m) is None
    r["no_wrap_with_ac"] = raises(lambda: fsdp2_apply_ac(fake(p), m))
    p = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=True, activation_checkpointing=True,
                                       auto_wrap_policy="transformer_based_wrap")
    m = net()  # no _no_split_modules, no transformer_cls_names_to_wrap
    p.set_auto_wrap_policy(m)
    pol = fsdp2_prepare_auto_wrap_policy(p, m)
    r["no_split_policy_matches"] = sum(bool(pol(x)) for x in m.modules())
    fsdp2_apply_ac(fake(p), m)
    r["no_split_checkpoint_wrappers"] = sum(type(x).__name__ == "CheckpointWrapper" for x in m.modules())
    return r


@case("to_fsdp2_v2_unchanged")
def _():
    from accelerate.commands.to_fsdp2 import convert_config_to_fsdp2
    cfg = {"fsdp_config": {"fsdp_version": 2, "fsdp_reshard_after_forward": False, "fsdp_use_orig_params": True}}
    return convert_config_to_fsdp2(json.loads(json.dumps(cfg))) == cfg


# ------------------------------------------------------------------ DeepSpeed plugin (no engine)
@case("ds_plugin")
def _():
    r = {}

    def conflict():
        p = DeepSpeedPlugin(hf_ds_config={"fp16": {"enabled": True}, "zero_optimization": {"stage": 2}})
        p.set_mixed_precision("bf16")

    r["json_fp16_vs_bf16"] = raises(conflict)
    p = DeepSpeedPlugin(hf_ds_config={"fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
                                      "zero_optimization": {"stage": 2}})
    p.set_mixed_precision("no")
    r["auto_with_no"] = {"fp16": p.deepspeed_config["fp16"]["enabled"], "bf16": p.deepspeed_config["bf16"]["enabled"]}
    p = DeepSpeedPlugin(hf_ds_config={"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}})
    p.set_mixed_precision("bf16")
    r["auto_with_bf16"] = p.deepspeed_config["bf16"]["enabled"]
    r["msamp_zero3"] = raises(lambda: DeepSpeedPlugin(zero_stage=3, gradient_accumulation_steps=1, enable_msamp=True))
    r["no_zero_block"] = raises(lambda: DeepSpeedPlugin(hf_ds_config={"train_micro_batch_size_per_gpu": 1}))
    os.environ["ACCELERATE_DEEPSPEED_ZERO_STAGE"] = "2"
    r["file_plus_inline_env"] = raises(lambda: DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 3}}))
    del os.environ["ACCELERATE_DEEPSPEED_ZERO_STAGE"]
    os.environ["ACCELERATE_MIXED_PRECISION"] = "no"
    os.environ["ACCELERATE_CONFIG_DS_FIELDS"] = "deepspeed_config_file,mixed_precision"
    r["file_plus_mixed_precision_no"] = raises(lambda: DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 3}}))
    return r


@case("ds_cpu_true_ignored")
def _():
    acc = Accelerator(cpu=True, deepspeed_plugin=DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=1))
    return {"distributed_type": str(acc.distributed_type)}


def stub_transformers():
    """The transformers stand-in (tests/_transformers_stub.py) reporting 4.46.0, below the TP gate."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _transformers_stub import install
    install(WORK / "stub", "4.46.0")


@case("tp_config_before_stub")
def _():
    from accelerate.utils import TorchTensorParallelConfig
    return raises(TorchTensorParallelConfig)


@case("ds_single_process")
def _():
    import importlib.util
    r = {"transformers_hidden": hidden() and importlib.util.find_spec("transformers") is None}
    r["without_transformers"] = raises(lambda: Accelerator(
        deepspeed_plugin=DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=1)))
    reset()
    os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
    os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"] = "auto"
    r["gas_auto_from_env_without_transformers"] = raises(Accelerator)
    stub_transformers()
    reset()
    r["gas_auto_from_env"] = raises(Accelerator)
    reset()
    del os.environ["ACCELERATE_GRADIENT_ACCUMULATION_STEPS"]
    del os.environ["ACCELERATE_USE_DEEPSPEED"]
    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=2, gradient_accumulation_steps=1))
    r["distributed_type"] = str(acc.distributed_type)
    return r


@case("tp_config_with_old_transformers")
def _():
    from accelerate.utils import TorchTensorParallelConfig
    return raises(TorchTensorParallelConfig)  # the stand-in says 4.46.0


# ------------------------------------------------------------------ LocalSGD and DDP hooks
@case("local_sgd")
def _():
    from accelerate.local_sgd import LocalSGD
    from accelerate.utils import DistributedType
    acc = Accelerator(cpu=True)
    net = acc.prepare(nn.Linear(2, 2))
    r = {}
    for dt in ("DEEPSPEED", "FSDP", "MEGATRON_LM", "XLA"):
        acc.state.distributed_type = getattr(DistributedType, dt)
        r[dt] = raises(lambda: LocalSGD(accelerator=acc, model=net, local_sgd_steps=2, enabled=True))
    acc.state.distributed_type = DistributedType.NO
    return r


# ------------------------------------------------------------------ accelerate config default
@case("config_default")
def _():
    from accelerate.commands.config.default import write_basic_config
    path = WORK / "cfg" / "default_config.yaml"
    first = write_basic_config(save_location=str(path))
    written = json.loads(path.read_text())
    path.write_text("sentinel: 1\n")
    second = write_basic_config(save_location=str(path))
    from accelerate.commands.config.config_args import load_config_from_file
    jpath = WORK / "cfg" / "c.json"
    jpath.write_text(json.dumps({"distributed_type": "NO", "mixed_precision": "no"}))
    loaded = load_config_from_file(str(jpath))
    return {"first_returns": first, "first_distributed_type": written.get("distributed_type"), "second_returns": second,
            "unchanged": path.read_text() == "sentinel: 1\n", "json_loaded_type": type(loaded).__name__,
            "json_compute_environment": str(loaded.compute_environment)}


# ------------------------------------------------------------------ mid-epoch resume order (s11-ck-l02)
@case("skip_first_batches_iteration")
def _():
    from accelerate.utils import DataLoaderConfiguration
    from torch.utils.data import DataLoader, TensorDataset
    set_seed(0)
    acc = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True))
    dl = acc.prepare(DataLoader(TensorDataset(torch.arange(12)), batch_size=2, shuffle=True))
    ids = lambda loader: [[int(v) for v in b[0]] for b in loader]  # noqa: E731
    epochs = [ids(dl) for _ in range(2)]
    dl.set_epoch(0)   # a fresh process: the prepared loader's iteration is 0
    r = {"epochs": epochs, "fresh_skip_iteration": acc.skip_first_batches(dl, 2).iteration}
    r["fresh_skip"] = ids(acc.skip_first_batches(dl, 2))
    dl.set_epoch(1)
    skipped = acc.skip_first_batches(dl, 2)
    r["set_epoch_skip_iteration"] = skipped.iteration
    r["set_epoch_skip"] = ids(skipped)
    old = acc.skip_first_batches(dl, 2)
    old.iteration = 0   # accelerate before the fix: the new loader started at iteration 0
    r["iteration0_skip"] = ids(old)
    r["source_iteration_after"] = dl.iteration
    return r



# the launch, environment and CLI cases live in _single_probe_launch.py (module size)
import _single_probe_launch  # noqa: E402,F401

json.dump(out, sys.stdout, default=str)
