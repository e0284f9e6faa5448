"""One gloo rank under torchrun, DS_ACCELERATOR=cpu (deepspeed 0.19.8, transformers 5.25.0, torch 2.13.0).
Three things users meet through RLHF trainers, checkpoint conversion and hand-written ZeRO-3 loading:

(a) frozen: deepspeed.initialize on a model whose every parameter is frozen, with and without an
    optimizer (a config "optimizer" section, a client torch optimizer) at ZeRO stages 0-3, and at
    stage 3 with offload_param; a frozen reference engine built from a copy of the policy's config
    with and without its "optimizer" section (what TRL's prepare_deepspeed builds).
(b) tied: a model with tied weights (embedding and output layer share one Parameter), ZeRO-2 and
    ZeRO-3 checkpoints converted with convert_zero_checkpoint_to_fp32_state_dict, pickle vs
    safe_serialization, and the two ways out (safetensors.torch.save_model, save_pretrained).
(c) zero_init: transformers from_pretrained / a model constructor inside a hand-written
    `with deepspeed.zero.Init(...)` without HfDeepSpeedConfig, and from_pretrained with one alive.

argv[1]: scratch dir. Prints RESULT <json>; ends with os._exit(0) after printing."""
import copy
import json
import os
import sys
import traceback

import torch
import deepspeed

deepspeed.init_distributed(dist_backend="gloo")
ROOT = sys.argv[1]


def err(e):
    tb = traceback.extract_tb(e.__traceback__)
    last = tb[-1]
    lib = [f for f in tb if "site-packages" in f.filename]
    return {"error": f"{type(e).__name__}: {e}".strip()[:300],
            "file": last.filename.split("site-packages/")[-1], "func": last.name, "line": (last.line or "").strip(),
            "frames": [f"{f.filename.split('site-packages/')[-1]}::{f.name}" for f in lib][-6:]}


# (a) --------------------------------------------------------------------------------------------
def frozen_model():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    m.requires_grad_(False)
    return m


def frozen(stage, how, offload=False):
    m = frozen_model()
    zero = {"stage": stage}
    if offload:
        zero["offload_param"] = {"device": "cpu"}
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_allow_untested_optimizer": True, "zero_optimization": zero}
    kw = {}
    try:
        if how == "config":
            cfg["optimizer"] = {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}
        elif how == "client":
            kw["optimizer"] = torch.optim.AdamW(m.parameters(), lr=1e-3)
        elif how == "client_trainable_only":
            kw["optimizer"] = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-3)
        eng, _, _, _ = deepspeed.initialize(model=m, config=cfg, **kw)
        out = {"optimizer": type(eng.optimizer).__name__ if eng.optimizer is not None else None}
        if stage == 3:
            out["param_shape"] = list(eng.module[0].weight.shape)
        return out
    except Exception as e:  # noqa: BLE001
        return err(e)


def reference_engine(drop_optimizer):
    """TRL-style: the policy's whole DeepSpeed config, deep-copied, reused for a frozen reference."""
    policy_cfg = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
                  "zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}},
                  "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}},
                  "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 2}}}
    cfg = copy.deepcopy(policy_cfg)
    if drop_optimizer:
        cfg.pop("optimizer")
        cfg.pop("scheduler")
    try:
        eng, _, _, _ = deepspeed.initialize(model=frozen_model(), config=cfg)
        eng.eval()
        with torch.no_grad():
            y = eng(torch.ones(1, 8))
        return {"optimizer": type(eng.optimizer).__name__, "forward_shape": list(y.shape)}
    except Exception as e:  # noqa: BLE001
        return err(e)


res = {"frozen": {}, "reference": {}, "tied": {}, "zero_init": {}}
for stage in (0, 1, 2, 3):
    for how in ("none", "config", "client"):
        res["frozen"][f"{stage}_{how}"] = frozen(stage, how)
res["frozen"]["3_config_offload_param"] = frozen(3, "config", offload=True)
res["frozen"]["3_none_offload_param"] = frozen(3, "none", offload=True)
res["frozen"]["trainable_only_optimizer"] = frozen(3, "client_trainable_only")
res["reference"]["policy_config_copied"] = reference_engine(drop_optimizer=False)
res["reference"]["optimizer_and_scheduler_popped"] = reference_engine(drop_optimizer=True)


# (b) --------------------------------------------------------------------------------------------
class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)
        self.mid = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.emb.weight   # tied, as tie_word_embeddings does

    def forward(self, x):
        return self.head(self.mid(self.emb(x)))


from deepspeed.utils.zero_to_fp32 import (convert_zero_checkpoint_to_fp32_state_dict,  # noqa: E402
                                          load_state_dict_from_zero_checkpoint)
from safetensors.torch import load_model, save_model  # noqa: E402

for stage in (2, 3):
    torch.manual_seed(0)
    cfg = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": stage},
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}}}
    eng, _, _, _ = deepspeed.initialize(model=Tied(), config=cfg)
    loss = eng(torch.tensor([[1, 2]])).sum()
    eng.backward(loss)
    eng.step()
    ckpt = os.path.join(ROOT, f"tied_z{stage}")
    eng.save_checkpoint(ckpt)
    r = {"named_parameters": [n for n, _ in Tied().named_parameters()],
         "state_dict_keys": sorted(Tied().state_dict())}
    for safe in (False, True):
        out = os.path.join(ROOT, f"tied_z{stage}_out_{safe}")
        try:
            convert_zero_checkpoint_to_fp32_state_dict(ckpt, out, safe_serialization=safe)
            r[f"safe_{safe}"] = {"files": sorted(os.listdir(out))}
        except Exception as e:  # noqa: BLE001
            r[f"safe_{safe}"] = err(e)
    sd = torch.load(os.path.join(ROOT, f"tied_z{stage}_out_False", "pytorch_model.bin"))
    r["bin_keys"] = sorted(sd)
    r["bin_tied_alias_kept"] = sd["emb.weight"].data_ptr() == sd["head.weight"].data_ptr()
    # way out 1: load the fp32 weights into the model, let safetensors drop the alias and re-tie on load
    fresh = load_state_dict_from_zero_checkpoint(Tied(), ckpt)
    path = os.path.join(ROOT, f"tied_z{stage}_save_model.safetensors")
    save_model(fresh, path)
    back = Tied()
    load_model(back, path)
    from safetensors import safe_open  # noqa: E402
    with safe_open(path, "pt") as f:
        r["save_model_keys"] = sorted(f.keys())
    r["save_model_roundtrip_equal"] = bool(torch.equal(back.emb.weight, sd["emb.weight"].float()))
    r["save_model_still_tied"] = back.head.weight is back.emb.weight
    res["tied"][str(stage)] = r

# ZeRO-1/2 keep every 16-bit parameter as a view into one flat buffer: does save_file accept that?
from safetensors.torch import save_file  # noqa: E402

torch.manual_seed(0)
eng, _, _, _ = deepspeed.initialize(
    model=torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 1)),
    config={"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}, "bf16": {"enabled": True},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "torch_adam": True}}})
sd = eng.module.state_dict()
fv = {"tensors": len(sd), "storages": len({v.untyped_storage().data_ptr() for v in sd.values()})}
try:
    save_file(sd, os.path.join(ROOT, "flat_views.safetensors"))
    fv["save_file"] = "ok"
except Exception as e:  # noqa: BLE001
    fv["save_file"] = err(e)["error"]
res["tied"]["zero2_flat_views"] = fv

# way out 2: a transformers model with tie_word_embeddings: save_pretrained writes one copy, reload re-ties
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402

torch.manual_seed(0)
lcfg = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2,
                   num_key_value_heads=2, max_position_embeddings=16, tie_word_embeddings=True)
llama = LlamaForCausalLM(lcfg)
eng, _, _, _ = deepspeed.initialize(model=llama, config={
    "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2},
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "torch_adam": True}}})
out = eng(input_ids=torch.tensor([[1, 2, 3]]), labels=torch.tensor([[1, 2, 3]]))
eng.backward(out.loss)
eng.step()
ck = os.path.join(ROOT, "llama_z2")
eng.save_checkpoint(ck)
r = {}
try:
    convert_zero_checkpoint_to_fp32_state_dict(ck, os.path.join(ROOT, "llama_safe"), safe_serialization=True)
    r["zero_to_fp32_safe"] = {"files": sorted(os.listdir(os.path.join(ROOT, "llama_safe")))}
except Exception as e:  # noqa: BLE001
    r["zero_to_fp32_safe"] = err(e)
fresh = load_state_dict_from_zero_checkpoint(LlamaForCausalLM(lcfg), ck)
fresh.save_pretrained(os.path.join(ROOT, "llama_hf"))
r["save_pretrained_files"] = sorted(x for x in os.listdir(os.path.join(ROOT, "llama_hf")) if x.endswith(".safetensors"))
with safe_open(os.path.join(ROOT, "llama_hf", "model.safetensors"), "pt") as f:
    r["save_pretrained_has_lm_head_key"] = "lm_head.weight" in f.keys()
re_ = LlamaForCausalLM.from_pretrained(os.path.join(ROOT, "llama_hf"))
r["reload_tied"] = re_.lm_head.weight is re_.model.embed_tokens.weight
r["reload_equal"] = bool(torch.equal(re_.model.embed_tokens.weight, fresh.model.embed_tokens.weight))
res["tied"]["llama"] = r


# (c) --------------------------------------------------------------------------------------------
from transformers import BertConfig, BertModel  # noqa: E402
from transformers.integrations.deepspeed import HfDeepSpeedConfig, is_deepspeed_zero3_enabled  # noqa: E402

bert_dir = os.path.join(ROOT, "bert")
bcfg = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                  max_position_embeddings=16)
torch.manual_seed(0)
BertModel(bcfg).save_pretrained(bert_dir)
ref = BertModel.from_pretrained(bert_dir).embeddings.word_embeddings.weight.detach().clone()
z3 = {"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3}}


def loaded(fn):
    try:
        m = fn()
        w = m.embeddings.word_embeddings.weight
        out = {"shape_outside_gather": list(w.shape), "partitioned": hasattr(w, "ds_id")}
        with deepspeed.zero.GatheredParameters([w]):
            out["equal_to_file"] = bool(torch.equal(w.detach().cpu(), ref))
        return out
    except Exception as e:  # noqa: BLE001
        return err(e)


def bare_from_pretrained():
    with deepspeed.zero.Init(config_dict_or_path=z3):
        return BertModel.from_pretrained(bert_dir)


def bare_constructor():
    with deepspeed.zero.Init(config_dict_or_path=z3):
        return BertModel(bcfg)


res["zero_init"]["switch_before"] = is_deepspeed_zero3_enabled()
res["zero_init"]["bare_from_pretrained"] = loaded(bare_from_pretrained)
res["zero_init"]["bare_constructor"] = loaded(bare_constructor)
keep = HfDeepSpeedConfig(z3)  # noqa: F841 -- held: the switch is a weak reference to this object
res["zero_init"]["switch_with_hfdsconfig"] = is_deepspeed_zero3_enabled()
res["zero_init"]["hfdsconfig_from_pretrained"] = loaded(lambda: BertModel.from_pretrained(bert_dir))
res["zero_init"]["hfdsconfig_plus_bare_init"] = loaded(bare_from_pretrained)
res["zero_init"]["hfdsconfig_plus_bare_constructor"] = loaded(bare_constructor)
res["zero_init"]["hfdsconfig_constructor_alone"] = loaded(lambda: BertModel(bcfg))

print("RESULT " + json.dumps(res))
sys.stdout.flush()
os._exit(0)
