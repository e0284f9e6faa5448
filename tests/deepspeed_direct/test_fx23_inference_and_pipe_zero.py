"""deepspeed 0.19.8 on DeepSpeed's CPU accelerator (gloo, 2 ranks; probe _fx23_ds_probe.py;
the four 2-rank runs in parallel, ~20 s), set-22 misses
s22-K8-04 and s22-K8-02. Backs zero3-parameters.md ("ZeRO-Inference is `initialize`, not `init_inference`")
and deepspeed-pipeline.md ("What the engine runs"):

- init_inference(config={"zero": {"stage": 3, ...}}) parses the zero section into DeepSpeedInferenceConfig
  and leaves every parameter whole (no ds_id); InferenceEngine never reads it. deepspeed.initialize with
  ZeRO-3 and no optimizer partitions the same model (DeepSpeedZeRoOffload, local numel 0).
- a model not built under zero.Init is moved whole to the device before partitioning (source check).
- PipelineEngine refuses ZeRO-2 and ZeRO-3 with an AssertionError; ZeRO-1 trains a batch.
- TrainSchedule is non-interleaved 1F1B with p2p send/recv and the tied/data-parallel gradient reduction and
  optimizer step only after the last micro-batch (the instruction stream, no processes needed).
"""
from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _ds_matrix as m  # noqa: E402

PROBE = HERE / "_fx23_ds_probe.py"


def _start(work, *args):
    work.mkdir()
    port = m._port()
    return [subprocess.Popen([sys.executable, str(PROBE), args[0], str(work), *args[1:]], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=m._env(m.EXT, rk, 2, port), cwd=work)
            for rk in range(2)]


def _collect(ps):
    return [m._result(o, e) for o, e, _ in m.communicate_all(ps)]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fx23ds")
    procs = {"inference": _start(tmp / "inf", "inference"),
             **{f"pipe{s}": _start(tmp / f"pipe{s}", "pipe", str(s)) for s in (1, 2, 3)}}
    return {k: _collect(ps) for k, ps in procs.items()}


def test_init_inference_parses_zero_but_keeps_parameters_whole(runs):
    for r in runs["inference"]:
        assert r["inference_config_zero_stage"] == 3
        assert r["inference_numel"] == [512, 32, 128, 4]
        assert r["inference_ds_id"] is False
        assert r["inference_forward_shape"] == [2, 4]


def test_inference_engine_never_reads_the_zero_field():
    from deepspeed.inference import engine
    src = inspect.getsource(engine)
    assert "zero" not in src.replace("zero_", "").lower().replace("nonzero", "")


def test_initialize_zero3_without_optimizer_partitions(runs):
    for r in runs["inference"]:
        assert r["initialize_optimizer"] == "DeepSpeedZeRoOffload"
        assert r["initialize_numel"] == [0, 0, 0, 0]
        assert r["initialize_ds_numel"] == [512, 32, 128, 4]


def test_model_not_built_under_zero_init_moves_whole_to_device():
    from deepspeed.runtime.engine import DeepSpeedEngine
    src = inspect.getsource(DeepSpeedEngine._configure_distributed_model)
    assert 'hasattr(param, "ds_id")' in src
    assert "if not (self.dont_change_device or is_zero_init_model):" in src
    assert "self.module.to(self.device)" in src


def test_pipeline_engine_refuses_zero2_and_zero3(runs):
    for s in (2, 3):
        for r in runs[f"pipe{s}"]:
            assert r["error"] == "AssertionError: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", r


def test_pipeline_engine_trains_with_zero1(runs):
    for r in runs["pipe1"]:
        assert r.get("train_batch") == "ok", r
        assert r["engine"] == "PipelineEngine"


def _names(stage_id):
    from deepspeed.runtime.pipe import schedule
    return [[type(c).__name__ for c in cmds]
            for cmds in schedule.TrainSchedule(micro_batches=4, stages=2, stage_id=stage_id).steps()]


def test_train_schedule_is_1f1b_with_reduction_at_the_end():
    for sid in (0, 1):
        steps = _names(sid)
        compute = [c for cmds in steps for c in cmds if c in ("ForwardPass", "BackwardPass")]
        # warm-up forwards = stages - stage_id, then one forward / one backward alternating, then cool-down
        warm = 2 - sid
        assert compute[:warm] == ["ForwardPass"] * warm
        assert compute.count("ForwardPass") == compute.count("BackwardPass") == 4
        flat = [c for cmds in steps for c in cmds]
        assert flat[-3:] == ["ReduceTiedGrads", "ReduceGrads", "OptimizerStep"]
        assert flat.count("ReduceGrads") == 1 and flat.count("OptimizerStep") == 1
    s0 = {c for cmds in _names(0) for c in cmds}
    s1 = {c for cmds in _names(1) for c in cmds}
    assert {"SendActivation", "RecvGrad"} <= s0 and not {"RecvActivation", "SendGrad"} & s0
    assert {"RecvActivation", "SendGrad"} <= s1 and not {"SendActivation", "RecvGrad"} & s1


def test_default_pipeline_engine_uses_train_schedule_dualpipev_is_opt_in():
    import deepspeed
    from deepspeed.runtime.pipe import engine, dualpipev
    assert "schedule.TrainSchedule(" in inspect.getsource(engine.PipelineEngine._train_schedule)
    assert "DualPipeVSchedule(" in inspect.getsource(dualpipev.DualPipeVEngine._train_schedule)
    assert "DualPipeVEngine if isinstance(model, DualPipeVModule) else PipelineEngine" in \
        inspect.getsource(deepspeed.initialize)
