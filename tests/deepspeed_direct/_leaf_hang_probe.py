"""Child process (one per rank) for _leaf_matrix.py: a toy MoE block with one submodule per expert in an
nn.ModuleList, routed so that rank r runs only expert r, under ZeRO-3 on 2 gloo ranks (deepspeed 0.19.8,
DS_ACCELERATOR=cpu, stage3_param_persistence_threshold 0 so every parameter is partitioned). With
LEAF=1 the block is a leaf module through `zero_optimization.leaf_module.classes`; with LEAF=0 it is not.
Prints "STEP <n>" after each finished step and "RESULT <json>" at the end, or dies on the process-group
timeout (gloo raises after TIMEOUT_S seconds).

usage: python _leaf_hang_probe.py LEAF ROUTING   (LEAF 0/1, ROUTING one/uneven/mixtral; RANK / MASTER_* from the
       caller; "mixtral" runs a tiny transformers 5.25 Mixtral instead of the toy block)
"""
from __future__ import annotations

import datetime
import importlib
import json
import os
import sys
import warnings


def main():
    leaf, routing = sys.argv[1] == "1", sys.argv[2]
    warnings.simplefilter("ignore")
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    import torch
    import torch.distributed as tdist
    rank = int(os.environ["RANK"])
    tdist.init_process_group("gloo", rank=rank, world_size=2,
                             timeout=datetime.timedelta(seconds=int(os.environ.get("TIMEOUT_S", "20"))))
    import deepspeed
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")

    class ToyMoE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))

        def forward(self, x):
            # routing that differs per rank, as token routing does. "one": rank r runs expert r only (same
            # number of gathers on both ranks); "uneven": rank 0 runs both experts, rank 1 only expert 1
            if routing == "one":
                return self.experts[tdist.get_rank()](x)
            if tdist.get_rank() == 0:
                return self.experts[0](x) + self.experts[1](x)
            return self.experts[1](x)

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inp = torch.nn.Linear(8, 8)
            self.moe = ToyMoE()
            self.out = torch.nn.Linear(8, 1)

        def forward(self, x):
            return self.out(self.moe(self.inp(x)))

    torch.manual_seed(0)
    zero = {"stage": 3, "stage3_param_persistence_threshold": 0}
    zero["leaf_module"] = {"classes": ["ToyMoE"]} if leaf else {"classes": []}
    if routing == "mixtral":
        # transformers 5.25 Mixtral (fused MixtralExperts), not a leaf, different tokens on each rank
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import _leaf_probe
        model = _leaf_probe._model(torch, "mixtral")
        ids = torch.tensor([[1, 2, 3, 4, 5, 6]]) if rank == 0 else torch.tensor([[40, 50, 60, 61, 62, 63]])
        cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": zero,
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
        engine, *_ = deepspeed.initialize(model=model, config=cfg, model_parameters=model.parameters())
        for step in range(2):
            out = engine(input_ids=ids, labels=ids)
            engine.backward(out.loss)
            engine.step()
            print(f"STEP {step}", flush=True)
        print("RESULT " + json.dumps({"steps": 2, "leaf": leaf, "routing": routing}), flush=True)
        return
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": zero,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
    model = Net()
    engine, *_ = deepspeed.initialize(model=model, config=cfg, model_parameters=model.parameters())
    x = torch.ones(1, 8)
    for step in range(2):
        loss = engine(x).sum()
        engine.backward(loss)
        engine.step()
        print(f"STEP {step}", flush=True)
    print("RESULT " + json.dumps({"steps": 2, "leaf": leaf, "routing": routing}), flush=True)


if __name__ == "__main__":
    main()
