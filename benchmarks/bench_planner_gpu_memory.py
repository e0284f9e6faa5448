#!/usr/bin/env python3
"""Planner vs CUDA allocator: per-GPU memory of one training step, predicted and measured (needs a GPU).

    python3 benchmarks/bench_planner_gpu_memory.py                 # DDP and FSDP2, GPT-2 1024x12
    python3 benchmarks/bench_planner_gpu_memory.py --out DIR       # also writes DIR/planner_gpu_memory.json

Runs plan_backend.py for two model shapes (GPT-2: hidden 1024, 12 layers, vocab 50257, tied embeddings;
Llama: hidden 1024, 8 layers, ffn 2816, GQA 16/4 heads, vocab 32000) at three (sequence, micro-batch)
shapes on one GPU, then trains each for three steps under DDP (fp32 weights, bf16 autocast, AdamW) and
FSDP2 (MixedPrecisionPolicy bf16 params, fp32 reduce, AdamW), each in its own single-rank NCCL
process, and reads torch.cuda.memory_allocated at each phase: after the model is on the GPU
(parameters), after wrapping (DDP's gradient buckets), after the first backward (gradients), after the
first optimizer step (optimizer states), at the end of the third step's forward (what autograd keeps:
the planner's `activations`), and the allocator's peak during that step (activations peak = peak -
memory resident at the step's start - gradients at the end of backward). Prints one row per component
with the planner's figure, the measured one and their ratio. A figure, not a test: nothing fails on a mismatch.
Exit codes: 0 printed, 2 no CUDA device or the planner failed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLANNER = os.path.join(ROOT, "sub-skills", "distributed-training-backends", "scripts", "plan_backend.py")
CONFIGS = {
    "gpt2": {"model_type": "gpt2", "n_embd": 1024, "n_layer": 12, "n_head": 16, "vocab_size": 50257,
             "n_positions": 2048, "n_inner": None},
    "llama": {"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 8,
              "num_attention_heads": 16, "num_key_value_heads": 4, "vocab_size": 32000,
              "tie_word_embeddings": False},
}

WORKER = r'''
import json, os, sys, torch, torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM
strategy, family, seq, mb = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.cuda.set_device(0)
dist.init_process_group("nccl", device_id=torch.device("cuda:0"))
MiB = 1
def alloc(): torch.cuda.synchronize(); return torch.cuda.memory_allocated()
if family == "gpt2":
    cfg = GPT2Config(n_embd=1024, n_layer=12, n_head=16, vocab_size=50257, n_positions=2048)
    Model = GPT2LMHeadModel
else:
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000, tie_word_embeddings=False)
    Model = LlamaForCausalLM
cfg.use_cache = False
blocks = (lambda m: m.transformer.h) if family == "gpt2" else (lambda m: m.model.layers)
base = alloc()
torch.manual_seed(0)
model = Model(cfg).cuda()
n_params = sum(p.numel() for p in model.parameters())
a_params = alloc() - base
if strategy == "ddp":
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    ctx = lambda: torch.autocast("cuda", dtype=torch.bfloat16)
else:
    from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for blk in blocks(model):
        fully_shard(blk, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    import contextlib
    ctx = contextlib.nullcontext
a_wrapped = alloc() - base
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
ids = torch.randint(0, cfg.vocab_size, (mb, seq), device="cuda")
rec = {"strategy": strategy, "family": family, "seq": seq, "mb": mb, "n_params": n_params, "parameters": a_params, "wrap_extra": a_wrapped - a_params}
for step in range(3):
    start = alloc()
    torch.cuda.reset_peak_memory_stats()
    with ctx():
        loss = model(input_ids=ids, labels=ids).loss
    end_fwd = alloc()
    loss.backward()
    after_bwd = alloc()
    peak = torch.cuda.max_memory_allocated()
    opt.step()
    after_step = alloc()
    opt.zero_grad(set_to_none=True)
    after_zero = alloc()
    if step == 0:
        rec["gradients"] = after_bwd - start
        rec["optimizer_states"] = after_step - after_bwd
    if step == 2:
        rec["resident_at_step_start"] = start - base
        rec["peak_step"] = peak - base
        rec["grads_at_end_of_backward"] = after_bwd - after_zero
        rec["activations"] = peak - start - (after_bwd - after_zero)
        rec["end_of_forward"] = end_fwd - start
        rec["max_reserved"] = torch.cuda.max_memory_reserved()
print("R " + json.dumps(rec), flush=True)
os._exit(0)
'''


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog="example: python3 benchmarks/bench_planner_gpu_memory.py --out /tmp/m")
    ap.add_argument("--out", default="", help="folder for planner_gpu_memory.json")
    args = ap.parse_args(argv)
    try:
        import torch
        ok = torch.cuda.is_available()
    except Exception:  # noqa: BLE001 - any import failure means no usable GPU here
        ok = False
    if not ok:
        print("bench_planner_gpu_memory.py: needs a CUDA device", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp()
    script = os.path.join(tmp, "worker.py")
    with open(script, "w") as f:
        f.write(WORKER)
    cases = [(fam, seq, mb) for fam in ("gpt2", "llama") for seq, mb in ((1024, 4), (512, 2), (2048, 1))]
    jobs = [(s_, fam, seq, mb) for fam, seq, mb in cases for s_ in ("ddp", "fsdp2")]
    plans = {}
    for fam, seq, mb in cases:
        cfg_path = os.path.join(tmp, f"{fam}.json")
        with open(cfg_path, "w") as f:
            json.dump(CONFIGS[fam], f)
        p = subprocess.run([sys.executable, PLANNER, "--model-config", cfg_path, "--gpus-per-node", "1",
                            "--seq-len", str(seq), "--micro-batch", str(mb), "--precision", "bf16",
                            "--gpu-memory", "80GiB", "--output", "json"], capture_output=True, text=True)
        if p.returncode not in (0, 1):
            print(f"bench_planner_gpu_memory.py: planner failed: {p.stderr.strip()[:300]}", file=sys.stderr)
            return 2
        plans[(fam, seq, mb)] = {c["strategy"]: c["per_gpu_bytes"] for c in json.loads(p.stdout)["candidates"]
                                 if c.get("offload", "none") == "none"}

    def run(job_i):
        i, (strategy, fam, seq, mb) = job_i
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29810 + i), RANK="0", WORLD_SIZE="1",
                   LOCAL_RANK="0")
        r = subprocess.run([sys.executable, script, strategy, fam, str(seq), str(mb)], env=env,
                           capture_output=True, text=True, timeout=300)
        lines = [ln[2:] for ln in r.stdout.splitlines() if ln.startswith("R ")]
        return (strategy, fam, seq, mb), (json.loads(lines[-1]) if lines else
                                          {"error": r.stderr.strip().splitlines()[-3:]})
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max_workers=4) as ex:
        results = list(ex.map(run, enumerate(jobs)))
    rows, measured = [], []
    for (strategy, fam, seq, mb), m in results:
        measured.append(m)
        if "error" in m:
            rows.append((strategy, fam, seq, mb, "error", None, 0, " ".join(m["error"])[:60]))
            continue
        pl = plans[(fam, seq, mb)].get(strategy, {})
        pairs = [("parameters", m["parameters"], pl.get("parameters")),
                 ("gradients", m["gradients"], pl.get("gradients")),
                 ("optimizer_states", m["optimizer_states"], pl.get("optimizer_states")),
                 ("buckets", m["wrap_extra"], pl.get("communication_buffers")),
                 ("saved (end of fwd)", m["end_of_forward"], pl.get("activations")),
                 ("activations peak", m["activations"], (pl.get("activations") or 0) + (pl.get("activation_workspace") or 0)),
                 ("reserved / total", m["max_reserved"], pl.get("total"))]
        for name, got, want in pairs:
            rows.append((strategy, fam, seq, mb, name, want, got, f"{want / got:.2f}" if want and got else "-"))
    print(f"{'strategy':8s} {'model':6s} {'seq':>5s} {'mb':>3s} {'component':20s} {'planner MiB':>12s} {'measured MiB':>13s} {'ratio':>6s}")
    for s_, fam, seq, mb, n, w, g, r in rows:
        ws = f"{w / 2**20:.0f}" if w else "-"
        print(f"{s_:8s} {fam:6s} {seq:5d} {mb:3d} {n:20s} {ws:>12s} {g / 2**20:>13.0f} {r:>6s}")
    doc = {"configs": CONFIGS, "planner": {f"{k[0]}-{k[1]}x{k[2]}": v for k, v in plans.items()},
           "measured": measured, "device": torch.cuda.get_device_name(0), "torch": torch.__version__}
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "planner_gpu_memory.json"), "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
