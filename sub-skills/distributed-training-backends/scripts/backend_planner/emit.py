"""Write the Accelerate config (+ DeepSpeed JSON) for a planned candidate; YAML written by hand."""
from __future__ import annotations

import json
import os
import re

from .common import GIB, InputError

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"}


def yaml_scalar(v) -> str:
    """A YAML 1.1 scalar that PyYAML's safe_load reads back as v (bool, int or str).
    Strings that could be read as anything else are double-quoted, escaping what YAML does not
    print or would fold. (Written by hand: importing PyYAML costs a third of a plan.)"""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if _PLAIN.fullmatch(v) and v.lower() not in _YAML_WORDS:
        return v
    out = []
    for ch in v:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif (0x20 <= o <= 0x7E or 0xA0 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD or o >= 0x10000) \
                and o not in (0x2028, 0x2029, 0xFEFF):
            out.append(ch)                   # printable for YAML and no line break: as is
        elif o <= 0xFF:
            out.append("\\x%02x" % o)
        elif o <= 0xFFFF:
            out.append("\\u%04x" % o)
        else:
            out.append("\\U%08x" % o)
    return '"' + "".join(out) + '"'


def yaml_dump(d: dict, indent: int = 0) -> str:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out.append(" " * indent + f"{k}:\n" + yaml_dump(v, indent + 2))
        else:
            out.append(" " * indent + f"{k}: {yaml_scalar(v)}\n")
    return "".join(out)


def emit(result, args, folder):
    """Write accelerate.yaml (+ ds_config.json) for the recommended (or --emit-candidate) candidate."""
    rec = result["recommended"]
    if args.emit_candidate:
        strat, _, off = args.emit_candidate.partition(":")
        off, _, dev = (off or "none").partition("@")
        match = [c for c in result["candidates"] if c["strategy"] == strat and c["offload"] == off
                 and (c["offload_device"] == dev if dev else c["offload_device"] in ("none", "cpu"))]
        if not match:
            raise InputError(f"--emit-candidate {args.emit_candidate!r}: no such candidate "
                             "(STRATEGY[:OFFLOAD[@nvme]], e.g. zero3:optimizer or zero3:optimizer+params@nvme)")
        rec = match[0]
    inp = result["inputs"]
    G, M = inp["gpus_per_node"], inp["nodes"]
    mp = {"fp32": "no", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8"}[inp["precision"]]
    layer_cls = {"llama": "LlamaDecoderLayer", "mistral": "MistralDecoderLayer", "qwen2": "Qwen2DecoderLayer",
                 "gpt2": "GPT2Block"}.get(result["model"]["family"], "LlamaDecoderLayer")
    cfg = {"compute_environment": "LOCAL_MACHINE", "num_machines": M, "num_processes": G * M,
           "machine_rank": 0, "main_training_function": "main", "use_cpu": False, "rdzv_backend": "static"}
    if M > 1:
        cfg["main_process_ip"] = "MAIN_NODE_IP"
        cfg["main_process_port"] = 29500
    files = {}
    s = rec["strategy"]
    if s == "ddp":
        cfg.update(distributed_type="MULTI_GPU", mixed_precision=mp, gpu_ids="all")
    elif s.startswith("zero"):
        stage = int(s[-1])
        zo = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
              "reduce_bucket_size": "auto"}
        if stage == 3:
            zo.update({"stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                       "stage3_gather_16bit_weights_on_model_save": True})
        if rec["offload"] != "none":
            dev = rec["offload_device"]
            zo["offload_optimizer"] = {"device": dev, "pin_memory": True}
            if rec["offload"] == "optimizer+params":
                zo["offload_param"] = {"device": dev, "pin_memory": True}
            if dev == "nvme":
                for key in ("offload_optimizer", "offload_param"):
                    if key in zo:
                        zo[key]["nvme_path"] = "/local_nvme"
        ds = {"train_micro_batch_size_per_gpu": inp["micro_batch"], "train_batch_size": "auto",
              "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
              "bf16": {"enabled": inp["precision"] in ("bf16", "fp8")},
              "fp16": {"enabled": inp["precision"] == "fp16"}, "zero_optimization": zo}
        ds_path = os.path.join(os.path.abspath(folder), "ds_config.json")
        files["ds_config.json"] = json.dumps(ds, indent=2) + "\n"
        cfg.update(distributed_type="DEEPSPEED",
                   deepspeed_config={"deepspeed_config_file": ds_path, "zero3_init_flag": stage == 3})
        if M > 1:
            cfg["deepspeed_config"]["deepspeed_multinode_launcher"] = "standard"
    else:
        fc = {"fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_transformer_layer_cls_to_wrap": layer_cls,
              "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_cpu_ram_efficient_loading": True,
              "fsdp_offload_params": rec["offload"] != "none",
              "fsdp_activation_checkpointing": bool(inp["activation_checkpointing"])}
        if s in ("fsdp2", "hsdp"):
            fc.update(fsdp_version=2, fsdp_reshard_after_forward=True)
        else:
            strategy = {"fsdp-full-shard": "FULL_SHARD", "fsdp-shard-grad-op": "SHARD_GRAD_OP",
                        "fsdp-hybrid-shard": "HYBRID_SHARD"}[s]
            fc.update(fsdp_version=1, fsdp_sharding_strategy=strategy, fsdp_backward_prefetch="BACKWARD_PRE",
                      fsdp_use_orig_params=True, fsdp_sync_module_states=True)
            fc.pop("fsdp_activation_checkpointing")
        cfg.update(distributed_type="FSDP", mixed_precision=mp, fsdp_config=fc)
        if s == "hsdp":
            cfg["parallelism_config"] = {"parallelism_config_dp_replicate_size": M,
                                         "parallelism_config_dp_shard_size": G,
                                         "parallelism_config_tp_size": 1, "parallelism_config_cp_size": 1}
    header = ("# Written by plan_backend.py for candidate {} (offload {}); check with\n"
              "# validate_backend_config.py before launching. Per-GPU plan: {:.1f} GiB.\n").format(
                  s, rec["offload"], rec["per_gpu_bytes"]["total"] / GIB)
    files["accelerate.yaml"] = header + yaml_dump(cfg)
    try:
        os.makedirs(folder, exist_ok=True)
        written = []
        for name, text in files.items():
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            written.append(path)
    except OSError as exc:
        raise InputError(f"--emit {folder!r}: cannot write: {exc.strerror or exc}") from None
    except UnicodeError:
        raise InputError(f"--emit {folder!r}: the path is not valid text in this locale") from None
    return written
