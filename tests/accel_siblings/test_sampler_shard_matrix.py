"""prepare.md's per-sampler table is what accelerate 1.15.0 / torch 2.13.0 really do on 2 ranks:
_sampler_shard_matrix.py ran each sampler kind x use_seedable_sampler in 2-rank gloo CPU processes
(_sampler_shard_probe.py, ranks seeded differently) and committed the results (sampler_shard_capture.json).
The page's block must equal the rendering of that capture word for word; the rows the page's advice rests on
are asserted on the capture. A full rerun is `_sampler_shard_matrix.py --check` (~30 s)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _sampler_shard_matrix as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gb.load_json(gen.CAPTURE)


def _case(data, cfg, name, rank=0):
    return data[cfg][f"rank{rank}"]["cases"][name]


def _disjoint(data, cfg, name, p=0):
    a, b = (_case(data, cfg, name, r)["passes"][p]["got"] for r in (0, 1))
    return not set(a) & set(b) and len(set(a) | set(b)) == 16


def test_page_is_the_rendered_capture(data):
    gb.assert_page_is_rendered(gen.PAGE, gen.render(data))


def test_every_cell_ran(data):
    assert set(data) == set(gen.CONFIGS)
    for cfg, v in data.items():
        for r in ("rank0", "rank1"):
            assert "crash" not in v[r], (cfg, r, v[r].get("crash"))
            assert v[r]["num_processes"] == 2 and set(v[r]["cases"]) == set(gen.CASES), (cfg, r)


def test_weighted_sampler_is_synchronized_only_without_seedable_sampler(data):
    """s13-A8-06: the default broadcasts the WeightedRandomSampler's generator (one draw, split); with
    use_seedable_sampler=True it is not synchronized, data_seed does not change its order, ranks overlap."""
    d, s1, s2 = (_case(data, c, "weighted") for c in ("default", "seedable_ds1", "seedable_ds2"))
    assert d["synchronized"] and d["rng_types"] == ["generator"] and d["sampler_class"] == "WeightedRandomSampler"
    assert d["passes"][0]["drawn"] == _case(data, "default", "weighted", 1)["passes"][0]["drawn"]
    assert _disjoint(data, "default", "weighted") and _disjoint(data, "default", "weighted", 1)
    assert d["passes"][1]["drawn"] != d["passes"][0]["drawn"]              # a new draw each epoch, no set_epoch
    assert not s1["synchronized"] and s1["rng_types"] == [] and s1["generator_attr"] == "None"
    assert s1["passes"][0]["drawn"] != _case(data, "seedable_ds1", "weighted", 1)["passes"][0]["drawn"]
    assert not _disjoint(data, "seedable_ds1", "weighted")
    # data_seed is not read: ranks seeded alike draw the same with data_seed 1 and 2 (same global seed per rank)
    assert s1["passes"][0]["drawn"] == s2["passes"][0]["drawn"]
    assert _disjoint(data, "seedable_same", "weighted", 1)                  # agrees only if every rank's RNG does


def test_random_sampler_rows(data):
    assert _case(data, "default", "random")["synchronized"] and _disjoint(data, "default", "random")
    sd = _case(data, "seedable_ds1", "random")
    assert sd["sampler_class"] == "SeedableRandomSampler" and not sd["synchronized"]
    assert _disjoint(data, "seedable_ds1", "random") and sd["passes"][2]["drawn"] == sd["passes"][0]["drawn"]
    assert sd["passes"][0]["drawn"] != _case(data, "seedable_ds2", "random")["passes"][0]["drawn"]
    assert not _disjoint(data, "seedable", "random")                      # no data_seed: per-rank initial_seed
    assert _case(data, "seedable_ds1", "batch_sampler")["sampler_class"] == "SeedableRandomSampler"


def test_custom_and_iterable_rows(data):
    assert _case(data, "default", "custom_gen")["synchronized"] and _disjoint(data, "default", "custom_gen")
    assert not _case(data, "seedable_ds1", "custom_gen")["synchronized"]
    assert not _disjoint(data, "default", "custom_nogen") and not _disjoint(data, "seedable_ds1", "custom_nogen")
    for cfg in ("default", "seedable_ds1"):
        assert _case(data, cfg, "iterable")["dl_class"] == "DataLoaderDispatcher" and _disjoint(data, cfg, "iterable")
        assert not _disjoint(data, cfg, "iterable_shard")
        g = _case(data, cfg, "iterable_gen_shard")
        assert g["synchronized"] and _disjoint(data, cfg, "iterable_gen_shard")
        assert g["passes"][2]["drawn"] == g["passes"][0]["drawn"]          # IterableDatasetShard seeds it with the epoch


def test_seeded_generator_keeps_ranks_agreeing_under_seedable_sampler(data):
    """A WeightedRandomSampler given a generator seeded alike on every rank: broadcast by default, and under
    use_seedable_sampler=True (the Trainer's default) not broadcast but still one sequence on both ranks,
    although the ranks' global RNGs differ (seeded 100 and 101); a new order each pass; data_seed not read."""
    d = _case(data, "default", "weighted_gen")
    assert d["synchronized"] and d["generator_attr"] == "set"
    for cfg in ("seedable", "seedable_ds1"):
        s = _case(data, cfg, "weighted_gen")
        assert not s["synchronized"] and s["rng_types"] == [] and s["generator_attr"] == "set"
        for p in (0, 1):
            assert s["passes"][p]["drawn"] == _case(data, cfg, "weighted_gen", 1)["passes"][p]["drawn"]
            assert _disjoint(data, cfg, "weighted_gen", p)
        assert s["passes"][1]["drawn"] != s["passes"][0]["drawn"]
    assert _case(data, "seedable_ds1", "weighted_gen")["passes"][0]["drawn"] == \
        _case(data, "seedable_ds2", "weighted_gen")["passes"][0]["drawn"]


def test_iterable_shard_generator_is_reseeded_to_the_epoch(data):
    """IterableDatasetShard calls dataset.generator.manual_seed(epoch): the ranks' own seeds (100, 101) are
    overwritten, epoch e draws torch.randperm(16, generator=manual_seed(e)) in every config."""
    import torch
    want = [torch.randperm(16, generator=torch.Generator().manual_seed(e)).tolist() for e in (0, 1, 0)]
    for cfg in gen.CONFIGS:
        for r in (0, 1):
            assert [p["drawn"] for p in _case(data, cfg, "iterable_gen_shard", r)["passes"]] == want, (cfg, r)
