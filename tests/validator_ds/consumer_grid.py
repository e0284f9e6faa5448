"""Generated grid of consumer configs for tests/validator_ds/test_consumer_model.py.

Each axis lists the values a key can take in a real config (absent, "auto", valid, legacy,
edge); the grid is a seeded sample of the full product, so every run checks the same cases
and a new axis value widens it without hand-picking combinations.
"""
from __future__ import annotations

import json
import random

ABSENT = object()
SEED = 14

# Accelerate YAML without deepspeed_config_file: the plugin builds the config from these.
YAML_AXES = {
    "zero_stage": [ABSENT, 0, 1, 2, 3, "3"],
    "offload_optimizer_device": [ABSENT, "none", "cpu", "nvme", "auto", "CPU"],
    "offload_param_device": [ABSENT, "none", "cpu", "nvme", "auto"],
    "offload_optimizer_nvme_path": [ABSENT, "/nvme"],
    "offload_param_nvme_path": [ABSENT, "/nvme"],
    "gradient_accumulation_steps": [ABSENT, 1, 4, "auto"],
    "gradient_clipping": [ABSENT, 1.0, "auto", 0],
    "zero3_save_16bit_model": [ABSENT, True, False, "true"],
    "mixed_precision": [ABSENT, "no", "fp16", "bf16"],
}

# DeepSpeed JSON named by deepspeed_config_file / given to the Trainer / to deepspeed.
JSON_AXES = {
    "zero": ["block", "block", "block", "block", "missing", True],
    "stage": [ABSENT, "auto", 0, 1, 2, 3],
    "offload_optimizer": [ABSENT, {"device": "auto"}, {"device": "cpu"}, {"device": "none"}, None],
    "offload_param": [ABSENT, {"device": "auto"}, {"device": "cpu"}],
    # legacy names and aliases DeepSpeed still reads, and field names the consumers do not fill
    "legacy": [ABSENT, ("cpu_offload", True), ("cpu_offload", False), ("cpu_offload_param", True),
               ("stage3_gather_fp16_weights_on_model_save", True), ("cpu_offload_use_pin_memory", True),
               ("stage3_param_persistence_threshold", 500), ("param_persistence_threshold", 500),
               ("prefetch_bucket_size", 777), ("prefetch_bucket_size", "auto"),
               ("gather_16bit_weights_on_model_save", True), ("gather_16bit_weights_on_model_save", "auto")],
    "gather16": [ABSENT, "auto", True, False],
    "prefetch": [ABSENT, "auto", 1000],
    "fp16": [ABSENT, {"enabled": "auto"}, {"enabled": True}, {"enabled": False}],
    "bf16": [ABSENT, {"enabled": "auto"}, {"enabled": True}, ("bfloat16", {"enabled": True})],
    "gas": [ABSENT, "auto", 2],
    "clipping": [ABSENT, "auto", 0.5],
    "batch": [{"train_micro_batch_size_per_gpu": "auto"}, {"train_micro_batch_size_per_gpu": 2},
              {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"}],
    "optimizer": [ABSENT, "adamw", "adamw+warmup"],
    "force_ds_cpu": [ABSENT, False],
    "mixed_precision": ["no", "no", "bf16", "fp16"],
}


def _sample(axes, n, seed):
    keys = list(axes)
    total = 1
    for k in keys:
        total *= len(axes[k])
    rng = random.Random(seed)
    picks = sorted(rng.sample(range(total), n))
    out = []
    for idx in picks:
        combo = {}
        for k in reversed(keys):
            idx, r = divmod(idx, len(axes[k]))
            combo[k] = axes[k][r]
        out.append({k: combo[k] for k in keys})
    # every value of every axis alone on the base case (the first value of each axis), so each
    # legacy name / alias is also seen without the others
    base = {k: axes[k][0] for k in keys}
    for k in keys:
        for v in axes[k][1:]:
            c = dict(base)
            c[k] = v
            out.append(c)
    return out


def yaml_text(combo, ds_file=None):
    lines = ["distributed_type: DEEPSPEED", "num_processes: 1"]
    if combo.get("mixed_precision", ABSENT) is not ABSENT:
        lines.append(f"mixed_precision: {json.dumps(combo['mixed_precision'])}")
    lines.append("deepspeed_config:")
    if ds_file:
        lines.append(f"  deepspeed_config_file: {ds_file}")
    for k, v in combo.items():
        if k == "mixed_precision" or v is ABSENT:
            continue
        lines.append(f"  {k}: {json.dumps(v)}")
    if lines[-1] == "deepspeed_config:":
        lines.append("  zero_stage: 2")
    return "\n".join(lines) + "\n"


def json_config(c):
    d = {}
    d.update(c["batch"])
    if c["zero"] == "block":
        z = {}
        if c["stage"] is not ABSENT:
            z["stage"] = c["stage"]
        for k in ("offload_optimizer", "offload_param"):
            if c[k] is not ABSENT:
                z[k] = c[k]
        if c["legacy"] is not ABSENT:
            k, v = c["legacy"]
            clash = {"cpu_offload": "offload_optimizer" in z, "cpu_offload_param": "offload_param" in z,
                     "stage3_gather_fp16_weights_on_model_save": c["gather16"] is not ABSENT,
                     "gather_16bit_weights_on_model_save": c["gather16"] is not ABSENT,
                     "prefetch_bucket_size": c["prefetch"] is not ABSENT}
            if not clash.get(k):
                z[k] = v
        if c["gather16"] is not ABSENT:
            z["stage3_gather_16bit_weights_on_model_save"] = c["gather16"]
        if c["prefetch"] is not ABSENT:
            z["stage3_prefetch_bucket_size"] = c["prefetch"]
        d["zero_optimization"] = z
    elif c["zero"] is True:
        d["zero_optimization"] = True  # the legacy boolean form (stage 1)
    for k in ("fp16", "bf16"):
        if isinstance(c[k], tuple):
            d[c[k][0]] = dict(c[k][1])  # the legacy "bfloat16" block name
        elif c[k] is not ABSENT:
            d[k] = dict(c[k])
    if c["gas"] is not ABSENT:
        d["gradient_accumulation_steps"] = c["gas"]
    if c["clipping"] is not ABSENT:
        d["gradient_clipping"] = c["clipping"]
    if c["optimizer"] is not ABSENT:
        d["optimizer"] = {"type": "AdamW", "params": {"lr": "auto", "weight_decay": "auto"}}
        if c["optimizer"] == "adamw+warmup":
            d["scheduler"] = {"type": "WarmupLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                             "warmup_num_steps": "auto"}}
    if c["force_ds_cpu"] is not ABSENT:
        d["zero_force_ds_cpu_optimizer"] = c["force_ds_cpu"]
    return d


def trainer_args_matching(d):
    """TrainingArguments overrides (consumer_oracle.TRAINER_ARGS names) equal to the explicit
    values of the JSON, so that the Trainer's comparison passes."""
    out = {}
    for key, arg in (("train_micro_batch_size_per_gpu", "per_device_train_batch_size"),
                     ("gradient_accumulation_steps", "gradient_accumulation_steps"),
                     ("gradient_clipping", "max_grad_norm")):
        v = d.get(key)
        if v is not None and v != "auto":
            out[arg] = v
    return out


def jobs(n_yaml=64, n_json=96):
    """[(job, meta)]: meta carries the parsed inputs the validator-side model needs."""
    out = []
    for i, c in enumerate(_sample(YAML_AXES, n_yaml, SEED)):
        y = yaml_text(c)
        out.append(({"id": f"yaml|{i}", "consumer": "accelerate", "yaml": y, "json": None},
                    {"yaml": y, "json": None}))
    for i, c in enumerate(_sample(JSON_AXES, n_json, SEED + 1)):
        d = json_config(c)
        text = json.dumps(d)
        mp = c["mixed_precision"]
        # the file form: a YAML that names the JSON (any mixed_precision in that YAML, even 'no',
        # is refused next to a file: every 8th case keeps one to exercise the refusal)
        y = yaml_text({"mixed_precision": mp} if i % 8 == 0 else {}, ds_file="ds_config.json")
        out.append(({"id": f"file|{i}", "consumer": "accelerate", "yaml": y, "json": text},
                    {"yaml": y, "json": d}))
        # the Trainer: every other case has TrainingArguments that agree with the JSON's explicit
        # values, the others the defaults (an explicit value that differs is refused)
        targs = trainer_args_matching(d) if i % 2 == 0 else {}
        out.append(({"id": f"trainer|{i}", "consumer": "transformers", "json": text, "mixed_precision": mp,
                     "trainer_args": targs}, {"yaml": None, "json": d, "mixed_precision": mp, "trainer_args": targs}))
        out.append(({"id": f"ds|{i}", "consumer": "deepspeed", "json": text}, {"yaml": None, "json": d}))
    return out


def real_jobs(folder):
    """Jobs for the published configs in tests/validator_ds/real_configs (PROVENANCE.tsv): an
    Accelerate YAML as launched; a DeepSpeed JSON named by a YAML's deepspeed_config_file, given
    to the Trainer (with TrainingArguments that agree with its explicit values) and to deepspeed."""
    out = []
    for p in sorted(folder.iterdir()):
        text = p.read_text(encoding="utf-8")
        if p.suffix in (".yaml", ".yml"):
            out.append(({"id": f"real|{p.name}|accelerate", "consumer": "accelerate", "yaml": text, "json": None},
                        {"yaml": text, "json": None}))
        elif p.suffix == ".json":
            d = json.loads(text)
            y = yaml_text({}, ds_file="ds_config.json")
            targs = trainer_args_matching(d)
            out.append(({"id": f"real|{p.name}|accelerate", "consumer": "accelerate", "yaml": y, "json": text},
                        {"yaml": y, "json": d}))
            out.append(({"id": f"real|{p.name}|transformers", "consumer": "transformers", "json": text,
                         "mixed_precision": "no", "trainer_args": targs},
                        {"yaml": None, "json": d, "mixed_precision": "no", "trainer_args": targs}))
            out.append(({"id": f"real|{p.name}|deepspeed", "consumer": "deepspeed", "json": text},
                        {"yaml": None, "json": d}))
    return out
