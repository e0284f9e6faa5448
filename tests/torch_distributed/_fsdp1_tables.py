"""Generator for two FSDP1 tables, rendered from the 2-rank gloo job `fsdp1` of _jobs_defaults.py
(torch 2.13.0 CPU, accelerate 1.15.0):

- fsdp1-generate  (sub-skills/failure-triage/references/generation-under-sharding.md): how the inner
  module of an FSDP1 model can be run the way `generate` runs it, per use_orig_params.
- fsdp1-sync-tied (sub-skills/torch-distributed/references/fsdp1-to-fsdp2.md): sync_module_states with
  a real tied model on rank 0 and a meta one on rank 1, per param_init_fn variant.

test_defaults_and_generate.py runs the job once and compares both blocks word for word.

usage: python tests/torch_distributed/_fsdp1_tables.py render   run the job, print the blocks
       python tests/torch_distributed/_fsdp1_tables.py write    run the job, rewrite the pages' blocks
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import _generated_blocks as gb  # noqa: E402

PAGES = {"fsdp1-generate": ROOT / "sub-skills/failure-triage/references/generation-under-sharding.md",
         "fsdp1-sync-tied": ROOT / "sub-skills/torch-distributed/references/fsdp1-to-fsdp2.md"}

GEN_ROWS = {
    "direct": "inner module called directly after a training step (`accelerator.unwrap_model(model)`, then `generate`)",
    "own_units": "the same, with every module `generate` reaches wrapped as its own unit (here encoder and head too: the root owns no parameter)",
    "root_forward_first": "one forward through the FSDP root first, then the inner module",
    "summon_recurse_false": "inside `FSDP.summon_full_params(model, recurse=False, writeback=False)`",
    "summon_recursive": "inside `FSDP.summon_full_params(model)` (recursive, `writeback=True`: the defaults, and the Seq2SeqTrainer `prediction_step` call)",
}
TIED_ROWS = {
    "to_empty_only": "`param_init_fn=lambda m: m.to_empty(device=..., recurse=False)`",
    "retie_in_param_init_fn": "the same, then `model.tie_weights()` inside `param_init_fn` once no parameter is on meta",
    "materialise_and_tie_before": "`model.to_empty(device=...)`; `model.tie_weights()` before `FSDP(...)`, no `param_init_fn`",
    "accelerate_ensure_weights_retied": "Accelerate's `ensure_weights_retied(to_empty_fn, model, device)` (what `Accelerator.prepare_model` installs for FSDP1)",
}
GLOO_MISMATCH = "Received data size doesn't match expected size"


def _cell(res: dict, want_ok: str) -> str:
    if "error" in res:
        return f"{res['error']}: `{res['msg']}`"
    if res["ok"] is not True:
        return f"runs, output differs from the unsharded model ({res['ok']})"
    after = res.get("train_step_after")
    tail = "; the next training step works" if after == {"ok": True} else ""
    return want_ok + tail


def render_generate(r0: dict) -> str:
    g = r0["generate"]
    lines = ["| How the inner module runs (after one training step) | `use_orig_params=False` (an FSDP1 plugin built with `FSDP_USE_ORIG_PARAMS` unset, or `--fsdp_use_orig_params false`) | `use_orig_params=True` (the default of `accelerate launch`, `accelerate config` and the Trainer) |",
             "| --- | --- | --- |"]
    for case, label in GEN_ROWS.items():
        cells = [_cell(g[f"uop={uop}:{case}"], "works: output equals the unsharded model's") for uop in (False, True)]
        lines.append(f"| {label} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines) + "\n"


def render_tied(r0: dict, r1: dict, log: str) -> str:
    lines = ["| Rank 1 (meta model) gets | parameters before `FSDP(...)`, rank 0 / rank 1 | rank 1 still tied at the broadcast | elements broadcast, rank 0 / rank 1 | result |",
             "| --- | --- | --- | --- | --- |"]
    for mode, label in TIED_ROWS.items():
        a, b = r0["tied"][mode], r1["tied"][mode]
        if "ok" in a.get("result", {}) and "ok" in b.get("result", {}) and a["result"] == b["result"]:
            result = "constructor returns on both ranks, same forward output"
        elif (a.get("ctor") == b.get("ctor") == {"ok": True} and ("result" not in a or "result" not in b)
              and GLOO_MISMATCH in log):
            # rank 1 receives rank 0's shorter list without error (gloo checks only that a message is not
            # longer than the buffer); which rank's pair raises in the forward is gloo's business
            result = ("constructor returns on both ranks (rank 1 receives rank 0's shorter list without error; its "
                      "untied `head.weight` keeps uninitialised memory); the first forward's all-gather aborts the "
                      f"job: `{GLOO_MISMATCH}. Is there a distributed collective mismatch in your code?`")
        elif ("ctor" not in a or "ctor" not in b) and GLOO_MISMATCH in log:
            result = f"gloo aborts the job in the broadcast: `{GLOO_MISMATCH}`"
        else:
            result = f"unexpected: {a.get('result')} / {b.get('result')}"
        tied = "yes" if b["tied_at_broadcast"] else "no"
        lines.append(f"| {label} | {a['params_before_wrap']} / {b['params_before_wrap']} | {tied} | "
                     f"{a['broadcast_numels']} / {b['broadcast_numels']} | {result} |")
    return "\n".join(lines) + "\n"


def render(r0: dict, r1: dict, log: str) -> dict:
    return {"fsdp1-generate": render_generate(r0), "fsdp1-sync-tied": render_tied(r0, r1, log)}


def _run() -> tuple:
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([sys.executable, str(HERE / "_jobs_defaults.py"), "fsdp1", d],
                           capture_output=True, text=True, timeout=180)
        ranks = [json.loads((Path(d) / f"fsdp1.rank{r}.json").read_text()) for r in (0, 1)]
    return ranks[0], ranks[1], p.stdout + p.stderr


if __name__ == "__main__":
    out = render(*_run())
    if sys.argv[1:] == ["write"]:
        gb.write(PAGES, out)
    else:
        gb.show(out)
