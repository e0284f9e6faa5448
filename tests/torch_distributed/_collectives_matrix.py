"""Generator for sub-skills/torch-distributed/references/gloo-collectives-matrix.md (torch 2.13.0, gloo, CPU).

ONE run of two gloo processes calls every c10d collective x every ReduceOp it takes x every dtype
and records, per cell, what each rank got back: the result, or the exception class and the first
line of its message. Both ranks make the same calls with the same shapes, so an error raised on
one rank is raised on both (a cell where only one rank raised is recorded as such).

python tests/torch_distributed/_collectives_matrix.py capture   run the 2 processes, write data/collectives_capture.json
python tests/torch_distributed/_collectives_matrix.py render    print the generated block from the capture
python tests/torch_distributed/_collectives_matrix.py worker RANK PORT OUT  (internal) one rank
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
CAPTURE = HERE / "data" / "collectives_capture.json"
DTYPES = ["float32", "bfloat16", "float16", "int64", "bool"]
OPS = ["SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"]
REDUCING = ["all_reduce", "reduce", "reduce_scatter_tensor", "reduce_scatter_single", "reduce_scatter"]
PLAIN = ["broadcast", "all_gather", "all_gather_into_tensor", "all_gather_single", "gather", "scatter", "all_to_all_single",
         "all_to_all", "send/recv", "isend/irecv"]
NO_DTYPE = ["barrier", "broadcast_object_list", "all_gather_object", "gather_object", "scatter_object_list",
            "send_object_list/recv_object_list"]
# how AVG is computed: 60000 on each rank fits float16 (max 65504), their sum does not; divide-then-sum
# would return 60000, sum-then-divide returns inf
PROBES = {"all_reduce AVG, float16 60000 on each rank": ("all_reduce", "AVG", 60000.0, "float16"),
          "all_reduce AVG, float32 60000 on each rank": ("all_reduce", "AVG", 60000.0, "float32")}
TIMEOUT_S = 20


def _values(dtype_name, rank, n=2):
    """Rank r holds [1 + r, 4 (1 + r)] (n=2); bool: rank 0 [True, False], rank 1 [True, True]."""
    import torch
    if dtype_name == "bool":
        base = [True, bool(rank)] * (n // 2)
        return torch.tensor(base, dtype=torch.bool)
    base = [1 + rank, 4 * (1 + rank)] * (n // 2)
    if n == 4:
        base = [1 + rank, 4 * (1 + rank), 10 * (1 + rank), 100 * (1 + rank)]
    return torch.tensor(base, dtype=getattr(torch, dtype_name))


def _show(t):
    if isinstance(t, (list, tuple)):
        return "[" + ", ".join(_show(x) for x in t) + "]"
    vals = t.tolist()
    if isinstance(vals, list):
        return "[" + ", ".join(_fmt(v) for v in vals) + "]"
    return _fmt(vals)


def _fmt(v):
    if isinstance(v, bool):
        return "T" if v else "F"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _err(e):
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0].strip() if msg else ''}"


def _op(name):
    import torch.distributed as dist
    if name == "PREMUL_SUM":
        return dist._make_nccl_premul_sum(2.0)     # the public way to build one; SUM of (2 x each input)
    return getattr(dist.ReduceOp, name)


def _reducing(kind, op, dtype, rank, world):
    import torch
    import torch.distributed as dist
    if kind == "all_reduce":
        t = _values(dtype, rank)
        dist.all_reduce(t, op=op)
        return _show(t)
    if kind == "reduce":
        t = _values(dtype, rank)
        dist.reduce(t, dst=0, op=op)
        return _show(t) if rank == 0 else "-"
    if kind in ("reduce_scatter_tensor", "reduce_scatter_single"):
        t = _values(dtype, rank, 4)
        out = torch.empty(2, dtype=t.dtype)
        getattr(dist, kind)(out, t, op=op)
        return _show(out)
    t = _values(dtype, rank, 4)
    out = torch.empty(2, dtype=t.dtype)
    dist.reduce_scatter(out, list(t.chunk(world)), op=op)
    return _show(out)


def _plain(kind, dtype, rank, world):
    import torch
    import torch.distributed as dist
    t = _values(dtype, rank)
    if kind == "broadcast":
        dist.broadcast(t, src=0)
        return _show(t)
    if kind == "all_gather":
        outs = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(outs, t)
        return _show(outs)
    if kind in ("all_gather_into_tensor", "all_gather_single"):
        out = torch.empty(world * t.numel(), dtype=t.dtype)
        getattr(dist, kind)(out, t)
        return _show(out)
    if kind == "gather":
        outs = [torch.empty_like(t) for _ in range(world)] if rank == 0 else None
        dist.gather(t, outs, dst=0)
        return _show(outs) if rank == 0 else "-"
    if kind == "scatter":
        out = torch.empty_like(t)
        ins = [_values(dtype, 0), _values(dtype, 1)] if rank == 0 else None
        dist.scatter(out, ins, src=0)
        return _show(out)
    if kind == "all_to_all_single":
        out = torch.empty_like(t)
        dist.all_to_all_single(out, t)
        return _show(out)
    if kind == "all_to_all":
        outs = [torch.empty(1, dtype=t.dtype) for _ in range(world)]
        dist.all_to_all(outs, list(t.chunk(world)))
        return _show(outs)
    if kind == "send/recv":
        if rank == 0:
            dist.send(t, dst=1)
            return "-"
        out = torch.empty_like(t)
        dist.recv(out, src=0)
        return _show(out)
    if kind == "isend/irecv":
        peer = 1 - rank
        out = torch.empty_like(t)
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, out, peer)])
        for r in reqs:
            r.wait()
        return _show(out)
    raise KeyError(kind)


def _objects(kind, rank, world):
    import torch.distributed as dist
    obj = {"rank": rank}
    if kind == "barrier":
        return repr(dist.barrier())
    if kind == "broadcast_object_list":
        lst = [obj]
        dist.broadcast_object_list(lst, src=0)
        return repr(lst)
    if kind == "all_gather_object":
        outs = [None] * world
        dist.all_gather_object(outs, obj)
        return repr(outs)
    if kind == "gather_object":
        outs = [None] * world if rank == 0 else None
        dist.gather_object(obj, outs, dst=0)
        return repr(outs) if rank == 0 else "-"
    if kind == "scatter_object_list":
        out = [None]
        dist.scatter_object_list(out, [{"rank": 0}, {"rank": 1}] if rank == 0 else None, src=0)
        return repr(out)
    if kind == "send_object_list/recv_object_list":
        lst = [obj] if rank == 0 else [None]
        if rank == 0:
            dist.send_object_list(lst, dst=1)
            return "-"
        dist.recv_object_list(lst, src=0)
        return repr(lst)
    raise KeyError(kind)


def cells():
    """[(collective, op or '', dtype or '')] in the order both ranks run them."""
    out = [(k, o, d) for k in REDUCING for o in OPS for d in DTYPES]
    out += [(k, "", d) for k in PLAIN for d in DTYPES]
    out += [(k, "", "") for k in NO_DTYPE]
    out += [(k, "", "") for k in PROBES]
    return out


def run_cell(kind, op, dtype, rank, world):
    if kind in REDUCING:
        return _reducing(kind, _op(op), dtype, rank, world)
    if kind in PLAIN:
        return _plain(kind, dtype, rank, world)
    if kind in PROBES:
        import torch
        import torch.distributed as dist
        coll, opname, value, dt = PROBES[kind]
        t = torch.tensor([value], dtype=getattr(torch, dt))
        getattr(dist, coll)(t, op=_op(opname))
        return _show(t)
    return _objects(kind, rank, world)


def worker(rank, port, out):
    import datetime

    import torch
    import torch.distributed as dist
    store = dist.TCPStore("127.0.0.1", port, 2, is_master=rank == 0, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    import warnings
    results, warned = {}, {}
    only = os.environ.get("COLL_ONLY")           # a live rerun of some cells: keys joined by ";"
    todo = [c for c in cells() if not only or "|".join(c) in only.split(";")]
    for i, (kind, op, dtype) in enumerate(todo):
        key = "|".join((kind, op, dtype))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                results[key] = "ok " + run_cell(kind, op, dtype, rank, 2)
            except Exception as e:     # noqa: BLE001 -- the exception is the datum
                results[key] = "error " + _err(e)
        if caught:
            warned[key] = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0]}" for w in caught})
        # re-align: a cell that raised on one rank only must not shift the next one
        store.set(f"cell{i}.rank{rank}", "1")
        store.wait([f"cell{i}.rank{1 - rank}"])
    Path(out).write_text(json.dumps({"torch": torch.__version__, "rank": rank, "cells": results, "warnings": warned}), encoding="utf-8")
    dist.destroy_process_group()


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def run_ranks(only=None, timeout=600):
    """Start the two gloo ranks (every cell, or only the keys given) and return the capture dict."""
    import tempfile
    port = free_port()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env.pop("COLL_ONLY", None)
    if only:
        env["COLL_ONLY"] = ";".join(only)
    with tempfile.TemporaryDirectory() as tmp:
        procs = [subprocess.Popen([sys.executable, __file__, "worker", str(r), str(port), os.path.join(tmp, f"r{r}.json")],
                                  env=env) for r in (0, 1)]
        try:
            for p in procs:
                p.wait(timeout=timeout)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        ranks = [json.loads(Path(tmp, f"r{r}.json").read_text()) for r in (0, 1)]
    return {"torch": ranks[0]["torch"], "backend": "gloo", "world_size": 2,
            "cells": {k: [ranks[0]["cells"][k], ranks[1]["cells"][k]] for k in ranks[0]["cells"]},
            "warnings": {k: sorted(set(ranks[0]["warnings"].get(k, [])) | set(ranks[1]["warnings"].get(k, [])))
                         for k in ranks[0]["cells"] if k in ranks[0]["warnings"] or k in ranks[1]["warnings"]}}


def capture(dest=CAPTURE):
    data = run_ranks()
    Path(dest).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    return data


def _cell_text(pair, errors):
    """One table cell from both ranks' outcomes; errors get a number in the legend."""
    r0, r1 = pair
    if r0.startswith("error") and r0 == r1:
        text = r0[len("error "):]
        if text not in errors:
            errors.append(text)
        return f"E{errors.index(text) + 1}"
    if r0.startswith("error") or r1.startswith("error"):
        parts = []
        for r in (r0, r1):
            if r.startswith("error"):
                text = r[len("error "):]
                if text not in errors:
                    errors.append(text)
                parts.append(f"E{errors.index(text) + 1}")
            else:
                parts.append(r[3:])
        return "rank 0: " + parts[0] + "; rank 1: " + parts[1]
    v0, v1 = r0[3:], r1[3:]
    if v1 == "-":
        return f"`{v0}`"
    if v0 == "-":
        return f"`{v1}` (rank 1)"
    return f"`{v0}`" if v0 == v1 else f"`{v0}` / `{v1}`"


def render(data=None):
    data = data if data is not None else json.loads(CAPTURE.read_text(encoding="utf-8"))
    c = data["cells"]
    errors: list[str] = []
    out = []

    def dtype_table(first: str, rows: dict) -> list:
        """One row per name, one column per dtype; ROWS maps a row name to its cell key prefix."""
        return ([f"| {first} | " + " | ".join(DTYPES) + " |", "| --- |" + " --- |" * len(DTYPES)]
                + [f"| `{name}` | " + " | ".join(_cell_text(c[key + d], errors) for d in DTYPES) + " |"
                   for name, key in rows.items()] + [""])

    for kind in REDUCING:
        out.append(f"**`{kind}`**\n")
        out += dtype_table("op", {op: f"{kind}|{op}|" for op in OPS})
    out.append("**No reduce op**\n")
    out += dtype_table("collective", {kind: f"{kind}||" for kind in PLAIN})
    out.append("**Objects and barrier** (pickled Python objects; no dtype)\n")
    out.append("| collective | result |")
    out.append("| --- | --- |")
    for kind in NO_DTYPE:
        out.append(f"| `{kind}` | {_cell_text(c[f'{kind}||'], errors)} |")
    out.append("")
    out.append("**How AVG is computed** (a sum that overflows float16)\n")
    out.append("| probe | result |")
    out.append("| --- | --- |")
    for kind in PROBES:
        out.append(f"| {kind} | {_cell_text(c[f'{kind}||'], errors)} |")
    out.append("")
    out.append("**Errors** (exception class and the first line of its message, as raised on both ranks)\n")
    out.append("| # | exception |")
    out.append("| --- | --- |")
    for i, e in enumerate(errors, 1):
        cls, _, msg = e.partition(": ")
        msg = msg.replace("|", "&#124;")
        out.append(f"| E{i} | `{cls}`: {msg} |")
    out.append("")
    out.append("**Warnings** (Python warnings a call emitted, on either rank)\n")
    out.append("| collective | warning | cells |")
    out.append("| --- | --- | --- |")
    warned = data.get("warnings", {})
    for kind in REDUCING + PLAIN + NO_DTYPE:
        keys = [k for k in c if k.split("|")[0] == kind]
        texts = sorted({w for k in keys for w in warned.get(k, [])})
        for w in texts:
            hit = [k for k in keys if w in warned.get(k, [])]
            where = "every cell" if len(hit) == len(keys) else ", ".join(
                " ".join(x for x in k.split("|")[1:] if x) for k in hit)
            cls, _, msg = w.partition(": ")
            out.append(f"| `{kind}` | `{cls}`: {msg.replace('|', '&#124;')} | {where} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        worker(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1:2] == ["capture"]:
        capture()
        print(render())
    else:
        print(render())
