"""Opt-in reproduction of the Transformers Trainer hand-off facts in
sub-skills/distributed-training-backends/references/transformers-trainer.md. Not collected by
pytest and not run by the suite (each case is a subprocess with a GPT-2 and a DeepSpeed engine; the
cheap in-process cases are in test_transformers_trainer_cpu.py). transformers 5.25.0 is pinned in
requirements-test.txt, so it runs from .venv:

    DS_ACCELERATOR=cpu .venv/bin/python tests/field_coverage/_trainer_handoff_probe.py

Each case runs in a fresh subprocess (the Accelerator state is process-global) with a 1-layer
GPT-2 on CPU and one rank; it prints one JSON line per case.
"""
import json
import os
import subprocess
import sys
import tempfile

CASES = {
    # name: (environment the launcher would export, TrainingArguments overrides, run train())
    "env_bf16": ({"ACCELERATE_MIXED_PRECISION": "bf16"}, {}, False),
    "env_bf16_arg_fp16": ({"ACCELERATE_MIXED_PRECISION": "bf16"}, {"fp16": True}, False),
    "json_auto_env_bf16": ({"ACCELERATE_MIXED_PRECISION": "bf16"}, {"deepspeed": "@auto"}, False),
    "json_fp16_env_bf16": ({"ACCELERATE_MIXED_PRECISION": "bf16"}, {"deepspeed": "@fp16"}, False),
    "accel_ds_inline_bf16": ({"ACCELERATE_MIXED_PRECISION": "bf16", "ACCELERATE_USE_DEEPSPEED": "true",
                              "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "1"},
                             {}, True),
    "accel_ds_gas4": ({"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_USE_DEEPSPEED": "true",
                       "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2", "ACCELERATE_GRADIENT_ACCUMULATION_STEPS": "4"}, {}, True),
    "inline_ds_plus_json": ({"ACCELERATE_MIXED_PRECISION": "no", "ACCELERATE_USE_DEEPSPEED": "true",
                             "ACCELERATE_DEEPSPEED_ZERO_STAGE": "2",
                             "ACCELERATE_CONFIG_DS_FIELDS": "zero_stage,gradient_accumulation_steps"},
                            {"deepspeed": "@auto"}, False),
    "fsdp_plain_python": ({}, {"fsdp": True}, False),
}

CHILD = r'''
import json, os, sys, warnings
warnings.filterwarnings("ignore")
import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
kw, do_train = json.loads(sys.argv[1]), sys.argv[2] == "1"
out = {}
def err(e):
    return f"{type(e).__name__}: {str(e)[:300]}"
class Data(torch.utils.data.Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        x = torch.randint(0, 32, (8,))
        return {"input_ids": x, "labels": x}
try:
    args = TrainingArguments(output_dir=os.environ["SCRATCH"], per_device_train_batch_size=2, max_steps=1,
                             report_to=[], save_strategy="no", logging_strategy="no", **kw)
    out["args.mixed_precision"] = args.mixed_precision
    if getattr(args, "fsdp_plugin_args", None):
        out["fsdp_plugin_args"] = args.fsdp_plugin_args
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=32, n_positions=16))
    tr = Trainer(model=model, args=args, train_dataset=Data())
    out["accelerator.mixed_precision"] = tr.accelerator.mixed_precision
    if tr.is_deepspeed_enabled:
        c = tr.accelerator.state.deepspeed_plugin.deepspeed_config
        out["ds"] = {k: c.get(k) for k in ("bf16", "fp16", "gradient_accumulation_steps")}
    if do_train:
        tr.train()
        out["train"] = "ok"
except Exception as e:
    out["error"] = err(e)
print("RESULT " + json.dumps(out, default=str))
'''


def main():
    scratch = tempfile.mkdtemp(prefix="trainer_handoff_")
    jsons = {}
    for name, cfg in (("@auto", {"bf16": {"enabled": "auto"}, "fp16": {"enabled": "auto"}}),
                      ("@fp16", {"fp16": {"enabled": True}})):
        path = os.path.join(scratch, name[1:] + ".json")
        with open(path, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
                       "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}, **cfg}, f)
        jsons[name] = path
    base = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_"))}
    base.update(DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1", SCRATCH=scratch, RANK="0", WORLD_SIZE="1",
                LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT="29613", HF_HOME=os.path.join(scratch, "hf"))
    for name, (env, kw, do_train) in CASES.items():
        kw = {k: jsons.get(v, v) if isinstance(v, str) else v for k, v in kw.items()}
        if name == "fsdp_plain_python":
            run_env = {k: v for k, v in base.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
        else:
            run_env = dict(base)
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(kw), "1" if do_train else "0"],
                              env={**run_env, **env}, capture_output=True, text=True, timeout=300)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
        print(json.dumps({name: json.loads(lines[-1][7:]) if lines else {"rc": proc.returncode,
                                                                         "stderr": proc.stderr[-500:]}}))


if __name__ == "__main__":
    main()
