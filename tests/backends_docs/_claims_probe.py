"""Behavioural facts behind statements a user acts on, measured from the installed packages.

Run by test_claims.py as one subprocess (stdout: one JSON object). Each key answers one question
the references make a claim about; sources are read with inspect, behaviour is exercised on CPU
without launching anything.
"""
from __future__ import annotations

import inspect
import json
import os
import re
import sys
import warnings

for k in [k for k in os.environ if k.startswith(("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_"))]:
    del os.environ[k]
os.environ["HF_HOME"] = sys.argv[1]  # empty directory: no default_config.yaml is read

from accelerate import Accelerator, DeepSpeedPlugin, FullyShardedDataParallelPlugin  # noqa: E402
from accelerate.commands.launch import _validate_launch_command, launch_command_parser  # noqa: E402
from accelerate.utils import deepspeed as acc_ds  # noqa: E402
from accelerate.utils import environment as acc_env  # noqa: E402
from accelerate.utils import launch as L  # noqa: E402
import accelerate.state as acc_state  # noqa: E402
import deepspeed.accelerator.cpu_accelerator as ds_cpu  # noqa: E402
import deepspeed.runtime.engine as ds_engine  # noqa: E402
import deepspeed.runtime.zero.stage_1_and_2 as ds_z12  # noqa: E402

out: dict = {}

# 1. gradient clipping: the inline plugin leaves "auto", _prepare_deepspeed fills it with this value
p = DeepSpeedPlugin(gradient_accumulation_steps=1)
out["ds_default_zero_stage"] = p.zero_stage
out["ds_inline_clipping"] = p.deepspeed_config.get("gradient_clipping")
src = inspect.getsource(Accelerator._prepare_deepspeed)
kw = src[src.index("config_kwargs = {"):]
kw = kw[:kw.index("}")]
out["ds_prepare_clipping_fill"] = float(re.search(r'"gradient_clipping":\s*([\d.]+)', kw).group(1))
p.deepspeed_config_process(must_match=False, gradient_clipping=out["ds_prepare_clipping_fill"],
                           train_batch_size=8, train_micro_batch_size_per_gpu=4)
out["ds_clipping_after_fill"] = p.deepspeed_config["gradient_clipping"]

out["ds_zero3_init_default"] = {stage: DeepSpeedPlugin(zero_stage=stage, gradient_accumulation_steps=1).zero3_init_flag
                                for stage in (2, 3)}

# 1b. a DeepSpeed JSON without gradient_accumulation_steps, and who wins at prepare
out["ds_json_missing_gas"] = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 2}}).deepspeed_config[
    "gradient_accumulation_steps"]
out["ds_prepare_prefers_json_gas"] = ("self.gradient_accumulation_steps = deepspeed_gradient_accumulation_steps" in src
                                      and "Gradient accumulation steps mismatch" in src)

# 2. optimizer offload with a torch optimizer: swapped, and which hyper-parameters survive
out["ds_prepare_maps_optimizer"] = ("map_pytorch_optim_to_deepspeed(optimizer)" in src
                                    and 'get("zero_force_ds_cpu_optimizer", True)' in src)
msrc = inspect.getsource(acc_ds.map_pytorch_optim_to_deepspeed)
out["ds_map_kept_keys"] = sorted(re.findall(r'"(\w+)"', re.search(r"if k in \[([^\]]*)\]", msrc).group(1)))
out["ds_map_default_class"] = re.search(r"optimizer_class = (\w+)\n", msrc).group(1)
esrc = inspect.getsource(ds_engine.DeepSpeedEngine._configure_optimizer)
out["ds_offload_accepted_classes"] = sorted(set(re.findall(r"deepspeed\.ops\.\w+\.(DeepSpeedCPU\w+)", esrc)))

m = re.search(r'compare_versions\("deepspeed", ">=", "([\d.]+)"\) and self\.state\.dynamo_plugin', src)
out["ds_compile_min_version"] = m.group(1) if m and "engine.compile(" in src else None

# 3. stage 1/2 optimizer: offload config is honoured, NVMe path is not
z12 = inspect.getsource(ds_z12.DeepSpeedZeroOptimizer.__init__)
out["ds_z12_reads_nvme_path"] = "nvme_path" in inspect.getsource(ds_z12)
out["ds_z12_any_offload_device_is_cpu"] = bool(
    re.search(r"offload_optimizer_config\.device != OffloadDeviceEnum\.none:\s*\n\s*self\.cpu_offload = True", z12))
zsrc = inspect.getsource(ds_engine.DeepSpeedEngine._configure_zero_optimizer)
stage12 = zsrc[zsrc.index("if zero_stage <= ZeroStageEnum.gradients"):zsrc.index("elif zero_stage == ZeroStageEnum.weights")]
out["ds_stage1_and_2_pass_offload_optimizer"] = "offload_optimizer_config=self.zero_offload_optimizer()" in stage12
out["ds_stage1_and_2_pass_offload_param"] = "offload_param" in stage12

# 4. DeepSpeed's CPU accelerator and fp16
out["ds_cpu_fp16_depends_on_onednn"] = "_is_mkldnn_fp16_supported" in inspect.getsource(
    ds_cpu.CPU_Accelerator.is_fp16_supported)

# 5. FP8 hardware floor and fallback
csrc = inspect.getsource(acc_env.check_cuda_fp8_capability.__wrapped__)
out["fp8_min_capability"] = [int(x) for x in re.search(r">= \((\d+), (\d+)\)", csrc).groups()]
ssrc = inspect.getsource(acc_state.AcceleratorState.__init__)
blk = ssrc[ssrc.index("not check_cuda_fp8_capability()"):]
out["fp8_fallback_precision"] = re.search(r'mixed_precision = "(\w+)"', blk).group(1)


# 6. --use_parallelism_config on the command line
def validate(argv):
    args = launch_command_parser().parse_args(argv + ["--num_processes", "2", "--num_machines", "1",
                                                      "--mixed_precision", "no", "--dynamo_backend", "no",
                                                      "train.py"])
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _validate_launch_command(args)
        return "accepted"
    except ValueError as e:
        return f"ValueError: {e}"


out["pc_flag"] = {name: validate(argv) for name, argv in {
    "fsdp_default_version": ["--use_fsdp", "--use_parallelism_config"],
    "fsdp_version_1": ["--use_fsdp", "--fsdp_version", "1", "--use_parallelism_config"],
    "fsdp_version_2": ["--use_fsdp", "--fsdp_version", "2", "--use_parallelism_config"],
    "deepspeed": ["--use_deepspeed", "--use_parallelism_config"],
    "multi_gpu": ["--multi_gpu", "--use_parallelism_config"],
}.items()}


# 7. DeepSpeed multi-node command lines per launcher
def ds_cmd(launcher):
    args = launch_command_parser().parse_args([
        "--use_deepspeed", "--num_processes", "4", "--num_machines", "2", "--machine_rank", "1",
        "--main_process_ip", "10.0.0.1", "--main_process_port", "29555", "--mixed_precision", "no",
        "--dynamo_backend", "no", "--deepspeed_hostfile", "hosts", "--deepspeed_multinode_launcher",
        launcher, "train.py"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        args, _, _ = _validate_launch_command(args)
    args.deepspeed_fields_from_accelerate_config = ""
    saved = dict(os.environ)
    try:
        cmd, _ = L.prepare_deepspeed_cmd_env(args)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return cmd


out["ds_cmd"] = {name: ds_cmd(name) for name in ("pdsh", "nossh", "standard")}

# 7b. a busy rendezvous port on one machine and on the main node of two
import socket  # noqa: E402


def busy_port(num_machines):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        args = launch_command_parser().parse_args([
            "--multi_gpu", "--num_processes", "2", "--num_machines", str(num_machines), "--machine_rank", "0",
            "--main_process_ip", "127.0.0.1", "--main_process_port", str(port), "--mixed_precision", "no",
            "--dynamo_backend", "no", "train.py"])
        saved = dict(os.environ)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                _validate_launch_command(args)
                L.prepare_multi_gpu_env(args)
            return {"standalone": bool(getattr(args, "standalone", False)),
                    "warning": any("already in use" in str(w.message) for w in caught)}
        except ConnectionError:
            return "ConnectionError"
        finally:
            os.environ.clear()
            os.environ.update(saved)


out["busy_port"] = {"one_machine": busy_port(1), "two_machines": busy_port(2)}

# 8. FSDP2 and forward_prefetch given in code (even False)
try:
    FullyShardedDataParallelPlugin(fsdp_version=2, forward_prefetch=False)
    out["fsdp2_forward_prefetch_false"] = "accepted"
except ValueError as e:
    out["fsdp2_forward_prefetch_false"] = f"ValueError: {e}"

try:
    FullyShardedDataParallelPlugin(fsdp_version=2, sharding_strategy="FULL_SHARD")
    out["fsdp2_strategy_only"] = "accepted"
except ValueError as e:
    out["fsdp2_strategy_only"] = f"ValueError: {e}"

# 8b. to-fsdp2 with both FSDP1 keys present: which one wins
from accelerate.commands.to_fsdp2 import convert_config_to_fsdp2  # noqa: E402

out["to_fsdp2_both_keys"] = {
    order: convert_config_to_fsdp2({"fsdp_config": dict(pairs)})["fsdp_config"]["fsdp_reshard_after_forward"]
    for order, pairs in {
        "strategy_first": [("fsdp_sharding_strategy", "SHARD_GRAD_OP"), ("fsdp_reshard_after_forward", "FULL_SHARD")],
        "strategy_last": [("fsdp_reshard_after_forward", "FULL_SHARD"), ("fsdp_sharding_strategy", "SHARD_GRAD_OP")],
    }.items()}

# 8c. FSDP plugin defaults with no launcher environment (plain torchrun)
fp = FullyShardedDataParallelPlugin()
sp = FullyShardedDataParallelPlugin(auto_wrap_policy="SIZE_BASED_WRAP")
out["fsdp_plugin_defaults"] = {"fsdp_version": fp.fsdp_version, "use_orig_params": fp.use_orig_params,
                               "sync_module_states": fp.sync_module_states,
                               "cpu_ram_efficient_loading": fp.cpu_ram_efficient_loading,
                               "min_num_params": sp.min_num_params}

# 9. an FSDP plugin in a plain single process (no launcher): what prepare returns
import torch  # noqa: E402

acc = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
out["fsdp_plugin_single_process"] = {"distributed_type": str(acc.distributed_type),
                                     "prepared": type(acc.prepare(torch.nn.Linear(2, 2))).__name__}

json.dump(out, sys.stdout)
