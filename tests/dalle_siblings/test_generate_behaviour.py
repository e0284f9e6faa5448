"""Behaviour of DALLE-pytorch's `generate_images`, run on CPU with a tiny model (dalle_cpu.py).

Each test runs the code path a reference describes and checks the reference says what happened.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from dalle_cpu import run  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cache_calls():
    """For cond_scale 1 and 2, with and without use_cache: the size of the cache dict DALLE.forward
    received at each call (None = no cache) and the generated images."""
    return run('''
        dalle = tiny_dalle()
        seen = []
        original = DALLE.forward
        def spy(self, *args, cache=None, **kwargs):
            seen.append(None if cache is None else len(cache))
            return original(self, *args, cache=cache, **kwargs)
        DALLE.forward = spy
        text = torch.randint(1, 20, (1, 4), generator=torch.Generator().manual_seed(3))
        out = {}
        for cond_scale in (1, 2):
            for use_cache in (False, True):
                seen.clear()
                torch.manual_seed(1)
                img = dalle.generate_images(text, use_cache=use_cache, cond_scale=cond_scale, filter_thres=0.9)
                out[f"{cond_scale}-{use_cache}"] = {"calls": list(seen), "img": img.flatten().tolist()}
        print(json.dumps(out))
    ''')


def test_use_cache_does_nothing_at_the_default_cond_scale(cache_calls):
    off, on = cache_calls["1-False"], cache_calls["1-True"]
    assert on["calls"] and all(c is None for c in on["calls"]), on["calls"]  # the cache never reaches forward
    assert on["img"] == off["img"]  # same images: nothing was reused
    assert len(on["calls"]) == len(off["calls"]) == 16  # one forward per image code: 16 for this VAE


def test_use_cache_takes_effect_with_guidance(cache_calls):
    on = cache_calls["2-True"]["calls"]
    assert on[0] == 0 and max(c or 0 for c in on) > 0, on  # the cache fills after the first step
    assert all(c is None for c in cache_calls["2-False"]["calls"])
    assert len(on) == 2 * 16  # guidance runs a second, text-dropped pass per step


def test_references_state_the_cond_scale_condition():
    rerank = (REPO / "sub-skills/generation-and-ranking/references/clip-reranking.md").read_text()
    row = next(ln for ln in rerank.splitlines() if ln.startswith("| `use_cache`"))
    assert "only when `cond_scale` is not 1" in row and "forward_with_cond_scale" in row
    # no example in the bundle turns the cache on without guidance
    for path in (REPO / "sub-skills").rglob("*.md"):
        for call in re.findall(r"generate_images\(([^)]*)\)", path.read_text()):
            if "use_cache=True" in call.replace(" ", ""):
                assert re.search(r"cond_scale\s*=\s*(?!1\b)", call), (path, call)
    skill = (REPO / "sub-skills/generation-and-ranking/SKILL.md").read_text()
    assert "does nothing at the default `cond_scale=1`" in " ".join(skill.split())
    args = (REPO / "sub-skills/dalle-training/references/dalle-model-arguments.md").read_text()
    assert "`use_cache=True` **and** `cond_scale` other than 1" in " ".join(args.split())
