"""backend_validator/launch/flags.py describes the pinned parsers exactly (every flag, alias, nargs kind,
type, default, choices, const), read from the real parsers in a subprocess."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from backend_validator.launch import flags


@pytest.fixture(scope="module")
def real_tables(python_exe):
    script = Path(__file__).with_name("_parser_tables.py")
    proc = subprocess.run([python_exe, str(script)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _norm(rows):
    return [json.loads(json.dumps(list(r))) for r in rows]


@pytest.mark.parametrize("launcher", ["accelerate", "deepspeed", "torchrun"])
def test_table_matches_real_parser(real_tables, launcher):
    real = real_tables[launcher]
    assert flags.ALLOW_ABBREV[launcher] == real["allow_abbrev"]
    ours = _norm(flags.TABLES[launcher])
    assert len(ours) == len(real["actions"])
    for a, b in zip(ours, real["actions"]):
        assert a == b, (a, b)


def test_aliases_present():
    acc = {o: r[1] for r in flags.ACCELERATE for o in r[0]}
    assert acc["--num-processes"] == acc["--num_processes"] == "num_processes"
    tr = {o: r[1] for r in flags.TORCHRUN for o in r[0]}
    assert tr["--nproc-per-node"] == tr["--nproc_per_node"] == "nproc_per_node"
    ds = {o: r[1] for r in flags.DEEPSPEED for o in r[0]}
    assert ds["--num_accelerators"] == ds["--num_gpus"] == "num_gpus"
