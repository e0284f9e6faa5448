"""Generator for the per-sampler table in sub-skills/training-loop-integration/references/prepare.md: what
`accelerator.prepare` does to each kind of sampler / dataset on 2 ranks, with use_seedable_sampler False and
True (accelerate 1.15.0, torch 2.13.0, 2 gloo CPU processes per config).

Each config is one 2-rank run of _sampler_shard_probe.py (ranks seeded differently, except `seedable_same`):
every rank records, per pass, the order its sampler (or iterable dataset) drew before sharding and the items it
got. Raw results: sampler_shard_capture.json; render() gives the page's block, compared word for word by
test_sampler_shard_matrix.py.

usage: python tests/accel_siblings/_sampler_shard_matrix.py capture|render|write|--check   (~60 s)
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

CAPTURE = HERE / "sampler_shard_capture.json"
PROBE = HERE / "_sampler_shard_probe.py"
PAGE = ROOT / "sub-skills" / "training-loop-integration" / "references" / "prepare.md"
CONFIGS = ("default", "seedable", "seedable_ds1", "seedable_ds2", "seedable_same")
CASES = {
    "random": "`shuffle=True` (`RandomSampler`)",
    "sequential": "no shuffle (`SequentialSampler`)",
    "weighted": "`WeightedRandomSampler`",
    "weighted_gen": "`WeightedRandomSampler(..., generator=torch.Generator().manual_seed(0))` on every rank",
    "custom_gen": "custom sampler drawing from its `self.generator`",
    "custom_nogen": "custom sampler drawing from the global RNG (no `generator`)",
    "batch_sampler": "`batch_sampler=BatchSampler(RandomSampler(ds), ...)`",
    "iterable": "`IterableDataset` shuffling with the global RNG (default: dispatched)",
    "iterable_gen": "`IterableDataset` drawing from its `self.generator` (default: dispatched)",
    "iterable_shard": "`IterableDataset` shuffling with the global RNG, `dispatch_batches=False`",
    "iterable_gen_shard": "`IterableDataset` drawing from its `self.generator`, `dispatch_batches=False`",
}


def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def run(config: str, work: Path) -> dict:
    out = work / config
    out.mkdir()
    port = _port()
    envs = [gb.child_env(work, PYTHONWARNINGS="ignore", ACCELERATE_DISABLE_RICH="1", RANK=str(r), LOCAL_RANK=str(r),
                         WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
            for r in range(2)]
    return gb.run_ranks([sys.executable, str(PROBE), config, str(out)], envs, out, timeout=180, err_key="crash",
                        tail=600)


def collect() -> dict:
    with tempfile.TemporaryDirectory() as w:
        return {c: run(c, Path(w)) for c in CONFIGS}


def shares(r0: list, r1: list, n: int = 16) -> str:
    both, seen = len(set(r0) & set(r1)), len(set(r0) | set(r1))
    if not both and seen == n:
        return "disjoint, all 16 seen"
    return f"**overlap {both}, {n - seen} of {n} never seen**"


def generator(case: dict, name: str) -> str:
    if case["dl_class"] == "DataLoaderDispatcher":
        return "rank 0's pass, sliced and sent to every rank (other ranks' draws unused)"
    if case["synchronized"]:
        where = "dataset's" if name.startswith("iterable") else "sampler's"
        return f"the {where} `generator`, rank 0's state broadcast each pass"
    if case["sampler_class"] == "SeedableRandomSampler":
        return "its own generator, reseeded to `data_seed` + epoch each pass (not broadcast)"
    if case["sampler_class"] == "SequentialSampler":
        return "nothing (fixed order)"
    if case.get("generator_attr") == "set":
        return "its own `generator` on each rank (seeded alike, not broadcast; advances each pass)"
    left = ", its `generator` left `None`" if case.get("generator_attr") == "None" else ""
    return f"each rank's global torch RNG (not broadcast{left})"


def same_order(a: dict, b: dict) -> str:
    if a["dl_class"] == "DataLoaderDispatcher":
        return "n/a (only rank 0's is used)"
    ok = [a["passes"][p]["drawn"] == b["passes"][p]["drawn"] for p in (0, 1)]
    return "yes" if all(ok) else "**no**"


def render(data: dict) -> dict:
    rows = ["| Passed to the `DataLoader` | `use_seedable_sampler` | After `prepare` | What each rank draws from "
            "| Same order on both ranks before sharding? | Ranks' shares, epoch 0 | `dl.set_epoch(0)`, then a pass: "
            "epoch 0's order again? | `data_seed` 1 vs 2: other order? |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, label in CASES.items():
        for cfg, flag in (("default", "False"), ("seedable_ds1", "True, `data_seed=1`")):
            a, b = data[cfg]["rank0"]["cases"][name], data[cfg]["rank1"]["cases"][name]
            after = f"`{a['sampler_class']}` in `{a['dl_class']}`"
            key = "got" if a["dl_class"] == "DataLoaderDispatcher" else "drawn"
            replay = "yes" if a["passes"][2][key] == a["passes"][0][key] else "no"
            if cfg == "default":
                ds = "not read"
            else:
                d1, d2 = (data[c]["rank0"]["cases"][name]["passes"][0][key] for c in ("seedable_ds1", "seedable_ds2"))
                ds = "yes" if d1 != d2 else "no (not read)"
            rows.append(f"| {label} | {flag} | {after} | {generator(a, name)} | {same_order(a, b)} | "
                        f"{shares(a['passes'][0]['got'], b['passes'][0]['got'])} | {replay} | {ds} |")
    same = data["seedable_same"]
    ok = [CASES[n].split(" (")[0] for n in CASES
          if shares(same["rank0"]["cases"][n]["passes"][1]["got"], same["rank1"]["cases"][n]["passes"][1]["got"])
          .startswith("disjoint")]
    nods = [CASES[n].split(" (")[0] for n in CASES
            if not shares(data["seedable"]["rank0"]["cases"][n]["passes"][0]["got"],
                          data["seedable"]["rank1"]["cases"][n]["passes"][0]["got"]).startswith("disjoint")]
    rnd = data["seedable"]["rank0"]["cases"]["random"]
    note = ("\nRun: 2 gloo CPU ranks, 16 items, batch size 2, rank r seeded with `torch.manual_seed(100 + r)` before "
            "`Accelerator` and before each `prepare` (ranks whose global RNG differs: `set_seed(s, device_specific="
            "True)`, no seed, or different RNG use between passes); `WeightedRandomSampler` without replacement "
            "so that an overlap is visible (`prepare_data_loader` does not look at `replacement`). "
            f"`use_seedable_sampler=True` without `data_seed` (the seed is then each rank's `torch.initial_seed()`): "
            f"`{rnd['sampler_class']}`, shares {shares(rnd['passes'][0]['got'], data['seedable']['rank1']['cases']['random']['passes'][0]['got'])}; "
            f"cases that overlapped: {'; '.join(nods)}. "
            f"With `use_seedable_sampler=True, data_seed=1` and every rank seeded alike, epoch 1 was disjoint for: "
            f"{'; '.join(ok)}.\n")
    return {"sampler shard": "\n".join(rows) + "\n" + note}


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=collect, render=render,
           usage=__doc__)
