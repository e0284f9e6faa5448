"""A small Llama-style decoder-only transformer (RMSNorm, GQA attention through
F.scaled_dot_product_attention, SwiGLU MLP, untied LM head) and a counter of the bytes
autograd saves for backward. Used by test_activations.py; the planner's activation
formula (references/memory-planning.md) describes exactly this block."""
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
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


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

    def forward(self, x):
        b, s, _ = x.shape
        n = self.norm1(x)
        q = self.q(n).view(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(n).view(b, s, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(n).view(b, s, self.kv_heads, self.d).transpose(1, 2)
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
        for blk in self.blocks:
            x = checkpoint(blk, x, use_reentrant=False) if self.checkpointing else blk(x)
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
    loss.backward()
    return total, log
