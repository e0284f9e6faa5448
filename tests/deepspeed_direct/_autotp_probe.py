"""Child process for _ds_tables.py's AutoTP rows (deepspeed 0.19.8, transformers 5.25.0, torch 2.13.0,
DS_ACCELERATOR=cpu, 2 gloo ranks: RANK / WORLD_SIZE / MASTER_* from the caller).

usage: python _autotp_probe.py CASES_JSON   (a list of {"id", "stage", "same_batch"}, optional "train_batch_size"
       and "before_collectives": an error both ranks raise before any collective, so the next case still runs)

A tiny Llama (4 heads, 2 key-value heads) goes through deepspeed.initialize with
"tensor_parallel": {"autotp_size": 2} and a client torch AdamW, then one forward/backward/step. Prints one
line "RESULT <json>" (rank 0's view; rank 1 reports only its error) and leaves with os._exit(0).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_probe as base  # noqa: E402


def _model(torch):
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16)
    return LlamaForCausalLM(cfg)


def case(torch, deepspeed, c):
    from deepspeed.utils import groups
    model = _model(torch)
    full = tuple(model.model.layers[0].self_attn.q_proj.weight.shape)
    cfg = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 10 ** 9,
           "tensor_parallel": {"autotp_size": 2}, "zero_optimization": {"stage": c["stage"]}}
    if "train_batch_size" in c:
        cfg["train_batch_size"] = c["train_batch_size"]
    rank = int(os.environ["RANK"])
    out = {"full_q_proj": list(full)}
    try:
        engine, *_ = deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3),
                                          config=cfg)
        q = engine.module.model.layers[0].self_attn.q_proj
        w = q.weight
        shape = getattr(w, "ds_shape", None) if c["stage"] == 3 else None
        out.update(q_proj_type=type(q).__name__, q_proj_local=list(shape if shape is not None else w.shape),
                   tp_world=groups.get_tensor_model_parallel_world_size(),
                   dp_world=engine.dp_world_size, zero_stage=engine.zero_optimization_stage(),
                   train_batch_size=engine.train_batch_size())
        seed = 5 if c["same_batch"] else 5 + rank
        ids = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(seed))
        loss = engine(input_ids=ids, labels=ids).loss
        engine.backward(loss)
        engine.step()
        out.update(loss_finite=bool(torch.isfinite(loss).item()), step="ok")
    except BaseException as e:  # noqa: BLE001
        out.update(error=type(e).__name__, message=base._first(e))
    return out


def main():
    torch, deepspeed = base._setup()
    import logging
    logging.getLogger("DeepSpeed").setLevel(logging.ERROR)
    res = {}
    for c in json.loads(sys.argv[1]):
        res[c["id"]] = case(torch, deepspeed, c)
        if "error" in res[c["id"]] and not c.get("before_collectives"):
            break   # the other rank may wait in a collective: stop here
    if os.environ["RANK"] == "0":
        print("RESULT " + json.dumps(res))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
