"""Small decoder-only transformers and a counter of the bytes autograd saves for backward.

Decoder: the Llama layout as transformers writes it (models/llama/modeling_llama.py): an RMSNorm
that upcasts to fp32 (LlamaRMSNorm's arithmetic), rotary embeddings applied with rotate_half,
grouped-query attention through F.scaled_dot_product_attention (enable_gqa, no repeat_kv copy),
SwiGLU MLP, untied LM head, fp32 cross-entropy. GPT2: LayerNorm, fused qkv with bias, GELU MLP,
tied head. Used by test_activations.py; the planner's activation formula
(references/memory-planning.md) describes these blocks. Written for this bundle."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class RMSNorm(nn.Module):
    def __init__(self, h: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(seq: int, d: int, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    emb = torch.cat((ang, ang), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


class Block(nn.Module):
    def __init__(self, h: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, h // heads
        self.norm1, self.norm2 = RMSNorm(h), RMSNorm(h)
        self.q = nn.Linear(h, heads * self.d, bias=False)
        self.k = nn.Linear(h, kv_heads * self.d, bias=False)
        self.v = nn.Linear(h, kv_heads * self.d, bias=False)
        self.o = nn.Linear(heads * self.d, h, bias=False)
        self.gate = nn.Linear(h, ffn, bias=False)
        self.up = nn.Linear(h, ffn, bias=False)
        self.down = nn.Linear(ffn, h, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        n = self.norm1(x)
        q = self.q(n).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(n).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(n).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, -1))
        n = self.norm2(x)
        return x + self.down(F.silu(self.gate(n)) * self.up(n))


class Decoder(nn.Module):
    def __init__(self, vocab: int, h: int, layers: int, heads: int, kv_heads: int, ffn: int,
                 checkpointing: bool = False):
        super().__init__()
        self.embed = nn.Embedding(vocab, h)
        self.blocks = nn.ModuleList(Block(h, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RMSNorm(h)
        self.head = nn.Linear(h, vocab, bias=False)
        self.checkpointing = checkpointing

    def forward(self, ids, targets):
        x = self.embed(ids)
        cos, sin = rope(ids.shape[1], self.blocks[0].d, x.dtype)     # once per forward, shared by all layers
        for blk in self.blocks:
            x = checkpoint(blk, x, cos, sin, use_reentrant=False) if self.checkpointing else blk(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def saved_bytes(model: nn.Module, ids, targets) -> tuple[int, list]:
    """Bytes of distinct storages autograd holds for backward at the end of the forward pass,
    parameters excluded (they are model state, counted elsewhere)."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}
    log = []

    def pack(t):
        st = t.untyped_storage()
        ptr = st.data_ptr()
        if ptr not in params and ptr not in seen:
            seen[ptr] = st.nbytes()
            log.append((tuple(t.shape), str(t.dtype), st.nbytes()))
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(ids, targets)
    total = sum(seen.values())
    del loss                      # the graph (and what it saved) is freed; no backward needed to count
    return total, log


class GPT2Block(nn.Module):
    """GPT-2 layout: LayerNorm, fused qkv projection with bias, causal SDPA, GELU MLP."""

    def __init__(self, h: int, heads: int, ffn: int, act=None, p_drop: float = 0.0):
        super().__init__()
        self.heads, self.d = heads, h // heads
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.c_attn, self.attn_proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.c_fc, self.mlp_proj = nn.Linear(h, ffn), nn.Linear(ffn, h)
        self.act = act or (lambda t: F.gelu(t, approximate="tanh"))     # default: the fused tanh GELU
        self.drop = nn.Dropout(p_drop)                                  # GPT-2's resid_pdrop (train mode)

    def forward(self, x):
        b, s, h = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, self.d).transpose(1, 2) for t in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.attn_proj(a.transpose(1, 2).reshape(b, s, h)))
        return x + self.drop(self.mlp_proj(self.act(self.c_fc(self.ln_2(x)))))


class GPT2(nn.Module):
    def __init__(self, vocab: int, positions: int, h: int, layers: int, heads: int, ffn: int,
                 checkpointing: bool = False, act=None, p_drop: float = 0.0):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, h), nn.Embedding(positions, h)
        self.blocks = nn.ModuleList(GPT2Block(h, heads, ffn, act, p_drop) for _ in range(layers))
        self.drop = nn.Dropout(p_drop)                                  # embd_pdrop
        self.ln_f = nn.LayerNorm(h)
        self.checkpointing = checkpointing

    def forward(self, ids, targets):
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(ids.shape[1])))
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if self.checkpointing else blk(x)
        logits = F.linear(self.ln_f(x), self.wte.weight)          # tied head
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))
