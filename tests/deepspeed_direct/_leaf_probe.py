"""Child process for _leaf_matrix.py: builds tiny transformers 5.25 MoE models (Mixtral, Qwen2-MoE,
Qwen3-MoE), runs deepspeed.initialize (deepspeed 0.19.8, DS_ACCELERATOR=cpu, gloo, world size 1) with a
`zero_optimization.leaf_module` variant, and records which modules carry the ZeRO-3 leaf flag, whether the
block's child parameters are already gathered when the block's forward starts, and whether one
forward/backward/step runs. Prints one line "RESULT <json>".

usage: python _leaf_probe.py CASES_JSON       (the caller sets DS_ACCELERATOR=cpu and TORCH_EXTENSIONS_DIR)
"""
from __future__ import annotations

import json
import logging
import os
import sys


def _setup():
    from _ds_probe import clean_env  # same folder: the probe's own directory is on sys.path
    clean_env()
    import torch
    import torch.distributed as tdist
    tdist.init_process_group("gloo", rank=0, world_size=1)
    import deepspeed
    import importlib
    # the shared-memory allreduce is a CPU speed-up JIT-compiled on first use; not part of this probe
    importlib.import_module("deepspeed.comm.torch").build_shm_op = lambda: None
    deepspeed.init_distributed(dist_backend="gloo")
    return torch, deepspeed


class _Catch(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.msgs = []

    def emit(self, record):
        m = record.getMessage().strip()
        if "leaf" in m and m not in self.msgs:
            self.msgs.append(m.split(" in model ")[0])


MODELS = {
    "mixtral": ("MixtralConfig", "MixtralForCausalLM", dict(num_local_experts=4, num_experts_per_tok=2)),
    "qwen2_moe": ("Qwen2MoeConfig", "Qwen2MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16,
                       shared_expert_intermediate_size=16)),
    "qwen3_moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM",
                  dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=16)),
}


def _model(torch, name):
    import transformers
    cfg_cls, model_cls, extra = MODELS[name]
    cfg = getattr(transformers, cfg_cls)(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                                         max_position_embeddings=32, use_cache=False, **extra)
    torch.manual_seed(0)
    return getattr(transformers, model_cls)(cfg)


def _subclassed(model):
    """Swap every MoE block's class for a trivial subclass defined here (same behaviour, other name)."""
    for m in model.modules():
        if type(m).__name__.endswith("SparseMoeBlock"):
            m.__class__ = type("My" + type(m).__name__, (type(m),), {})


def case(torch, deepspeed, c):
    from deepspeed.utils import set_z3_leaf_modules, unset_z3_leaf_modules, get_z3_leaf_modules
    from deepspeed.runtime.zero.partition_parameters import ZeroParamStatus
    model = _model(torch, c.get("model", "mixtral"))
    if c.get("subclass"):
        _subclassed(model)
    before = c.get("before")
    if before:
        fn = {"set": set_z3_leaf_modules, "unset": unset_z3_leaf_modules}[before["call"]]
        arg = [_resolve(model, n) for n in before["classes"]]
        try:
            fn(model, arg, **before.get("kwargs", {}))
        except Exception as e:  # noqa: BLE001 - the error is the result
            return {"before_error": f"{type(e).__name__}: {str(e).split(' in model ')[0]} in model ..."}
    zero = {"stage": c.get("stage", 3)}
    if "leaf_module" in c:
        zero["leaf_module"] = c["leaf_module"]
    cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": zero,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}}
    catch = _Catch()
    logging.getLogger("DeepSpeed").addHandler(catch)
    engine, *_ = deepspeed.initialize(model=model, config=cfg, model_parameters=model.parameters())
    logging.getLogger("DeepSpeed").removeHandler(catch)
    leaves = [n for n, m in engine.module.named_modules() if getattr(m, "_z3_leaf", False)]
    seen = {}
    blocks = [m for m in engine.module.modules() if type(m).__name__.endswith("SparseMoeBlock")]

    def pre(mod, args):
        if c.get("stage", 3) == 3:
            st = {p.ds_status for p in mod.parameters()}
            seen["gathered"] = st == {ZeroParamStatus.AVAILABLE}
    h = blocks[0].register_forward_pre_hook(pre)
    ids = torch.tensor([[1, 2, 3, 4, 5, 6]])
    out = engine(input_ids=ids, labels=ids)
    engine.backward(out.loss)
    engine.step()
    h.remove()
    experts = blocks[0].experts
    return {"leaves": sorted({type(engine.module.get_submodule(n)).__name__ for n in leaves}),
            "n_leaves": len(leaves), "first_leaf": leaves[0] if leaves else "",
            "gathered": seen.get("gathered"), "experts": type(experts).__name__,
            "experts_3d": all(len(getattr(p, "ds_shape", p.shape)) == 3 for p in experts.parameters()),
            "step": bool(torch.isfinite(out.loss).item()), "warnings": catch.msgs,
            "get_z3": len(get_z3_leaf_modules(engine.module))}


def _resolve(model, name):
    """'type:X' -> the class object named X found in the model; anything else stays a string."""
    if not name.startswith("type:"):
        return name
    want = name[5:]
    for m in model.modules():
        for k in type(m).__mro__:
            if k.__name__ == want:
                return k
    raise LookupError(want)


def main():
    cases = json.loads(sys.argv[1])
    torch, deepspeed = _setup()
    res = {}
    for c in cases:
        try:
            res[c["id"]] = case(torch, deepspeed, c)
        except Exception as e:  # noqa: BLE001 - the error is the result
            res[c["id"]] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"}
    print("RESULT " + json.dumps(res, sort_keys=True))


if __name__ == "__main__":
    main()
    # no interpreter teardown: a finished gloo rank can abort there under load (SIGABRT)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
