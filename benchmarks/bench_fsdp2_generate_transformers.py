#!/usr/bin/env python3
"""Does Transformers' `generate` work on an FSDP2 (`fully_shard`) root? (prints the outcome per rank; not a test)

    python benchmarks/bench_fsdp2_generate_transformers.py --transformers-path /path/holding/transformers

Needs transformers importable (the pinned .venv has none). Two gloo ranks build the same tiny Llama, shard each
decoder layer and then the root (so `embed_tokens`, the final norm and `lm_head` stay in the root group), and
call `generate` on the root; the result is compared with the unsharded model's greedy tokens.

Measured on transformers 5.25.0, torch 2.13.0 (CPU): both ranks print "same as unsharded": `generate` runs the
model through `self.__call__` (`generation/utils.py`), so the root's pre-forward hook gathers the root group.
Exit 0 after printing, 2 when transformers cannot be imported.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r'''
import os, sys, json
if os.environ.get("BENCH_TF_PATH"):
    sys.path.insert(0, os.environ["BENCH_TF_PATH"])
import torch, torch.distributed as dist
dist.init_process_group("gloo")
rank = dist.get_rank()
from torch.distributed.fsdp import fully_shard
from transformers import LlamaConfig, LlamaForCausalLM
cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2)
torch.manual_seed(0)
ref = LlamaForCausalLM(cfg)
m = LlamaForCausalLM(cfg); m.load_state_dict(ref.state_dict())
for layer in m.model.layers:
    fully_shard(layer)
fully_shard(m)   # embed_tokens, norm, lm_head stay in the root group
ids = torch.tensor([[1, 2, 3]])
want = ref.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0).tolist()
out = {"rank": rank, "root_embed_type": type(m.model.embed_tokens.weight).__name__}
try:
    got = m.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0).tolist()
    out["root_generate"] = "same as unsharded" if got == want else f"differs {got} vs {want}"
except Exception as e:
    out["root_generate"] = f"{type(e).__name__}: {str(e)[:150]}"
try:
    got = m.model(ids).last_hidden_state.shape
    out["inner_call"] = str(tuple(got))
except Exception as e:
    out["inner_call"] = f"{type(e).__name__}: {str(e)[:150]}"
print("R " + json.dumps(out), flush=True)
dist.destroy_process_group()
'''


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[1],
                                 epilog="example: python benchmarks/bench_fsdp2_generate_transformers.py "
                                        "--transformers-path /tmp/tfpkg")
    ap.add_argument("--transformers-path", default="", help="folder holding the transformers package")
    ap.add_argument("--port", type=int, default=29643)
    args = ap.parse_args(argv)
    env = dict(os.environ, OMP_NUM_THREADS="1", BENCH_TF_PATH=args.transformers_path)
    probe = subprocess.run([sys.executable, "-c", "import os,sys; p=os.environ['BENCH_TF_PATH'];"
                            " p and sys.path.insert(0,p); import transformers"], capture_output=True, env=env)
    if probe.returncode != 0:
        print("transformers is not importable; pass --transformers-path", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        worker = Path(tmp) / "worker.py"
        worker.write_text(WORKER)
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                               "--master_port", str(args.port), str(worker)],
                              capture_output=True, text=True, env=env, timeout=600)
    rows = [line[2:] for line in proc.stdout.splitlines() if line.startswith("R ")]
    for row in sorted(rows):
        print(row)
    if proc.returncode != 0:
        print(proc.stderr[-2000:], file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
