"""DataLoader(IterableDataset, batch_size=None) through accelerator.prepare (accelerate 1.15.0,
torch 2.13.0, gloo on CPU): claims of sub-skills/training-loop-integration/references/iterable-datasets.md
("batch_size=None"). One run of _batch_none_probe.py per case; the runs go in parallel."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _torchrun import torchrun  # noqa: E402

HERE = Path(__file__).resolve().parent
PROBE = HERE / "_batch_none_probe.py"
CASES = [(2, "batched", "1"), (2, "scalar", "1"), (2, "float", "1"), (2, "batched", "0"), (0, "float", "1")]


def _run(tmp: Path, nproc: int, case: str, dispatch: str):
    out = tmp / f"p{nproc}{case}{dispatch}"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("ACCELERATE_USE_CPU", None)
    if nproc:  # torchrun: a failing rank 0 ends the job, so rank 1 may report a closed connection
        torchrun(PROBE, out, case, dispatch, nproc=nproc, cwd=tmp, env=env, timeout=300)
    else:  # plain `python script.py`: one process, no process group
        subprocess.run([sys.executable, str(PROBE), str(out), case, dispatch], env=env, cwd=tmp,
                       capture_output=True, text=True, timeout=300)
    return [json.loads(p.read_text()) for p in sorted(tmp.glob(out.name + ".rank*.json"))]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("batch_none")
    with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
        futs = {c: pool.submit(_run, tmp, *c) for c in CASES}
        return {c: f.result() for c, f in futs.items()}


def test_items_with_a_leading_dim_are_dispatched_as_batches(runs):
    ranks = runs[(2, "batched", "1")]
    assert [r["class"] for r in ranks] == ["DataLoaderDispatcher"] * 2
    # 4 items of shape (2, 3): rank 0 reads 2 per step, concatenates to (4, 3), each rank gets (2, 3)
    assert [r["shapes"] for r in ranks] == [[[2, 3], [2, 3]], [[2, 3], [2, 3]]]


def test_zero_dim_tensor_items_fail_in_concatenate(runs):
    rank0 = runs[(2, "scalar", "1")][0]
    assert rank0["class"] == "DataLoaderDispatcher" and rank0["where"] == "_fetch_batches"
    assert "You can't use batches of different size with `dispatch_batches=True`" in rank0["error"]


def test_float_items_fail_on_rank0(runs):
    rank0 = runs[(2, "float", "1")][0]
    assert rank0["error"] == "TypeError: Can only concatenate tensors but got <class 'float'>"


def test_float_items_one_plain_process_fail_in_find_batch_size(runs):
    (only,) = runs[(0, "float", "1")]
    assert only["class"] == "DataLoaderDispatcher" and only["where"] == "find_batch_size"
    assert only["error"].startswith("TypeError: Can only find the batch size of tensors but got <class 'float'>")


def test_no_dispatch_with_batch_size_none_fails_on_every_rank(runs):
    ranks = runs[(2, "batched", "0")]
    assert [r["class"] for r in ranks] == ["DataLoaderShard"] * 2
    assert [r["error"] for r in ranks] == ["TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'"] * 2
