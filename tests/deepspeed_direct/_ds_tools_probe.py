"""Child process for _ds_tools_matrix.py: DeepSpeed's checkpoint tools on the CPU accelerator (gloo).

usage: python _ds_tools_probe.py save CASES_JSON WORKDIR   save_checkpoint + save_16bit_model (RANK / WORLD_SIZE
                                                            / MASTER_* from the caller; 2 processes)
       python _ds_tools_probe.py load CASES_JSON WORKDIR   load_checkpoint with "checkpoint": {"load_universal": true}
       python _ds_tools_probe.py fp32 CASES_JSON WORKDIR   zero_to_fp32 in-process (no process group)

deepspeed 0.19.8, torch 2.13.0. The caller sets DS_ACCELERATOR=cpu and a private TORCH_EXTENSIONS_DIR.
Engine helpers (model, config, steps, weights) are _ds_probe.py's, so both matrices train the same MLP.
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _ds_probe as P  # noqa: E402


def _eng(stage, **more):
    return {"stage": stage, "prec": "fp32", "opt": "client AdamW", "sched": True, **more}


def save_case(torch, deepspeed, c, work):
    """2 steps, save_checkpoint(<work>/<dir>), then save_16bit_model(<work>/<dir>.16bit)."""
    rank = int(os.environ["RANK"])
    d = os.path.join(work, c["dir"])
    eng = P._engine(torch, deepspeed, c["save"])
    P._step(torch, eng, 2)
    out = {}
    if c.get("checkpoint", True):
        eng.save_checkpoint(d, client_state={"epoch": 7})
    w = P._weights(torch, deepspeed, eng)
    if rank == 0:
        torch.save(w, d + ".weights.pt")
    d16 = d + ".16bit"
    try:
        ret = eng.save_16bit_model(d16)
        out["save16"] = {"ok": True, "returned": ret}
    except BaseException as e:  # noqa: BLE001
        out["save16"] = {"ok": False, "error": type(e).__name__, "message": P._first(e)[:300]}
    torch.distributed.barrier()
    if rank == 0:
        out["files"] = P._layout(d) if os.path.isdir(d) else []
        files16 = P._layout(d16) if os.path.isdir(d16) else []
        out["save16"]["files"] = files16
        if files16:
            sd = torch.load(os.path.join(d16, files16[0]), weights_only=True)
            out["save16"]["keys"] = len(sd)
            out["save16"]["dtype"] = sorted({str(v.dtype).replace("torch.", "") for v in sd.values()})
            out["save16"]["equal"] = all(torch.equal(a.float(), b) for a, b in zip(sd.values(), w))
    eng.destroy() if hasattr(eng, "destroy") else None
    return out


def load_case(torch, deepspeed, c, work):
    """A fresh engine (other initial weights) of c["load"] with load_universal loads <work>/<dir>."""
    d = os.path.join(work, c["dir"])
    lc = dict(c["load"], top={"checkpoint": {"load_universal": True}})
    try:
        eng = P._engine(torch, deepspeed, lc, seed=1)
        path, client = eng.load_checkpoint(d, **c.get("load_kw", {}))
        saved = torch.load(os.path.join(work, c["dir"] + ".weights.pt"))
        after = P._weights(torch, deepspeed, eng)
        out = {"ok": True, "path": os.path.relpath(path, work) if path else None,
               "weights_restored": all(torch.allclose(a, b) for a, b in zip(after, saved)),
               "opt_step": P._opt_step_count(eng), "global_steps": eng.global_steps,
               "sched_iter": getattr(eng.lr_scheduler, "last_batch_iteration", None),
               "client_state": {k: v for k, v in (client or {}).items() if k == "epoch"}}
        try:
            P._step(torch, eng)
            out["step_after"] = "ok"
        except Exception as e:  # noqa: BLE001
            out["step_after"] = f"{type(e).__name__}: {P._first(e)}"
        return out
    except BaseException as e:  # noqa: BLE001
        return {"ok": False, "error": type(e).__name__, "message": P._first(e)[:300]}


def _adam(obj, where=""):
    """'<key path>: exp_avg, ...' for every dict holding Adam moments inside a loaded optimizer state."""
    found = set()

    def walk(o, path):
        if isinstance(o, dict):
            if "exp_avg" in o:
                found.add(f"{path}: " + ", ".join(sorted(k for k in o if not isinstance(k, int))))
                return
            for k, v in o.items():
                walk(v, path + ("/" if path else "") + (str(k) if not isinstance(k, int) else "<i>"))
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v, path + "[]")
    walk(obj, where)
    return sorted(found)


def fp32_case(torch, c, work):
    """What zero_to_fp32 holds: the optimizer file's keys as saved, the keys parse_optim_states keeps, whether
    the kept tensors are memory-mapped from the file, and what get_fp32_state_dict_from_zero_checkpoint returns
    eagerly and in lazy mode."""
    import glob
    from deepspeed.utils import zero_to_fp32 as z
    d = os.path.join(work, c["dir"])
    tagdir = os.path.join(d, open(os.path.join(d, "latest")).read().strip())
    files = sorted(glob.glob(os.path.join(tagdir, "*_optim_states.pt")))
    raw = torch.load(files[0], map_location="cpu", weights_only=False)
    inner = raw["optimizer_state_dict"]
    out = {"file_keys": sorted(inner), "file_adam": _adam(inner)}
    seen = []   # what parse_optim_states' own torch.load calls returned, and with which keywords
    real_load = z.torch.load

    def spy(*a, **kw):
        obj = real_load(*a, **kw)
        seen.append((kw, obj))
        return obj
    z.torch.load = spy
    try:
        sds = z.parse_optim_states(files, tagdir)
    finally:
        z.torch.load = real_load
    out["zero_stage"], out["world_size"] = sds[0], sds[1]
    out["load_kwargs"] = sorted(f"{k}={v}" for k, v in seen[0][0].items() if k in ("mmap", "weights_only"))
    out["kept_keys"] = sorted(seen[0][1]["optimizer_state_dict"])
    out["kept_adam"] = _adam(seen[0][1]["optimizer_state_dict"])
    # memory-mapped = the optimizer files appear in this process's address-space map (Linux)
    with open("/proc/self/maps") as fh:
        maps = fh.read()
    out["files_mapped"] = sum(os.path.realpath(f) in maps for f in files)
    del seen
    saved = torch.load(d + ".weights.pt")
    tol = {"atol": c.get("atol") or 1e-8}   # bf16 runs: the fp32 master copy vs the bf16 module weights
    eager = z.get_fp32_state_dict_from_zero_checkpoint(d)
    out["eager"] = {"types": sorted({type(v).__name__ for v in eager.values()}), "keys": len(eager),
                    "equal": all(torch.allclose(a.float(), b, **tol) for a, b in zip(eager.values(), saved))}
    lazy = z.get_fp32_state_dict_from_zero_checkpoint(d, lazy_mode=True)
    out["lazy"] = {"types": sorted({type(v).__name__ for v in lazy.values()})}
    mat = z.to_torch_tensor(lazy)
    out["lazy"]["to_torch_tensor_equal"] = all(torch.allclose(a.float(), b, **tol) for a, b in zip(mat.values(), saved))
    return out


def main():
    mode, cases, work = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    res = {}
    if mode == "fp32":
        import warnings
        warnings.simplefilter("ignore")
        import torch
        for c in cases:
            try:
                res[c["id"]] = fp32_case(torch, c, work)
            except BaseException as e:  # noqa: BLE001
                res[c["id"]] = {"error": type(e).__name__, "message": P._first(e)[:300]}
    else:
        torch, deepspeed = P._setup()
        for c in cases:
            res[c["id"]] = (save_case if mode == "save" else load_case)(torch, deepspeed, c, work)
            print("CASE " + json.dumps(res[c["id"]], sort_keys=True), flush=True)
            torch.distributed.barrier()
    print("RESULT " + json.dumps(res, sort_keys=True), flush=True)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
