"""prepare() dispatch, plain-torchrun and `--module` claims (set-3 misses s3-acb-09, s3-acl-05, s3-acl-01), runs on CPU.

Two short child processes in a torchrun-style environment (one rank, gloo, `ACCELERATE_USE_CPU=true`,
a default_config.yaml asking for fp16 under HF_HOME): the first also runs torch FSDP1 with an
optimizer built before wrapping; the second adds `ACCELERATE_MIXED_PRECISION=bf16`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
SUB = HERE.parents[1] / "sub-skills"
DSF = SUB / "distributed-training-backends" / "references" / "deepspeed-fsdp.md"
CFG = SUB / "configuration-and-cli" / "references" / "config-file-and-precedence.md"
CMD = SUB / "configuration-and-cli" / "references" / "commands.md"


def text(p: Path) -> str:
    return " ".join(p.read_text(encoding="utf-8").split())


def _free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _run(tmp: Path, extra: dict, *args) -> dict:
    home = tmp / "hf"
    cfg = home / "accelerate"
    cfg.mkdir(parents=True, exist_ok=True)
    (cfg / "default_config.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\n"
                                             "mixed_precision: fp16\nnum_processes: 1\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_"))}
    env.update(HF_HOME=str(home), OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", RANK="0", LOCAL_RANK="0",
               WORLD_SIZE="1", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()),
               ACCELERATE_USE_CPU="true", **extra)
    proc = subprocess.run([sys.executable, str(HERE / "_prepare_dispatch_probe.py"), *args], capture_output=True,
                          text=True, cwd=tmp, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return {"plain": _run(tmp_path_factory.mktemp("plain"), {}, "--fsdp1"),
            "bf16": _run(tmp_path_factory.mktemp("bf16"), {"ACCELERATE_MIXED_PRECISION": "bf16"})}


def test_fsdp1_optimizer_built_before_wrap_trains_only_with_use_orig_params(runs):
    fsdp1 = runs["plain"]["fsdp1"]
    assert fsdp1["False"] == {"weights_changed": False, "optimizer_tensors_got_grad": False}
    assert fsdp1["True"] == {"weights_changed": True, "optimizer_tensors_got_grad": True}
    doc = text(DSF)
    assert "the optimizer's tensors never get a `.grad` and `step()` changes nothing" in doc
    assert "the optimizer updates the weights the model uses" in doc


def test_plain_torchrun_ignores_the_config_file_and_reads_the_environment(runs):
    plain, bf16 = runs["plain"]["accelerator"], runs["bf16"]["accelerator"]
    # the file asks for fp16 and MULTI_GPU; under a torchrun-style launch neither is read
    assert plain == {"distributed_type": "MULTI_CPU", "mixed_precision": "no", "num_processes": 1}
    assert bf16["mixed_precision"] == "bf16" and bf16["distributed_type"] == "MULTI_CPU"
    doc = text(CFG)
    assert "never reads `default_config.yaml` or `--config_file`" in doc


def test_module_runs_python_dash_m_and_refuses_no_python(runs):
    mod = runs["plain"]["module"]
    assert mod["cmd_tail"] == ["PYTHON", "-m", "pkg.mod", "--x", "1"]
    assert mod["module_and_no_python"] == "--module and --no_python cannot be used together"
    doc = text(CMD)
    assert "the simple launcher runs `python -m SCRIPT`" in doc
    assert '| `--module` and `--no_python` | `ValueError` "--module and --no_python cannot be used together"' in doc


def test_save_state_hooks_on_the_non_deepspeed_path(runs):
    """Save hook: every prepared model and one state dict per model; popping one stops save_state writing
    it; load_state then still expects it unless a load hook removes that model from `models`."""
    hooks = runs["plain"]["save_hooks"]
    assert hooks["save"] == [2, 2, "OrderedDict"] and hooks["load"] == 2
    assert hooks["model_files"] == ["model.safetensors"]            # model_1's weights were popped
    assert hooks["load_error"].startswith("FileNotFoundError") and "pytorch_model_1.bin" in hooks["load_error"]


def test_frozen_half_module_outside_prepare_gets_no_autocast(runs):
    """bf16 mixed precision autocasts only prepared models' forward: a frozen bf16 helper fed fp32 fails
    (dtype mismatch) unless called under accelerator.autocast(); the prepared model returns fp32."""
    half = runs["bf16"]["frozen_half"]
    assert half["plain_call"].startswith("RuntimeError: mat1 and mat2 must have the same dtype")
    assert half["under_autocast"] == "torch.bfloat16" and half["prepared_output"] == "torch.float32"


def test_reentrant_frozen_input_under_ddp(runs):
    """ddp.md (frozen inputs): DDP over a reentrant-checkpointed LoRA block behind a frozen embedding. With
    find_unused_parameters=False the second iteration raises DDP's unfinished-reduction error; with True every
    step runs and the adapter never gets a gradient."""
    ddp = runs["plain"]["reentrant_frozen_ddp"]
    assert ddp["False"][0] == ["ok", False] and ddp["False"][1][0] == "error"
    assert ddp["False"][1][1].startswith("Expected to have finished reduction in the prior iteration")
    assert ddp["True"] == [["ok", False], ["ok", False]]
