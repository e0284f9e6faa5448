"""sub-skills/torch-distributed/references/torchrun-worker-matrix.md is what torchrun (torch 2.13.0)
really does: _torchrun_matrix.generate() runs torch.distributed.run in-process for each configuration
with workers that record their argv and environment; the page's block must equal it word for word,
and the rules that launch-torchrun.md states from it are checked on the generated rows."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _torchrun_matrix as gen  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "sub-skills" / "torch-distributed" / "references" / "torchrun-worker-matrix.md"
LAUNCH = DOC.with_name("launch-torchrun.md")


@pytest.fixture(scope="module")
def out():
    return gen.generate()


def rows(out):
    return {r.split(" | ")[1]: r for r in out["matrix"].splitlines() if r.startswith("| ") and r[2].isdigit()}


def test_matrix_is_the_generated_one(out):
    assert gb.block(DOC.read_text(encoding="utf-8"), "torchrun matrix").strip() == out["matrix"].strip()


def test_key_cells(out):
    r = rows(out)
    assert len(r) == len(gen.CASES)
    legend = out["matrix"].splitlines()[0]
    for common in ("`ROLE_NAME=default`", "`TORCHELASTIC_USE_AGENT_STORE=True`", "`TORCH_NCCL_ASYNC_ERROR_HANDLING=1`",
                   "`TORCHELASTIC_SIGNALS_TO_HANDLE=SIGTERM,SIGINT,SIGHUP,SIGQUIT`"):
        assert common in legend
    # single node without --master-port becomes c10d on a free port with a uuid id; static keeps 127.0.0.1 and none
    one = r["single node, 2 workers"]
    assert "`TORCHELASTIC_RUN_ID=<uuid>`" in one and "`MASTER_PORT=<free port>`" in one and "`MASTER_ADDR=<hostname>`" in one
    static = r["single node, --master-port given (static)"]
    assert "`TORCHELASTIC_RUN_ID=none`" in static and "`MASTER_ADDR=127.0.0.1`" in static and "`MASTER_PORT=<port>`" in static
    assert "`RANK`: `2`, `3`" in r["static 2 nodes, node 1"] and "`GROUP_RANK=1`" in r["static 2 nodes, node 1"]
    assert "`WORLD_SIZE=4`" in r["static 2 nodes, node 0"] and "`GROUP_WORLD_SIZE=2`" in r["static 2 nodes, node 0"]
    assert "`TORCHELASTIC_RUN_ID=job7`" in r["c10d rendezvous"]
    assert "`TORCHELASTIC_MAX_RESTARTS=2`" in r["--max-restarts 2"] and "`TORCHELASTIC_RESTART_COUNT=0`" in r["--max-restarts 2"]
    again = r["--max-restarts 2, rank 1 exits 3 once: attempt 1"]
    assert "`TORCHELASTIC_RESTART_COUNT=1`" in again and "attempt_1/1/error.json" in again and "`RANK`: `0`, `1`" in again
    # OMP_NUM_THREADS: 1 for several workers with none set; never with one worker; a shell value passes through
    assert "OMP_NUM_THREADS" not in r["1 worker (OMP_NUM_THREADS unset)"].split(" | ")[5]
    assert "OMP_NUM_THREADS" not in r["shell has OMP_NUM_THREADS=4"].split(" | ")[5]
    assert "`OMP_NUM_THREADS=1`" in r["PET_NPROC_PER_NODE=2, no flag"]
    assert "`<logs>/<run>/attempt_0/1/error.json`" in r["logs: filter, tee, log dir"]
    assert "| `python -u -m train lr=0.1` |" in r["-m (module)"]
    assert "| `./train.py lr=0.1` |" in r["--no-python"]
    assert "`LOCAL_RANK=0`" in r["--virtual-local-rank"] and "`CUDA_VISIBLE_DEVICES`: `0`, `1`" in r["--virtual-local-rank"]
    assert "`CUDA_VISIBLE_DEVICES`: `4`, `5`" in r["--virtual-local-rank, shell has CUDA_VISIBLE_DEVICES=4,5"]


def test_launch_page_table_names_every_variable(out):
    """The short table in launch-torchrun.md ("What each worker gets") names every variable a row shows."""
    text = LAUNCH.read_text(encoding="utf-8")
    section = text.split("## What each worker gets", 1)[1].split("\n## ", 1)[0]
    cells = out["matrix"].splitlines()[0] + " ".join(r.split(" | ")[5] for r in rows(out).values())
    shown = set(re.findall(r"`([A-Z][A-Z0-9_]+)[=`]", cells))
    assert len(shown) >= 20
    assert not {n for n in shown if f"`{n}`" not in section}, sorted(n for n in shown if f"`{n}`" not in section)
    assert "torchrun-worker-matrix.md" in section


def test_row_numbers_named_in_the_prose(out):
    doc = DOC.read_text(encoding="utf-8")
    n = {r.split(" | ")[1]: int(r.split(" | ")[0].strip("| ")) for r in rows(out).values()}
    assert f"Rows {n['static 2 nodes, node 0']}–{n['static 2 nodes, node 1']} are the" in doc
    assert f"(rows {n['single node, --master-port given (static)']}, {n['static 2 nodes, node 0']}, " \
           f"{n['static 2 nodes, node 1']})" in doc
    assert f"(rows {n['--virtual-local-rank']}–{n['--virtual-local-rank, shell has CUDA_VISIBLE_DEVICES=4,5']})" in doc
    assert f"(row {n['--max-restarts 2, rank 1 exits 3 once: attempt 1']}, rank 1" in doc
    assert f"(rows {n['-m (module)']}–{n['--no-python']})" in doc
    assert f"(row {n['PET_NPROC_PER_NODE=2, no flag']})" in doc and f"(row {n['logs: filter, tee, log dir']})" in doc


def test_restart_block_is_the_generated_one(out):
    """s6-mn-01: under c10d the shared store keeps MASTER_ADDR/MASTER_PORT across a restart; only
    TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 gives a new free port each round; static keeps the given port."""
    assert gb.block(DOC.read_text(encoding="utf-8"), "torchrun restarts").strip() == out["restarts"].strip()
    r = {x.split(" | ")[1]: x for x in out["restarts"].splitlines() if x.startswith("| ") and x[2].isdigit()}
    assert len(r) == len(gen.RESTART_CASES)
    shared, fresh, static = r["c10d, shared store (default)"], r["c10d, TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1"], \
        r["static, --master-port given"]
    assert shared.count("`MASTER_PORT=<port A>`") == 2 and "<port B>" not in shared
    assert shared.count("`TORCHELASTIC_USE_AGENT_STORE=True`") == 2
    assert "`TORCHELASTIC_RESTART_COUNT=1`: `MASTER_ADDR=<hostname>` `MASTER_PORT=<port B>`" in fresh
    assert fresh.count("`TORCHELASTIC_USE_AGENT_STORE=False`") == 2
    assert static.count("`MASTER_ADDR=127.0.0.1` `MASTER_PORT=<port>`") == 2


def test_exported_master_vars_are_overwritten_pet_form_is_read(out):
    """s11-td-i02: torchrun reads --master-port / PET_MASTER_PORT, never an exported MASTER_PORT; the
    exported MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE/LOCAL_RANK are overwritten in every worker; a shell
    CUDA_VISIBLE_DEVICES passes through while LOCAL_RANK still counts from 0."""
    r = rows(out)
    exported = r["shell exports MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK"].split(" | ")[5]
    for cell in ("`MASTER_PORT=<free port>`", "`MASTER_ADDR=<hostname>`", "`RANK`: `0`, `1`", "`WORLD_SIZE=2`",
                 "`LOCAL_RANK`: `0`, `1`", "`TORCHELASTIC_RUN_ID=<uuid>`"):
        assert cell in exported, cell
    pet = r["shell has PET_MASTER_ADDR, PET_MASTER_PORT, no flag"].split(" | ")[5]
    assert "`MASTER_PORT=<port>`" in pet and "`MASTER_ADDR=127.0.0.1`" in pet and "`TORCHELASTIC_RUN_ID=none`" in pet
    gpus = r["shell has CUDA_VISIBLE_DEVICES=4,5 (second job on one machine)"].split(" | ")[5]
    assert "CUDA_VISIBLE_DEVICES" not in gpus and "`LOCAL_RANK`: `0`, `1`" in gpus
    n = {k: int(v.split(" | ")[0].strip("| ")) for k, v in r.items()}
    doc = DOC.read_text(encoding="utf-8")
    assert f"(row {n['shell exports MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK']}: the shell's" in doc
    assert f"(row {n['shell has PET_MASTER_ADDR, PET_MASTER_PORT, no flag']})." in doc
    assert f"(row {n['shell has CUDA_VISIBLE_DEVICES=4,5 (second job on one machine)']}):" in doc
