"""load-state-files.md#how-load_state-reads-each-file is what accelerate 1.15.0 really does (set 6, s6-ck-01):
_ckpt_files_matrix.py ran save_state/load_state on CPU with every file intact, broken and missing, and the
RNG file with the numpy < 1.25 branch forced; its capture is committed. The reference's generated blocks
must equal the rendering of the capture word for word, and the probe is rerun live (one child process,
about 4 s) and must reproduce the capture."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ckpt_files_matrix as gen  # noqa: E402

NUMPY_OLD = "numpy < 1.25 forced (UInt32DType not allowlisted)"
FIX = "numpy < 1.25 forced + torch.serialization.add_safe_globals([type(np.dtype(np.uint32))]) first"
KWARGS = "numpy < 1.25 forced + load_state(load_kwargs={'weights_only': False})"
TORCH23 = ("numpy < 1.25 forced, torch 2.3 emulated (is_weights_only_available() False, "
           "torch.load default weights_only=False)")
NEW = "numpy >= 1.25 (installed, UInt32DType allowlisted)"


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_reference_is_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.REF, gen.render(data))


def test_live_probe_reproduces_the_capture(data):
    got = gen.run_probe()
    assert got == data


def test_key_rows(data):
    rng = data["rng_cases"]
    lost = ["RNG (random, numpy, torch)", "accelerator.step"]
    # the user's case: no exception, INFO line, everything but RNG and step restored
    assert rng[NUMPY_OLD]["error"] is None
    assert rng[NUMPY_OLD]["logs"][-1] == "INFO [RANK 0] Could not load random states"
    assert sorted(set(data["items"]) - set(rng[NUMPY_OLD]["restored"])) == sorted(lost)
    assert "but got <class 'numpy.dtypes.UInt32DType'>" in rng[NUMPY_OLD]["direct"]
    assert data["branches"] == {"is_numpy_available('1.25.0') with numpy reported as 1.23.5": False}
    # the fixes and the non-fix
    for case in (FIX, TORCH23, NEW):
        assert set(lost) <= set(rng[case]["restored"]), case
    assert rng[FIX]["kept_after"] is True
    assert not set(lost) & set(rng[KWARGS]["restored"])
    # every file's reader; only the RNG file fails silently
    reads = data["baseline"]["reads"]
    assert reads["random_states_0.pkl"] == ["accelerate.utils.load", True]
    assert reads["custom_checkpoint_0.pkl"] == ["accelerate.utils.load", False]
    assert reads["model.safetensors"][0] == "safetensors.torch.load_model"
    # scaler.pt and the RNG files bypass accelerate.utils.save (its main-process check): every rank writes them
    assert data["writers"]["scaler.pt"] == data["writers"]["random_states_0.pkl"] == "torch.save (every rank that reaches it)"
    assert data["writers"]["optimizer.bin"] == "accelerate.utils.save -> torch.save (main process)"
    for mode in ("broken", "missing"):
        silent = sorted(f for f, r in data[mode].items() if r["error"] is None)
        assert silent == ["random_states_0.pkl"], mode
