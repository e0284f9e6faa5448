"""The numbers of the 'Token-level losses' section of
sub-skills/training-loop-integration/references/gradient-accumulation.md: averaging per-micro-batch
mean losses over micro-batches of unequal token counts is not the mean over all tokens, and the
sum / total-count fix (with backward's division by k undone) gives the full-batch gradient."""
from __future__ import annotations

from pathlib import Path

import torch

DOC = Path(__file__).resolve().parents[2] / "sub-skills" / "training-loop-integration" / "references" / "gradient-accumulation.md"

# per-token losses of two micro-batches of one optimizer step: 2 tokens and 6 tokens
MB = [torch.tensor([1.0, 1.0], dtype=torch.float64), torch.zeros(6, dtype=torch.float64)]


def test_mean_of_means_differs_from_token_mean():
    k = len(MB)
    mean_of_means = sum(mb.mean() for mb in MB) / k
    token_mean = torch.cat(MB).mean()
    assert float(mean_of_means) == 0.5 and float(token_mean) == 0.25


def test_sum_over_global_count_matches_the_full_batch_gradient():
    k = len(MB)
    w = torch.tensor(2.0, dtype=torch.float64, requires_grad=True)
    # full batch: mean over all 8 tokens of w * loss_token
    (w * torch.cat(MB)).mean().backward()
    full = w.grad.clone()
    w.grad = None
    total = sum(mb.numel() for mb in MB)
    for mb in MB:
        # plain torch loop (no division by k in backward): loss = token sum / tokens of the whole step
        ((w * mb).sum() / total).backward()
    assert torch.allclose(w.grad, full)
    w.grad = None
    for mb in MB:
        ((w * mb).mean() / k).backward()  # the naive per-micro-batch mean
    assert not torch.allclose(w.grad, full)


def test_reference_states_the_numbers():
    text = DOC.read_text()
    assert "loss 0.5 where the mean over all 8" in text and "tokens is 0.25" in text and "`num_items_in_batch`" in text
