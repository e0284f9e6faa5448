"""mixed-precision-sources.md#outer-torchautocast-around-the-engine is what deepspeed 0.19.8 does with a
torch.autocast opened around the engine call (set 12, s12-fd-a05): _autocast_nesting.py ran the engine under
five configs with and without an outer autocast; its capture is committed. The page's generated block must
equal the rendering of the capture, and the probe is rerun live (one child, about 4 s of CPU)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _autocast_nesting as gen  # noqa: E402

NO_SECTION, DISABLED, BF16_SECTION, NO_DTYPE, BF16_BLOCK = gen.CONFIGS


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_reference_is_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.REF, gen.render(data))


def test_outer_autocast_without_the_section_is_disabled_with_a_warning_not_raised(data):
    for label in (NO_SECTION, DISABLED, BF16_BLOCK):
        row = data["rows"][label]
        assert "error" not in row["outer"] and row["outer"]["inside"] == "autocast off", label
        assert row["outer"]["log"].startswith("WARNING: torch.autocast is enabled outside DeepSpeed but disabled"), label
        assert row["outer again"]["log"] == "-", label  # once per process
    assert data["rows"][NO_SECTION]["outer"]["out"] == "float32"
    assert data["rows"][BF16_BLOCK]["outer"]["out"] == "bfloat16"  # the bf16 block, not the outer fp16, decides


def test_the_enabled_section_replaces_the_outer_autocast(data):
    row = data["rows"][BF16_SECTION]
    assert row["outer"]["inside"] == "autocast on, bfloat16" and row["plain"]["inside"] == "autocast on, bfloat16"
    assert row["outer"]["log"].startswith("INFO: torch.autocast is already enabled outside DeepSpeed")
    no_dtype = data["rows"][NO_DTYPE]
    assert no_dtype["outer"]["inside"] == "autocast on, float16" and no_dtype["plain"]["inside"] == "autocast on, bfloat16"
    assert data["versions"]["deepspeed"] == "0.19.8"


@pytest.mark.reproduces("deepspeed-outer-autocast-not-in-config")
def test_live_probe_reproduces_the_capture(data):
    fresh = gen.run_probe()
    assert gen.render(fresh) == gen.render(data)
    assert fresh["rows"][NO_SECTION]["outer"]["log"].startswith("WARNING: torch.autocast is enabled outside DeepSpeed")


def test_an_outer_cpu_autocast_is_not_seen_and_stays_on(data):
    # autocast_if_enabled calls torch.is_autocast_enabled() without a device: the CUDA state on torch 2.13.0,
    # so a real CPU autocast around the engine is neither warned about nor disabled
    c = data["cpu_outer_as_is"]
    assert c == {"inside": "autocast on, float16", "out": "float16", "log": "-"}
