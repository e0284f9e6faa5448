"""A TrainingArguments subclass that defaults `bf16` to `not fp16` (TRL's configs since trl v0.19.0:
`self.bf16 = not (self.fp16) if self.bf16 is None else self.bf16` before `super().__post_init__()`)
turns a run with no precision flag into `mixed_precision="bf16"`, which `DeepSpeedPlugin.set_mixed_precision`
(called by AcceleratorState when the Trainer builds its Accelerator) refuses against a DeepSpeed config
with `fp16.enabled: true`. trl is not installed: the subclass below carries the same line (cited in the
ledger from the trl repository). One child, DS_ACCELERATOR=cpu, no launcher variables.
Backs mixed-precision-sources.md step 0 and its symptom row (set-23 miss s23-K3-08)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

CHILD = textwrap.dedent('''
    import dataclasses, json, sys
    from typing import Optional
    from transformers import TrainingArguments

    @dataclasses.dataclass
    class TrlLikeConfig(TrainingArguments):
        bf16: Optional[bool] = dataclasses.field(default=None)
        def __post_init__(self):
            self.bf16 = not (self.fp16) if self.bf16 is None else self.bf16
            super().__post_init__()

    def ds(fp16_enabled):
        return {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto",
                "fp16": {"enabled": fp16_enabled}}

    out = {}
    cases = {"subclass, no flag, fp16 true": (TrlLikeConfig, {}, True),
             "subclass, fp16=True, fp16 true": (TrlLikeConfig, {"fp16": True}, True),
             "subclass, bf16=False, fp16 true": (TrlLikeConfig, {"bf16": False}, True),
             "subclass, no flag, fp16 auto": (TrlLikeConfig, {}, "auto"),
             "plain TrainingArguments, no flag, fp16 true": (TrainingArguments, {}, True)}
    for name, (cls, kw, en) in cases.items():
        a = cls(output_dir=sys.argv[1], deepspeed=ds(en), use_cpu=True, report_to=[], **kw)
        row = {"bf16": a.bf16, "fp16": a.fp16, "mixed_precision": a.mixed_precision}
        try:
            a.deepspeed_plugin.set_mixed_precision(a.mixed_precision)
            row["error"] = None
        except ValueError as e:
            row["error"] = str(e)
        out[name] = row
    print("RESULT " + json.dumps(out))
    sys.stdout.flush()
''')


@pytest.fixture(scope="module")
def rows():
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    env["DS_ACCELERATOR"] = "cpu"
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([sys.executable, "-c", CHILD, d], env=env, capture_output=True, text=True, timeout=120)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert line, p.stdout[-2000:] + p.stderr[-4000:]
    return json.loads(line[-1][len("RESULT "):])


def test_subclass_default_makes_bf16_and_clashes_with_fp16_json(rows):
    r = rows["subclass, no flag, fp16 true"]
    assert (r["bf16"], r["fp16"], r["mixed_precision"]) == (True, False, "bf16")
    assert r["error"] == ("`--mixed_precision` arg cannot be set to `bf16` when `fp16` is set in the "
                          "DeepSpeed config file.")


def test_plain_training_arguments_has_no_bf16_default(rows):
    r = rows["plain TrainingArguments, no flag, fp16 true"]
    assert (r["bf16"], r["mixed_precision"], r["error"]) == (False, "no", None)


def test_fp16_flag_or_bf16_false_or_auto_resolves(rows):
    assert rows["subclass, fp16=True, fp16 true"]["bf16"] is False
    assert rows["subclass, fp16=True, fp16 true"]["mixed_precision"] == "fp16"
    assert rows["subclass, fp16=True, fp16 true"]["error"] is None
    assert rows["subclass, bf16=False, fp16 true"]["mixed_precision"] == "no"
    assert rows["subclass, bf16=False, fp16 true"]["error"] is None
    assert rows["subclass, no flag, fp16 auto"]["mixed_precision"] == "bf16"
    assert rows["subclass, no flag, fp16 auto"]["error"] is None
