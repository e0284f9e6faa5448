"""transformers-trainer-args-checks.md is what TrainingArguments(...) accepts or raises in transformers 5.25.0
(set 9, s9-tr-e03): _trainer_args_checks.py built every case in-process; the capture is committed. The
page's generated blocks must equal the rendering of the capture word for word, and every case is rebuilt
live here (in-process, no training)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _trainer_args_checks as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_reference_is_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.REF, gen.render(data))


def test_live_cases_reproduce_the_capture(data):
    assert gen.probe() == data


def test_ratio_pairs_pass_and_mixing_is_checked_only_on_a_float_remainder(data):
    """s9-tr-e03: 0.1/0.02 and 0.3/0.1 are accepted (scaled ratio branch), 0.1/0.03 raises 'not a multiple',
    a mixed pair raises only when the float modulo is non-zero, and ceil() at train time can break the multiple."""
    res = {c["case"]: c["result"] for c in data["cases"]}
    assert res["save_steps=0.1, eval_steps=0.02"].startswith("accepted")
    assert res["save_steps=0.3, eval_steps=0.1"].startswith("accepted")
    assert "which is not a multiple of 0.03" in res["save_steps=0.1, eval_steps=0.03"]
    assert "mixing ratio and absolute steps" in res["save_steps=100, eval_steps=0.02"]
    assert res["save_steps=100, eval_steps=0.5"].startswith("accepted")
    assert "at max_steps=1234: save_steps=124 eval_steps=25" in res["save_steps=0.1, eval_steps=0.02"]
    assert "round multiple" in res["save_steps=300, eval_steps=200"]
    assert res["save_strategy='best', eval_strategy='steps', save_steps=300, eval_steps=200"].startswith("accepted")
