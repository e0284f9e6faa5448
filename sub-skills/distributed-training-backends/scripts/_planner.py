"""The planner behind plan_backend.py (kept as a module so Python caches its bytecode).

Plan a distributed-training backend from model size and hardware, before anything is queued.

Compares DDP, DeepSpeed ZeRO-1/2/3 (with CPU/NVMe offload), FSDP1 strategies, FSDP2 and HSDP
per GPU: parameters, gradients, fp32 master weights, optimizer states, activations,
communication buffers and allocator overhead; host memory per node; communication volume per
step; ranks them (least sharding that fits first) and can write the recommended Accelerate
config (+ DeepSpeed JSON) for validate_backend_config.py.

Standard library only (the YAML it writes is produced by hand and read back by PyYAML in the tests).
Never imports torch, accelerate or deepspeed; never downloads.
The arithmetic is explained in ../references/memory-planning.md.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys

VERSION = "1"
GIB = 1024 ** 3
MAX_CONFIG_BYTES = 5 * 1024 * 1024

EXAMPLES = """\
examples:
  plan_backend.py --params 7e9 --gpus-per-node 8 --gpu-memory 80GiB
  plan_backend.py --params 13B --largest-layer-params 164e6 --nodes 2 --host-memory 1TiB
  plan_backend.py --model-config path/to/config.json --seq-len 4096 --micro-batch 2 \\
      --activation-checkpointing --gpu-memory 40GiB --output json
  plan_backend.py --params 70e9 --optimizer adam8bit --precision bf16 --emit out/   # writes accelerate.yaml (+ ds_config.json)
  plan_backend.py --params 7e9 --trainable-fraction 0.01                            # LoRA: 1% trainable

output: a table ranked best first (text) or, with --output json, one document:
  {"inputs", "model", "candidates": [{"strategy", "offload", "offload_device", "per_gpu_bytes":
  {"parameters", "gradients", "master_weights", "optimizer_states", "gathered_params",
  "model_states", "activations", "activation_workspace", "communication_buffers",
  "allocator_overhead", "total"}, "host_bytes_per_node", "fits", "comm_bytes_per_gpu", "rank",
  "why", "deepspeed_estimate" (ZeRO-2/3 only)}], "recommended", "assumptions"}.
  strategy: ddp zero1 zero2 zero3 fsdp-full-shard fsdp-shard-grad-op fsdp-hybrid-shard fsdp2 hsdp
  offload: none optimizer optimizer+params

sizes: a number with a unit, e.g. 80GiB, 2TiB, 512GB: B, KB, MB, GB, TB (powers of 1000) or
  KiB, MiB, GiB, TiB (powers of 1024). A bare number is refused.
parameter counts: 7e9, 7B, 1.3B, 125M, 350K, 7000000000.

exit codes:
  0  plan printed and at least one candidate fits
  1  plan printed but no candidate fits the GPU (and host) memory given
  2  bad input (one line on stderr): bad number or size, unknown optimizer, unreadable or
     unsupported config.json, unwritable --emit folder

Arithmetic and its evidence: references/memory-planning.md (verified against torch 2.13.0,
deepspeed 0.19.8, accelerate 1.15.0). GPU-side overheads are assumptions, not measurements.
"""

# Optimizer state bytes per trainable parameter (fp32 states unless named otherwise).
OPTIMIZERS = {
    "adamw": 8.0, "adam": 8.0,             # exp_avg + exp_avg_sq, fp32
    "adam8bit": 2.0 + 8.0 / 2048, "adamw8bit": 2.0 + 8.0 / 2048,  # two uint8 states + fp32 absmax per 2048-block
    "lion": 4.0,                           # one fp32 momentum
    "sgd": 0.0,                            # no momentum: no state
    "sgd-momentum": 4.0,                   # momentum_buffer, fp32
    "adagrad": 4.0,                        # sum, fp32
    "adafactor": None,                     # factored: computed from the matrix shapes
}
PRECISIONS = ("fp32", "fp16", "bf16", "fp8")
LLAMA_TYPES = {"llama": "attention_bias", "mistral": None, "qwen2": "qkv"}
SUPPORTED_TYPES = sorted(list(LLAMA_TYPES) + ["gpt2"])

DS_REDUCE_BUCKET = 500_000_000          # deepspeed zero_optimization.reduce_bucket_size default (elements)
DS_NVME_BUFFERS = 5 * 100_000_000       # offload_param buffer_count 5 x buffer_size 1e8 (elements)


class InputError(Exception):
    """Bad input: reported as one line on stderr, exit 2."""


# ----------------------------------------------------------------------------- parsing

_SIZE_UNITS = {"b": 1, "kb": 10 ** 3, "mb": 10 ** 6, "gb": 10 ** 9, "tb": 10 ** 12,
               "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}
_COUNT_SUFFIX = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "b": 10 ** 9, "t": 10 ** 12}
_NUM = r"(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"


def parse_size(text: str, flag: str) -> int:
    m = re.fullmatch(_NUM + r"\s*([A-Za-z]+)", str(text).strip())
    if str(text).strip().startswith("-"):
        raise InputError(f"{flag}: {text!r} must be a positive size")
    if not m or m.group(2).lower() not in _SIZE_UNITS:
        raise InputError(f"{flag}: {text!r} is not a size; write a number and a unit, e.g. 80GiB, 512GB, 2TiB")
    value = float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{flag}: {text!r} must be a positive size")
    return int(value)


def parse_count(text: str, flag: str) -> int:
    m = re.fullmatch(_NUM + r"\s*([kKmMbBtT]?)", str(text).strip())
    if str(text).strip().startswith("-"):
        raise InputError(f"{flag}: {text!r} must be positive")
    if not m:
        raise InputError(f"{flag}: {text!r} is not a count; e.g. 7e9, 7B, 125M")
    value = float(m.group(1)) * _COUNT_SUFFIX[m.group(2).lower()]
    if not math.isfinite(value) or value < 1 or value > 1e16:
        raise InputError(f"{flag}: {text!r} must be between 1 and 1e16")
    return int(round(value))


def positive_int(flag: str, lo: int = 1, hi: int = 10 ** 7):
    def conv(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"{v} is outside {lo}..{hi}")
        return v
    return conv


def fraction(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (0 < v <= 1):
        raise argparse.ArgumentTypeError(f"{text} must be in (0, 1]")
    return v


def nonneg_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(v) and v >= 0):
        raise argparse.ArgumentTypeError(f"{text} must be a finite number >= 0")
    return v


# ----------------------------------------------------------------------------- model

class Arch:
    """Decoder-only transformer shape and parameter inventory."""

    BLOCK_MODULES = {"ln_1", "c_attn", "attn.c_proj", "ln_2", "c_fc", "mlp.c_proj", "input_layernorm", "q_proj",
                     "k_proj", "v_proj", "o_proj", "post_attention_layernorm", "gate_proj", "up_proj", "down_proj"}

    def __init__(self, family, hidden, layers, heads, kv_heads, ffn, vocab, tied, head_dim=None,
                 positions=0, qkv_bias=False, o_bias=False, mlp_bias=False, assumed=False):
        self.family, self.hidden, self.layers, self.heads = family, hidden, layers, heads
        self.kv_heads, self.ffn, self.vocab, self.tied = kv_heads, ffn, vocab, tied
        self.head_dim = head_dim or hidden // heads
        self.positions, self.qkv_bias, self.o_bias, self.mlp_bias = positions, qkv_bias, o_bias, mlp_bias
        self.assumed = assumed

    def modules(self):
        """[(name, [param shapes], count)] with one entry per distinct module kind."""
        h, f, v, d = self.hidden, self.ffn, self.vocab, self.head_dim
        qd, kvd = self.heads * d, self.kv_heads * d
        mods = []
        if self.family == "gpt2":
            mods.append(("wte", [(v, h)], 1))
            mods.append(("wpe", [(self.positions, h)], 1))
            blk = [("ln_1", [(h,), (h,)]), ("c_attn", [(h, 3 * h), (3 * h,)]), ("attn.c_proj", [(h, h), (h,)]),
                   ("ln_2", [(h,), (h,)]), ("c_fc", [(h, f), (f,)]), ("mlp.c_proj", [(f, h), (h,)])]
            mods += [(n, s, self.layers) for n, s in blk]
            mods.append(("ln_f", [(h,), (h,)], 1))
            return mods
        b = self.qkv_bias
        mods.append(("embed_tokens", [(v, h)], 1))
        blk = [("input_layernorm", [(h,)]),
               ("q_proj", [(qd, h)] + ([(qd,)] if b else [])),
               ("k_proj", [(kvd, h)] + ([(kvd,)] if b else [])),
               ("v_proj", [(kvd, h)] + ([(kvd,)] if b else [])),
               ("o_proj", [(h, qd)] + ([(h,)] if self.o_bias else [])),
               ("post_attention_layernorm", [(h,)]),
               ("gate_proj", [(f, h)] + ([(f,)] if self.mlp_bias else [])),
               ("up_proj", [(f, h)] + ([(f,)] if self.mlp_bias else [])),
               ("down_proj", [(h, f)] + ([(h,)] if self.mlp_bias else []))]
        mods += [(n, s, self.layers) for n, s in blk]
        mods.append(("norm", [(h,)], 1))
        if not self.tied:
            mods.append(("lm_head", [(v, h)], 1))
        return mods

    @staticmethod
    def _numel(shape):
        return math.prod(shape)

    def total_params(self) -> int:
        return sum(sum(self._numel(s) for s in shapes) * n for _, shapes, n in self.modules())

    def largest_layer_params(self) -> int:
        """DeepSpeed's sense: the most parameters held directly by one module (a tied head counts)."""
        best = max(sum(self._numel(s) for s in shapes) for _, shapes, _ in self.modules())
        return max(best, self.vocab * self.hidden)

    def _part(self, per_layer: bool) -> int:
        return sum(sum(self._numel(s) for s in shapes) for name, shapes, _ in self.modules()
                   if (name in self.BLOCK_MODULES) == per_layer)

    def block_params(self) -> int:
        """One decoder layer: the unit FSDP's TRANSFORMER_BASED_WRAP gathers."""
        return self._part(True)

    def root_params(self) -> int:
        """Embeddings, final norm and head: the root FSDP unit."""
        return self._part(False)

    def adafactor_state_elems(self) -> int:
        """transformers Adafactor defaults (beta1=None): factored row+col for >=2-D, full for 1-D."""
        total = 0
        for _, shapes, n in self.modules():
            for s in shapes:
                total += n * (s[0] + s[1] if len(s) >= 2 else s[0])
        return total

    def as_dict(self):
        return {"family": self.family, "hidden_size": self.hidden, "num_layers": self.layers,
                "num_heads": self.heads, "num_kv_heads": self.kv_heads, "head_dim": self.head_dim,
                "ffn_size": self.ffn, "vocab_size": self.vocab, "tied_embeddings": self.tied,
                "assumed": self.assumed}


def _cfg_int(cfg, key, path, default=None, lo=1):
    if key not in cfg or cfg[key] is None:
        if default is None:
            raise InputError(f"{path}: config.json lacks {key!r}; pass --params instead")
        return default
    v = cfg[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or v > 10 ** 8:
        raise InputError(f"{path}: {key} must be an integer in {lo}..1e8, got {v!r}")
    return v


def _cfg_bool(cfg, key, path, default):
    v = cfg.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(f"{path}: {key} must be true or false, got {v!r}")
    return v


def arch_from_config(path: str) -> Arch:
    try:
        if os.path.isdir(path):
            raise InputError(f"{path}: is a folder; pass the config.json inside it")
        size = os.path.getsize(path)
        if size > MAX_CONFIG_BYTES:
            raise InputError(f"{path}: {size} bytes is over the 5 MiB limit for a config.json")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
        text = raw.decode("utf-8")
        cfg = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"{c} is not JSON")))
    except InputError:
        raise
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: not UTF-8 text, so not a config.json") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not valid JSON: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(cfg, dict):
        raise InputError(f"{path}: a Transformers config.json is a JSON object, got {type(cfg).__name__}")
    mt = cfg.get("model_type")
    if not isinstance(mt, str):
        raise InputError(f"{path}: no string 'model_type', so not a Transformers config.json; pass --params")
    if mt == "gpt2":
        h = _cfg_int(cfg, "n_embd", path)
        heads = _cfg_int(cfg, "n_head", path)
        if h % heads:
            raise InputError(f"{path}: n_embd {h} is not divisible by n_head {heads}")
        ffn = cfg.get("n_inner")
        ffn = 4 * h if ffn is None else _cfg_int(cfg, "n_inner", path)
        return Arch("gpt2", h, _cfg_int(cfg, "n_layer", path), heads, heads, ffn, _cfg_int(cfg, "vocab_size", path),
                    tied=_cfg_bool(cfg, "tie_word_embeddings", path, True),
                    positions=_cfg_int(cfg, "n_positions", path, lo=1))
    if mt not in LLAMA_TYPES:
        raise InputError(f"{path}: model_type {mt!r} is not supported (supported: {', '.join(SUPPORTED_TYPES)}); "
                         "pass --params and --largest-layer-params instead")
    h = _cfg_int(cfg, "hidden_size", path)
    heads = _cfg_int(cfg, "num_attention_heads", path)
    kv = _cfg_int(cfg, "num_key_value_heads", path, default=heads)
    if heads % kv:
        raise InputError(f"{path}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv}")
    head_dim = _cfg_int(cfg, "head_dim", path, default=0, lo=1) or None
    if head_dim is None and h % heads:
        raise InputError(f"{path}: hidden_size {h} is not divisible by num_attention_heads {heads}")
    bias = _cfg_bool(cfg, "attention_bias", path, False) if mt == "llama" else False
    return Arch(mt, h, _cfg_int(cfg, "num_hidden_layers", path), heads, kv, _cfg_int(cfg, "intermediate_size", path),
                _cfg_int(cfg, "vocab_size", path), tied=_cfg_bool(cfg, "tie_word_embeddings", path, False),
                head_dim=head_dim, qkv_bias=(mt == "qwen2") or bias, o_bias=bias,
                mlp_bias=_cfg_bool(cfg, "mlp_bias", path, False) if mt == "llama" else False)


def infer_arch(params: int, args) -> Arch:
    """A Llama-shaped model of about `params` parameters (head_dim 128, layers = hidden/128,
    ffn = 8/3 hidden rounded to 256, vocab 32000), overridden by any shape flag given."""
    vocab = args.vocab_size or 32000
    best = None
    for h in range(128, 65537, 128):
        layers = args.num_layers or max(1, h // 128)
        ffn = args.ffn_size or (int(8 * h / 3) + 255) // 256 * 256
        p = layers * (4 * h * h + 3 * h * ffn + 2 * h) + 2 * vocab * h + h
        if best is None or abs(p - params) < abs(best[0] - params):
            best = (p, h)
    h = args.hidden_size or best[1]
    heads = args.num_heads or max(1, h // 128)
    return Arch("llama", h, args.num_layers or max(1, h // 128), heads, args.num_kv_heads or heads,
                args.ffn_size or (int(8 * h / 3) + 255) // 256 * 256, vocab, tied=False,
                head_dim=h // heads if h % heads == 0 else None,
                assumed=not (args.hidden_size and args.num_layers))


# ----------------------------------------------------------------------------- activations

def activation_bytes(arch: Arch, seq: int, mbs: int, w: int, checkpointing: bool):
    """(bytes autograd keeps at the end of forward, extra bytes during backward) for one micro-batch.

    Per token and layer (references/memory-planning.md, measured by tests/planner/test_activations.py):
    Llama family: each of 2 RMSNorms keeps its fp32 input (4h), fp32 rstd (4), normalised value
    and output in the working dtype (2wh); attention keeps q, k, v after RoPE, its output and an
    fp32 logsumexp per head (w*(2qd + 2kv) + 4a; flash/memory-efficient SDPA, no s x s matrix);
    SwiGLU keeps gate, up, silu(gate) and their product (4wf).
    GPT-2: each of 2 LayerNorms keeps input, output (2wh) and fp32 mean+rstd (8); fused qkv (3wh),
    attention output (wh), logsumexp (4a); GELU MLP keeps its input and output (2wf).
    """
    t = seq * mbs
    h, f, a = arch.hidden, arch.ffn, arch.heads
    kv = arch.kv_heads * arch.head_dim
    qd = arch.heads * arch.head_dim
    if arch.family == "gpt2":
        per_tok = 2 * (2 * w * h + 8) + w * (3 * h + h) + 4 * a + w * 2 * f
        final = t * (2 * w * h + 8) + seq * 8               # ln_f; position ids
    else:
        per_tok = 2 * (4 * h + 4 + 2 * w * h) + w * (2 * qd + 2 * kv + 4 * f) + 4 * a
        final = t * (4 * h + 4 + 2 * w * h) + 2 * seq * arch.head_dim * w   # final norm; RoPE cos and sin
    per_layer = t * per_tok
    final += t * arch.vocab * 4 + 2 * t * 8 + 4             # fp32 log_softmax output, targets, input ids, loss
    if checkpointing:
        saved = arch.layers * t * w * h + final             # each checkpoint keeps only its layer input
        workspace = per_layer                               # one layer recomputed during backward
    else:
        saved = arch.layers * per_layer + final
        workspace = 0
    workspace += t * arch.vocab * 4                         # gradient of the fp32 logits
    return saved, workspace


# ----------------------------------------------------------------------------- deepspeed estimators

def ds_zero2_estimate(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, additional_buffer_factor=1.5):
    """Same arithmetic as deepspeed/runtime/zero/stage_1_and_2.py::estimate_zero2_model_states_mem_needs."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * additional_buffer_factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem)


def ds_zero3_estimate(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True,
                      cpu_offload_params=True, zero_init=True, additional_buffer_factor=1.5):
    """Same arithmetic as deepspeed/runtime/zero/stage3.py::estimate_zero3_model_states_mem_needs."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest_layer_params
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            if zero_init:
                cpu_mem = total_params * 18 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 18 * gpus_factor) * additional_buffer_factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            if zero_init:
                cpu_mem = total_params * 16 * gpus_factor * additional_buffer_factor
            else:
                cpu_mem = total_params * max(4 * num_gpus_per_node, 16 * gpus_factor) * additional_buffer_factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        if zero_init:
            cpu_mem = largest_layer_params * 4 * num_gpus_per_node * additional_buffer_factor
        else:
            cpu_mem = total_params * 4 * num_gpus_per_node * additional_buffer_factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


# ----------------------------------------------------------------------------- candidates

# (strategy, offload, offload_device, sharding level for the ranking)
CANDIDATES = [
    ("ddp", "none", "none", 0),
    ("zero1", "none", "none", 1),
    ("zero2", "none", "none", 2),
    ("fsdp-shard-grad-op", "none", "none", 2),
    ("fsdp-hybrid-shard", "none", "none", 3),
    ("hsdp", "none", "none", 3),
    ("fsdp2", "none", "none", 4),
    ("fsdp-full-shard", "none", "none", 4),
    ("zero3", "none", "none", 4),
    ("zero1", "optimizer", "cpu", 5),
    ("zero2", "optimizer", "cpu", 5),
    ("zero3", "optimizer", "cpu", 6),
    ("fsdp2", "optimizer+params", "cpu", 7),
    ("zero3", "optimizer+params", "cpu", 7),
    ("zero3", "optimizer+params", "nvme", 8),
]
# Same sharding level: prefer the native / simpler backend (FSDP2 before DeepSpeed before FSDP1).
BACKEND_PREF = {"ddp": 0, "fsdp2": 0, "hsdp": 1, "zero1": 2, "zero2": 2, "zero3": 2,
                "fsdp-shard-grad-op": 3, "fsdp-hybrid-shard": 4, "fsdp-full-shard": 3}


def ceil_div(a, b):
    return -(-int(a) // int(b))


def plan(args):
    # ---- model
    if args.model_config:
        arch = arch_from_config(args.model_config)
        params = arch.total_params() if args.params is None else args.params
    else:
        params = args.params
        arch = infer_arch(params, args)
    trainable = max(1, int(round(params * args.trainable_fraction)))
    largest = args.largest_layer_params or (arch.largest_layer_params() if (args.model_config or not arch.assumed)
                                            else None)
    assumed_largest = largest is None
    if largest is None:
        largest = arch.largest_layer_params()
    if largest > params:
        raise InputError(f"the largest layer ({largest} parameters, --largest-layer-params or the config) "
                         f"is larger than the model ({params} parameters)")
    unit = max(arch.block_params(), arch.root_params()) if (args.model_config or not arch.assumed) else largest
    unit = min(max(unit, largest), params)

    G, M = args.gpus_per_node, args.nodes
    N = G * M
    prec = args.precision
    w = 4 if prec == "fp32" else 2
    opt = args.optimizer
    if OPTIMIZERS[opt] is None:
        scale = params / max(1, arch.total_params())
        s_bytes = 4.0 * arch.adafactor_state_elems() * scale / params
    else:
        s_bytes = OPTIMIZERS[opt]
    opt_total = int(round(s_bytes * trainable))
    act_saved, act_work = activation_bytes(arch, args.seq_len, args.micro_batch, w, args.activation_checkpointing)
    fp8_extra = params if prec == "fp8" else 0          # fp8 weight copies (assumption)

    assumptions = [
        "GPU allocator overhead: {:.0%} of the tensors plus {:.2f} GiB per GPU for the CUDA context and "
        "library workspaces (--overhead-fraction, --reserve); not measured here".format(
            args.overhead_fraction, args.reserve / GIB),
        "DDP: Accelerate's mixed precision is autocast, so weights, gradients and DDP's gradient buckets stay fp32",
        "activations: flash/memory-efficient attention (no seq x seq matrix saved), no tensor/sequence parallelism",
    ]
    if arch.assumed:
        assumptions.append("architecture inferred from the parameter count (Llama-shaped, hidden {}, {} layers); "
                           "pass --model-config or --hidden-size/--num-layers for exact activations".format(
                               arch.hidden, arch.layers))
    if assumed_largest:
        assumptions.append(f"largest layer assumed {largest} parameters (vocab x hidden of the inferred shape); "
                           "pass --largest-layer-params")
    if prec == "fp8":
        assumptions.append("fp8: planned as bf16 plus one byte per parameter for fp8 weight copies; "
                           "activations as bf16 (not measured: no GPU)")
    if opt == "adafactor":
        assumptions.append("adafactor: transformers defaults (no first moment, factored second moment)")

    cands = []
    for strategy, offload, device, level in CANDIDATES:
        if strategy in ("fsdp-hybrid-shard", "hsdp") and M == 1:
            level = 4                        # one node: the same as full sharding, no cheaper traffic
        c = candidate(strategy, offload, device, level, params=params, trainable=trainable, largest=largest,
                      unit=unit, G=G, M=M, N=N, w=w, opt_total=opt_total, s_bytes=s_bytes,
                      act_saved=act_saved, act_work=act_work, fp8_extra=fp8_extra, args=args)
        cands.append(c)

    order = sorted(cands, key=lambda c: (not c["fits"], c["_level"], BACKEND_PREF[c["strategy"]],
                                         c["per_gpu_bytes"]["total"]))
    for i, c in enumerate(order, 1):
        c["rank"] = i
    rec = order[0]
    if rec["fits"]:
        less = [c for c in cands if c["_level"] < rec["_level"]]
        rec["why"] += "; ranked first: the least sharding that fits" + (
            " (every less sharded option is over the limit)" if less else "") + \
            ", so the least communication and the simplest setup"
    else:
        best = min(cands, key=lambda c: c["per_gpu_bytes"]["total"])
        rec = best
        rec["why"] += ("; nothing fits: this needs the least GPU memory; lower --micro-batch, enable "
                       "--activation-checkpointing or add GPUs")
    for c in cands:
        c.pop("_level")
    cands.sort(key=lambda c: c["rank"])
    return {
        "planner_version": VERSION,
        "inputs": {"params": params, "trainable_params": trainable, "largest_layer_params": largest,
                   "fsdp_unit_params": unit, "seq_len": args.seq_len, "micro_batch": args.micro_batch,
                   "precision": prec, "optimizer": opt, "optimizer_state_bytes_per_param": s_bytes,
                   "activation_checkpointing": args.activation_checkpointing, "gpus_per_node": G,
                   "nodes": M, "gpu_memory": args.gpu_memory, "host_memory": args.host_memory},
        "model": arch.as_dict(),
        "candidates": cands,
        "recommended": rec,
        "assumptions": assumptions,
    }


def candidate(strategy, offload, device, level, *, params, trainable, largest, unit, G, M, N, w,
              opt_total, s_bytes, act_saved, act_work, fp8_extra, args):
    P, T = params, trainable
    gpu = dict(parameters=0, gradients=0, master_weights=0, optimizer_states=0, gathered_params=0)
    host = 0
    nvme = 0
    comm = 0.0
    internode = 0.0
    pcie = 0
    buffers = 0
    why = ""
    ring = lambda n: (n - 1) / n if n > 1 else 0.0  # noqa: E731
    shard = lambda x, n=N: ceil_div(x, n)  # noqa: E731
    opt_shard = ceil_div(opt_total, N)
    load_peak = G * w * P                    # every process loads its own copy into CPU RAM
    if strategy == "ddp":
        gpu.update(parameters=4 * P, gradients=4 * T, optimizer_states=opt_total)
        buffers = 4 * T                      # DDP's gradient buckets (gradient_as_bucket_view=False)
        load_peak = G * 4 * P                # fp32 weights in every process (autocast keeps them fp32)
        comm = 2 * ring(N) * 4 * T
        why = "no sharding: every GPU holds the whole fp32 model, gradients and optimizer"
    elif strategy in ("zero1", "zero2", "zero3"):
        stage = int(strategy[-1])
        master = shard(4 * T)                # a separate fp32 copy, also when training in fp32
        g16 = shard(w * T)                   # deepspeed 0.19.8 reduce-scatters at stage 1 too (measured)
        g32 = shard(4 * T)
        p16 = w * P if stage < 3 else shard(w * P)
        gpu.update(parameters=p16, gradients=g16 + g32, master_weights=master, optimizer_states=opt_shard)
        buffers = w * min(T, DS_REDUCE_BUCKET)
        if stage < 3:
            comm = ring(N) * w * T + ring(N) * w * P
        else:
            gpu["gathered_params"] = 2 * w * unit + w * unit
            comm = 2 * ring(N) * w * P + ring(N) * w * T
            load_peak = w * P                # zero.Init (zero3_init_flag) materialises partitions only
        why = {1: "ZeRO-1 shards optimizer states and fp32 master weights",
               2: "ZeRO-2 also shards gradients",
               3: "ZeRO-3 also shards the 16-bit parameters and gathers one layer at a time"}[stage]
        if offload != "none":
            # fp32 master, fp32 gradient partition and optimizer states move to host RAM (DeepSpeed CPU Adam)
            off = gpu["master_weights"] + g32 + opt_shard
            gpu.update(master_weights=0, optimizer_states=0, gradients=0 if stage < 3 else g16)
            host_states = G * off
            pcie = shard(w * T) + shard(w * P)
            why += "; optimizer step on the CPU (slow, needs host RAM)"
            if offload == "optimizer+params":
                gpu["parameters"] = 0
                host_states += G * shard(w * P)
                pcie += 2 * w * P
                why += "; parameters streamed from host every forward and backward"
            if device == "nvme":
                nvme = host_states
                host_states = G * w * (DS_NVME_BUFFERS + 2 * min(T, DS_REDUCE_BUCKET))
                why += "; states on NVMe (needs libaio and fast local disks; slowest)"
            host = host_states
    else:  # FSDP family
        n = G if strategy in ("fsdp-hybrid-shard", "hsdp") else N
        sharded = ceil_div(4 * P, n)       # fp32 sharded parameters double as master weights
        gpu.update(parameters=sharded, gradients=ceil_div(4 * T, n), optimizer_states=ceil_div(opt_total, n))
        if strategy == "fsdp-shard-grad-op":
            gpu["gathered_params"] = w * P + w * unit
            comm = ring(n) * w * P + ring(n) * w * T
            why = "FSDP SHARD_GRAD_OP: parameters stay gathered between forward and backward (ZeRO-2-like)"
        else:
            gpu["gathered_params"] = 2 * w * unit + w * unit
            comm = 2 * ring(n) * w * P + ring(n) * w * T
            why = {"fsdp-full-shard": "FSDP1 FULL_SHARD: everything sharded, one wrapped unit gathered at a time",
                   "fsdp2": "FSDP2 (fully_shard): everything sharded, per-parameter DTensor shards",
                   "fsdp-hybrid-shard": "FSDP1 HYBRID_SHARD: shard inside a node, replicate across nodes",
                   "hsdp": "FSDP2 HSDP: shard inside a node, replicate across nodes"}[strategy]
        if n < N:
            internode = 2 * ring(M) * ceil_div(w * T, n)
            comm += internode
            if M == 1:
                why += "; on one node this is the same as full sharding"
        load_peak = w * P                    # fsdp_cpu_ram_efficient_loading: rank 0 loads, others meta
        if offload != "none":
            off = gpu["parameters"] + gpu["gradients"] + gpu["optimizer_states"]
            gpu.update(parameters=0, gradients=0, optimizer_states=0)
            host = G * off
            pcie = 2 * w * P + ceil_div(w * T, n)
            why += "; CPUOffloadPolicy: shards and the optimizer step live on the CPU"
    if M > 1 and internode == 0:
        internode = comm
    gpu["parameters"] += fp8_extra if strategy == "ddp" or strategy in ("zero1", "zero2") else 0
    model_states = sum(gpu.values())
    tensors = model_states + act_saved + act_work + buffers
    overhead = int(args.overhead_fraction * tensors) + args.reserve
    per_gpu = dict(gpu, model_states=model_states, activations=act_saved, activation_workspace=act_work,
                   communication_buffers=buffers, allocator_overhead=overhead, total=tensors + overhead)
    host_total = max(host, load_peak) if offload != "none" else load_peak
    fits_gpu = per_gpu["total"] <= args.gpu_memory
    fits_host = None if args.host_memory is None else host_total <= args.host_memory
    fits = fits_gpu and fits_host is not False
    if not fits_gpu:
        why += "; does not fit: {:.1f} GiB > {:.1f} GiB per GPU".format(per_gpu["total"] / GIB, args.gpu_memory / GIB)
    elif fits_host is False:
        why += "; does not fit host RAM: {:.1f} GiB > {:.1f} GiB per node".format(host_total / GIB,
                                                                                args.host_memory / GIB)
    c = {"strategy": strategy, "offload": offload, "offload_device": device, "per_gpu_bytes": per_gpu,
         "host_bytes_per_node": int(host_total), "nvme_bytes_per_node": int(nvme), "fits": fits,
         "fits_gpu": fits_gpu, "fits_host": fits_host, "comm_bytes_per_gpu": int(comm),
         "internode_bytes_per_gpu": int(internode), "pcie_bytes_per_gpu": int(pcie), "why": why, "_level": level}
    if args.intra_node_bandwidth or args.inter_node_bandwidth:
        secs = 0.0
        if args.inter_node_bandwidth and internode:
            secs += internode / args.inter_node_bandwidth
        if args.intra_node_bandwidth:
            secs += (comm - internode if args.inter_node_bandwidth else comm) / args.intra_node_bandwidth
        c["comm_seconds_per_step"] = round(secs, 4)
    if strategy == "zero2":
        cpu_b, gpu_b = ds_zero2_estimate(P, G, M, cpu_offload=offload != "none")
        c["deepspeed_estimate"] = {"function": "estimate_zero2_model_states_mem_needs",
                                   "args": {"total_params": P, "num_gpus_per_node": G, "num_nodes": M,
                                            "cpu_offload": offload != "none", "additional_buffer_factor": 1.5},
                                   "gpu_bytes": gpu_b, "cpu_bytes": cpu_b}
    elif strategy == "zero3":
        cpu_b, gpu_b, ll = ds_zero3_estimate(P, largest, G, M, cpu_offload=offload != "none",
                                             cpu_offload_params=offload == "optimizer+params", zero_init=True)
        c["deepspeed_estimate"] = {"function": "estimate_zero3_model_states_mem_needs",
                                   "args": {"total_params": P, "largest_layer_params": largest,
                                            "num_gpus_per_node": G, "num_nodes": M,
                                            "cpu_offload": offload != "none",
                                            "cpu_offload_params": offload == "optimizer+params",
                                            "zero_init": True, "additional_buffer_factor": 1.5},
                                   "gpu_bytes": gpu_b, "cpu_bytes": cpu_b, "largest_layer_memory": ll}
    return c


# ----------------------------------------------------------------------------- emit

_PLAIN = re.compile(r"[A-Za-z_/][A-Za-z0-9_./-]*")
_YAML_WORDS = {"y", "yes", "n", "no", "true", "false", "on", "off", "null", "~"}


def yaml_scalar(v) -> str:
    """A YAML 1.1 scalar that PyYAML's safe_load reads back as v (bool, int or str).
    Strings that could be read as anything else are double-quoted, escaping what YAML does not
    print or would fold. (Written by hand: importing PyYAML costs a third of a plan.)"""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if _PLAIN.fullmatch(v) and v.lower() not in _YAML_WORDS:
        return v
    out = []
    for ch in v:
        o = ord(ch)
        if ch in '"\\':
            out.append("\\" + ch)
        elif (0x20 <= o <= 0x7E or 0xA0 <= o <= 0xD7FF or 0xE000 <= o <= 0xFFFD or o >= 0x10000) \
                and o not in (0x2028, 0x2029, 0xFEFF):
            out.append(ch)                   # printable for YAML and no line break: as is
        elif o <= 0xFF:
            out.append("\\x%02x" % o)
        elif o <= 0xFFFF:
            out.append("\\u%04x" % o)
        else:
            out.append("\\U%08x" % o)
    return '"' + "".join(out) + '"'


def yaml_dump(d: dict, indent: int = 0) -> str:
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            out.append(" " * indent + f"{k}:\n" + yaml_dump(v, indent + 2))
        else:
            out.append(" " * indent + f"{k}: {yaml_scalar(v)}\n")
    return "".join(out)


def emit(result, args, folder):
    """Write accelerate.yaml (+ ds_config.json) for the recommended (or --emit-candidate) candidate."""
    rec = result["recommended"]
    if args.emit_candidate:
        strat, _, off = args.emit_candidate.partition(":")
        off, _, dev = (off or "none").partition("@")
        match = [c for c in result["candidates"] if c["strategy"] == strat and c["offload"] == off
                 and (c["offload_device"] == dev if dev else c["offload_device"] in ("none", "cpu"))]
        if not match:
            raise InputError(f"--emit-candidate {args.emit_candidate!r}: no such candidate "
                             "(STRATEGY[:OFFLOAD[@nvme]], e.g. zero3:optimizer or zero3:optimizer+params@nvme)")
        rec = match[0]
    inp = result["inputs"]
    G, M = inp["gpus_per_node"], inp["nodes"]
    mp = {"fp32": "no", "fp16": "fp16", "bf16": "bf16", "fp8": "fp8"}[inp["precision"]]
    layer_cls = {"llama": "LlamaDecoderLayer", "mistral": "MistralDecoderLayer", "qwen2": "Qwen2DecoderLayer",
                 "gpt2": "GPT2Block"}.get(result["model"]["family"], "LlamaDecoderLayer")
    cfg = {"compute_environment": "LOCAL_MACHINE", "num_machines": M, "num_processes": G * M,
           "machine_rank": 0, "main_training_function": "main", "use_cpu": False, "rdzv_backend": "static"}
    if M > 1:
        cfg["main_process_ip"] = "MAIN_NODE_IP"
        cfg["main_process_port"] = 29500
    files = {}
    s = rec["strategy"]
    if s == "ddp":
        cfg.update(distributed_type="MULTI_GPU", mixed_precision=mp, gpu_ids="all")
    elif s.startswith("zero"):
        stage = int(s[-1])
        zo = {"stage": stage, "overlap_comm": True, "contiguous_gradients": True,
              "reduce_bucket_size": "auto"}
        if stage == 3:
            zo.update({"stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto",
                       "stage3_gather_16bit_weights_on_model_save": True})
        if rec["offload"] != "none":
            dev = rec["offload_device"]
            zo["offload_optimizer"] = {"device": dev, "pin_memory": True}
            if rec["offload"] == "optimizer+params":
                zo["offload_param"] = {"device": dev, "pin_memory": True}
            if dev == "nvme":
                for key in ("offload_optimizer", "offload_param"):
                    if key in zo:
                        zo[key]["nvme_path"] = "/local_nvme"
        ds = {"train_micro_batch_size_per_gpu": inp["micro_batch"], "train_batch_size": "auto",
              "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
              "bf16": {"enabled": inp["precision"] in ("bf16", "fp8")},
              "fp16": {"enabled": inp["precision"] == "fp16"}, "zero_optimization": zo}
        ds_path = os.path.join(os.path.abspath(folder), "ds_config.json")
        files["ds_config.json"] = json.dumps(ds, indent=2) + "\n"
        cfg.update(distributed_type="DEEPSPEED",
                   deepspeed_config={"deepspeed_config_file": ds_path, "zero3_init_flag": stage == 3})
        if M > 1:
            cfg["deepspeed_config"]["deepspeed_multinode_launcher"] = "standard"
    else:
        fc = {"fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP", "fsdp_transformer_layer_cls_to_wrap": layer_cls,
              "fsdp_state_dict_type": "SHARDED_STATE_DICT", "fsdp_cpu_ram_efficient_loading": True,
              "fsdp_offload_params": rec["offload"] != "none",
              "fsdp_activation_checkpointing": bool(inp["activation_checkpointing"])}
        if s in ("fsdp2", "hsdp"):
            fc.update(fsdp_version=2, fsdp_reshard_after_forward=True)
        else:
            strategy = {"fsdp-full-shard": "FULL_SHARD", "fsdp-shard-grad-op": "SHARD_GRAD_OP",
                        "fsdp-hybrid-shard": "HYBRID_SHARD"}[s]
            fc.update(fsdp_version=1, fsdp_sharding_strategy=strategy, fsdp_backward_prefetch="BACKWARD_PRE",
                      fsdp_use_orig_params=True, fsdp_sync_module_states=True)
            fc.pop("fsdp_activation_checkpointing")
        cfg.update(distributed_type="FSDP", mixed_precision=mp, fsdp_config=fc)
        if s == "hsdp":
            cfg["parallelism_config"] = {"parallelism_config_dp_replicate_size": M,
                                         "parallelism_config_dp_shard_size": G,
                                         "parallelism_config_tp_size": 1, "parallelism_config_cp_size": 1}
    header = ("# Written by plan_backend.py for candidate {} (offload {}); check with\n"
              "# validate_backend_config.py before launching. Per-GPU plan: {:.1f} GiB.\n").format(
                  s, rec["offload"], rec["per_gpu_bytes"]["total"] / GIB)
    files["accelerate.yaml"] = header + yaml_dump(cfg)
    try:
        os.makedirs(folder, exist_ok=True)
        written = []
        for name, text in files.items():
            path = os.path.join(folder, name)
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
            written.append(path)
    except OSError as exc:
        raise InputError(f"--emit {folder!r}: cannot write: {exc.strerror or exc}") from None
    except UnicodeError:
        raise InputError(f"--emit {folder!r}: the path is not valid text in this locale") from None
    return written


# ----------------------------------------------------------------------------- output

def gib(x):
    return "{:.1f}".format(x / GIB)


def text_report(result) -> str:
    inp = result["inputs"]
    lines = ["model: {:,} parameters ({:,} trainable), largest layer {:,}; {} x {} GPUs; {} {}; seq {} x micro-batch {}{}"
             .format(inp["params"], inp["trainable_params"], inp["largest_layer_params"], inp["nodes"],
                     inp["gpus_per_node"], inp["precision"], inp["optimizer"], inp["seq_len"], inp["micro_batch"],
                     ", activation checkpointing" if inp["activation_checkpointing"] else ""),
             "GiB per GPU: params, grads, master, optim, gathered, activ(+work), buffers, overhead -> total "
             "(limit {}); host GiB/node; comm GB/step per GPU".format(gib(inp["gpu_memory"])), ""]
    head = "{:>2}  {:<19} {:<22} {:>6} {:>6} {:>6} {:>6} {:>6} {:>11} {:>6} {:>6} {:>7} {:>7} {:>6}  {}".format(
        "#", "strategy", "offload", "param", "grad", "mastr", "optim", "gathr", "activ(+wk)", "buf", "ovh",
        "TOTAL", "host", "comm", "fits")
    lines += [head, "-" * len(head)]
    for c in result["candidates"]:
        g = c["per_gpu_bytes"]
        off = c["offload"] if c["offload_device"] in ("none", "cpu") else c["offload"] + "@nvme"
        lines.append("{:>2}  {:<19} {:<22} {:>6} {:>6} {:>6} {:>6} {:>6} {:>11} {:>6} {:>6} {:>7} {:>7} {:>6}  {}".format(
            c["rank"], c["strategy"], off, gib(g["parameters"]), gib(g["gradients"]), gib(g["master_weights"]),
            gib(g["optimizer_states"]), gib(g["gathered_params"]),
            gib(g["activations"]) + "+" + gib(g["activation_workspace"]), gib(g["communication_buffers"]),
            gib(g["allocator_overhead"]), gib(g["total"]), gib(c["host_bytes_per_node"]),
            "{:.1f}".format(c["comm_bytes_per_gpu"] / 1e9), "yes" if c["fits"] else "no"))
    rec = result["recommended"]
    lines += ["", "recommended: {} (offload {}): {}".format(rec["strategy"], rec["offload"], rec["why"])]
    for c in result["candidates"]:
        if "deepspeed_estimate" in c and c["offload_device"] != "nvme":
            d = c["deepspeed_estimate"]
            lines.append("  deepspeed {} for {}/{}: GPU {} GiB, CPU {} GiB (model states only; ours above)".format(
                d["function"], c["strategy"], c["offload"], gib(d["gpu_bytes"]), gib(d["cpu_bytes"])))
    lines += ["assumptions:"] + ["  - " + a for a in result["assumptions"]]
    return "\n".join(lines) + "\n"


class Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message.splitlines()[0] if message else 'bad arguments'}\n")
        sys.exit(2)


def build_parser():
    p = Parser(prog="plan_backend.py", formatter_class=argparse.RawDescriptionHelpFormatter,
               description="Rank DDP, DeepSpeed ZeRO-1/2/3 (+offload), FSDP1, FSDP2 and HSDP by per-GPU memory for "
                           "a model and machine, say which fits, and optionally write the recommended Accelerate "
                           "config. Never imports torch/accelerate/deepspeed; never downloads anything.",
               epilog=EXAMPLES)
    m = p.add_argument_group("model (one of --params or --model-config)")
    m.add_argument("--params", help="total parameter count, e.g. 7e9 or 7B")
    m.add_argument("--largest-layer-params", help="parameters of the largest module (DeepSpeed's sense), e.g. 131e6")
    m.add_argument("--model-config", metavar="PATH", help="a local Transformers config.json (model_type: "
                   + ", ".join(SUPPORTED_TYPES) + ")")
    for flag, hlp in (("--hidden-size", "hidden size"), ("--num-layers", "decoder layers"),
                      ("--num-heads", "attention heads"), ("--num-kv-heads", "key/value heads (GQA)"),
                      ("--ffn-size", "MLP intermediate size"), ("--vocab-size", "vocabulary size")):
        m.add_argument(flag, type=positive_int(flag, 1, 10 ** 8), help=hlp + " (with --params; inferred if absent)")
    m.add_argument("--trainable-fraction", type=fraction, default=1.0,
                   help="share of parameters trained (LoRA/frozen layers); default 1")
    j = p.add_argument_group("job")
    j.add_argument("--seq-len", type=positive_int("--seq-len", 1, 10 ** 8), default=2048, help="default 2048")
    j.add_argument("--micro-batch", type=positive_int("--micro-batch", 1, 10 ** 6), default=1,
                   help="micro-batch per GPU; default 1")
    j.add_argument("--precision", choices=PRECISIONS, default="bf16", help="default bf16")
    j.add_argument("--optimizer", default="adamw", help="one of: " + ", ".join(OPTIMIZERS) + " (default adamw)")
    j.add_argument("--activation-checkpointing", action="store_true", help="checkpoint every decoder layer")
    h = p.add_argument_group("hardware")
    h.add_argument("--gpus-per-node", type=positive_int("--gpus-per-node", 1, 4096), default=8, help="default 8")
    h.add_argument("--nodes", type=positive_int("--nodes", 1, 100000), default=1, help="default 1")
    h.add_argument("--gpu-memory", default="80GiB", help="memory per GPU; default 80GiB")
    h.add_argument("--host-memory", default=None, help="CPU RAM per node, e.g. 1TiB (unchecked if absent)")
    h.add_argument("--intra-node-bandwidth", type=nonneg_float, default=None,
                   help="bytes/s per GPU inside a node, e.g. 3e11 (adds comm_seconds_per_step)")
    h.add_argument("--inter-node-bandwidth", type=nonneg_float, default=None,
                   help="bytes/s per GPU between nodes, e.g. 2.5e10")
    h.add_argument("--overhead-fraction", type=nonneg_float, default=0.10,
                   help="allocator fragmentation as a share of the tensors; default 0.10")
    h.add_argument("--reserve", default="1GiB", help="per-GPU CUDA context and workspaces; default 1GiB")
    o = p.add_argument_group("output")
    o.add_argument("--output", choices=("text", "json"), default="text", help="default text")
    o.add_argument("--emit", metavar="DIR", help="write accelerate.yaml (+ ds_config.json) for the recommendation")
    o.add_argument("--emit-candidate", metavar="STRATEGY[:OFFLOAD[@nvme]]",
                   help="with --emit: write this candidate instead, e.g. zero3:optimizer, zero3:optimizer+params@nvme")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if (args.params is None) == (args.model_config is None) and args.params is None:
            raise InputError("give the model as --params N or --model-config PATH")
        args.params = None if args.params is None else parse_count(args.params, "--params")
        args.largest_layer_params = (None if args.largest_layer_params is None
                                     else parse_count(args.largest_layer_params, "--largest-layer-params"))
        args.optimizer = args.optimizer.lower()
        if args.optimizer not in OPTIMIZERS:
            raise InputError(f"--optimizer {args.optimizer!r} is unknown; choose one of {', '.join(OPTIMIZERS)}")
        args.gpu_memory = parse_size(args.gpu_memory, "--gpu-memory")
        args.host_memory = None if args.host_memory is None else parse_size(args.host_memory, "--host-memory")
        args.reserve = parse_size(args.reserve, "--reserve")
        if args.emit_candidate and not args.emit:
            raise InputError("--emit-candidate needs --emit DIR")
        result = plan(args)
        if args.emit:
            result["emitted"] = emit(result, args, args.emit)
    except InputError as exc:
        sys.stderr.write(f"plan_backend.py: error: {exc}\n")
        return 2
    if args.output == "json":
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
    else:
        sys.stdout.write(text_report(result))
        for path in result.get("emitted", []):
            sys.stdout.write(f"wrote {path}\n")
    return 0 if result["recommended"]["fits"] else 1
