"""Every behaviour claim of sub-skills/training-loop-integration/references/iterable-datasets.md, shown by
one run of _data_probe.py under torchrun with 2 gloo ranks (accelerate 1.15.0, Accelerator(cpu=True))."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _torchrun import shared, torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PROBE = HERE / "_data_probe.py"
DOC = REPO / "sub-skills" / "training-loop-integration" / "references" / "iterable-datasets.md"


def probe_run(tmp_path_factory):
    """This module's probe run (field_coverage/conftest.py may start it early, beside the others)."""
    out = tmp_path_factory.mktemp("data") / "obs.json"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("ACCELERATE_USE_CPU", None)
    proc = torchrun(PROBE, out, nproc=2, cwd=out.parent, env=env)
    assert proc.returncode == 0 and out.exists(), (proc.stdout + proc.stderr)[-4000:]
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def obs(tmp_path_factory):
    return shared(probe_run, tmp_path_factory)


def test_two_real_ranks(obs):
    assert obs["distributed_type"] == "DistributedType.MULTI_CPU" and obs["num_processes"] == 2


def test_map_style_round_robin_batches_padded_from_the_start(obs):
    assert obs["map_default"] == [[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7], [0, 1]]]


def test_map_style_even_batches_off_leaves_ranks_uneven(obs):
    assert obs["map_uneven_no_pad"] == [[[0, 1], [4, 5], [8, 9]], [[2, 3], [6, 7]]]


def test_split_batches_divides_the_batch(obs):
    assert obs["map_split_batches"] == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]


def test_iterable_default_reads_only_rank0_stream(obs):
    assert obs["iterable_default_class"] == "DataLoaderDispatcher"
    assert obs["iterable_default"] == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]  # rank 1's items (100+) never seen
    assert obs["iterable_default_reads"] == [1, 0]


def test_iterable_without_dispatch_keeps_a_slice_of_each_rank_stream(obs):
    assert obs["iterable_shard_class"] == "DataLoaderShard/IterableDatasetShard"
    assert obs["iterable_shard"] == [[[0, 1], [4, 5]], [[102, 103], [106, 107]]]  # half of each stream dropped
    assert obs["iterable_shard_reads"] == [1, 1]  # each rank reads its whole stream


def test_unprepared_loader_keeps_the_per_rank_stream(obs):
    assert obs["iterable_unprepared"] == [[[0, 1], [2, 3], [4, 5], [6, 7]],
                                          [[100, 101], [102, 103], [104, 105], [106, 107]]]


def test_no_opt_out_flag_in_this_accelerate():
    import accelerate.data_loader as dl
    from accelerate.utils import DataLoaderConfiguration
    assert "shard_iterable_dataset" not in dl.prepare_data_loader.__code__.co_varnames
    assert not hasattr(DataLoaderConfiguration(), "shard_iterable_dataset")


def test_reference_states_what_the_run_shows():
    text = DOC.read_text()
    for phrase in ["`DataLoaderDispatcher`", "`IterableDatasetShard`", "never read", "dispatch_batches=False",
                   "split_batches=True", "do not pass it to `prepare`"]:
        assert phrase in text, phrase


def test_prepared_loader_matrix_page_matches_the_run(obs):
    """prepared-loader-matrix.md's generated table is this run's matrix, word for word (s9-tl-b01)."""
    from _loader_matrix import PAGE, render  # puts tests/ on sys.path first
    import _generated_blocks as gb
    assert gb.block(PAGE.read_text(encoding="utf-8"), "prepared-loader-matrix") == render(obs["matrix"])


def test_gather_for_metrics_trims_iterable_only_when_dispatched(obs):
    rows = {(r["kind"], r["dispatch"], r["even"], r["split"], r["drop"]): r for r in obs["matrix"]}
    for kind in ("iter", "iter_len"):  # default dispatcher knows the remainder, with or without __len__
        r = rows[(kind, None, True, False, False)]
        assert r["wrapper"] == "DataLoaderDispatcher" and r["ranks"][0]["remainder"] == 5
        assert len(r["gather"]) == 14 and r["gather_for_metrics"] == list(range(13))
    assert rows[("iter", False, True, False, False)]["ranks"][0]["remainder"] == -1
    assert rows[("iter_len", False, True, False, False)]["ranks"][0]["remainder"] == 0  # shard's rounded length
    for kind in ("iter", "iter_len"):
        assert len(rows[(kind, False, True, False, False)]["gather_for_metrics"]) == 16
    assert rows[("map", None, True, False, False)]["gather_for_metrics"] == list(range(13))
