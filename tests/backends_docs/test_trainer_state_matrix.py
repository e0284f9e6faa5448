"""transformers-trainer-state.md is what the transformers 5.25.0 Trainer does (set 7, s7-ck-01 / s7-ck-02):
_trainer_state_matrix.py ran tiny CPU Trainer jobs (eval every step, sparse saves, save_strategy="best",
a resume with a stale best path); its capture is committed. The reference's generated blocks must equal the
rendering of the capture word for word, and the probe is rerun live (one child process, about 5 s, which also
reruns the unwrap_model x compile cells of tests/accel_siblings/test_unwrap_compile_matrix.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _trainer_state_matrix as gen  # noqa: E402

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_reference_is_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.REF, gen.render(data))


def test_live_probe_reproduces_the_capture(data):
    """One child (~5 s): every, sparse and the stale-path resume, plus the unwrap_model x compile cells of
    tests/accel_siblings/unwrap_compile_capture.json (both live reruns share the interpreter)."""
    live = gen.run_probe(quick=True)
    unwrap = live.pop("unwrap")
    for name in ("every", "sparse", "resume", "trainer_state_json", "versions", "sharded_at_load"):
        assert live[name] == data[name], name
    sys.path.insert(0, str(gen.ROOT / "tests" / "accel_siblings"))
    import _unwrap_compile_matrix as uc

    assert unwrap == uc.load_capture()


def test_every_trainer_state_field_is_in_the_table(data):
    assert set(data["trainer_state_json"]) == set(gen.WRITER)


def test_best_checkpoint_only_when_saved(data):
    # s7-ck-01: best at the unsaved step 3 -> best_global_step 3, path still checkpoint-2
    last = data["sparse"]["saves"][-1]
    assert (last["best_global_step"], last["best_model_checkpoint"]) == (3, "<tmp>/sparse/checkpoint-2")
    for name in ("every", "sparse", "best", "resume", "resume_best_copied"):
        for s in data[name]["saves"]:
            bmc = s["best_model_checkpoint"]
            assert bmc is None or bmc.rsplit("/", 1)[1] in s["folders"], (name, s)
    assert [s["step"] for s in data["best"]["saves"]] == [1, 2, 4]


def test_stale_best_path_is_dropped_on_resume(data):
    # s7-ck-02: warning, None, best_metric / best_global_step kept; no crash at the end
    r = data["resume"]
    after = r["state_after_resume_load"]
    assert after["best_model_checkpoint"] is None
    assert (after["best_metric"], after["best_global_step"]) == (3.0, 2)
    assert "does not exist anymore. Ignoring it for this run." in r["warnings"][0]
    assert r["final_folders"] == ["checkpoint-6"]
    assert data["resume_best_copied"]["final_best_model_checkpoint"] == "<tmp>/resume_best_copied/checkpoint-2"
    # the checkpoint's save_steps (1) wins over the argument (2)
    assert [s["step"] for s in r["saves"]] == [5, 6]


def test_sharded_at_load_page_states_the_run(data):
    """transformers-trainer-sharded-load.md (s9-fd-e04): the refusal message word for word, which settings
    pass, the files a save_only_model checkpoint holds, and that a resume restarts the scheduler."""
    sh = data["sharded_at_load"]
    page = (gen.ROOT / "sub-skills" / "distributed-training-backends" / "references"
            / "transformers-trainer-sharded-load.md").read_text()
    refusal = sh["default (save_strategy='steps', save_only_model=False)"]
    assert refusal.startswith("ValueError: Resuming is not supported") and f"`{refusal}`" in page
    assert sh["save_strategy='epoch'"] == refusal
    assert sh["save_only_model=True"] == sh["save_strategy='no'"] == "accepted"
    assert sh["checkpoint-1 files"] == ["model.safetensors", "trainer_state.json", "training_args.bin"]
    assert sh["resume from checkpoint-1: final global_step"] == 2
    assert sh["resume from checkpoint-1: scheduler steps taken"] == 1  # fresh scheduler, not restored


def test_resume_into_dtensor_parameters_raises():
    """transformers-trainer-sharded-load.md (found wrong by the set-9 re-check, s9-fd-e04): the one-process
    run above has plain parameters, so its resume loads; a model really sharded at load time has DTensor
    parameters, and the plain load_state_dict that Trainer._load_from_checkpoint runs refuses the plain
    tensors of a save_only_model checkpoint."""
    import subprocess
    port = str(_ports.free_port())
    probe = Path(__file__).resolve().parent / "_dtensor_resume_probe.py"
    out = subprocess.run([sys.executable, str(probe), port], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "RuntimeError: got mixed torch.Tensor and DTensor", out.stdout + out.stderr
    page = (gen.ROOT / "sub-skills" / "distributed-training-backends" / "references"
            / "transformers-trainer-sharded-load.md").read_text()
    assert "got mixed torch.Tensor and DTensor" in page
