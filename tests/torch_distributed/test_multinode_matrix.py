"""sub-skills/torch-distributed/references/multinode-rank-matrix.md is what two simulated nodes really
got: _multinode_matrix.py ran each case (two launcher processes with different node ranks, one
store on 127.0.0.1) and committed the capture (tests/torch_distributed/data/multinode_capture.json).
Here the page's block must equal the rendering of that capture word for word, the capture must hold
what the prose states, and the cheapest row (two bare processes joining through env:// from SLURM_*
variables, no launcher) runs live and must give the captured cells."""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _multinode_matrix as gen  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "sub-skills" / "torch-distributed" / "references" / "multinode-rank-matrix.md"
CAP = json.loads(gen.CAPTURE.read_text(encoding="utf-8"))


def workers(cid, node):
    return CAP[cid]["nodes"][node]["workers"]


def test_page_block_is_the_rendered_capture():
    assert set(CAP) == {c[0] for c in gen.CASES}
    assert gb.block(DOC.read_text(encoding="utf-8"), "multinode matrix").strip() == gen.render(CAP).strip()


def test_capture_holds_the_stated_rules():
    # static: the rank block follows --node-rank, not start order
    for cid in ("static", "static-rank1-first", "acc", "acc-file"):
        a, b = workers(cid, "A")[0], workers(cid, "B")[0]
        assert (a["RANK"], a["GROUP_RANK"], b["RANK"], b["GROUP_RANK"]) == ("0", "0", "1", "1"), cid
        assert a["MASTER_ADDR"] == "127.0.0.1" and a["TORCHELASTIC_RUN_ID"] == "none", cid
    # c10d: the workers' MASTER_ADDR is the rank-0 node's hostname and a new port, not the endpoint
    for cid in ("c10d-id", "c10d-noid", "c10d-minmax"):
        a = workers(cid, "A")[0]
        assert a["MASTER_ADDR"] == "<hostname>" and a["MASTER_PORT"] == "<other port>", cid
        assert a["WORLD_SIZE"] == "2" and workers(cid, "B")[0]["WORLD_SIZE"] == "2", cid
    assert workers("c10d-noid", "A")[0]["TORCHELASTIC_RUN_ID"] == "none"
    assert workers("c10d-id", "A")[0]["TORCHELASTIC_RUN_ID"] == "job7"
    # Kubeflow: torchrun replaces the operator's RANK (pod index) with the worker's global rank
    assert [workers("pet", n)[0]["RANK"] for n in "AB"] == ["0", "1"]
    assert workers("pet", "B")[0]["GROUP_RANK"] == "1"
    # env:// with no launcher: only what the script/operator set; torchrun's variables stay unset
    for cid in ("slurm-env", "kf-python"):
        for n in "AB":
            w = workers(cid, n)[0]
            assert w["all_reduce(rank)"] == "1" and w["GROUP_RANK"] is None and w["TORCHELASTIC_RUN_ID"] is None
    assert workers("kf-python", "A")[0]["LOCAL_RANK"] is None
    # deepspeed --no_ssh: no rendezvous variables; CROSS_* and --local_rank instead
    for n, rank in (("A", "0"), ("B", "1")):
        w = workers("ds", n)[0]
        assert (w["RANK"], w["CROSS_RANK"], w["CROSS_SIZE"], w["LOCAL_SIZE"], w["WORLD_SIZE"]) == (rank, rank, "2", "1", "2")
        assert w["argv"] == "--local_rank=0 env" and w["GROUP_RANK"] is None and w["all_reduce(rank)"] == "1"
    # unset main_process_port: accelerate uses 29500 on both nodes
    assert workers("acc-noport", "A")[0]["MASTER_PORT"] == "29500"


def test_mistake_rows_fail_with_the_stated_errors():
    def exc(cid, node):
        n = CAP[cid]["nodes"][node]
        return n["rc"], (n["exception"] or [None, ""])[0], n["seconds"]
    rc, cls, s = exc("c10d-missing", "A")
    assert rc == 1 and cls == "RendezvousTimeoutError" and 8 <= s < 40
    rc, cls, s = exc("c10d-id-mismatch", "A")
    assert rc == 1 and cls == "RendezvousTimeoutError"
    assert exc("c10d-id-mismatch", "B")[1] == "RendezvousConnectionError"
    waiting = "Timed out after 9 seconds waiting for clients. 1/2 clients joined."   # timeout=8 given
    for cid in ("static-missing", "static-same-rank", "acc-same-rank", "acc-port0"):
        assert CAP[cid]["nodes"]["A"]["exception"] == ["DistStoreError", waiting], cid
    assert CAP["acc-port0"]["nodes"]["B"]["exception"][0] == "DistNetworkError"
    assert "EADDRINUSE" in CAP["static-same-rank"]["nodes"]["B"]["exception"][1]        # one-host artifact
    assert CAP["acc-same-rank"]["nodes"]["B"]["exception"][0] == "ConnectionError"
    assert CAP["slurm-missing"]["nodes"]["A"]["exception"][0] == "DistStoreError"
    assert CAP["ds-same-rank"]["nodes"]["A"]["exception"][0] == "DistStoreError"      # raised in the worker
    for cid in ("c10d-missing", "c10d-id-mismatch", "static-missing", "static-same-rank", "acc-same-rank", "acc-port0"):
        assert not any(n["workers"] for n in CAP[cid]["nodes"].values()), cid     # failed before any worker
    # nnodes differing between nodes: static keeps node 0's count; c10d depends on who joins last
    assert [workers("static-nnodes", n)[0]["GROUP_WORLD_SIZE"] for n in "AB"] == ["2", "3"]
    assert [workers("static-nnodes", n)[0]["WORLD_SIZE"] for n in "AB"] == ["2", "2"]
    assert [workers("c10d-nnodes-small-last", n)[0]["GROUP_WORLD_SIZE"] for n in "AB"] == ["2", "2"]
    assert [CAP["c10d-nnodes-small-first"]["nodes"][n]["exception"][0] for n in "AB"] == \
        ["RendezvousTimeoutError", "RendezvousConnectionError"]
    assert not any(n["workers"] for n in CAP["c10d-nnodes-small-first"]["nodes"].values())


def test_live_slurm_env_row_matches_the_capture():
    """The cheapest row, rerun: two bare processes (no launcher) join gloo via env://."""
    case = next(c for c in gen.CASES if c[0] == "slurm-env")
    with tempfile.TemporaryDirectory() as work:
        got = gen.run_case(case, os.path.realpath(work))
    for n in "AB":
        assert got["nodes"][n]["rc"] == 0, got
        assert got["nodes"][n]["workers"] == workers("slurm-env", n), got


def test_save_state_rows_on_node_local_folders():
    """Accelerate 1.15.0 save_state, two nodes in separate folders: save_on_each_node decides node 1's files."""
    files = {cid: [workers(cid, n)[0]["files in ckpt/"] for n in "AB"] for cid in ("save-default", "save-each")}
    assert files["save-default"] == ["model.safetensors,optimizer.bin,random_states_0.pkl", "random_states_1.pkl"]
    assert files["save-each"] == ["model.safetensors,optimizer.bin,random_states_0.pkl",
                                  "model.safetensors,optimizer.bin,random_states_1.pkl"]


def test_row_numbers_named_in_the_prose():
    doc = DOC.read_text(encoding="utf-8")
    n = {c[0]: i for i, c in enumerate(gen.CASES, 1)}
    assert f"(rows 1-{n['ds']} work, {n['acc-port0']}-{n['slurm-missing']} are mistakes, " \
           f"{n['save-default']}-{n['save-each']} `save_state`" in doc
    for cid in ("static-missing", "c10d-missing", "c10d-id-mismatch", "static-nnodes", "c10d-nnodes-small-first",
                "c10d-nnodes-small-last", "acc-port0", "slurm-missing", "ds-same-rank"):
        assert f"({n[cid]})" in doc or f"({n[cid]}) |" in doc, cid
    assert f"({n['acc-same-rank']}, {n['static-same-rank']})" in doc
    assert f"Rows {n['save-default']}-{n['save-each']} ran" in doc and f"(row {n['ds']}); no" in doc
