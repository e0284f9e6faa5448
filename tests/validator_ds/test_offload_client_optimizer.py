"""ds-offload-client-optimizer: optimizer offload at ZeRO stages 1-3 with no "optimizer" block
(deepspeed 0.19.8, accelerate 1.15.0).

Run on DeepSpeed's CPU accelerator with the oracle's setup (tests/oracle/deepspeed_oracle.py::_setup,
one process, gloo): ``deepspeed.initialize`` with a script's ``torch.optim.AdamW`` raises
ZeRORuntimeException at every stage 1-3 for offload_optimizer cpu, nvme and the legacy
``cpu_offload: true``, and accepts it with ``zero_force_ds_cpu_optimizer: false``. Accelerate
swaps a torch optimizer for DeepSpeedCPUAdam under the same offload (checked in its installed
source; building DeepSpeedCPUAdam needs a JIT-compiled op), so the rule is a warning for plain
DeepSpeed only.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from ds_support import run_with_client_optimizer, validate_json

RID = "ds-offload-client-optimizer"

def _cfg(stage, device="cpu", **top):
    oo = {"device": device}
    if device == "nvme":
        oo["nvme_path"] = "/tmp/ds_offload_client_optimizer_nvme"
    return {"train_batch_size": 1, "zero_optimization": {"stage": stage, "offload_optimizer": oo}, **top}


def _legacy(stage):
    return {"train_batch_size": 1, "zero_optimization": {"stage": stage, "cpu_offload": True}}


CASES = {**{f"s{s}-{d}": _cfg(s, d) for s in (1, 2, 3) for d in ("cpu", "nvme")},
         **{f"s{s}-legacy": _legacy(s) for s in (1, 2, 3)},
         **{f"s{s}-force-false": _cfg(s, zero_force_ds_cpu_optimizer=False) for s in (1, 2, 3)}}


def _hits(cfg, consumer):
    fs, _ = validate_json(json.dumps(cfg), consumer=consumer, world_size=1)
    return [(f.rule, f.severity) for f in fs if f.rule == RID]


def test_deepspeed_initialize_refuses_a_torch_optimizer_under_offload_at_stages_1_to_3():
    got = run_with_client_optimizer(CASES)
    assert set(got) == set(CASES)
    for name, res in got.items():
        stage = int(name[1])
        if name.endswith("force-false"):
            assert res == {"ok": True, "stage": stage, "cpu_optimizer_path": True, "optimizer": "AdamW"}, (name, res)
            assert _hits(CASES[name], "deepspeed") == [], name
        else:
            assert res["ok"] is False and res["error"] == "ZeRORuntimeException", (name, res)
            assert "ZeRO-Offload with a client provided optimizer" in res["message"], (name, res)
            # the validator warns for plain deepspeed exactly on these
            assert _hits(CASES[name], "deepspeed") == [(RID, "warning")], name


def test_validator_scope():
    base = _cfg(2)
    # Accelerate and the Trainer swap the torch optimizer: no finding (the legacy key is another rule)
    for consumer in ("accelerate", "transformers"):
        for cfg in (base, _cfg(3, "nvme"), _legacy(2)):
            assert _hits(cfg, consumer) == [], (consumer, cfg)
    # an optimizer block: DeepSpeed builds its own CPU optimizer
    assert _hits(dict(base, optimizer={"type": "AdamW", "params": {"lr": 1e-3}}), "deepspeed") == []
    # stage 0 belongs to ds-offload-ignored (an error there); no offload, nothing to say
    assert _hits(_cfg(0), "deepspeed") == []
    assert _hits(_cfg(2, "none"), "deepspeed") == []
    assert _hits({"train_batch_size": 1, "zero_optimization": {"stage": 2}}, "deepspeed") == []


def test_the_refusal_and_the_accelerate_swap_in_the_installed_source():
    ds = Path(importlib.util.find_spec("deepspeed").origin).parent
    engine = (ds / "runtime" / "engine.py").read_text(encoding="utf-8")
    body = engine.split("def _configure_optimizer(self, client_optimizer, model_parameters):", 1)[1]
    body = body.split("\n    def ", 1)[0]
    assert "self.zero_use_cpu_optimizer()" in body and "self.zero_force_ds_cpu_optimizer()" in body
    assert "deepspeed.ops.adam.DeepSpeedCPUAdam" in body and "deepspeed.ops.lion.DeepSpeedCPULion" in body
    assert "raise ZeRORuntimeException" in body
    acc = Path(importlib.util.find_spec("accelerate").origin).parent
    prep = (acc / "accelerator.py").read_text(encoding="utf-8").split("def _prepare_deepspeed(", 1)[1]
    prep = prep.split("\n    def ", 1)[0]
    assert 'get("offload_optimizer", {}).get(' in prep and 'get("zero_force_ds_cpu_optimizer", True)' in prep
    assert "optimizer = map_pytorch_optim_to_deepspeed(optimizer)" in prep
    swap = (acc / "utils" / "deepspeed.py").read_text(encoding="utf-8")
    swap = swap.split("def map_pytorch_optim_to_deepspeed(", 1)[1].split("\ndef ", 1)[0]
    assert "optimizer_class = DeepSpeedCPUAdam" in swap
