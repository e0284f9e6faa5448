"""DeviceMesh slicing on torch 2.13.0, run in ONE process on a fake process group (world size 8, rank 0,
`init_process_group("fake", store=FakeStore())`): every case is an expression evaluated in order on a
2x2x2 root mesh `m` (dims dp, cp, ep) or an unnamed 2x4 mesh `u`; the result (mesh names/sizes/ranks, a
value, or the exception class and first line) and any warning go into the capture, rendered into
sub-skills/torch-distributed/references/dtensor.md. Set-7 miss s7-td-01.

    python tests/torch_distributed/_mesh_slicing_matrix.py capture|render|write
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "sub-skills" / "torch-distributed" / "references" / "dtensor.md"
CAPTURE = Path(__file__).resolve().parent / "data" / "mesh_slicing_capture.json"
NAME = "mesh slicing"

# (expression, evaluated in order: earlier _flatten calls are visible to later cases)
CASES = [
    'm["dp"]',
    'm["ep"]',
    'm["dp", "cp"]',
    'm["dp", "ep"]',
    'm["cp", "dp"]',
    'm["dp", "cp", "ep"]',
    'm["tp"]',
    'm["dp", "cp"]["cp"]',
    'm["dp", "cp"]["ep"]',
    'm["dp_cp"]',
    'm["dp", "cp"]._flatten("dp_cp")',
    'm["dp_cp"]',
    'm["dp_cp", "ep"]',
    'm["ep", "dp_cp"]',
    'm["dp_cp", "cp"]',
    'm["dp_cp", "ep"]["ep"]',
    'm["dp", "cp"]._flatten("dp_cp")',
    'm["cp", "ep"]._flatten("dp_cp")',
    'm["dp", "cp"]._flatten("ep")',
    'm["cp", "ep"]._flatten()',
    'm["dp", "cp_ep"]',
    'm["dp", "ep"]._flatten("dp_ep")',
    'm["dp_ep", "cp"]',
    'DeviceMesh._concatenate([m["dp", "cp"]._flatten("dp_cp"), m["ep"]])',
    'm["dp_cp", "ep"].size(), m["dp_cp", "ep"].size(0), m["dp_cp", "ep"].get_local_rank("ep")',
    'm["dp_cp", "ep"].get_group("dp_cp").size(), m["dp"].get_group().size()',
    'm.get_group()',
    'm.size()',
    'm.get_local_rank()',
    'u.mesh_dim_names',
    'u["dp"]',
    'u.get_group(1).size(), u.size(1), u.get_local_rank(1)',
    'u.get_group()',
]


def _show(v):
    from torch.distributed.device_mesh import DeviceMesh
    if isinstance(v, DeviceMesh):
        dims = ", ".join(f"{n}={s}" for n, s in zip(v.mesh_dim_names or ("?",) * v.ndim, v.mesh.shape))
        return f"{v.ndim}-D mesh ({dims}), ranks {v.mesh.tolist()}"
    if isinstance(v, tuple):
        return ", ".join(_show(x) for x in v)
    return repr(v)


def collect():
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore
    dist.init_process_group("fake", rank=0, world_size=8, store=FakeStore())
    try:
        env = {"DeviceMesh": DeviceMesh,
               "m": init_device_mesh("cpu", (2, 2, 2), mesh_dim_names=("dp", "cp", "ep")),
               "u": init_device_mesh("cpu", (2, 4))}
        rows = []
        for expr in CASES:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    res = _show(eval(expr, env))  # noqa: S307 - our own fixed expressions
                except Exception as e:  # noqa: BLE001 - the class and first line are the result
                    res = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
            warns = sorted({f"{w.category.__name__}: {str(w.message).strip().splitlines()[0]}" for w in caught})
            rows.append({"expr": expr, "result": res, "warnings": warns})
        return {"torch": torch.__version__, "world_size": 8, "rank": 0, "rows": rows}
    finally:
        dist.destroy_process_group()


def render(cap) -> dict:
    out = [f"torch {cap['torch']}, fake process group, world size {cap['world_size']}, seen from rank {cap['rank']}; "
           "cases run top to bottom, so a `_flatten` stays registered for the rows below it.", "",
           "| # | Expression | Result on rank 0 | Warning |", "| --- | --- | --- | --- |"]
    for i, r in enumerate(cap["rows"], 1):
        warn = "; ".join(r["warnings"]) or "none"
        out.append(f"| {i} | `{r['expr']}` | {r['result'].replace('|', '/')} | {warn.replace('|', '/')} |")
    return {NAME: "\n".join(out) + "\n"}


if __name__ == "__main__" and sys.argv[1:2] == ["probe"]:
    import json
    print(json.dumps(collect(), sort_keys=True))
elif __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=collect, render=render,
           usage=__doc__)
