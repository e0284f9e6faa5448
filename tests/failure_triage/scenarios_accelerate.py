"""Trigger Accelerate 1.15.0 failures for real on a CPU, in one process, and print each traceback.

Run as a child by test_repro_accelerate.py (``python scenarios_accelerate.py WORKDIR``). Every
scenario calls the real library the way a user's script or ``accelerate launch`` does; the
traceback Python prints is written between marker lines so the test can triage each one.
"""
from __future__ import annotations

import os
import socket
import sys
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("ACCELERATE_DISABLE_RICH", "1")

WORK = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


def _reset():
    from accelerate.state import AcceleratorState, GradientState, PartialState
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    PartialState._reset_state()


def _tiny():
    import torch
    return torch.nn.Linear(2, 2)


def _launch(argv):
    """What `accelerate launch ARGV` runs before it starts a process (same functions, same order)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils import launch as L
    args = launch_command_parser().parse_args(argv)
    args, defaults, mp_from_config = _validate_launch_command(args)
    if args.use_deepspeed:
        fields = list(defaults.deepspeed_config.keys()) if defaults is not None else []
        if mp_from_config:
            fields.append("mixed_precision")
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        return L.prepare_deepspeed_cmd_env(args)
    if args.use_fsdp or args.multi_gpu:
        return L.prepare_multi_gpu_env(args)
    return L.prepare_simple_launcher_cmd_env(args)


def _yaml(name, text):
    p = WORK / name
    p.write_text(text)
    return str(p)


# --------------------------------------------------------------------------- Accelerator(...)

@scenario
def accelerate_unknown_mixed_precision():
    from accelerate import Accelerator
    Accelerator(mixed_precision="fp32")


@scenario
def accelerate_fp8_recipe_without_fp8():
    from accelerate import Accelerator
    from accelerate.utils import AORecipeKwargs
    Accelerator(kwargs_handlers=[AORecipeKwargs.__new__(AORecipeKwargs)])


@scenario
def accelerate_fp8_no_backend():
    from accelerate import Accelerator
    Accelerator(mixed_precision="fp8")


@scenario
def accelerate_grad_accum_twice():
    from accelerate import Accelerator
    from accelerate.utils import GradientAccumulationPlugin
    Accelerator(gradient_accumulation_steps=4, gradient_accumulation_plugin=GradientAccumulationPlugin(num_steps=4))


@scenario
def accelerate_kwargs_handler_twice():
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs as K
    Accelerator(kwargs_handlers=[K(), K(find_unused_parameters=True)])


@scenario
def accelerate_state_changed_after_init():
    from accelerate import Accelerator
    Accelerator()
    Accelerator(mixed_precision="bf16")


@scenario
def accelerate_state_without_accelerator():
    from accelerate.state import AcceleratorState
    AcceleratorState()


@scenario
def accelerate_dynamo_twice():
    from accelerate import Accelerator
    from accelerate.utils import TorchDynamoPlugin
    Accelerator(dynamo_plugin=TorchDynamoPlugin(), dynamo_backend="inductor")


@scenario
def transformers_old_trainer_new_accelerate():
    # what transformers < 4.38 Trainer.create_accelerator_and_postprocess passes to accelerate >= 1.0
    from accelerate import Accelerator
    Accelerator(dispatch_batches=None, split_batches=False)


# --------------------------------------------------------------------------- checkpoints

@scenario
def accelerate_load_state_missing_dir():
    from accelerate import Accelerator
    Accelerator().load_state(str(WORK / "no_such_checkpoint"))


@scenario
def accelerate_load_state_no_dir():
    from accelerate import Accelerator
    Accelerator().load_state()


@scenario
def accelerate_save_state_exists():
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration
    proj = WORK / "proj"
    (proj / "checkpoints" / "checkpoint_0").mkdir(parents=True, exist_ok=True)
    acc = Accelerator(project_config=ProjectConfiguration(project_dir=str(proj), automatic_checkpoint_naming=True))
    acc.save_state()


@scenario
def accelerate_register_without_state_dict():
    from accelerate import Accelerator
    Accelerator().register_for_checkpointing(object())


@scenario
def accelerate_custom_checkpoint_count():
    import torch
    from accelerate import Accelerator

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _toy_models import Counter

    acc = Accelerator()
    model = acc.prepare(_tiny())
    out = WORK / "ckpt_custom"
    acc.save_state(str(out))
    acc.register_for_checkpointing(Counter())
    acc.load_state(str(out))
    del model, torch


@scenario
def accelerate_save_model_meta():
    import torch
    from accelerate import Accelerator
    with torch.device("meta"):
        model = _tiny()
    Accelerator().save_model(model, str(WORK / "meta_out"))


# --------------------------------------------------------------------------- data loaders

@scenario
def accelerate_split_batches_not_divisible():
    import torch
    from accelerate.data_loader import prepare_data_loader
    dl = torch.utils.data.DataLoader(list(range(12)), batch_size=3)
    prepare_data_loader(dl, num_processes=2, process_index=0, split_batches=True)


# --------------------------------------------------------------------------- plugins

@scenario
def accelerate_fsdp2_local_state_dict():
    from accelerate.utils.dataclasses import FullyShardedDataParallelPlugin as P
    p = P.__new__(P)
    p.fsdp_version = 2
    p.set_state_dict_type("LOCAL_STATE_DICT")


@scenario
def accelerate_deepspeed_no_zero_section():
    from accelerate.utils import DeepSpeedPlugin
    DeepSpeedPlugin(hf_ds_config={"train_micro_batch_size_per_gpu": 1})


@scenario
def accelerate_deepspeed_mixed_precision_conflict():
    from accelerate.utils import DeepSpeedPlugin
    p = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 2}, "bf16": {"enabled": True}})
    p.set_mixed_precision("fp16")


@scenario
def accelerate_deepspeed_config_mismatch():
    from accelerate.utils import DeepSpeedPlugin
    p = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 2}, "gradient_accumulation_steps": 4,
                                      "train_micro_batch_size_per_gpu": 8})
    p.deepspeed_config_process(must_match=True, train_micro_batch_size_per_gpu=16, gradient_accumulation_steps=4)


@scenario
def accelerate_deepspeed_auto_unresolved():
    from accelerate.utils import DeepSpeedPlugin
    p = DeepSpeedPlugin(hf_ds_config={"zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW",
                                      "params": {"lr": "auto"}}})
    p.deepspeed_config_process(must_match=True)


@scenario
def accelerate_deepspeed_file_and_accelerate_keys():
    ds = WORK / "ds.json"
    ds.write_text('{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}')
    os.environ.update({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_CONFIG_FILE": str(ds),
                       "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4",
                       "ACCELERATE_CONFIG_DS_FIELDS": "gradient_accumulation_steps,zero_stage"})
    try:
        from accelerate.utils import DeepSpeedPlugin
        DeepSpeedPlugin()
    finally:
        for k in ("ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_CONFIG_FILE",
                  "ACCELERATE_GRADIENT_ACCUMULATION_STEPS", "ACCELERATE_CONFIG_DS_FIELDS"):
            os.environ.pop(k, None)


@scenario
def accelerate_hf_deepspeed_config_missing_file():
    from accelerate.utils.deepspeed import HfDeepSpeedConfig
    HfDeepSpeedConfig("configs/ds_zero3.json")


# --------------------------------------------------------------------------- accelerate launch

@scenario
def accelerate_launch_config_missing():
    _launch(["--config_file", str(WORK / "missing.yaml"), "train.py"])


@scenario
def accelerate_launch_config_unknown_keys():
    cfg = _yaml("unknown_keys.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n"
                "num_processes: 1\nmixed_precision: 'no'\nfsdp_sharding_strategy: FULL_SHARD\n")
    _launch(["--config_file", cfg, "train.py"])


@scenario
def accelerate_launch_config_no_distributed_type():
    cfg = _yaml("no_type.yaml", "compute_environment: LOCAL_MACHINE\nnum_processes: 2\n")
    _launch(["--config_file", cfg, "train.py"])


@scenario
def accelerate_launch_multi_gpu_one_process():
    _launch(["--multi_gpu", "--num_processes", "1", "train.py"])


@scenario
def accelerate_launch_two_modes():
    _launch(["--cpu", "--use_deepspeed", "train.py"])


@scenario
def accelerate_launch_fp8_unavailable():
    cfg = _yaml("fp8.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nnum_processes: 1\n"
                "mixed_precision: fp8\nuse_cpu: true\n")
    _launch(["--config_file", cfg, "train.py"])


@scenario
def accelerate_launch_unknown_mixed_precision():
    cfg = _yaml("mp.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\nnum_processes: 1\n"
                "mixed_precision: fp32\nuse_cpu: true\n")
    _launch(["--config_file", cfg, "train.py"])


@scenario
def accelerate_launch_module_and_no_python():
    _launch(["--cpu", "--num_processes", "1", "--module", "--no_python", "train"])


@scenario
def accelerate_launch_port_in_use_multinode():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        cfg = _yaml("multinode.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
                    f"num_machines: 2\nmachine_rank: 0\nnum_processes: 4\nmain_process_ip: 127.0.0.1\n"
                    f"main_process_port: {port}\nmixed_precision: 'no'\nuse_cpu: true\n")
        _launch(["--config_file", cfg, "--multi_gpu", "train.py"])


@scenario
def accelerate_launch_ram_efficient_without_sync():
    cfg = _yaml("fsdp.yaml", "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_processes: 2\n"
                "mixed_precision: 'no'\nfsdp_config:\n  fsdp_version: 2\n  fsdp_cpu_ram_efficient_loading: true\n"
                "  fsdp_sync_module_states: false\n  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP\n")
    _launch(["--config_file", cfg, "train.py"])


def main():
    warnings.simplefilter("ignore")
    only = set(sys.argv[2:])
    for fn in SCENARIOS:
        if only and fn.__name__ not in only:
            continue
        try:
            _reset()
        except Exception:  # noqa: BLE001 - state classes not imported yet
            pass
        print(f"=== SCENARIO {fn.__name__}", flush=True)
        try:
            fn()
            print("NO EXCEPTION", flush=True)
        except BaseException:  # noqa: BLE001 - we want the printed traceback of anything
            sys.stdout.write(traceback.format_exc())
        print("=== END", flush=True)


if __name__ == "__main__":
    main()
