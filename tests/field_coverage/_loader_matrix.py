"""Renders the prepared-dataloader matrix of _data_probe.py (2 gloo ranks, 13 items, DataLoader
batch_size 4) into sub-skills/training-loop-integration/references/prepared-loader-matrix.md.

`python tests/field_coverage/_loader_matrix.py OBS.json` rewrites the page's generated block from a
probe capture (torchrun --nproc_per_node 2 tests/field_coverage/_data_probe.py OBS.json);
test_data_sharding.py compares the committed block with a fresh run word for word."""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import _generated_blocks as gb  # noqa: E402

PAGE = HERE.parents[1] / "sub-skills" / "training-loop-integration" / "references" / "prepared-loader-matrix.md"
N = 13
KIND = {"map": "map-style (`__len__`)", "iter_len": "`IterableDataset` with `__len__`",
        "iter": "`IterableDataset`, no `__len__`"}


def _count(values):
    dup, miss = len(values) - len(set(values)), N - len(set(values))
    extra = [f"{dup} dup" for _ in [0] if dup] + [f"{miss} missing" for _ in [0] if miss]
    return f"{len(values)}" + (f" ({', '.join(extra)})" if extra else " exact")


def _outcome(row):
    ranks = row["ranks"]
    if any(r["error"] for r in ranks):
        return ("error", ranks[0]["error"])
    sizes = " / ".join(",".join(str(len(b)) for b in r["batches"]) for r in ranks)
    seen = _count([v for r in ranks for b in r["batches"] for v in b])
    rem = ranks[0]["remainder"]
    if "gather" in row:
        g, gm = _count(row["gather"]), _count(row["gather_for_metrics"])
    else:
        g = gm = "not run: sizes differ per rank"
    return (row["wrapper"], sizes, seen, str(rem), g, gm)


def _label(values, default_is):
    names = []
    for v in values:
        names.append(f"default (= {default_is})" if v is None else str(v))
    return ", ".join(names)


def render(matrix) -> str:
    """Rows merged where even_batches (then dispatch_batches) values give the same outcome."""
    groups = {}
    for row in matrix:
        key = (row["kind"], row["split"], row["drop"], _outcome(row))
        groups.setdefault(key, []).append(row)
    merged = {}
    for (kind, split, drop, out), rows in groups.items():
        disp = tuple(sorted({r["dispatch"] for r in rows}, key=str))
        even = sorted({r["even"] for r in rows})
        # only merge even_batches when both values share the same dispatch set
        for d in disp:
            evs = tuple(sorted({r["even"] for r in rows if r["dispatch"] == d}))
            merged.setdefault((kind, evs, split, drop, out), []).append(d)
        del even
    lines = ["| dataset | `dispatch_batches` | `even_batches` | `split_batches` | `drop_last` | wrapper "
             "| batch sizes rank 0 / rank 1 | samples seen (of 13) | `remainder` | `gather` returns "
             "| `gather_for_metrics` returns |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    order = {"map": 0, "iter_len": 1, "iter": 2}
    for (kind, evs, split, drop, out), disps in sorted(
            merged.items(), key=lambda kv: (order[kv[0][0]], str(sorted(kv[1], key=str)), kv[0][2], kv[0][3],
                                            kv[0][1])):
        default_is = "False" if kind == "map" else "True"
        ev = "either" if len(evs) == 2 else str(evs[0])
        d = _label(sorted(disps, key=lambda x: (x is not None, str(x))), default_is)
        if out[0] == "error":
            cells = ["error", out[1], "", "", "", ""]
        else:
            cells = list(out)
        lines.append(f"| {KIND[kind]} | {d} | {ev} | {split} | {drop} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    data = json.loads(Path(sys.argv[1]).read_text())
    gb.write(PAGE, {"prepared-loader-matrix": render(data["matrix"])})
