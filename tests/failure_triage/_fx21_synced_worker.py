"""Child process (one per rank) for test_fx21_generate_synced_gpus.py; accelerate 1.15.0, deepspeed 0.19.8,
transformers 5.25.0, DS_ACCELERATOR=cpu, gloo.

usage: python _fx21_synced_worker.py OUT_JSON   (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT from the caller)
In one process, in this order:
  1. before anything: transformers' is_deepspeed_zero3_enabled()
  2. a bare deepspeed.initialize with ZeRO-3 (no Accelerate, no HfDeepSpeedConfig): is_deepspeed_zero3_enabled()
  3. Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=3)): is_deepspeed_zero3_enabled(); prepare a tiny
     Llama, then unwrap_model(model).generate(...) WITHOUT synced_gpus, rank r asking for 2 + 4 r new tokens
     -> the synced_gpus value generate chose, the tokens each rank got, whether both ranks finished
Writes one JSON object to OUT_JSON, then os._exit(0).
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import sys
import traceback
import warnings


def main():
    out = sys.argv[1]
    warnings.simplefilter("ignore")
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    import torch
    import torch.distributed as tdist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    tdist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=30))
    import deepspeed
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    from transformers.integrations import is_deepspeed_zero3_enabled
    res = {"rank": rank, "world": world, "before": is_deepspeed_zero3_enabled()}

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
    bare, *_ = deepspeed.initialize(model=lin, config=cfg, model_parameters=lin.parameters())
    res["bare_deepspeed_initialize_zero3"] = is_deepspeed_zero3_enabled()

    from accelerate import Accelerator
    from accelerate.state import PartialState
    real = PartialState._prepare_backend

    def prep(self, cpu=False, sagemaker_dp=False, backend=None):
        # GPU stand-in (as tests/backends_docs/_trainer_backend_matrix.py::_gpu_stand_in): on a GPU host this
        # branch returns "nccl" when LOCAL_RANK is set; this CPU host returns None, so hand back "gloo"
        got, dt = real(self, cpu, sagemaker_dp, backend)
        return ("gloo" if got is None and not cpu else got), dt
    PartialState._prepare_backend = prep
    from accelerate.utils import DeepSpeedPlugin
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.generation.utils import GenerationMixin
    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(zero_stage=3, gradient_accumulation_steps=1))
    res["accelerator_zero3"] = is_deepspeed_zero3_enabled()
    acc.state.deepspeed_plugin.deepspeed_config["train_micro_batch_size_per_gpu"] = 1
    mcfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                       num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaForCausalLM(mcfg)
    optim = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optim = acc.prepare(model, optim)
    seen = []
    orig = GenerationMixin._has_unfinished_sequences

    def spy(self, this_peer_finished, synced_gpus, device):
        seen.append(bool(synced_gpus))
        return orig(self, this_peer_finished, synced_gpus, device)
    GenerationMixin._has_unfinished_sequences = spy
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        gen = acc.unwrap_model(model).generate(ids, max_new_tokens=2 + 4 * rank, min_new_tokens=2 + 4 * rank,
                                               do_sample=False, eos_token_id=None, pad_token_id=0)
    res["synced_gpus"] = sorted(set(seen))
    res["new_tokens"] = int(gen.shape[1] - ids.shape[1])
    tdist.barrier()
    res["finished"] = True
    with open(out, "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.stdout.flush()
        os._exit(1)
