#!/usr/bin/env python3
"""Measure what `from_pretrained` holds on each rank under Accelerate's FSDP loading variables (prints figures; not a test).

    python benchmarks/bench_fsdp_ram_efficient_loading.py --transformers-path /path/holding/transformers

Needs transformers importable (from the environment or --transformers-path, a folder that contains the
`transformers` package); the pinned .venv has none, so this is a benchmark, not a test. It saves a small
Llama (about 100M parameters, fp32) once, then starts two gloo ranks with `torch.distributed.run` and
`ACCELERATE_USE_FSDP=true`, for `FSDP_CPU_RAM_EFFICIENT_LOADING` true and false and for a load in the
checkpoint's dtype (fp32) and a converting one (bf16). Each rank prints: whether transformers sees FSDP
RAM-efficient loading (`is_fsdp_enabled`), the device of its parameters, whether they equal the checkpoint,
and how much anonymous and file-backed resident memory (/proc/self/status RssAnon, RssFile) the call added.

Measured on transformers 5.25.0, torch 2.13.0 (CPU): with the flag true, rank 1 holds the checkpoint's
values on CPU exactly like rank 0; an fp32 load adds ~0 MiB anonymous memory per rank (memory-mapped), a
bf16 load of the fp32 checkpoint adds ~200 MiB anonymous memory per rank (the converted copy); the flag
changes neither figure. Exit 0 after printing, 2 when transformers cannot be imported.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r'''
import json, os, sys
if os.environ.get("BENCH_TF_PATH"):
    sys.path.insert(0, os.environ["BENCH_TF_PATH"])
import torch, torch.distributed as dist
dist.init_process_group("gloo")
from transformers import LlamaForCausalLM
from transformers.distributed.fsdp import is_fsdp_enabled
from safetensors.torch import load_file

def mem():
    d = {}
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(("RssAnon", "RssFile")):
                k, v = line.split(":")
                d[k] = int(v.split()[0]) // 1024
    return d

path = sys.argv[1]
before = mem()
m = LlamaForCausalLM.from_pretrained(path, use_kernels=False, dtype=os.environ["BENCH_DTYPE"])
after = mem()
key = "model.layers.0.mlp.up_proj.weight"
p = dict(m.named_parameters())[key]
ref = load_file(os.path.join(path, "model.safetensors"))[key].to(p.dtype)
print("RESULT " + json.dumps({
    "rank": dist.get_rank(), "is_fsdp_enabled": is_fsdp_enabled(), "device": str(p.device),
    "equals_checkpoint": p.device.type != "meta" and torch.equal(p.detach(), ref),
    "anon_MiB_added": after["RssAnon"] - before["RssAnon"], "file_MiB_added": after["RssFile"] - before["RssFile"],
    "model_MiB": sum(t.numel() * t.element_size() for t in m.parameters()) // 2**20}), flush=True)
dist.destroy_process_group()
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="example: python benchmarks/bench_fsdp_ram_efficient_loading.py "
                                        "--transformers-path /tmp/tfpkg")
    ap.add_argument("--transformers-path", default="", help="folder holding the transformers package")
    ap.add_argument("--port", type=int, default=29641)
    args = ap.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS="1", BENCH_TF_PATH=args.transformers_path)
    probe = subprocess.run([sys.executable, "-c", "import os,sys; p=os.environ['BENCH_TF_PATH'];"
                            " p and sys.path.insert(0,p); import transformers; print(transformers.__version__)"],
                           capture_output=True, text=True, env=env)
    if probe.returncode != 0:
        print("transformers is not importable; pass --transformers-path", file=sys.stderr)
        return 2
    print(f"transformers {probe.stdout.strip()}")
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "llama"
        make = ("import os,sys; p=os.environ['BENCH_TF_PATH']; p and sys.path.insert(0,p);"
                "from transformers import LlamaConfig, LlamaForCausalLM;"
                "LlamaForCausalLM(LlamaConfig(vocab_size=1024, hidden_size=1024, intermediate_size=2816,"
                " num_hidden_layers=8, num_attention_heads=8, num_key_value_heads=8)).save_pretrained(sys.argv[1])")
        subprocess.run([sys.executable, "-c", make, str(model_dir)], check=True, env=env, capture_output=True)
        worker = Path(tmp) / "worker.py"
        worker.write_text(WORKER)
        for dtype in ("float32", "bfloat16"):
            for flag in ("true", "false"):
                run_env = dict(env, ACCELERATE_USE_FSDP="true", FSDP_CPU_RAM_EFFICIENT_LOADING=flag, BENCH_DTYPE=dtype)
                proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                                       "--master_port", str(args.port), str(worker), str(model_dir)],
                                      capture_output=True, text=True, env=run_env, timeout=600)
                rows = sorted((json.loads(line[7:]) for line in proc.stdout.splitlines()
                               if line.startswith("RESULT ")), key=lambda r: r["rank"])
                if proc.returncode != 0 or len(rows) != 2:
                    print(f"load {dtype}, FSDP_CPU_RAM_EFFICIENT_LOADING={flag}: failed\n{proc.stderr[-2000:]}",
                          file=sys.stderr)
                    continue
                for r in rows:
                    print(f"load {dtype:8s} ram_efficient={flag:5s} rank {r['rank']}: is_fsdp_enabled="
                          f"{r['is_fsdp_enabled']} device={r['device']} equals_checkpoint={r['equals_checkpoint']} "
                          f"model={r['model_MiB']} MiB anon+={r['anon_MiB_added']} MiB file+={r['file_MiB_added']} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
