"""Generator for sub-skills/distributed-training-backends/references/transformers-trainer-state.md
(transformers 5.25.0, torch 2.13.0, CPU, one process; set 7, s7-ck-01 / s7-ck-02).

One child process (this file with `probe`) runs tiny Trainer jobs (a 2->1 Linear model, 4 samples, batch 2,
eval every step, a scripted `compute_metrics` score, greater_is_better=True) and records, after every
save (an `on_save` callback), the best-checkpoint fields and the checkpoint folders on disk:
- every:  save_steps=1, load_best_model_at_end, no save_total_limit (the run resumed below);
- sparse: save_steps=2, the best score on an odd (unsaved) step, load_best_model_at_end, save_total_limit=1;
- best:   save_strategy="best";
- resume: checkpoint-4 of `every` copied to a new output_dir, the old output_dir deleted (the copied
  trainer_state.json names a best folder that no longer exists), sentinel values written into
  max_steps / num_train_epochs / is_*_process_zero / trial_name / trial_params, resumed with
  save_steps=2 (the checkpoint says 1), save_total_limit=1, load_best_model_at_end, scores that never beat
  the restored best; `resume_best_copied` is the same with checkpoint-2 (the best) copied too;
- errors: the ValueErrors of TrainingArguments / Trainer for the best-model settings.

`probe quick` (the live rerun of the tests) runs every, sparse and resume only, and in the same child the
unwrap_model x compile probe of tests/accel_siblings/_unwrap_compile_matrix.py (one interpreter for both).

usage: python tests/backends_docs/_trainer_state_matrix.py render | write | capture | probe [quick]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CAPTURE = HERE / "trainer_state_capture.json"
REF = ROOT / "sub-skills" / "distributed-training-backends" / "references" / "transformers-trainer-state.md"
SENTINEL = {"max_steps": 999, "num_train_epochs": 99, "is_local_process_zero": False,
            "is_world_process_zero": False, "trial_name": "old-trial", "trial_params": {"lr": 1.0}}


# --------------------------------------------------------------------------------------------- probe
def probe(quick: bool = False) -> dict:  # noqa: C901 (one linear scenario list)
    import logging
    import shutil
    import tempfile

    import torch
    import transformers
    from torch import nn
    from transformers import EarlyStoppingCallback, Trainer, TrainerCallback, TrainingArguments
    from transformers.utils import logging as hf_logging

    torch.manual_seed(0)
    root = Path(tempfile.mkdtemp(prefix="trstate"))
    out: dict = {"versions": {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}}

    def rel(p):
        return None if p is None else str(p).replace(str(root), "<tmp>")

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(2, 1)

        def forward(self, x, labels=None):
            y = self.l(x).squeeze(-1)
            return {"loss": ((y - labels) ** 2).mean(), "logits": y}

    ds = [{"x": torch.randn(2), "labels": torch.tensor(0.0)} for _ in range(4)]

    class Snap(TrainerCallback):
        def __init__(self, rows, out_dir):
            self.rows, self.out_dir = rows, out_dir

        def on_save(self, args, state, control, **kw):
            self.rows.append({"step": state.global_step, "best_metric": state.best_metric,
                              "best_global_step": state.best_global_step,
                              "best_model_checkpoint": rel(state.best_model_checkpoint),
                              "folders": sorted(os.listdir(self.out_dir))})

    # WARNING lines of the transformers logger
    warnings: list = []

    class H(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage().replace(str(root), "<tmp>"))

    hf_logging.set_verbosity_warning()
    hf_logging.get_logger().addHandler(H())

    def shape(history):  # keys per entry: the timings and float values differ from run to run
        return [{"step": e["step"], "keys": sorted(e)} for e in history]

    def job(name, out_dir, scores, resume=None, **kw):
        it = iter(scores)
        rows: list = []
        base = dict(max_steps=4, per_device_train_batch_size=2, eval_strategy="steps", eval_steps=1,
                    save_steps=1, metric_for_best_model="score", greater_is_better=True, report_to=[],
                    use_cpu=True, logging_steps=1, disable_tqdm=True)
        base.update(kw)
        args = TrainingArguments(str(out_dir), **base)
        tr = Trainer(model=M(), args=args, train_dataset=ds, eval_dataset=ds[:2],
                     compute_metrics=lambda p: {"score": float(next(it))},
                     callbacks=[Snap(rows, out_dir), EarlyStoppingCallback(10)])
        seen = {}
        real_init = tr._init_training_state

        def init_spy(*a, **k):
            r = real_init(*a, **k)
            seen.update(json.loads(json.dumps(vars(tr.state), default=str)))
            seen["log_history"] = shape(seen["log_history"])
            return r

        tr._init_training_state = init_spy
        del warnings[:]
        tr.train(resume_from_checkpoint=None if resume is None else str(resume))
        rec = {"saves": rows, "final_folders": sorted(os.listdir(out_dir)),
               "final_best_model_checkpoint": rel(tr.state.best_model_checkpoint),
               "final_best_metric": tr.state.best_metric, "final_best_global_step": tr.state.best_global_step,
               "warnings": [w for w in warnings if "mtime" not in w]}
        if resume is not None:
            rec["state_after_resume_load"] = {k: (rel(v) if isinstance(v, str) else v) for k, v in seen.items()}
        out[name] = rec
        return tr

    a = root / "old_machine"
    job("every", a, [1, 3, 2, 2], load_best_model_at_end=True)
    state_json = json.loads((a / "checkpoint-4" / "trainer_state.json").read_text())
    state_json["log_history"] = shape(state_json["log_history"])
    out["trainer_state_json"] = {k: (rel(v) if isinstance(v, str) else v) for k, v in state_json.items()}

    job("sparse", root / "sparse", [1, 2, 5, 3], save_steps=2, load_best_model_at_end=True, save_total_limit=1)

    # A model sharded at load time (`is_distributed_loading_by_transformers`, set by from_pretrained with a
    # DistributedConfig / tp_plan; set on the class here, one process): Trainer.__init__'s refusal per setting,
    # the files a save_only_model checkpoint holds, and a resume from it (transformers-trainer-sharded-load.md).
    class Sharded(M):
        is_distributed_loading_by_transformers = True

    sh: dict = {}
    for label, kw in (("default (save_strategy='steps', save_only_model=False)", {}),
                      ("save_only_model=True", {"save_only_model": True}),
                      ("save_strategy='no'", {"save_strategy": "no"}),
                      ("save_strategy='epoch'", {"save_strategy": "epoch"})):
        try:
            Trainer(model=Sharded(), args=TrainingArguments(str(root / "sh_err"), report_to=[], use_cpu=True, **kw),
                    train_dataset=ds)
            sh[label] = "accepted"
        except Exception as e:  # noqa: BLE001 (recorded)
            sh[label] = f"{type(e).__name__}: " + " ".join(str(e).split())
    sargs = dict(report_to=[], use_cpu=True, save_only_model=True, max_steps=2, save_steps=1,
                 per_device_train_batch_size=2, disable_tqdm=True)
    Trainer(model=Sharded(), args=TrainingArguments(str(root / "sh"), **sargs), train_dataset=ds).train()
    sh["checkpoint-1 files"] = sorted(os.listdir(root / "sh" / "checkpoint-1"))
    tr2 = Trainer(model=Sharded(), args=TrainingArguments(str(root / "sh"), **sargs), train_dataset=ds)
    tr2.train(resume_from_checkpoint=str(root / "sh" / "checkpoint-1"))
    sh["resume from checkpoint-1: final global_step"] = tr2.state.global_step
    sched = getattr(tr2.lr_scheduler, "scheduler", tr2.lr_scheduler)
    sh["resume from checkpoint-1: scheduler steps taken"] = sched.last_epoch
    out["sharded_at_load"] = sh
    if quick:  # the live rerun: every, sparse and the stale-path resume; the rest comes from the capture
        stash = root / "stash"
        shutil.copytree(a / "checkpoint-4", stash / "checkpoint-4")
        shutil.rmtree(a)
        b = root / "resume"
        shutil.copytree(stash / "checkpoint-4", b / "checkpoint-4")
        sj = json.loads((b / "checkpoint-4" / "trainer_state.json").read_text())
        sj.update(SENTINEL)
        (b / "checkpoint-4" / "trainer_state.json").write_text(json.dumps(sj))
        job("resume", b, [2, 2], resume=b / "checkpoint-4", max_steps=6, save_steps=2,
            load_best_model_at_end=True, save_total_limit=1)
        sys.path.insert(0, str(ROOT / "tests" / "accel_siblings"))
        import _unwrap_compile_matrix as unwrap  # same child: one interpreter for both live reruns

        out["unwrap"] = unwrap.probe()
        shutil.rmtree(root, ignore_errors=True)
        return out
    job("best", root / "best", [1, 3, 2, 4], save_strategy="best", load_best_model_at_end=True)

    stash = root / "stash"
    shutil.copytree(a, stash)
    shutil.rmtree(a)  # the old machine's output_dir is gone: its best path is stale
    for name, copied in (("resume", ["checkpoint-4"]), ("resume_best_copied", ["checkpoint-4", "checkpoint-2"])):
        b = root / name
        for c in copied:
            shutil.copytree(stash / c, b / c)
        sj = json.loads((b / "checkpoint-4" / "trainer_state.json").read_text())
        sj.update(SENTINEL)
        (b / "checkpoint-4" / "trainer_state.json").write_text(json.dumps(sj))
        job(name, b, [2, 2], resume=b / "checkpoint-4", max_steps=6, save_steps=2,
            load_best_model_at_end=True, save_total_limit=1)

    errors = {}
    for label, kw, cls in (
        ("save_steps=3, eval_steps=2, load_best_model_at_end", dict(save_steps=3, eval_steps=2, load_best_model_at_end=True), "args"),
        ("save_strategy='epoch', eval_strategy='steps', load_best_model_at_end", dict(save_strategy="epoch", load_best_model_at_end=True), "args"),
        ("save_strategy='best', metric_for_best_model unset", dict(save_strategy="best", metric_for_best_model=None), "trainer"),
        ("load_best_model_at_end, metric_for_best_model unset", dict(load_best_model_at_end=True, metric_for_best_model=None), "trainer"),
    ):
        base = dict(max_steps=4, eval_strategy="steps", eval_steps=1, save_steps=1, metric_for_best_model="score",
                    report_to=[], use_cpu=True)
        base.update(kw)
        try:
            args = TrainingArguments(str(root / "err"), **base)
            Trainer(model=M(), args=args, train_dataset=ds, eval_dataset=ds)
            errors[label] = {"metric_for_best_model": args.metric_for_best_model,
                             "greater_is_better": args.greater_is_better}
        except Exception as e:  # noqa: BLE001 (recorded)
            where = "TrainingArguments" if cls == "args" else "Trainer"
            errors[label] = f"{type(e).__name__} at {where}(...): " + " ".join(str(e).split())
    out["errors"] = errors
    shutil.rmtree(root, ignore_errors=True)
    return out


def run_probe(quick: bool = False) -> dict:
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="warning", TOKENIZERS_PARALLELISM="false",
               DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="")
    proc = subprocess.run([sys.executable, __file__, "probe"] + (["quick"] if quick else []), capture_output=True, text=True, timeout=120,
                          env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    sys.stdout.flush()
    r = probe(quick=sys.argv[2:3] == ["quick"])
    print(json.dumps(r, sort_keys=True, default=str))


# --------------------------------------------------------------------------------------------- render
WRITER = {  # field -> who writes it (transformers 5.25.0 source)
    "epoch": "training loop, after each optimizer step: `epoch + (step + 1) / steps_in_epoch`",
    "global_step": "training loop, +1 per optimizer step",
    "max_steps": "`init_training_references` at `train()` start",
    "num_train_epochs": "`init_training_references` at `train()` start",
    "logging_steps": "`compute_steps` from the arguments at `train()` start (a value < 1 is a fraction of max_steps)",
    "eval_steps": "`compute_steps`, as `logging_steps`",
    "save_steps": "`compute_steps`, as `logging_steps`",
    "train_batch_size": "`_init_training_state`: per-device batch × n_gpu",
    "num_input_tokens_seen": "training step, only with `include_num_input_tokens_seen` not `\"no\"`",
    "total_flos": "`store_flos` before each save and at the end (`floating_point_ops` of a `PreTrainedModel`; 0 here, plain `nn.Module`)",
    "log_history": "`Trainer.log`: every training log and every evaluation, each with `step`",
    "best_metric": "`_determine_best_metric` at **every evaluation** that beats it (`metric_for_best_model`, `greater_is_better`)",
    "best_global_step": "`_determine_best_metric` on a new best: the current `global_step`, when `save_strategy` is `steps`, `epoch` or `best`",
    "best_model_checkpoint": "`_save_checkpoint` at **save** time: `<output_dir>/checkpoint-<best_global_step>`, **only if that folder exists**",
    "is_local_process_zero": "`init_training_references` at `train()` start",
    "is_world_process_zero": "`init_training_references` at `train()` start",
    "is_hyper_param_search": "`_init_training_state`: `trial is not None`",
    "trial_name": "`init_training_references`, only when `hp_name` and a trial are set",
    "trial_params": "`init_training_references`: `None`, or the trial's parameters",
    "stateful_callbacks": "`_save_checkpoint`: `state()` of `TrainerControl` and every `ExportableState` callback",
}
ACCEPTED = ("accepted: `TrainingArguments` fills `metric_for_best_model={metric_for_best_model!r}`, "
            "`greater_is_better={greater_is_better}` (False for a name ending in `loss`, else True)")
RESUME_NOTE = {
    "best_model_checkpoint": "**checked**: not an existing directory → WARNING and set to `None`; re-pointed at the next save if `<output_dir>/checkpoint-<best_global_step>` exists",
    "logging_steps": "kept: the file's value drives the schedule; a differing argument only logs a warning",
    "eval_steps": "kept: the file's value drives the schedule; a differing argument only logs a warning",
    "save_steps": "kept: the file's value drives the schedule; a differing argument only logs a warning",
    "train_batch_size": "kept; compared with the arguments (warning); used only with `auto_find_batch_size`",
    "global_step": "kept: epochs and batches to skip are computed from it",
    "stateful_callbacks": "kept; put back into the callbacks only with `restore_callback_states_from_checkpoint=True` (default False)",
    "best_metric": "kept: a resumed run must beat it to record a new best",
}


def _short(v):
    if isinstance(v, list):
        return f"list of {len(v)}"
    if isinstance(v, dict):
        return "{" + ", ".join(sorted(v)) + "}"
    return f"`{json.dumps(v)}`"


def render(data) -> dict:
    sj, after = data["trainer_state_json"], data["resume"]["state_after_resume_load"]
    rows = ["| Field | In `checkpoint-4/trainer_state.json` | Written by | On resume (sentinel values in the file where marked *) |",
            "| --- | --- | --- | --- |"]
    for k in sorted(sj):
        filed = SENTINEL.get(k, sj[k])
        star = " *" if k in SENTINEL else ""
        if after[k] == filed:
            res = "kept from the file"
        else:
            res = f"replaced by the current run: {_short(after[k])}"
        if k in RESUME_NOTE:
            res = RESUME_NOTE[k] if k != "best_model_checkpoint" else f"{RESUME_NOTE[k]} (measured: {_short(after[k])})"
        rows.append(f"| `{k}`{star} | {_short(sj[k])} | {WRITER[k]} | {res} |")
    fields = "\n".join(rows) + "\n"

    saves = ["| Run | Scores (step: score) | After each save: step → `best_global_step`, `best_model_checkpoint`, folders | End of training |",
             "| --- | --- | --- | --- |"]
    desc = {"every": ("eval and save every step, `load_best_model_at_end`", "1: 1, 2: 3, 3: 2, 4: 2"),
            "sparse": ("eval every step, `save_steps=2`, `save_total_limit=1`, `load_best_model_at_end`", "1: 1, 2: 2, 3: 5, 4: 3"),
            "best": ("`save_strategy=\"best\"`, eval every step", "1: 1, 2: 3, 3: 2, 4: 4"),
            "resume": ("resume of `every`'s `checkpoint-4` in a new folder, old folder gone; `save_steps=2` passed (the file says 1), `save_total_limit=1`", "5: 2, 6: 2"),
            "resume_best_copied": ("same, `checkpoint-2` (the best) copied too", "5: 2, 6: 2")}
    for name, (what, scores) in desc.items():
        r = data[name]
        cells = "; ".join(f"{s['step']} → {s['best_global_step']}, "
                          f"{'`' + s['best_model_checkpoint'].rsplit('/', 1)[1] + '`' if s['best_model_checkpoint'] else 'None'}, "
                          f"[{' '.join(f.split('-')[1] for f in s['folders'])}]" for s in r["saves"])
        bmc = r["final_best_model_checkpoint"]
        end = (f"best_metric {r['final_best_metric']}, best_global_step {r['final_best_global_step']}, "
               f"loads {'`' + bmc.rsplit('/', 1)[1] + '`' if bmc else 'nothing'}; folders left "
               f"[{' '.join(f.split('-')[1] for f in r['final_folders'])}]")
        saves.append(f"| {what} | {scores} | {cells} | {end} |")
    runs = "\n".join(saves) + "\n"

    warn = "\n".join(f"- `` {' '.join(w.split())} ``" for w in data["resume"]["warnings"]) + "\n"
    errs = "\n".join(f"- {k}: {ACCEPTED.format(**v) if isinstance(v, dict) else '`` ' + v + ' ``'}" for k, v in sorted(data["errors"].items())) + "\n"
    return {"trainer state fields": fields, "trainer best checkpoint runs": runs,
            "trainer resume warnings": warn, "trainer best errors": errs}


def load_capture():
    return gb.load_json(CAPTURE)


if __name__ == "__main__" and sys.argv[1:2] != ["probe"]:
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=REF, capture=CAPTURE, collect=run_probe, render=render,
           usage=__doc__)
