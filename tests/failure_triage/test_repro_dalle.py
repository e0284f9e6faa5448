"""DALLE-pytorch 1.6.6 failures reproduced for real on CPU (scenarios_dalle.py, one child process).

The package is installed without its dependencies; the child replaces only the missing
third-party imports with empty stand-ins, so each message comes from DALLE-pytorch's own code,
torch 2.13.0 or deepspeed 0.19.8. If a message changes, the matching test fails.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

EXPECTED = {
    "dalle_import_without_pkg_resources": "dalle-pkg-resources-missing",
    "dalle_unknown_backend": "dalle-unknown-distributed-backend",
    "dalle_horovod_not_installed": "dalle-backend-module-missing",
    "dalle_backend_not_set": "dalle-backend-not-set",
    "dalle_backend_require_init": "dalle-backend-require-init-nameerror",
    "dalle_torch_distributed_not_initialized": "dalle-torch-distributed-not-initialized",
    "dalle_image_size_not_power_of_2": "dalle-image-size-power-of-2",
    "dalle_openai_vae_needs_old_torch": "dalle-openai-vae-needs-old-torch",
    "dalle_reduce_lr_on_plateau_verbose": "dalle-reduce-lr-on-plateau-verbose",
    "dalle_sparse_attention_removed": "dalle-sparse-attention-module-removed",
    "dalle_deepspeed_amp_key": "deepspeed-amp-section-removed",
}


@pytest.fixture(scope="module")
def scenario_output(tmp_path_factory):
    work = tmp_path_factory.mktemp("dalle_scenarios")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    env.pop("CI", None)
    r = subprocess.run([sys.executable, str(HERE / "scenarios_dalle.py")], capture_output=True, text=True,
                       timeout=600, env=env, cwd=work)
    assert r.returncode == 0, r.stderr[-3000:]
    blocks = {}
    for chunk in r.stdout.split("=== SCENARIO ")[1:]:
        name, _, body = chunk.partition("\n")
        blocks[name.strip()] = body.split("=== END")[0]
    return blocks


def test_every_scenario_has_an_expectation(scenario_output):
    assert set(scenario_output) == set(EXPECTED)


@pytest.mark.parametrize("name,sig", [pytest.param(n, s, marks=pytest.mark.reproduces(s), id=n)
                                      for n, s in EXPECTED.items()])
def test_scenario_is_triaged_to_its_entry(scenario_output, triage, catalog, name, sig):
    text = scenario_output[name]
    assert "Traceback (most recent call last)" in text, f"{name} did not fail:\n{text[-800:]}"
    root = triage.triage_text(text, catalog)["root_cause"]
    assert root is not None and root["signature"] == sig, (root, text[-1500:])
    assert not text.splitlines()[root["line"] - 1].startswith(" ")
