"""The removed-keys, default-timeout and optimizer-defaults tables are what deepspeed 0.19.8 (torch 2.13.0,
accelerate 1.15.0, transformers 5.25.0) does: _ds_tables.py ran each removed key through DeepSpeedConfig,
read every layer's default process-group timeout with DEEPSPEED_TIMEOUT unset and 45, and read the optimizer
constructors' signatures, in child processes; the capture (ds_tables_capture.json) rendered must equal the
pages' blocks word for word. One live rerun (DEEPSPEED_TIMEOUT=45, about 3 s) must equal the capture."""
from __future__ import annotations

import sys
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "sub-skills" / "distributed-training-backends" / "scripts"))
import _generated_blocks as gb  # noqa: E402
import _ds_tables as gen  # noqa: E402
from backend_validator import deepspeed as D  # noqa: E402

SITE = Path(sysconfig.get_paths()["purelib"]) / "deepspeed"


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_pages_are_the_rendered_capture(data):
    gb.assert_page_is_rendered(gen.PAGES, gen.render(data))


def test_every_removed_key_is_refused_and_the_validator_knows_it(data):
    rows = data["unset"]["removed"]
    assert {r["key"] for r in rows if r["where"] == "top level"} == set(D.REMOVED_TOP_LEVEL)
    assert {r["key"] for r in rows if r["where"] == "zero_optimization"} == set(D.REMOVED_ZERO)
    assert all(r["raised"] == "DeepSpeedConfigError" for r in rows)
    msg = {r["key"]: r["message"] for r in rows}
    assert msg["elasticity"].startswith("Elastic training has been removed")
    assert "'fp16', 'bf16', or 'torch_autocast'" in msg["amp"]
    # no elastic agent either: the package is gone
    assert not (SITE / "elasticity").exists()
    # the launcher has no elastic flags either
    for flag, res in data["unset"]["launcher_flags"].items():
        assert res == f"SystemExit 2: unrecognized arguments: {flag}"


def test_triage_names_every_removed_key_refusal(data):
    """triage_log.py recognises each message the capture recorded (elasticity's has no issue link, and two
    others were unmatched before set 11)."""
    sys.path.insert(0, str(HERE.parents[1] / "sub-skills" / "failure-triage" / "scripts"))
    from triage import engine
    cat = engine.load_catalog()
    want = {"amp": "deepspeed-amp-section-removed", "elasticity": "deepspeed-elasticity-removed"}
    for r in data["unset"]["removed"]:
        res = engine.triage_text(f"deepspeed.runtime.config.DeepSpeedConfigError: {r['message']}\n", cat)
        assert res["root_cause"]["signature"] == want.get(r["key"], "deepspeed-removed-config-block"), r["key"]


def test_timeouts(data):
    t0, t45 = data["unset"]["timeouts"], data["45"]["timeouts"]
    assert t0["DEEPSPEED_TIMEOUT"] is None and t45["DEEPSPEED_TIMEOUT"] == "45"
    # minutes, default 10, and the init_distributed default is that value
    assert t0["deepspeed.constants.default_pg_timeout"] == t0["deepspeed.init_distributed(timeout=)"] == 600
    assert t45["deepspeed.constants.default_pg_timeout"] == t45["deepspeed.init_distributed(timeout=)"] == 2700
    for key in ("torch default_pg_timeout", "InitProcessGroupKwargs(backend=gloo)", "TrainingArguments.ddp_timeout"):
        assert t0[key] == t45[key] == 1800, key
    assert t0["InitProcessGroupKwargs(backend=nccl)"] == 600
    # read once at import: the default is bound when deepspeed.constants is imported
    src = (SITE / "constants.py").read_text(encoding="utf-8")
    assert 'default_pg_timeout = timedelta(minutes=int(os.getenv("DEEPSPEED_TIMEOUT", default=10)))' in src
    init = (SITE / "__init__.py").read_text(encoding="utf-8")
    assert "dist.init_distributed(dist_backend=dist_backend,\n                          distributed_port=distributed_port,\n                          dist_init_required=dist_init_required)" in init


def test_deepspeed_timeout_must_be_an_integer(monkeypatch):
    # deepspeed/constants.py imports only os and datetime: run the installed file itself with the variable set
    import runpy
    path = str(SITE / "constants.py")
    for value, minutes in (("45", 45), ("0", 0)):
        monkeypatch.setenv("DEEPSPEED_TIMEOUT", value)
        assert runpy.run_path(path)["default_pg_timeout"].total_seconds() == minutes * 60
    for bad in ("1.5", "90s"):
        monkeypatch.setenv("DEEPSPEED_TIMEOUT", bad)
        with pytest.raises(ValueError, match="invalid literal for int"):
            runpy.run_path(path)


def test_optimizer_defaults(data):
    opts = {o["class"]: dict(o["defaults"]) for o in data["unset"]["optimizers"]}
    assert set(opts) == {f"{m}.{n}" for m, n in gen.OPTIMIZERS}
    assert opts["deepspeed.ops.adam.DeepSpeedCPUAdam"]["adamw_mode"] == "True"
    assert opts["deepspeed.ops.adam.FusedAdam"]["adam_w_mode"] == "True"
    assert opts["torch.optim.Adam"]["decoupled_weight_decay"] == "False"
    assert opts["torch.optim.AdamW"]["weight_decay"] == "0.01"
    assert opts["deepspeed.ops.adam.DeepSpeedCPUAdam"]["weight_decay"] == "0"
    ams = data["unset"]["amsgrad"]
    assert ams == {"DeepSpeedCPUAdam": "RuntimeError: DeepSpeedCPUAdam does not support the AMSGrad variant.",
                   "FusedAdam": "RuntimeError: FusedAdam does not support the AMSGrad variant."}
    cpu_adam = (SITE / "ops" / "adam" / "cpu_adam.py").read_text(encoding="utf-8")
    assert "CPUAdam param is on {p.device} and must be 'cpu', make " in cpu_adam


def test_autotp_runs_with_every_zero_stage_and_checks_the_tp_batch(data):
    at = data["autotp"]
    assert set(at) == {c["id"] for c in gen.AUTOTP_CASES}
    for st in (0, 1, 2, 3):
        r = at[f"z{st} same batch"]
        assert r["zero_stage"] == st and r["step"] == "ok" and r["loss_finite"]
        # the layer is split over the 2 TP ranks; ZeRO's data-parallel group is world / autotp_size
        assert r["q_proj_local"] == [16, 32] and r["full_q_proj"] == [32, 32] and r["q_proj_type"] == "LinearLayer"
        assert r["tp_world"] == 2 and r["dp_world"] == 1
    # the batch check counts TP ranks as data-parallel: micro 2 x accumulation 1 x world 2 = 4, and 2 is refused
    assert all(at[f"z{st} same batch"]["train_batch_size"] == 4 for st in (0, 1, 2, 3))
    tb = at["z1 train_batch_size micro x dp"]
    assert tb["error"] == "AssertionError" and "2 != 2 * 1 * 2" in tb["message"]
    bad = at["z3 different batches"]
    assert bad["error"] == "AssertionError" and bad["message"].startswith("Data inconsistency within the TP group")
    engine = (SITE / "runtime" / "engine.py").read_text(encoding="utf-8")
    assert "AutoTP + ZeRO stage 3 is supported for both inference and training" in engine
    assert "self.first_dataloader_check.remove()" in engine   # the input check runs on the first forward only
    assert "# Tensor parallel priority: custom config > HF tp_plan > AutoTP" in engine


def test_live_probe_matches_the_capture(data):
    assert gen.run_probe("45") == data["45"]
