"""mid-epoch-resume.md is what accelerate 1.15.0 / torch 2.13.0 really replay: _resume_order_matrix.py ran every
sampler option x resume recipe in its own CPU process (_resume_order_probe.py: save mid-epoch, then a fresh
process that prepares, load_state's and applies the recipe) and committed the results
(resume_order_capture.json). The page's block must equal the rendering of that capture word for word; the rows
the page's advice rests on are asserted on the capture. The seedable rows are rerun live in
tests/audit/_single_probe.py (test_run_claims.py::test_skip_first_batches_passes_iteration); a full rerun is
`_resume_order_matrix.py --check` (~20 s)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402
import _resume_order_matrix as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gb.load_json(gen.CAPTURE)


def test_page_is_the_rendered_capture(data):
    gb.assert_page_is_rendered(gen.PAGE, gen.render(data))


def test_every_cell_ran(data):
    assert set(data["default2"]) == set(gen.TWO_RANK_MODES)
    assert not [m for m, v in data["default2"].items() if "error" in v or "crash" in v or "rank1" not in v]
    for s in gen.ONE_PROCESS:
        assert set(data[s]) == {"full", "save", *gen.RECIPES}, s
        assert not [m for m, v in data[s].items() if "error" in v or "crash" in v], s
    assert data["stateful"]["full"]["error"].startswith("ImportError: StatefulDataLoader is not available")


def test_key_rows(data):
    """s11-ck-l02: only seedable + the epoch set on the iterated loader (before skip_first_batches, or on the
    new loader as the Trainer does) replays the uninterrupted tail; the new loader
    carries the source's iteration; forced to 0 it replays epoch 0; the default sampler replays no recipe."""
    exact = {(s, m) for s in gen.SAMPLERS for m in gen.RECIPES if m in data[s]
             if data[s][m]["batches"] == data[s]["full"]["epochs"][1][2:]}
    assert exact == {("seedable", "set_epoch+skip"), ("seedable", "skip+set_epoch_new")}
    sd = data["seedable"]
    assert sd["set_epoch+skip"]["skipped_iteration"] == 1 and sd["skip"]["skipped_iteration"] == 0
    assert sd["set_epoch+skip+iteration0"]["batches"] == sd["full"]["epochs"][0][2:]
    assert sd["set_epoch+skip"]["next_pass"] == sd["full"]["epochs"][1]      # dl itself did not advance
    assert sd["set_epoch+skip"]["next_pass_set_epoch2"] == sd["full"]["epochs"][2]
    df = data["default"]
    assert df["full"]["sampler_class"] == "RandomSampler" and sd["full"]["sampler_class"] == "SeedableRandomSampler"
    assert df["skip"]["batches"] == df["full"]["epochs"][2][2:]              # the RNG saved mid-epoch is past epoch 1
    assert df["save"]["files"] == ["random_states_0.pkl"] and df["skip"]["iteration_after_load"] == 0
    two = data["default2"]   # 2 ranks, default sampler: the prepare-seeded generator restarts at epoch 0
    e = two["full"]["epochs"]
    for m in ("skip", "set_epoch+skip"):
        assert two[m]["batches"] == e[0][2:] and two[m]["next_pass"] == e[1], m
        assert two[m]["rank1"]["batches"] == two["full"]["rank1"]["epochs"][0][2:], m
