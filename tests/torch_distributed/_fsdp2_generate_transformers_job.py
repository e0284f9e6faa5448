"""2-rank gloo job for test_fsdp2_generate_transformers.py (torch 2.13.0 CPU, transformers 5.25.0).

Usage: python _fsdp2_generate_transformers_job.py OUTDIR -> OUTDIR/rankN.json. Each rank builds the same tiny
random decoder-only model (Llama) and encoder-decoder model (T5), shards each block and then the root (the
embeddings, final norm and head stay in the root group), and calls `generate` on the root, first plain, then
after register_fsdp_forward_method(model, "generate"); each result is compared with the unsharded model's
greedy tokens. Ranks meet through a FileStore in OUTDIR (after _meet.meet).
"""
from __future__ import annotations

import datetime
import json
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from _meet import meet  # noqa: E402 - ranks meet before the short-timeout init


def build(kind):
    from torch.distributed.fsdp import fully_shard
    from transformers import LlamaConfig, LlamaForCausalLM, T5Config, T5ForConditionalGeneration
    torch.manual_seed(0)
    if kind == "llama":
        cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                          num_attention_heads=2, num_key_value_heads=2)
        ref, m = LlamaForCausalLM(cfg), LlamaForCausalLM(cfg)
        blocks = list(m.model.layers)
    else:
        cfg = T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=2, num_decoder_layers=2, num_heads=2,
                       decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
        ref, m = T5ForConditionalGeneration(cfg), T5ForConditionalGeneration(cfg)
        blocks = list(m.encoder.block) + list(m.decoder.block)
    m.load_state_dict(ref.state_dict())
    for b in blocks:
        fully_shard(b)
    fully_shard(m)                      # shared embedding / final norm / head: the root group
    return ref.eval(), m.eval()


def worker(rank, outdir):
    store = dist.FileStore(os.path.join(outdir, "store"), 2)
    meet(store, 2)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=60))
    from torch.distributed.fsdp import register_fsdp_forward_method
    ids = torch.tensor([[5, 6, 7, 8]])
    res = {}
    for kind in ("llama", "t5"):
        ref, m = build(kind)
        want = ref.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0).tolist()
        for registered in (False, True):
            if registered:
                register_fsdp_forward_method(m, "generate")
            key = f"{kind}_{'registered' if registered else 'plain'}"
            try:
                got = m.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0).tolist()
                res[key] = "same as unsharded" if got == want else f"differs: {got} vs {want}"
            except Exception as e:  # noqa: BLE001 - the error is the result
                res[key] = f"{type(e).__name__}: {str(e)[:300]}"
    with open(os.path.join(outdir, f"rank{rank}.json"), "w") as f:
        json.dump(res, f)
    dist.barrier()
    os._exit(0)


if __name__ == "__main__":
    mp.spawn(worker, args=(sys.argv[1],), nprocs=2)
