"""Generator for three deepspeed-direct pages (deepspeed 0.19.8, torch 2.13.0, DS_ACCELERATOR=cpu, gloo):

- deepspeed-backward-protocol.md: engine.backward vs loss.backward / out.backward(grad) / engine.scale per ZeRO
  stage and precision, 2 gloo ranks, gradient_accumulation_steps 2 (_ds_protocol_probe.py backward);
- deepspeed-moe-groups.md: the rank lists of the expert-parallel groups that training
  (deepspeed.utils.groups._create_expert_and_data_parallel) and inference
  (InferenceEngine._create_ep_parallel_group) build per world size and ep_size, with deepspeed.comm replaced
  by a recorder; MoE layer validation (_ds_protocol_probe.py groups);
- deepspeed-op-loading.md: what `import deepspeed`, init_distributed and initialize load or build per
  feature (_ds_protocol_probe.py loads).

The raw results are committed in ds_protocol_capture.json; render() turns them into the pages' blocks,
which test_ds_protocol.py compares word for word.

usage: python tests/deepspeed_direct/_ds_protocol.py render | write | capture | --check
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ds_matrix as m  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = m.HERE
CAPTURE = HERE / "ds_protocol_capture.json"
PROBE = HERE / "_ds_protocol_probe.py"
PAGES = {"backward": m.REFS / "deepspeed-backward-protocol.md", "accelerate": m.REFS / "deepspeed-backward-protocol.md", "moe-train": m.REFS / "deepspeed-moe-groups.md",
         "moe-infer": m.REFS / "deepspeed-moe-groups.md", "moe-layer": m.REFS / "deepspeed-moe-groups.md",
         "loads": m.REFS / "deepspeed-op-loading.md"}
METHODS = ["engine.backward(loss)", "loss.backward()", "out.backward(out_grad)", "engine.scale(loss).backward()",
           "engine.backward(out)"]


def run_one(mode, work, ext=m.EXT, timeout=600):
    p = subprocess.run([sys.executable, str(PROBE), mode], capture_output=True, text=True, timeout=timeout,
                       env=m._env(ext, 0, 1, m._port()), cwd=work)
    return m._result(p.stdout, p.stderr)


def run_backward(work, ext=m.EXT, timeout=900):
    port = m._port()
    procs = [subprocess.Popen([sys.executable, str(PROBE), "backward"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=m._env(ext, r, 2, port), cwd=work)
             for r in range(2)]
    outs = [p.communicate(timeout=timeout) for p in procs]
    return m._result(*outs[0])


def capture():
    work = tempfile.mkdtemp(prefix="ds_protocol_")
    return {"backward": run_backward(work), "groups": run_one("groups", work), "loads": run_one("loads", work),
            "accelerate": run_one("accelerate", work)}


# ---------------------------------------------------------------------------------------- rendering

def _bw_cell(r, notes):
    if not r["ok"]:
        return f"**{r['error']}** {notes.ref(r['message'])}"
    s = "✓ same weights as `engine.backward`" if r["same_as_engine_backward"] else "✓ **different weights**"
    return s + ("" if r["ranks_equal"] else ", ranks **differ**")


def render_backward(bw):
    notes = m._Notes("B")
    rows = ["| Stage | Precision | `engine.optimizer` | torch-style backward | " +
            " | ".join(f"`{x}`" for x in METHODS) + " | other model's grad: `engine.backward` / `loss.backward()` |",
            "|" + " --- |" * (5 + len(METHODS))]
    for s in (0, 1, 2, 3):
        for p in ("fp32", "bf16"):
            ref = bw[f"z{s}|{p}|engine.backward(loss)"]
            cells = [_bw_cell(bw[f"z{s}|{p}|{h}"], notes) for h in METHODS]
            lb = bw[f"z{s}|{p}|loss.backward()"]
            ratio = f"{ref['other_grad_ratio']} / " + (f"{lb['other_grad_ratio']}" if "other_grad_ratio" in lb else "–")
            rows.append(f"| {s} | {p} | `{ref['optimizer']}` | {'yes' if ref['torch_style'] else 'no'} | " +
                        " | ".join(cells) + f" | {ratio} |")
    return "\n".join(rows) + "\n" + notes.block() + "\n"


def render_accelerate(ac):
    rows = ["| Stage | `accelerator.backward(loss)` | `loss.backward()` |", "| --- | --- | --- |"]

    def cell(r):
        if not r["ok"]:
            return f"**{r['error']}** \"{m._msg(r['message'], 60)}\""
        return ("weights changed" if r["weights_changed"] else "**weights unchanged**") + \
            f", `global_steps` {r['global_steps']}"
    for s in (0, 1, 2, 3):
        rows.append(f"| {s} | {cell(ac[f'z{s}|accelerator.backward(loss)'])} | {cell(ac[f'z{s}|loss.backward()'])} |")
    return "\n".join(rows) + "\n"


def _ranks(groups):
    return ", ".join("[" + ",".join(str(r) for r in g) + "]" for g in groups) or "none"


def render_moe(gr, moe_real):
    train = ["| World size | `ep_size` | expert-parallel groups (all-to-all) | expert-data-parallel groups "
             "(MoE grads all-reduce) | same with `use_data_before_expert_parallelism: true` |",
             "| --- | --- | --- | --- | --- |"]
    infer = ["| World size | `moe.ep_size` | `ep_group` ranks | `expert_mp_group` ranks |", "| --- | --- | --- | --- |"]
    for w in (1, 2, 4, 8):
        for ep in (1, 2, 3, 4, 8):
            a, b = gr["train"][f"{w}|{ep}|False"], gr["train"][f"{w}|{ep}|True"]
            if "error" in a:
                train.append(f"| {w} | {ep} | **{a['error']}** `{m._msg(a['message'])}` | | |")
            else:
                dbe = "same" if a == b else f"EP {_ranks(b['expert_parallel'])}; EDP {_ranks(b['expert_data_parallel'])}"
                train.append(f"| {w} | {ep} | {_ranks(a['expert_parallel'])} | {_ranks(a['expert_data_parallel'])} "
                             f"| {dbe} |")
            i = gr["infer"][f"{w}|{ep}"]
            if "error" in i:
                infer.append(f"| {w} | {ep} | **{i['error']}** `{m._msg(i['message'])}` | |")
            else:
                infer.append(f"| {w} | {ep} | {_ranks(i['ep'])} | {_ranks(i['expert_mp'])} |")
    layer = ["| `num_experts` | `ep_size` | `MoE(...)` |", "| --- | --- | --- |"]
    for k, v in gr["layer"].items():
        n, ep = k.split("|")
        cell = (f"**{v['error']}** `{m._msg(v['message'])}`" if "error" in v else
                f"{v['num_local_experts']} local experts per rank, group `{v['group']}`")
        layer.append(f"| {n} | {ep} | {cell} |")
    c = gr["config"]
    layer.append("")
    layer.append(f"`DeepSpeedInferenceConfig(moe={{\"ep_size\": 2, \"num_experts\": [8]}})` reads "
                 f"`moe.ep_size` = {c['ep_size']}, `moe.moe_experts` = {c['moe_experts']}; defaults "
                 f"`ep_size` {c['default'][0]}, `moe_experts` {c['default'][1]}.")
    real = "; ".join(f"`ep_size` {ep}: EP {_ranks([r['expert_parallel']])}, EDP {_ranks([r['expert_data_parallel']])}"
                     for ep, r in sorted(moe_real.items()))
    train.append("")
    train.append(f"Cross-check, 2 real gloo ranks through `deepspeed.initialize` (an `MoE` layer, 2 experts; rank 0's "
                 f"groups): {real}.")
    return {"moe-train": "\n".join(train) + "\n", "moe-infer": "\n".join(infer) + "\n",
            "moe-layer": "\n".join(layer) + "\n"}


def _list(xs):
    return ", ".join(f"`{x}`" for x in xs) if xs else "none"


def render_loads(ld):
    notes = m._Notes("L")
    imp, dist = ld["import"], ld["init_distributed"]
    rows = ["| Step | op builders whose `load()` ran (JIT build on first use) | `engine.optimizer` | "
            "DeepSpeed `atexit` hooks registered |", "| --- | --- | --- | --- |"]
    rows.append(f"| `import deepspeed` | none ({len(imp['ops'])} `deepspeed.ops.*` Python modules imported, "
                f"`matmul_ext` imported: {'yes' if imp['matmul_ext'] else 'no'}, `triton` imported: "
                f"{'yes' if imp['triton'] else 'no'}) | – | {_list(imp['atexit'])} |")
    rows.append(f"| `deepspeed.init_distributed` (`build_shm_op` called: "
                f"{'yes' if dist['build_shm_op_called'] else 'no'}) | {_list(dist['builders'])} | – | – |")
    for k, v in ld.items():
        if k in ("import", "init_distributed", "end"):
            continue
        opt = f"`{v['optimizer']}`" if v["ok"] else f"**{v['error']}** {notes.ref(v['message'])}"
        rows.append(f"| initialize: {k} | {_list(v['builders'])} | {opt} | {_list(v['atexit'])} |")
    e = ld["end"]
    rows.append("")
    rows.append(f"After all of these: `matmul_ext` imported: {'yes' if e['matmul_ext'] else 'no'}, `triton` "
                f"imported: {'yes' if e['triton'] else 'no'}, `deepspeed.HAS_TRITON` = `{e['HAS_TRITON']}` "
                "(no triton package on this CPU machine).")
    return "\n".join(rows) + "\n" + notes.block() + "\n"


def render(data):
    out = {"backward": render_backward(data["backward"]), "loads": render_loads(data["loads"]),
           "accelerate": render_accelerate(data["accelerate"])}
    out.update(render_moe(data["groups"], data["backward"]["moe"]))
    return out


def load_capture():
    return gb.load_json(CAPTURE)


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGES, capture=CAPTURE, collect=capture,
           render=render, usage=__doc__)
