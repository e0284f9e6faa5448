"""Accelerate failures reproduced for real on CPU; the catalog must map the printed text to its entry.

One child process (scenarios_accelerate.py) triggers every in-process scenario and prints each
traceback exactly as Python does; two real `accelerate launch` runs add the launcher's own output
(the child's traceback, then CalledProcessError; and a two-rank gloo run that loses rank 1).
If accelerate changes a message, the matching test fails.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PY = sys.executable
ACCELERATE = str(Path(PY).with_name("accelerate"))

# scenario function name -> catalog id it must be triaged to
EXPECTED = {
    "accelerate_unknown_mixed_precision": "accelerate-unknown-mixed-precision",
    "accelerate_fp8_recipe_without_fp8": "accelerate-fp8-recipe-without-fp8",
    "accelerate_fp8_no_backend": "accelerate-fp8-needs-backend",
    "accelerate_grad_accum_twice": "accelerate-grad-accum-steps-and-plugin",
    "accelerate_kwargs_handler_twice": "accelerate-kwargs-handler-twice",
    "accelerate_state_changed_after_init": "accelerate-state-already-initialized",
    "accelerate_state_without_accelerator": "accelerate-state-before-accelerator",
    "accelerate_dynamo_twice": "accelerate-dynamo-plugin-and-backend",
    "transformers_old_trainer_new_accelerate": "transformers-accelerate-too-new-dispatch-batches",
    "accelerate_load_state_missing_dir": "accelerate-load-state-missing-dir",
    "accelerate_load_state_no_dir": "accelerate-load-state-no-dir",
    "accelerate_save_state_exists": "accelerate-save-state-dir-exists",
    "accelerate_register_without_state_dict": "accelerate-register-without-state-dict",
    "accelerate_custom_checkpoint_count": "accelerate-custom-checkpoint-count",
    "accelerate_save_model_meta": "accelerate-save-model-meta-device",
    "accelerate_split_batches_not_divisible": "accelerate-split-batches-not-divisible",
    "accelerate_fsdp2_local_state_dict": "accelerate-fsdp2-local-state-dict",
    "accelerate_deepspeed_no_zero_section": "accelerate-deepspeed-no-zero-section",
    "accelerate_deepspeed_mixed_precision_conflict": "accelerate-deepspeed-mixed-precision-conflict",
    "accelerate_deepspeed_config_mismatch": "accelerate-deepspeed-config-mismatch",
    "accelerate_deepspeed_auto_unresolved": "accelerate-deepspeed-auto-not-resolved",
    "accelerate_deepspeed_file_and_accelerate_keys": "accelerate-deepspeed-config-file-and-accelerate-keys",
    "accelerate_hf_deepspeed_config_missing_file": "accelerate-hf-deepspeed-config-path",
    "accelerate_launch_config_missing": "accelerate-launch-config-file-missing",
    "accelerate_launch_config_unknown_keys": "accelerate-launch-config-unknown-keys",
    "accelerate_launch_config_no_distributed_type": "accelerate-launch-config-no-distributed-type",
    "accelerate_launch_multi_gpu_one_process": "accelerate-launch-multi-gpu-one-process",
    "accelerate_launch_two_modes": "accelerate-launch-conflicting-modes",
    "accelerate_launch_fp8_unavailable": "accelerate-launch-fp8-unavailable",
    "accelerate_launch_unknown_mixed_precision": "accelerate-launch-unknown-mixed-precision",
    "accelerate_launch_module_and_no_python": "accelerate-launch-module-no-python",
    "accelerate_launch_port_in_use_multinode": "accelerate-launch-port-in-use",
    "accelerate_launch_ram_efficient_without_sync": "accelerate-fsdp-ram-efficient-needs-sync",
}


def _env():
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", ACCELERATE_DISABLE_RICH="1", OMP_NUM_THREADS="1",
               HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore")
    env.pop("CI", None)
    return env


@pytest.fixture(scope="module")
def scenario_output(tmp_path_factory):
    work = tmp_path_factory.mktemp("acc_scenarios")
    r = subprocess.run([PY, str(HERE / "scenarios_accelerate.py"), str(work)], capture_output=True, text=True,
                       timeout=600, env=_env(), cwd=work)
    assert r.returncode == 0, r.stderr[-3000:]
    blocks = {}
    for chunk in r.stdout.split("=== SCENARIO ")[1:]:
        name, _, body = chunk.partition("\n")
        blocks[name.strip()] = body.split("=== END")[0]
    return blocks


def test_every_scenario_has_an_expectation(scenario_output):
    assert set(scenario_output) == set(EXPECTED)


def _params():
    return [pytest.param(name, sig, marks=pytest.mark.reproduces(sig), id=name) for name, sig in EXPECTED.items()]


@pytest.mark.parametrize("name,sig", _params())
def test_scenario_is_triaged_to_its_entry(scenario_output, triage, catalog, name, sig):
    text = scenario_output[name]
    assert "Traceback (most recent call last)" in text, f"{name} did not fail:\n{text[-800:]}"
    result = triage.triage_text(text, catalog)
    root = result["root_cause"]
    assert root is not None and root["signature"] == sig, (root, text[-1500:])
    # the root line is the exception line that ends a traceback, not a frame or the raise statement
    assert not text.splitlines()[root["line"] - 1].startswith(" ")


# --------------------------------------------------------------------------- real accelerate launch runs

FAILING = textwrap.dedent("""\
    import os, signal
    import torch
    from accelerate import Accelerator
    acc = Accelerator()
    mode = os.environ.get("FAIL_MODE", "load_state")
    if mode == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "gather_shapes":
        acc.gather(torch.zeros(acc.process_index + 1))
    if acc.process_index == int(os.environ.get("FAIL_RANK", "0")):
        acc.load_state("no_such_checkpoint_dir")
    acc.wait_for_everyone()
    """)


def _launch(tmp_path, args, extra_env=None, timeout=300):
    script = tmp_path / "train_fail.py"
    script.write_text(FAILING)
    env = _env()
    env.update(extra_env or {})
    r = subprocess.run([ACCELERATE, "launch", *args, str(script)], capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=tmp_path)
    return r


@pytest.mark.reproduces("accelerate-load-state-missing-dir", "accelerate-launch-child-failed",
                        "accelerate-launch-defaults-used-warning")
def test_simple_launcher_child_error_then_called_process_error(tmp_path, triage, catalog):
    r = _launch(tmp_path, ["--cpu", "--num_processes", "1"])
    assert r.returncode != 0
    log = r.stdout + r.stderr
    res = triage.triage_text(log, catalog)
    assert res["root_cause"]["signature"] == "accelerate-load-state-missing-dir", log[-2000:]
    roles = {(f["signature"], f["role"]) for f in res["findings"]}
    assert ("accelerate-launch-child-failed", "cascade") in roles, res["findings"]
    assert ("accelerate-launch-defaults-used-warning", "warning") in roles, res["findings"]
    # the cascade comes after the root cause in the log
    casc = [f["line"] for f in res["findings"] if f["signature"] == "accelerate-launch-child-failed"]
    assert min(casc) > res["root_cause"]["line"]


@pytest.mark.reproduces("accelerate-launch-child-killed")
def test_simple_launcher_child_killed(tmp_path, triage, catalog):
    r = _launch(tmp_path, ["--cpu", "--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no",
                           "--dynamo_backend", "no"], extra_env={"FAIL_MODE": "sigkill"})
    assert r.returncode != 0
    log = r.stdout + r.stderr
    res = triage.triage_text(log, catalog)
    assert res["root_cause"]["signature"] == "accelerate-launch-child-killed", log[-2000:]


@pytest.mark.reproduces("accelerate-operation-shape-mismatch")
def test_debug_mode_gather_of_different_shapes(tmp_path, triage, catalog):
    r = _launch(tmp_path, ["--multi_gpu", "--num_processes", "2", "--num_machines", "1", "--debug",
                           "--main_process_port", "0", "--mixed_precision", "no", "--dynamo_backend", "no"],
                extra_env={"ACCELERATE_USE_CPU": "1", "FAIL_MODE": "gather_shapes"})
    assert r.returncode != 0
    log = r.stdout + r.stderr
    res = triage.triage_text(log, catalog)
    assert res["root_cause"]["signature"] == "accelerate-operation-shape-mismatch", log[-3000:]


@pytest.mark.reproduces("accelerate-load-state-missing-dir", "accelerate-launch-port-in-use-warning")
def test_two_rank_gloo_run_root_is_the_failing_rank(tmp_path, triage, catalog):
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = str(busy.getsockname()[1])
    try:
        r = _launch(tmp_path, ["--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                               "--main_process_port", port, "--mixed_precision", "no", "--dynamo_backend", "no"],
                    extra_env={"ACCELERATE_USE_CPU": "1", "FAIL_RANK": "1", "PYTHONWARNINGS": "default"})
    finally:
        busy.close()
    assert r.returncode != 0
    log = r.stdout + r.stderr
    res = triage.triage_text(log, catalog)
    root = res["root_cause"]
    assert root["signature"] == "accelerate-load-state-missing-dir", log[-3000:]
    assert root["rank"] in (1, None), root
    assert any(f["signature"] == "accelerate-launch-port-in-use-warning" and f["role"] == "warning"
               for f in res["findings"]), res["findings"]
    # the same text through the CLI gives exit 0 and the same root line
    cli = subprocess.run([PY, str(REPO / "sub-skills/failure-triage/scripts/triage_log.py"), "--output", "json", "-"],
                         input=log, capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0, cli.stderr
    import json
    assert json.loads(cli.stdout)["root_cause"]["line"] == root["line"]
