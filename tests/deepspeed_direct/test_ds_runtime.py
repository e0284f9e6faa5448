"""Run-time behaviours of deepspeed 0.19.8 that deepspeed-engine-runtime.md states, run live on DeepSpeed's CPU
accelerator (gloo) by _ds_runtime_probe.py (~40 s in all, the four pipeline runs in parallel):

- the plain DeepSpeedEngine writes no training loss to the monitor (csv_monitor: only Train_Samples_lr.csv),
  and engine.backward returns the loss divided by gradient_accumulation_steps;
- bf16 casts every floating parameter to bf16, whatever data_types.keep_in_fp32_modules names (it keeps only
  buffers: it holds a listed buffer in fp32 against data_types.buffer_dtype, and upcasts a listed buffer
  that arrives in bf16, with or without buffer_dtype); an fp32 router works with weight.float() or under
  the torch_autocast section, where parameters stay fp32;
- PipelineEngine caches the first micro-batch's activation shape: an eval batch of another size crashes the
  receiving stage (gloo "Received data size doesn't match expected size"), also with num_micro_batches; a
  smaller one runs without an error and gives a wrong eval loss;
  reset_activation_shape() around eval or PipelineModule(dynamic_shape=True) fixes it.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _ds_matrix as m  # noqa: E402

PROBE = HERE / "_ds_runtime_probe.py"


def _one(mode, work):
    p = subprocess.run([sys.executable, str(PROBE), mode, str(work)], capture_output=True, text=True, timeout=300,
                       env=m._env(m.EXT, 0, 1, m._port()), cwd=work)
    return m._result(p.stdout, p.stderr)


def test_plain_engine_monitor_has_no_loss(tmp_path):
    r = _one("monitor", tmp_path)
    assert r["csv_files"] == ["job/Train_Samples_lr.csv"]
    assert r["returned_over_loss"] == [0.5, 0.5, 0.5, 0.5]      # GAS 2: backward returns loss / 2
    assert r["has_losses_attr_value"] is None


def test_zero2_offload_unused_parameter_asserts_only_when_not_ignored(tmp_path):
    """failure-triage catalog deepspeed-zero-offload-unused-parameters: the default (true) steps; false asserts."""
    r = _one("unused", tmp_path)
    assert r["true"] == "ok"
    assert r["false"].startswith("AssertionError: This assert indicates that your module has parameters that were not "
                                 "used in producing loss."), r["false"]
    assert "enable ignore_unused_parameters option in zero_optimization config" in r["false"]
    triage = HERE.parents[1] / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
    log = tmp_path / "rank0.log"
    log.write_text("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n    engine.step()\n"
                   + r["false"] + "\n")
    out = subprocess.run([sys.executable, str(triage), "--output", "json", str(log)], capture_output=True, text=True)
    assert json.loads(out.stdout)["root_cause"]["signature"] == "deepspeed-zero-offload-unused-parameters", out.stdout


def test_bf16_casts_every_parameter(tmp_path):
    r = _one("cast", tmp_path)
    mismatch = "expected m1 and m2 to have the same dtype"
    for name in ("bf16", "bf16 keep list", "bf16 buffer_dtype bf16", "bf16 buffer_dtype bf16 keep list"):
        row = r[name]
        assert {row[k] for k in ("proj.weight", "router.weight", "router_weight")} == {"torch.bfloat16"}, name
        assert mismatch in row["fp32 router forward"], name
    # buffers follow buffer_dtype (default None: left as loaded); the keep list holds a listed buffer in fp32
    assert r["bf16"]["e_score_correction_bias"] == "torch.float32"
    assert r["bf16 buffer_dtype bf16"]["e_score_correction_bias"] == "torch.bfloat16"
    assert r["bf16 buffer_dtype bf16 keep list"]["e_score_correction_bias"] == "torch.float32"
    # without buffer_dtype the list still acts: a listed buffer that arrives in bf16 is upcast to fp32
    assert r["bf16 buffer arrives bf16"]["e_score_correction_bias"] == "torch.bfloat16"
    assert r["bf16 buffer arrives bf16 keep list"]["e_score_correction_bias"] == "torch.float32"
    assert r["bf16 weight.float()"]["fp32 router forward"] == "ok"
    auto = r["torch_autocast"]
    assert {auto[k] for k in ("proj.weight", "router.weight", "router_weight")} == {"torch.float32"}
    assert auto["fp32 router forward"] == "ok"


def _pipe_all(tmp_path):
    procs = {}
    for v in ("static", "num_micro_batches", "reset", "dynamic", "static_small", "dynamic_small"):
        work = tmp_path / v
        work.mkdir()
        port = m._port()
        procs[v] = [subprocess.Popen([sys.executable, str(PROBE), "pipe", str(work), v], stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=m._env(m.EXT, rk, 2, port), cwd=work)
                    for rk in range(2)]
    out = {}
    for v, ps in procs.items():
        res = []
        for o, e, rc in m.communicate_all(ps):
            lines = [ln for ln in o.splitlines() if ln.startswith("RESULT ")]
            res.append({"result": json.loads(lines[-1][7:]) if lines else None, "rc": rc, "stderr": e})
        out[v] = res
    return out


def test_pipeline_eval_batch_size(tmp_path):
    out = _pipe_all(tmp_path)
    for v in ("static", "num_micro_batches"):
        s0, s1 = out[v]
        assert s1["rc"] != 0 and s1["result"] is None, v                      # the receiving stage aborts
        assert "Received data size doesn't match expected size" in s1["stderr"], v
        assert s0["result"]["sent_shapes"][-1] == [8, 16] and "error" in s0["result"], v   # the sender fails too
    for v in ("reset", "dynamic"):
        for s in out[v]:
            assert s["rc"] == 0 and s["result"]["eval"] == "ok" and s["result"]["train_after_eval"] == "ok", v
        assert out[v][0]["result"]["sent_shapes"] == [[2, 16]] * 2 + [[8, 16]] * 2 + [[2, 16]] * 2, v
    # a smaller eval batch (1 after micro-batch 2) does not abort: the last stage evaluates the old-size
    # buffer (the new rows plus stale ones), so the eval loss differs from the dynamic_shape run's, silently
    for v in ("static_small", "dynamic_small"):
        for s in out[v]:
            assert s["rc"] == 0 and s["result"]["eval"] == "ok" and s["result"]["train_after_eval"] == "ok", v
    assert abs(out["static_small"][1]["result"]["eval_loss"] - out["dynamic_small"][1]["result"]["eval_loss"]) > 1e-3
