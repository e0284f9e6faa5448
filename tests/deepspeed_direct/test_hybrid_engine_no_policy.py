"""DeepSpeedHybridEngine (hybrid_engine.enabled, the DeepSpeed-Chat step-3 actor) around a model no DeepSpeed
inference policy matches, run live on DeepSpeed's CPU accelerator (gloo, 1 rank) by _hybrid_engine_probe.py
(~10 s). deepspeed 0.19.8, torch 2.13.0.

- no inference container is built and module.generate is left as the model's own: the engine's generate()
  wrapper, the only place that sets _total_batch_size, never runs, so the value stays None;
- 0.19.8 logs "No compatible DeepSpeed inference policy found ..." at initialize, and its eval() skips the
  samples/sec fields when _total_batch_size is None (DeepSpeed PR 4789, first in v0.12.5), so
  eval()/train()/eval() runs; the pre-fix expression on the same state raises the TypeError of
  DeepSpeedExamples issue 593, which the failure-triage catalog entry
  deepspeed-hybrid-engine-total-batch-size-none recognises in a pasted traceback.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _ds_matrix as m  # noqa: E402

PROBE = HERE / "_hybrid_engine_probe.py"
TRIAGE = HERE.parents[1] / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"


def test_hybrid_engine_without_policy_keeps_native_generate_and_eval_does_not_raise(tmp_path):
    p = subprocess.run([sys.executable, str(PROBE), str(tmp_path)], capture_output=True, text=True, timeout=300,
                       env=m._env(tmp_path / "ext", 0, 1, m._port()), cwd=tmp_path)
    r = m._result(p.stdout, p.stderr)
    assert r["engine"] == "DeepSpeedHybridEngine"
    assert r["inference_containers"] == 0
    assert r["generate_replaced"] is False                 # the model's own generate() runs
    assert r["warnings"] and r["warnings"][0].startswith(
        "No compatible DeepSpeed inference policy found for model type Tiny."), r["warnings"]
    assert "use the model's native generate() path" in r["warnings"][0]
    assert r["total_batch_size"] is None                   # only the engine's generate() wrapper sets it
    assert r["eval"] == "ok"                               # eval(), train(), eval(), ... all ran
    # from the second eval() on, rank 0 prints the metrics line, without the samples/sec fields
    assert len(r["metrics_lines"]) == 2, r["metrics_lines"]
    assert all("SamplesPerSec" not in ln for ln in r["metrics_lines"])
    assert all("|Generate time=0.00s (0.00%)" in ln for ln in r["metrics_lines"])   # the wrapper also times generate
    assert r["unguarded"] == "TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'"


def test_pre_fix_traceback_is_triaged_to_the_hybrid_engine_entry(tmp_path):
    """The traceback of DeepSpeedExamples issue 593 (deepspeed <= 0.12.4): the exception line alone is a generic
    TypeError; the source line under the hybrid_engine.py frame names the entry."""
    log = tmp_path / "rank0.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/app/step3_rlhf_finetuning/ppo_trainer.py", line 97, in generate_experience\n'
        "    self.eval()\n"
        '  File "/app/step3_rlhf_finetuning/ppo_trainer.py", line 237, in eval\n'
        "    self.actor_model.eval()\n"
        '  File "/usr/lib/python3.10/site-packages/deepspeed/runtime/hybrid_engine.py", line 379, in eval\n'
        "    f'|CurSamplesPerSec={(1 / latency * self._total_batch_size):.2f} ' + \\\n"
        "TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'\n")
    out = subprocess.run([sys.executable, str(TRIAGE), "--output", "json", str(log)], capture_output=True, text=True)
    root = json.loads(out.stdout)["root_cause"]
    assert root["signature"] == "deepspeed-hybrid-engine-total-batch-size-none", out.stdout
