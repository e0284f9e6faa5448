"""Launch, environment and CLI cases of the single-process probe (imported by _single_probe.py,
which prints the shared `out` after them)."""
from __future__ import annotations

import json
import os
import sys
import traceback
import warnings
from pathlib import Path

from _probe_core import (  # noqa: F401
    WORK, Accelerator, AcceleratorState, AutocastKwargs, DeepSpeedPlugin, FullyShardedDataParallelPlugin, GradientAccumulationPlugin, GradientState, ProjectConfiguration, TorchDynamoPlugin, case, err, hidden, hide, nn, out, raises, reset, set_seed, torch,
)



# ------------------------------------------------------------------ launch validation on odd YAML
@case("launch_yaml")
def _():
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as L

    def run(yaml_text, extra=()):
        cfg = WORK / "launch.yaml"
        cfg.write_text(yaml_text)
        saved = dict(os.environ)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                args = launch_command_parser().parse_args(["--config_file", str(cfg), *extra, "train.py"])
                _validate_launch_command(args)
                L.prepare_multi_gpu_env(args)
            return {"ok": True, "rdzv_endpoint": getattr(args, "rdzv_endpoint", None),
                    "master_addr": getattr(args, "master_addr", None)}
        except Exception as exc:
            return err(exc)
        finally:
            os.environ.clear()
            os.environ.update(saved)

    base = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\ndynamo_config: {}\n"
    return {
        "mixed_precision_bare_no": run(base + "num_processes: 2\nmixed_precision: no\n"),
        "gpu_ids_int": run(base + "num_processes: 2\nmixed_precision: 'no'\ngpu_ids: 0\n"),
        "no_num_processes": run(base + "mixed_precision: 'no'\n"),
        "multinode_no_ip": run(base + "num_processes: 4\nnum_machines: 2\nmachine_rank: 1\nmixed_precision: 'no'\n"),
    }


@case("launch_defaults")
def _():
    """Effective values after accelerate's own validation of `accelerate launch train.py` with no
    config file (HF_HOME is an empty directory) on this CPU host."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    args = launch_command_parser().parse_args(["train.py"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _validate_launch_command(args)
    out = {k: v for k, v in vars(args).items() if isinstance(v, (str, int, float, bool, type(None)))}
    out["_cuda_device_count"] = torch.cuda.device_count()
    return out


@case("pc_handlers")
def _():
    from accelerate.utils import DeepSpeedSequenceParallelConfig, TorchContextParallelConfig
    return {"sp_attn": {v: raises(lambda v=v: DeepSpeedSequenceParallelConfig(sp_attn_implementation=v))
                        for v in ("sdpa", "flash_attention_2", "flash_attention_3", "eager", "flex_attention",
                                  "kernels-community/flash-attn")},
            "cp_default": TorchContextParallelConfig().cp_comm_strategy,
            "cp": {v: raises(lambda v=v: TorchContextParallelConfig(cp_comm_strategy=v)) for v in ("alltoall", "ring")}}


@case("fsdp2_strategy_env_and_code")
def _():
    """FSDP_SHARDING_STRATEGY (what `accelerate launch` always exports) under each fsdp_version,
    and sharding_strategy passed to an FSDP2 plugin in code."""
    r = {}
    os.environ.update(FSDP_VERSION="2", FSDP_SHARDING_STRATEGY="SHARD_GRAD_OP")
    p = FullyShardedDataParallelPlugin()
    r["v2_env"] = [p.reshard_after_forward, p.sharding_strategy]
    os.environ["FSDP_VERSION"] = "1"
    p = FullyShardedDataParallelPlugin()
    r["v1_env"] = [str(p.reshard_after_forward), str(p.sharding_strategy)]
    del os.environ["FSDP_SHARDING_STRATEGY"], os.environ["FSDP_VERSION"]
    r["v2_code_strategy_alone"] = raises(lambda: FullyShardedDataParallelPlugin(
        fsdp_version=2, sharding_strategy="SHARD_GRAD_OP"))
    p = FullyShardedDataParallelPlugin(fsdp_version=2, sharding_strategy="SHARD_GRAD_OP", reshard_after_forward=False)
    r["v2_code_strategy_with_bool"] = p.reshard_after_forward
    return r


@case("ga_end_of_dataloader")
def _():
    """accumulate() sync flags over two epochs of a 5-batch prepared DataLoader, num_steps=2."""
    from torch.utils.data import DataLoader
    r = {}
    for sync in (True, False):
        reset()
        acc = Accelerator(gradient_accumulation_plugin=GradientAccumulationPlugin(
            num_steps=2, sync_with_dataloader=sync))
        model, dl = acc.prepare(nn.Linear(2, 1), DataLoader(list(range(5)), batch_size=1))
        flags = []
        for _ in range(2):
            for _b in dl:
                with acc.accumulate(model):
                    flags.append(acc.sync_gradients)
        r[str(sync)] = flags
    return r


@case("ds_offload_optimizer_map")
def _():
    """accelerate's offload swap applied to torch optimizers (no DeepSpeed op is built: the
    constructor's signature is checked before its body runs)."""
    from accelerate.utils.deepspeed import map_pytorch_optim_to_deepspeed
    net = nn.Linear(2, 1)
    return {"adagrad": raises(lambda: map_pytorch_optim_to_deepspeed(torch.optim.Adagrad(net.parameters(), lr=0.1))),
            "torch_has_lion": hasattr(torch.optim, "Lion")}


@case("dynamo_dynamic")
def _():
    """What `accelerate launch` exports for dynamic shapes and what TorchDynamoPlugin makes of it."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_simple_launcher_cmd_env
    r = {}
    for name, argv in (("launch_default", ["--dynamo_backend", "inductor", "train.py"]),
                       ("launch_flag", ["--dynamo_backend", "inductor", "--dynamo_use_dynamic", "train.py"])):
        args = launch_command_parser().parse_args(argv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _validate_launch_command(args)
        env = prepare_simple_launcher_cmd_env(args)[1]
        os.environ["ACCELERATE_DYNAMO_USE_DYNAMIC"] = env["ACCELERATE_DYNAMO_USE_DYNAMIC"]
        r[name] = [env["ACCELERATE_DYNAMO_USE_DYNAMIC"], TorchDynamoPlugin().to_kwargs().get("dynamic", "absent"),
                   TorchDynamoPlugin(backend="inductor", dynamic=None).to_kwargs().get("dynamic", "absent")]
        del os.environ["ACCELERATE_DYNAMO_USE_DYNAMIC"]
    r["no_env"] = TorchDynamoPlugin().to_kwargs().get("dynamic", "absent")
    return r


@case("compile_prefix")
def _():
    """Key names written for a torch.compile'd model: compiled by the user before prepare, or by
    prepare through dynamo_backend (no forward runs, so nothing is compiled)."""
    from safetensors.torch import load_file
    r = {}
    for how in ("user", "dynamo_backend"):
        reset()
        acc = Accelerator(dynamo_backend="inductor" if how == "dynamo_backend" else "no")
        m = nn.Linear(2, 2)
        if how == "user":
            m = torch.compile(m)
        pm = acc.prepare(m)
        d = WORK / f"compile_{how}"
        acc.save_model(pm, d / "m")
        acc.save_state(d / "s")
        r[how] = {
            "prepared_type": type(pm).__name__,
            "unwrap_keys": sorted(acc.unwrap_model(pm).state_dict()),
            "unwrap_plain_keys": sorted(acc.unwrap_model(pm, keep_torch_compile=False).state_dict()),
            "save_model_keys": sorted(load_file(d / "m" / "model.safetensors")),
            "save_model_unwrapped_keys": None,
            "save_state_keys": sorted(load_file(d / "s" / "model.safetensors")),
        }
        acc.save_model(acc.unwrap_model(pm, keep_torch_compile=False), d / "u")
        r[how]["save_model_unwrapped_keys"] = sorted(load_file(d / "u" / "model.safetensors"))
        inner = acc.unwrap_model(pm)
        acc.save_model(getattr(inner, "_orig_mod", inner), d / "o")
        r[how]["save_model_inner_keys"] = sorted(load_file(d / "o" / "model.safetensors"))
    # resume the user-compiled save_state folder without compiling, and the reverse
    for saved, loader in (("user", "plain"), ("dynamo_backend", "user")):
        reset()
        acc = Accelerator()
        m = nn.Linear(2, 2)
        if loader == "user":
            m = torch.compile(m)
        pm = acc.prepare(m)
        r[f"load_{saved}_into_{loader}"] = raises(lambda: acc.load_state(WORK / f"compile_{saved}" / "s"))
    return r


@case("mp_cpu")
def _():
    """What mixed_precision does on a CPU device: the scaler, autocast, and dtypes after a step."""
    r = {}
    for mp in ("fp16", "bf16"):
        reset()
        acc = Accelerator(mixed_precision=mp)
        m = nn.Linear(4, 4)
        opt = torch.optim.AdamW(m.parameters())
        pm, opt = acc.prepare(m, opt)
        y = pm(torch.randn(2, 4))
        acc.backward(y.sum())
        opt.step()
        r[mp] = {"state": acc.mixed_precision, "native_amp": acc.native_amp, "scaler": acc.scaler is not None,
                 "output": str(y.dtype), "output_cast_back": type(y.grad_fn).__name__ == "ToCopyBackward0",
                 "param": str(pm.weight.dtype), "grad": str(pm.weight.grad.dtype),
                 "exp_avg": str(opt.optimizer.state[pm.weight]["exp_avg"].dtype)}
    # a model already in fp16 under a GradScaler (the fp16 path on a GPU): the scaler refuses its gradients
    scaler = torch.amp.GradScaler("cpu")
    half = nn.Linear(2, 2).half()
    sgd = torch.optim.SGD(half.parameters(), lr=0.1)
    scaler.scale(half(torch.randn(1, 2).half()).float().sum()).backward()
    r["half_model_scaler_step"] = raises(lambda: scaler.step(sgd))
    # an update smaller than bf16's spacing at 1.0 is lost; in fp32 it is kept
    w16, w32 = torch.ones(1, dtype=torch.bfloat16), torch.ones(1)
    w16 -= 1e-3
    w32 -= 1e-3
    r["bf16_update_lost"] = [w16.item(), round(w32.item(), 6)]
    return r


@case("tracker_blank")
def _():
    """get_tracker when this process holds no tracker (what every non-main rank sees, since
    init_trackers runs on the main process only) and when another tracker is active."""
    from accelerate.tracking import GeneralTracker
    r = {}
    acc = Accelerator()
    t = acc.get_tracker("wandb", unwrap=True)
    r["blank_type"] = type(t).__name__
    t.log({"x": 1})
    t.finish()
    r["blank_log_finish"] = "no-op"
    r["blank_tracker_attr"] = raises(lambda: t.tracker)
    r["blank_wandb_method"] = raises(lambda: t.define_metric("x"))

    class Mem(GeneralTracker):
        name = "mem"
        requires_logging_directory = False

        def __init__(self):
            super().__init__()
            self.rows = []

        @property
        def tracker(self):
            return self.rows

        def store_init_configuration(self, values):
            pass

        def log(self, values, step=None, **kwargs):
            self.rows.append(values)

    reset()
    acc = Accelerator(log_with=Mem())
    acc.init_trackers("p")
    r["active_other_name"] = raises(lambda: acc.get_tracker("wandb"))
    r["active_unwrap_type"] = type(acc.get_tracker("mem", unwrap=True)).__name__
    return r


@case("unequal_nodes_accelerate")
def _():
    """The --nproc_per_node accelerate launch hands torchrun on each node, from that node's own
    --num_processes and --num_machines (8 + 2 GPUs): one shared value, then per-node values."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env
    r = {}
    for label, n, rank in (("shared_10_node0", 10, 0), ("shared_10_node1", 10, 1),
                           ("own_16_node0", 16, 0), ("own_4_node1", 4, 1)):
        args = launch_command_parser().parse_args(
            ["--multi_gpu", "--num_machines", "2", "--num_processes", str(n), "--machine_rank", str(rank),
             "--main_process_ip", "10.0.0.1", "--main_process_port", "29500", "train.py"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _validate_launch_command(args)
        prepare_multi_gpu_env(args)
        r[label] = [args.nproc_per_node, args.nnodes, args.node_rank]
    return r


@case("load_before_prepare")
def _():
    """load_state called before prepare: what reaches the model, and what the log says."""
    import logging
    r = {}
    d = WORK / "load_before_prepare"
    acc = Accelerator()
    m = nn.Linear(2, 2)
    nn.init.constant_(m.weight, 7.0)
    acc.prepare(m, torch.optim.SGD(m.parameters(), lr=0.1))
    acc.step = 5
    acc.save_state(d)
    reset()
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda rec: records.append(rec.getMessage())
    lg = logging.getLogger("accelerate.checkpointing")
    old_level = lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    try:
        acc = Accelerator()
        m = nn.Linear(2, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        r["load"] = raises(lambda: acc.load_state(d))
        r["weight_after_load"] = float(m.weight[0, 0])
        r["step_after_load"] = acc.step
        pm, opt = acc.prepare(m, opt)
        r["weight_after_prepare"] = float(pm.weight[0, 0])
        acc.load_state(d)
        r["weight_after_prepare_then_load"] = float(pm.weight[0, 0])
    finally:
        lg.removeHandler(handler)
        lg.setLevel(old_level)
    r["says_loaded"] = any("All model weights loaded successfully" in x for x in records)
    return r


@case("accelerate_launch_pet_env")
def _():
    """The torchrun arguments `accelerate launch --multi_gpu` hands to torch.distributed.run.run
    (built as multi_gpu_launcher does) when the pod carries a Kubeflow operator's PET_* variables."""
    import torch.distributed.run as distrib_run
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import _filter_args, prepare_multi_gpu_env
    pet = {"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "job-master-0", "PET_MASTER_PORT": "23456",
           "PET_NPROC_PER_NODE": "8", "PET_RDZV_ENDPOINT": "job-worker-0:29400"}
    keys = ("nnodes", "nproc_per_node", "node_rank", "master_addr", "rdzv_backend", "rdzv_endpoint")

    def torchrun_args(argv):
        args = launch_command_parser().parse_args(argv)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _validate_launch_command(args)
        prepare_multi_gpu_env(args)
        return _filter_args(args, distrib_run.get_args_parser(),
                            ["--training_script", args.training_script, "--training_script_args", args.training_script_args])

    r = {}
    os.environ.update(pet)
    try:
        for label, argv in (("one_machine", ["--multi_gpu", "--num_processes", "2", "train.py"]),
                            ("two_machines_rank_0",  # one config file for every pod: machine_rank 0
                             ["--multi_gpu", "--num_processes", "16", "--num_machines", "2", "--machine_rank", "0",
                              "--main_process_ip", "10.0.0.1", "--main_process_port", "29500", "train.py"])):
            t = torchrun_args(argv)
            r[label] = {k: str(getattr(t, k)) for k in keys}
            r[label]["endpoint_used"] = distrib_run.get_rdzv_endpoint(t)
        # a PyTorchJob without elasticPolicy sets no PET_RDZV_ENDPOINT
        del os.environ["PET_RDZV_ENDPOINT"]
        t = torchrun_args(["--multi_gpu", "--num_processes", "2", "train.py"])
        r["one_machine_no_rdzv_endpoint"] = {"nnodes": str(t.nnodes), "endpoint_used": distrib_run.get_rdzv_endpoint(t)}
    finally:
        for k in pet:
            os.environ.pop(k, None)
    return r


@case("rtx40_p2p_check")
def _():
    """accelerate's RTX 40xx P2P/IB check with nvidia-smi's answers replaced (no GPU needed)."""
    import accelerate.utils.environment as envmod
    r = {}
    saved = envmod.get_gpu_info, envmod.get_driver_version
    try:
        for label, names, driver in (("two_4090_driver_535", ["NVIDIA GeForce RTX 4090"] * 2, "535.104.05"),
                                     ("two_4090_driver_550_54", ["NVIDIA GeForce RTX 4090"] * 2, "550.54.14"),
                                     ("one_4090_driver_535", ["NVIDIA GeForce RTX 4090"], "535.104.05"),
                                     ("two_a100_driver_535", ["NVIDIA A100-SXM4-80GB"] * 2, "535.104.05")):
            envmod.get_gpu_info = lambda names=names: (names, len(names))
            envmod.get_driver_version = lambda driver=driver: driver
            r[label] = envmod.check_cuda_p2p_ib_support()
    finally:
        envmod.get_gpu_info, envmod.get_driver_version = saved
    return r


