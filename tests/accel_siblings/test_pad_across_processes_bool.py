"""pad_across_processes on a bool tensor changes dtype on the padded ranks only (accelerate 1.15.0,
torch 2.13.0, 2 gloo CPU ranks, the real Accelerator). Backs the bool row and the paragraph under
"Rules the table shows" in sub-skills/training-loop-integration/references/accelerator-comm-methods.md
(set-21 miss s21-K10-04).
"""
from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _ports  # noqa: E402

JOB = Path(__file__).with_name("_pad_bool_job.py")


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("pad_bool")
    port = _ports.free_port()
    envs = [gb.child_env(out, RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2", LOCAL_WORLD_SIZE="2",
                         MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), PYTHONWARNINGS="ignore",
                         ACCELERATE_DISABLE_RICH="1") for r in range(2)]
    got = gb.run_ranks([sys.executable, str(JOB), str(out)], envs, out, 120, "error", 2000)
    for r in got.values():
        assert "error" not in r, r
    return got["rank0"], got["rank1"]


def test_padded_rank_gets_int64_longest_rank_keeps_bool(ranks):
    r0, r1 = ranks
    assert r0["in"] == r1["in"] == "torch.bool"
    assert r0["padded_shape"] == r1["padded_shape"] == [2, 6]
    assert r0["padded_dtype"] == "torch.int64"          # new_zeros(bool) + 0 -> int64, then the values copied in
    assert r0["padded_row0"] == [1, 0, 1, 0, 0, 0]      # True/False became 1/0, padding 0
    assert r1["padded_dtype"] == "torch.bool"           # already the longest: returned unchanged


def test_cast_first_or_cast_back_gives_one_dtype_on_every_rank(ranks):
    for r in ranks:
        assert r["cast_first"] == {"dtype": "torch.bool", "shape": [4, 6]}
        assert r["cast_back"] == {"dtype": "torch.bool", "shape": [4, 6]}


def test_pinned_source_pads_with_new_zeros_plus_pad_index():
    from accelerate.utils import operations
    src = inspect.getsource(operations.pad_across_processes)
    assert "if max_size == tensor.shape[dim]:\n            return tensor" in src
    assert "new_tensor = tensor.new_zeros(tuple(new_size)) + pad_index" in src
