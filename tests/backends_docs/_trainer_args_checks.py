"""Generator for sub-skills/distributed-training-backends/references/transformers-trainer-args-checks.md
(transformers 5.25.0; set 9, s9-tr-e03): what `TrainingArguments(...)` accepts or raises for the
cross-field checks users hit (load_best_model_at_end with save/eval strategy and steps as integers,
ratios, mixed and float-precision pairs; save_strategy="best"; eval_strategy vs do_eval; ratio values of
warmup/logging/eval/save steps). Every case constructs TrainingArguments in-process (no Trainer, no
training, well under a second for all of them); the capture is committed and the test reruns it live.

usage: python tests/backends_docs/_trainer_args_checks.py render | write | capture
"""
from __future__ import annotations

import math
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "trainer_args_checks_capture.json"
REF = ROOT / "sub-skills" / "distributed-training-backends" / "references" / "transformers-trainer-args-checks.md"

BEST = dict(eval_strategy="steps", save_strategy="steps", load_best_model_at_end=True)
# (group, label, kwargs); every case adds report_to=[], use_cpu=True and a temporary output_dir
CASES = [
    ("best", "save_steps=500, eval_steps=100", dict(BEST, save_steps=500, eval_steps=100)),
    ("best", "save_steps=300, eval_steps=200", dict(BEST, save_steps=300, eval_steps=200)),
    ("best", "save_steps=100, eval_steps=100", dict(BEST, save_steps=100, eval_steps=100)),
    ("best", "save_steps=0.1, eval_steps=0.02", dict(BEST, save_steps=0.1, eval_steps=0.02)),
    ("best", "save_steps=0.3, eval_steps=0.1", dict(BEST, save_steps=0.3, eval_steps=0.1)),
    ("best", "save_steps=0.2, eval_steps=0.1", dict(BEST, save_steps=0.2, eval_steps=0.1)),
    ("best", "save_steps=0.1, eval_steps=0.03", dict(BEST, save_steps=0.1, eval_steps=0.03)),
    ("best", "save_steps=0.05, eval_steps=0.1", dict(BEST, save_steps=0.05, eval_steps=0.1)),
    ("best", "save_steps=100, eval_steps=0.02", dict(BEST, save_steps=100, eval_steps=0.02)),
    ("best", "save_steps=100, eval_steps=0.5", dict(BEST, save_steps=100, eval_steps=0.5)),
    ("best", "save_steps=0.5, eval_steps=100", dict(BEST, save_steps=0.5, eval_steps=100)),
    ("best", "save_steps=1.5, eval_steps=0.5", dict(BEST, save_steps=1.5, eval_steps=0.5)),
    ("best", "eval_steps unset, logging_steps=50, save_steps=100", dict(BEST, save_steps=100, logging_steps=50)),
    ("best", "eval_steps unset, logging_steps=30, save_steps=100", dict(BEST, save_steps=100, logging_steps=30)),
    ("best", "save_strategy='epoch', eval_strategy='steps'", dict(BEST, save_strategy="epoch")),
    ("best", "eval_strategy='no' (default), save_strategy='steps'", dict(load_best_model_at_end=True)),
    ("best", "save_strategy='best', eval_strategy='steps', save_steps=300, eval_steps=200",
     dict(BEST, save_strategy="best", save_steps=300, eval_steps=200)),
    ("best", "save_strategy='best', eval_strategy='epoch'", dict(BEST, save_strategy="best", eval_strategy="epoch")),
    ("best", "save_strategy='epoch', eval_strategy='epoch', save_steps=300, eval_steps=200",
     dict(BEST, save_strategy="epoch", eval_strategy="epoch", save_steps=300, eval_steps=200)),
    ("eval", "eval_strategy='steps', do_eval=False", dict(eval_strategy="steps", do_eval=False)),
    ("eval", "eval_strategy='no', do_eval=True", dict(do_eval=True)),
    ("eval", "eval_strategy='steps', eval_steps=0, logging_steps=0", dict(eval_strategy="steps", eval_steps=0, logging_steps=0)),
    ("eval", "lr_scheduler_type='reduce_lr_on_plateau', eval_strategy='no'", dict(lr_scheduler_type="reduce_lr_on_plateau")),
    ("ratio", "warmup_steps=0.1", dict(warmup_steps=0.1)),
    ("ratio", "warmup_steps=1.5", dict(warmup_steps=1.5)),
    ("ratio", "warmup_steps=-1", dict(warmup_steps=-1)),
    ("ratio", "warmup_ratio=0.1", dict(warmup_ratio=0.1)),
    ("ratio", "logging_steps=0.05", dict(logging_steps=0.05)),
    ("ratio", "logging_steps=2.5", dict(logging_steps=2.5)),
    ("ratio", "logging_steps=0 (logging_strategy='steps')", dict(logging_steps=0)),
    ("ratio", "save_steps=1.0", dict(save_steps=1.0)),
    ("ratio", "save_steps=2.0", dict(save_steps=2.0)),
]
TRAIN_STEPS = (1000, 1234)  # ratios turned into absolute steps by TrainerState.compute_steps
WARMUP_AT = 30  # get_warmup_steps(num_training_steps) shown for this many steps


def _fmt(v):
    if hasattr(v, "value"):
        return repr(v.value)
    return repr(v)


def probe() -> dict:
    from transformers import TrainerState, TrainingArguments, __version__
    from transformers.utils import logging as tlog

    # quiet only while the cases run: this probe also runs inside a pytest worker, whose later tests
    # (and the children they start from its environment) must see transformers' usual warnings
    before = tlog.get_verbosity()
    tlog.set_verbosity_error()
    try:
        return _run_cases(TrainerState, TrainingArguments, __version__)
    finally:
        tlog.set_verbosity(before)


def _run_cases(TrainerState, TrainingArguments, version) -> dict:
    import warnings

    out = {"versions": {"transformers": version}, "cases": []}
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for group, label, kw in CASES:
            try:
                a = TrainingArguments(os.path.join(tmp, "o"), report_to=[], use_cpu=True, **kw)
                res = ("accepted: save_steps=" + _fmt(a.save_steps) + ", eval_steps=" + _fmt(a.eval_steps)
                       + ", logging_steps=" + _fmt(a.logging_steps) + ", do_eval=" + _fmt(a.do_eval))
                if "warmup_steps" in kw:
                    res += f", get_warmup_steps({WARMUP_AT})={a.get_warmup_steps(WARMUP_AT)}"
                if a.load_best_model_at_end:
                    res += f", metric_for_best_model={a.metric_for_best_model!r}"
                    if a.save_strategy.value == a.eval_strategy.value == "steps" and min(a.save_steps, a.eval_steps) < 1:
                        for n in TRAIN_STEPS:  # TrainerState.compute_steps at train() start
                            st = TrainerState()
                            st.compute_steps(a, n)
                            res += f", at max_steps={n}: save_steps={st.save_steps} eval_steps={st.eval_steps}"
            except Exception as e:  # noqa: BLE001 (recorded)
                res = f"{type(e).__name__}: " + " ".join(str(e).split())
            out["cases"].append({"group": group, "case": label, "result": res})
    return out


GROUPS = {"best": "trainer args best-model checks", "eval": "trainer args eval checks",
          "ratio": "trainer args step values"}


def render(data) -> dict:
    blocks = {}
    for g, name in GROUPS.items():
        rows = ["| Arguments | `TrainingArguments(...)` |", "| --- | --- |"]
        for c in data["cases"]:
            if c["group"] == g:
                r = c["result"]
                cell = f"`` {r} ``" if not r.startswith("accepted") else r.replace("accepted: ", "accepted: `").replace(", ", "`, `") + "`"
                rows.append(f"| `{c['case']}` | {cell} |")
        blocks[name] = "\n".join(rows) + "\n"
    return blocks


def load_capture():
    return gb.load_json(CAPTURE)


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=REF, capture=CAPTURE, collect=probe, render=render,
           usage=__doc__)
