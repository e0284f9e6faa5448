"""FSDP1's flattening rules on CPU (torch 2.13.0): what `use_orig_params=True` relaxes and what it does not.

`FlatParamHandle._validate_tensors_to_flatten` (torch/distributed/fsdp/_flat_param.py) refuses mixed
dtypes in one FSDP unit whatever `use_orig_params` is, and refuses mixed `requires_grad` only when it is
False. The handle is built directly on a world-1 gloo group (FSDP1's own constructor wants an
accelerator), so the test runs the very check that raises in a GPU job. Backs the fixes of the catalog
entries torch-fsdp-flat-param-dtype-reported (use_orig_params does not help) and
torch-fsdp-flat-param-requires-grad-reported (it does)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _ports import free_port  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CHILD = r"""
import json, sys, torch, torch.nn as nn, torch.distributed as dist
from torch.distributed.fsdp._flat_param import FlatParamHandle, HandleShardingStrategy
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{sys.argv[1]}", rank=0, world_size=1)
def handle(a, b, uop):
    m = nn.Module(); m.a, m.b = a, b
    try:
        FlatParamHandle([m.a, m.b], m, torch.device("cpu"), HandleShardingStrategy.FULL_SHARD, False, None, None,
                        False, dist.group.WORLD, uop)
        return "ok"
    except ValueError as e:
        return str(e)
out = {}
for uop in (False, True):
    out[f"dtype-{uop}"] = handle(nn.Parameter(torch.zeros(2, dtype=torch.bfloat16)), nn.Parameter(torch.zeros(2)), uop)
    out[f"grad-{uop}"] = handle(nn.Parameter(torch.zeros(2), requires_grad=False), nn.Parameter(torch.zeros(2)), uop)
dist.destroy_process_group()
print(json.dumps(out))
"""


def test_use_orig_params_relaxes_requires_grad_but_not_dtype():
    p = subprocess.run([sys.executable, "-c", CHILD, str(free_port())], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.strip().splitlines()[-1])
    for uop in (False, True):
        assert out[f"dtype-{uop}"].startswith("Must flatten tensors with uniform dtype but got torch.bfloat16"), out
    assert out["grad-False"].startswith("Must flatten tensors with uniform `requires_grad`"), out
    assert out["grad-True"] == "ok", out


def test_catalog_fixes_say_so():
    entries = {e["id"]: e for e in yaml.safe_load(
        (REPO / "sub-skills/failure-triage/catalog/reported.yaml").read_text(encoding="utf-8"))}
    dtype_fix = entries["torch-fsdp-flat-param-dtype-reported"]["fix"]
    assert "use_orig_params=True does not help" in dtype_fix and "own FSDP units" in dtype_fix
    assert "use_orig_params=True" in entries["torch-fsdp-flat-param-requires-grad-reported"]["fix"]
