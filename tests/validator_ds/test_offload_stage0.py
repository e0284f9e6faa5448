"""ds-offload-ignored at ZeRO stage 0: offload_optimizer is not ignored there (deepspeed 0.19.8).

The engine picks its CPU-optimizer path from offload_optimizer.device alone
(DeepSpeedEngine.zero_use_cpu_optimizer), whatever the stage. Run here on DeepSpeed's CPU
accelerator with the oracle's setup (tests/oracle/deepspeed_oracle.py::_setup, one process):
a torch optimizer from the script is refused at deepspeed.initialize, and with
zero_force_ds_cpu_optimizer false it runs unchanged (the offload is unused). The GPU half of
the claim (DeepSpeed's CPU Adam asserts at its first step that the parameters are on 'cpu',
which stage 0 never arranges) is checked in the installed source: on this CPU machine the
parameters are on the CPU anyway, and no GPU is lent to these tests.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ds_support import run_with_client_optimizer, validate_json


BASE = {"train_batch_size": 1, "zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}}

def _errors(cfg, consumer="deepspeed"):
    fs, _ = validate_json(json.dumps(cfg), consumer=consumer, world_size=1)
    return [(f.rule, f.severity) for f in fs if f.rule in ("ds-offload-ignored",)]


def test_validator_verdicts_at_stage_0():
    with_opt = dict(BASE, optimizer={"type": "AdamW", "params": {"lr": 1e-3}})
    assert _errors(BASE) == [("ds-offload-ignored", "error")]
    assert _errors(with_opt) == [("ds-offload-ignored", "error")]
    assert _errors(with_opt, "accelerate") == [("ds-offload-ignored", "error")]
    # only when DeepSpeed takes the script's optimizer as it is is the offload merely unused
    assert _errors(dict(BASE, zero_force_ds_cpu_optimizer=False)) == [("ds-offload-ignored", "warning")]
    assert _errors(dict(with_opt, zero_force_ds_cpu_optimizer=False)) == [("ds-offload-ignored", "error")]
    # stage 1 offloads for real: nothing to say
    assert _errors(dict(BASE, zero_optimization={"stage": 1, "offload_optimizer": {"device": "cpu"}})) == []


def test_deepspeed_takes_the_cpu_optimizer_path_at_stage_0():
    cfgs = {"offload": BASE, "offload-force-false": dict(BASE, zero_force_ds_cpu_optimizer=False),
            "no-offload": {"train_batch_size": 1, "zero_optimization": {"stage": 0}}}
    got = run_with_client_optimizer(cfgs)
    # not ignored: the script's torch optimizer is refused because of the stage-0 offload block
    assert got["offload"]["ok"] is False and got["offload"]["error"] == "ZeRORuntimeException", got
    assert "ZeRO-Offload with a client provided optimizer" in got["offload"]["message"]
    # zero_force_ds_cpu_optimizer false: DeepSpeed keeps the torch optimizer, on the CPU-optimizer path
    # (zero_use_cpu_optimizer is True at stage 0), and nothing is offloaded: the warning case
    assert got["offload-force-false"] == {"ok": True, "cpu_optimizer_path": True, "stage": 0,
                                          "optimizer": "AdamW"}, got
    assert got["no-offload"]["ok"] is True and got["no-offload"]["cpu_optimizer_path"] is False, got


def test_cpu_adam_needs_parameters_on_the_cpu_in_the_installed_source():
    root = Path(importlib.util.find_spec("deepspeed").origin).parent
    cpu_adam = (root / "ops" / "adam" / "cpu_adam.py").read_text(encoding="utf-8")
    assert "device = torch.device('cpu')" in cpu_adam and "assert p.device == device" in cpu_adam
    engine = (root / "runtime" / "engine.py").read_text(encoding="utf-8")
    body = engine.split("def zero_use_cpu_optimizer(self):", 1)[1].split("\n    def ", 1)[0]
    assert "offload_optimizer.device in [OffloadDeviceEnum.cpu, OffloadDeviceEnum.nvme]" in body
    assert "stage" not in body  # the stage plays no part in the choice
