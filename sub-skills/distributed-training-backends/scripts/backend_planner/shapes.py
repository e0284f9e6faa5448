"""Model shapes: a decoder-only transformer's parameter inventory (Arch), read from a local
Transformers config.json or inferred from a parameter count."""
from __future__ import annotations

import json
import math
import os

from .common import InputError

MAX_CONFIG_BYTES = 5 * 1024 * 1024
LLAMA_TYPES = {"llama": "attention_bias", "mistral": None, "qwen2": "qkv"}
SUPPORTED_TYPES = sorted(list(LLAMA_TYPES) + ["gpt2"])


class Arch:
    """Decoder-only transformer shape and parameter inventory."""

    BLOCK_MODULES = {"ln_1", "c_attn", "attn.c_proj", "ln_2", "c_fc", "mlp.c_proj", "input_layernorm", "q_proj",
                     "k_proj", "v_proj", "o_proj", "post_attention_layernorm", "gate_proj", "up_proj", "down_proj"}

    def __init__(self, family, hidden, layers, heads, kv_heads, ffn, vocab, tied, head_dim=None,
                 positions=0, qkv_bias=False, o_bias=False, mlp_bias=False, assumed=False, act=None,
                 resid_dropout=0.0, embd_dropout=0.0):
        self.family, self.hidden, self.layers, self.heads = family, hidden, layers, heads
        self.kv_heads, self.ffn, self.vocab, self.tied = kv_heads, ffn, vocab, tied
        self.head_dim = head_dim or hidden // heads
        self.positions, self.qkv_bias, self.o_bias, self.mlp_bias = positions, qkv_bias, o_bias, mlp_bias
        self.assumed = assumed
        # MLP activation as config.json names it (transformers ACT2FN key) and the residual/embedding
        # dropout probabilities: both change what autograd saves (memory.activation_bytes)
        self.act = act or ("gelu_new" if family == "gpt2" else "silu")
        self.resid_dropout, self.embd_dropout = resid_dropout, embd_dropout

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


def _cfg_prob(cfg, key, path, default):
    v = cfg.get(key, default)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
        raise InputError(f"{path}: {key} must be a probability in [0, 1), got {v!r}")
    return float(v)


def _cfg_act(cfg, key, path, default):
    v = cfg.get(key, default)
    if v is None:
        return default
    if not isinstance(v, str) or not v or len(v) > 64:
        raise InputError(f"{path}: {key} must be an activation name such as 'gelu_new', got {v!r}")
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
                    positions=_cfg_int(cfg, "n_positions", path, lo=1),
                    act=_cfg_act(cfg, "activation_function", path, "gelu_new"),      # GPT2Config defaults
                    resid_dropout=_cfg_prob(cfg, "resid_pdrop", path, 0.1),
                    embd_dropout=_cfg_prob(cfg, "embd_pdrop", path, 0.1))
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
                mlp_bias=_cfg_bool(cfg, "mlp_bias", path, False) if mt == "llama" else False,
                act=_cfg_act(cfg, "hidden_act", path, "silu"))


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

