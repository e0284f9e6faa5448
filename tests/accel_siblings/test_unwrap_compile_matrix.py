"""compiled-models.md#unwrap_model-and-compiled-submodules is what accelerate 1.15.0 does (set 7, s7-acb-06):
_unwrap_compile_matrix.py prepared and unwrapped a model compiled in six places; its capture is committed.
The reference's generated block must equal the rendering of the capture; the probe is rerun live in
tests/backends_docs/test_trainer_state_matrix.py::test_live_probe_reproduces_the_capture (same child as the
Trainer probe, to pay for one torch import)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _unwrap_compile_matrix as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_reference_is_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.REF, gen.render(data))


def test_compiled_submodule_keeps_its_wrapper(data):
    sub = data["cells"][gen.PLACES[2]]
    assert sub["has_compiled_regions"] is True and sub["orig_mod_in_dict"] is False  # the guarded branch: no KeyError
    for keep in (True, False):
        cell = sub[f"keep_torch_compile={keep}"]
        assert cell == {"type": "Net", "enc": "OptimizedModule", "keys": ["enc._orig_mod.", "head."]}
    top = data["cells"][gen.PLACES[1]]
    assert top["keep_torch_compile=True"]["keys"] == ["_orig_mod.enc.", "_orig_mod.head."]
    assert top["keep_torch_compile=False"]["keys"] == ["enc.", "head."]
    assert data["cells"][gen.PLACES[3]]["keep_torch_compile=True"]["keys"] == ["enc.", "head."]  # in-place compile
    assert data["versions"]["accelerate"] == "1.15.0"
