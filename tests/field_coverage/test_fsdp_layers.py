"""What Accelerate's FSDP wrapping does to the layers, 2 gloo ranks on CPU (accelerate 1.15.0, torch
2.13.0; the MULTI_GPU-on-CPU stand-in of tests/backends_docs/_trainer_backend_matrix.py): claims of
sub-skills/distributed-training-backends/references/deepspeed-fsdp.md ("What wrapping does")."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from _torchrun import side_by_side, torchrun  # noqa: E402

PROBE = Path(__file__).resolve().parent / "_fsdp_layers_probe.py"


def _run(tmp: Path, version: int) -> list:
    out = tmp / f"v{version}"
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    env.pop("ACCELERATE_USE_CPU", None)
    proc = torchrun(PROBE, out, str(version), nproc=2, cwd=tmp, env=env, timeout=300)
    ranks = [json.loads(p.read_text()) for p in sorted(tmp.glob(out.name + ".rank*.json"))]
    assert proc.returncode == 0 and len(ranks) == 2, (proc.stdout + proc.stderr)[-3000:]
    return ranks


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return side_by_side(_run, tmp_path_factory.mktemp("fsdp_layers"), 1, 2)


def test_wrapping_happens_in_prepare(runs):
    for v in (1, 2):
        for r in runs[v]:
            assert r["distributed_type"] == "DistributedType.FSDP"
            assert r["before"] is False and r["after_repr"] is True
    assert runs[1][0]["after_layer_classes"] == ["FullyShardedDataParallel"] * 4
    assert runs[2][0]["after_layer_classes"] == ["FSDPBlock"] * 4  # FSDP2 renames the class in place


def test_every_rank_holds_a_shard_of_every_layer(runs):
    # _no_split_modules = ["Block"], no class list: each of the 4 layers is a unit split in half over 2 ranks
    for r in runs[1]:
        assert r["layers"] == [[72, 36]] * 4  # FSDP1: FlatParameter of weight + bias (64 + 8)
    for r in runs[2]:
        assert r["layers"] == [[64, 32]] * 4  # FSDP2: the weight DTensor, local shard of rows
