"""state-dict-keys.md is what accelerate 1.15.0 / torch 2.13.0 really do: _sd_keys_matrix.py ran
_sd_keys_probe.py on 2 gloo ranks (MULTI_CPU DDP, torch.compile, FSDP1 and FSDP2 on CPU) and committed both
ranks' results (sd_keys_capture.json). The page's generated blocks must equal the rendering of that capture word
for word, and the rows the page's advice rests on are asserted on the capture. The DDP rows are rerun live in
the 2-rank launch of tests/audit/test_run_claims.py::test_ddp_state_dict_key_forms; a full rerun is
`_sd_keys_matrix.py --check` (~6 s)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _sd_keys_matrix as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gb.load_json(gen.CAPTURE)


def test_page_is_the_rendered_capture(data):
    gb.assert_page_is_rendered(gen.PAGE, gen.render(data))


def test_both_ranks_ran_every_cell_alike(data):
    assert set(data) == {"rank0", "rank1"} and data["rank0"] == data["rank1"]
    r = data["rank0"]
    assert r["distributed_type"] == "DistributedType.MULTI_CPU" and r["num_processes"] == 2
    assert set(r["loads"]) == {f"{f}->{t}" for f in gen.FORMS for t in gen.TARGETS}


def test_key_rows(data):
    """s11-ck-a01: a `module.` file loads only into the prepared wrapper; a plain one into the model before
    prepare or unwrap_model after it; DTensor shards only into FSDP2; no Accelerate export writes `module.`."""
    loads = data["rank0"]["loads"]
    ok = [k for k, v in loads.items() if v == "loads"]
    assert {t for f, t in (k.split("->") for k in ok) if f == "module"} == {"prepared"}
    assert {t for f, t in (k.split("->") for k in ok) if f == "plain"} == {"raw", "unwrap", "fsdp1", "fsdp2_set_full"}
    assert {t for f, t in (k.split("->") for k in ok) if f == "fsdp2"} == {"fsdp2", "fsdp2_set_full"}
    assert "mixed torch.Tensor and DTensor" in loads["plain->fsdp2"]
    assert loads["module->raw"] == "`RuntimeError`: missing `a.weight`, unexpected `module.a.weight`"
    ex = data["rank0"]["exports"]
    assert all(k == k.removeprefix("module.") for e in ex.values() for v in e.values() for k in v)
    assert ex["prepared"]["save_state"] == ["a.bias", "a.weight", "b.bias", "b.weight"]
    assert all(k.startswith("_orig_mod.") for v in ex["prepared_c"].values() for k in v)
