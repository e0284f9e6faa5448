"""Reproduce torch 2.13.0 distributed failures on CPU and check the catalog recognises the exact text.

- one interpreter walks through single-process failures (env:// without a launcher, store
  port in use / unreachable / unresolvable, DDP on a 1-rank gloo group, DCP load errors,
  torch.load of broken files, FSDP2 state dicts, C++ extension builds ...), each behind a
  `=== CASE name` marker;
- small `torchrun --nproc_per_node=2` gloo jobs provoke one multi-rank failure each (a rank
  raising while the other waits in a collective, a hang ending in a gloo timeout, different
  models per rank, mismatched collectives, a monitored barrier, a c10d rendezvous that never
  completes, the agent itself receiving SIGTERM) and yield the torchrun cascade text.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest




import _repro as R  # noqa: E402  (tests/failure_triage is on sys.path: conftest.py)

SINGLE_CASES = R.CASE_PRELUDE + r'''
import argparse, datetime, os, socket, sys, tempfile
import torch, torch.distributed as dist, torch.nn as nn
T = datetime.timedelta
tmp = tempfile.mkdtemp()

case("env_not_set", lambda: dist.init_process_group("gloo"))
case("no_default_pg", lambda: dist.all_reduce(torch.ones(1)))
case("nccl_not_built", lambda: dist.init_process_group("nccl", init_method="tcp://127.0.0.1:1", rank=0, world_size=1))
case("no_cuda", lambda: torch.zeros(1).cuda())
case("unknown_backend", lambda: dist.init_process_group("glooo", init_method="tcp://127.0.0.1:1", rank=0, world_size=1))

busy = socket.socket(); busy.bind(("127.0.0.1", 0)); busy.listen()
case("port_in_use", lambda: dist.TCPStore("127.0.0.1", busy.getsockname()[1], 1, True, timeout=T(seconds=5)))
free_port = int(sys.argv[1])   # from tests/_ports.py: outside the ephemeral range, reserved
case("clients_timeout", lambda: dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port}",
                                                        rank=0, world_size=2, timeout=T(seconds=2)))
case("client_connect_timeout", lambda: dist.TCPStore("127.0.0.1", 1, 2, False, timeout=T(seconds=2)))
case("host_not_resolved", lambda: dist.TCPStore("node-does-not-exist.invalid", 29500, 2, False, timeout=T(seconds=2)))

def cpp_build_error():
    src = os.path.join(tmp, "bad_ext.cpp")
    open(src, "w").write("#error this extension does not compile\n")
    from torch.utils.cpp_extension import load
    build = os.path.join(tmp, "build"); os.makedirs(build)
    load(name="bad_ext", sources=[src], build_directory=build, verbose=False)
case("cpp_build_error", cpp_build_error)
def cuda_home_unset():
    from torch.utils import cpp_extension
    cpp_extension._join_cuda_home("bin")
case("cuda_home_unset", cuda_home_unset)

# --- everything below runs in a 1-rank gloo group
dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "pg"), rank=0, world_size=1)
case("init_twice", lambda: dist.init_process_group("gloo", init_method="file://" + os.path.join(tmp, "pg2"),
                                                   rank=0, world_size=1))
case("invalid_root", lambda: dist.broadcast(torch.ones(2), src=3))
case("complex_max", lambda: dist.all_reduce(torch.ones(2, dtype=torch.complex64), op=dist.ReduceOp.MAX))
case("new_group_too_big", lambda: dist.new_group([0, 1]))
def mesh_too_big():
    from torch.distributed.device_mesh import init_device_mesh
    init_device_mesh("cpu", (2, 2))
case("mesh_too_big", mesh_too_big)

class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 2)
    def forward(self, x):
        return self.a(x)
def ddp_unused():
    m = nn.parallel.DistributedDataParallel(TwoHeads())
    for _ in range(2):
        m(torch.randn(1, 2)).sum().backward()
case("ddp_unused", ddp_unused)
def ddp_find_unused_not_needed():
    m = nn.parallel.DistributedDataParallel(nn.Linear(2, 2), find_unused_parameters=True)
    m(torch.randn(1, 2)).sum().backward()
case("ddp_find_unused_not_needed", ddp_find_unused_not_needed)
def ddp_shared_layer_reentrant_checkpoint():
    from torch.utils.checkpoint import checkpoint
    class Shared(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(2, 2)
        def forward(self, x):
            return checkpoint(self.l, checkpoint(self.l, x, use_reentrant=True), use_reentrant=True)
    m = nn.parallel.DistributedDataParallel(Shared(), find_unused_parameters=True)
    m(torch.randn(1, 2, requires_grad=True)).sum().backward()
case("ddp_shared_layer_reentrant_checkpoint", ddp_shared_layer_reentrant_checkpoint)
def ddp_frozen():
    m = nn.Linear(2, 2)
    for p in m.parameters():
        p.requires_grad_(False)
    nn.parallel.DistributedDataParallel(m)
case("ddp_frozen", ddp_frozen)
def inplace():
    w = torch.ones(2, 2, requires_grad=True)
    y = (w * 2).sigmoid()
    y.add_(1)
    y.sum().backward()
case("inplace", inplace)
def reentrant_grad():
    from torch.utils.checkpoint import checkpoint
    x = torch.ones(2, requires_grad=True)
    y = checkpoint(lambda a: a * 2, x, use_reentrant=True)
    torch.autograd.grad(y.sum(), x)
case("reentrant_grad", reentrant_grad)

# ZeRO-3 leaves a shape-[0] placeholder in .weight outside the engine's gather hooks
case("embedding_placeholder_weight", lambda: torch.nn.functional.embedding(torch.tensor([0]), torch.empty(0)))
case("bf16_input_fp32_weight", lambda: nn.Linear(2, 2)(torch.ones(1, 2, dtype=torch.bfloat16)))
case("state_dict_prefix", lambda: nn.Linear(2, 2).load_state_dict(
    {"module.weight": torch.zeros(2, 2), "module.bias": torch.zeros(2)}))
def fsdp2_full_state_dict():
    from torch.distributed.fsdp import fully_shard
    m = nn.Sequential(nn.Linear(2, 2))
    fully_shard(m)
    m.load_state_dict(nn.Sequential(nn.Linear(2, 2)).state_dict())
case("fsdp2_full_state_dict", fsdp2_full_state_dict)
def fsdp1_on_cpu():
    from torch.distributed.fsdp import FullyShardedDataParallel
    FullyShardedDataParallel(nn.Linear(2, 2))
case("fsdp1_on_cpu", fsdp1_on_cpu)

import torch.distributed.checkpoint as dcp
ck = os.path.join(tmp, "dcp")
dcp.save({"a": torch.zeros(2)}, checkpoint_id=ck)
case("dcp_missing_key", lambda: dcp.load({"a": torch.zeros(2), "b": torch.zeros(2)}, checkpoint_id=ck))
case("dcp_size_mismatch", lambda: dcp.load({"a": torch.zeros(3)}, checkpoint_id=ck))
case("dcp_no_metadata", lambda: dcp.load({"a": torch.zeros(2)}, checkpoint_id=os.path.join(tmp, "absent")))

def weights_only():
    p = os.path.join(tmp, "args.pt")
    torch.save({"args": argparse.Namespace(lr=0.1)}, p)
    torch.load(p)
case("weights_only", weights_only)
def truncated():
    p = os.path.join(tmp, "trunc.pt")
    torch.save({"a": torch.zeros(100)}, p)
    data = open(p, "rb").read()
    open(p, "wb").write(data[: len(data) // 2])
    torch.load(p)
case("truncated", truncated)
def lfs_pointer():
    p = os.path.join(tmp, "pytorch_model.bin")
    open(p, "w").write("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n")
    torch.load(p, weights_only=False)
case("lfs_pointer", lfs_pointer)
case("cpu_oom", lambda: torch.empty(2 ** 61, dtype=torch.uint8))

def ninja_missing():
    os.environ["PATH"] = "/nonexistent"
    from torch.utils.cpp_extension import verify_ninja_availability
    verify_ninja_availability()
case("ninja_missing", ninja_missing)
'''

SINGLE_PARAMS = [
    pytest.param("env_not_set", marks=pytest.mark.reproduces("torch-env-var-not-set"), id="env_not_set"),
    pytest.param("no_default_pg", marks=pytest.mark.reproduces("torch-default-pg-not-initialized"), id="no_default_pg"),
    pytest.param("nccl_not_built", marks=pytest.mark.reproduces("torch-nccl-not-built"), id="nccl_not_built"),
    pytest.param("no_cuda", marks=pytest.mark.reproduces("torch-not-compiled-with-cuda"), id="no_cuda"),
    pytest.param("unknown_backend", marks=pytest.mark.reproduces("torch-unknown-backend"), id="unknown_backend"),
    pytest.param("port_in_use", marks=pytest.mark.reproduces("torch-store-port-in-use"), id="port_in_use"),
    pytest.param("clients_timeout", marks=pytest.mark.reproduces("torch-store-clients-timeout"), id="clients_timeout"),
    pytest.param("client_connect_timeout", marks=pytest.mark.reproduces("torch-store-client-connect-retrying", "torch-store-client-connect-timeout"), id="client_connect_timeout"),
    pytest.param("host_not_resolved", marks=pytest.mark.reproduces("torch-store-host-not-resolved"), id="host_not_resolved"),
    pytest.param("cpp_build_error", marks=pytest.mark.reproduces("torch-cpp-extension-build-error", "os-ninja-build-stopped"), id="cpp_build_error"),
    pytest.param("cuda_home_unset", marks=pytest.mark.reproduces("torch-cpp-extension-cuda-home-unset"), id="cuda_home_unset"),
    pytest.param("init_twice", marks=pytest.mark.reproduces("torch-pg-initialized-twice"), id="init_twice"),
    pytest.param("invalid_root", marks=pytest.mark.reproduces("torch-gloo-invalid-root-rank"), id="invalid_root"),
    pytest.param("complex_max", marks=pytest.mark.reproduces("torch-allreduce-op-on-complex"), id="complex_max"),
    pytest.param("new_group_too_big", marks=pytest.mark.reproduces("torch-new-group-too-large"), id="new_group_too_big"),
    pytest.param("mesh_too_big", marks=pytest.mark.reproduces("torch-device-mesh-too-large"), id="mesh_too_big"),
    pytest.param("ddp_unused", marks=pytest.mark.reproduces("torch-ddp-unused-parameters"), id="ddp_unused"),
    pytest.param("ddp_find_unused_not_needed", marks=pytest.mark.reproduces("torch-ddp-find-unused-not-needed"), id="ddp_find_unused_not_needed"),
    pytest.param("ddp_frozen", marks=pytest.mark.reproduces("torch-ddp-no-trainable-parameters"), id="ddp_frozen"),
    pytest.param("ddp_shared_layer_reentrant_checkpoint", marks=pytest.mark.reproduces("torch-ddp-mark-variable-ready-twice"), id="ddp_shared_layer_reentrant_checkpoint"),
    pytest.param("inplace", marks=pytest.mark.reproduces("torch-inplace-modified-for-backward"), id="inplace"),
    pytest.param("reentrant_grad", marks=pytest.mark.reproduces("torch-checkpoint-use-reentrant-incompatible"), id="reentrant_grad"),
    pytest.param("embedding_placeholder_weight", marks=pytest.mark.reproduces("torch-embedding-weight-not-2d"), id="embedding_placeholder_weight"),
    pytest.param("bf16_input_fp32_weight", marks=pytest.mark.reproduces("torch-matmul-dtype-mismatch"), id="bf16_input_fp32_weight"),
    pytest.param("state_dict_prefix", marks=pytest.mark.reproduces("torch-load-state-dict-mismatch"), id="state_dict_prefix"),
    pytest.param("fsdp2_full_state_dict", marks=pytest.mark.reproduces("torch-load-state-dict-mismatch", "torch-dtensor-mixed-with-tensor"), id="fsdp2_full_state_dict"),
    pytest.param("fsdp1_on_cpu", marks=pytest.mark.reproduces("torch-fsdp1-needs-accelerator"), id="fsdp1_on_cpu"),
    pytest.param("dcp_missing_key", marks=pytest.mark.reproduces("torch-dcp-checkpoint-exception", "torch-dcp-missing-key"), id="dcp_missing_key"),
    pytest.param("dcp_size_mismatch", marks=pytest.mark.reproduces("torch-dcp-size-mismatch"), id="dcp_size_mismatch"),
    pytest.param("dcp_no_metadata", marks=pytest.mark.reproduces("torch-dcp-metadata-not-found"), id="dcp_no_metadata"),
    pytest.param("weights_only", marks=pytest.mark.reproduces("torch-load-weights-only"), id="weights_only"),
    pytest.param("truncated", marks=pytest.mark.reproduces("torch-load-truncated-archive"), id="truncated"),
    pytest.param("lfs_pointer", marks=pytest.mark.reproduces("python-unpickling-invalid-load-key"), id="lfs_pointer"),
    pytest.param("cpu_oom", marks=pytest.mark.reproduces("torch-cpu-allocator-oom"), id="cpu_oom"),
    pytest.param("ninja_missing", marks=pytest.mark.reproduces("torch-cpp-extension-ninja-missing"), id="ninja_missing"),
]

# Multi-rank jobs: the process group comes up with a generous timeout (a busy machine may
# start the ranks seconds apart); short timeouts go on a second group made for the failure.
_PG = """
import datetime, os, time, torch, torch.distributed as dist, torch.nn as nn
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=120))
rank = dist.get_rank()
dist.barrier()
"""
JOBS = {
    # rank 1 fails; rank 0 is inside an all_reduce when rank 1's sockets close
    "peer_raises": (_PG + """
if rank == 1:
    dist.destroy_process_group()
    time.sleep(3)
    raise ValueError("rank 1 fails on purpose")
dist.all_reduce(torch.ones(2))
""", ["--monitor-interval=1"]),
    "peer_hangs": (_PG + """
short = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=3))
if rank == 1:
    time.sleep(120)
dist.all_reduce(torch.ones(2), group=short)
""", []),
    "ddp_model_differs": (_PG + """
m = nn.Linear(2, 2) if rank == 0 else nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
nn.parallel.DistributedDataParallel(m)
""", []),
    "collective_mismatch": (_PG + """
if rank == 0:
    dist.all_reduce(torch.ones(2))
else:
    dist.broadcast(torch.ones(2), src=0)
""", []),
    "monitored_barrier": (_PG + """
if rank == 1:
    time.sleep(120)
dist.monitored_barrier(timeout=datetime.timedelta(seconds=3))
""", []),
}
JOB_ENV = {"collective_mismatch": {"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}}
JOB_PARAMS = [
    pytest.param("peer_raises", marks=pytest.mark.reproduces("torch-gloo-peer-connection-lost", "torch-elastic-sending-sigterm", "torch-elastic-worker-failed-exitcode", "torch-elastic-child-failed-error", "torch-elastic-root-cause-header", "torch-elastic-summary-sigterm", "torch-elastic-traceback-hint", "torch-elastic-omp-num-threads"), id="peer_raises"),
    pytest.param("peer_hangs", marks=pytest.mark.reproduces("torch-gloo-timeout"), id="peer_hangs"),
    pytest.param("ddp_model_differs", marks=pytest.mark.reproduces("torch-ddp-model-differs-across-ranks"), id="ddp_model_differs"),
    pytest.param("collective_mismatch", marks=pytest.mark.reproduces("torch-collective-mismatch-detected"), id="collective_mismatch"),
    pytest.param("monitored_barrier", marks=pytest.mark.reproduces("torch-monitored-barrier-failed"), id="monitored_barrier"),
]


def _job(name: str) -> tuple[int, str]:
    code, extra = JOBS[name]
    env = R.child_env(**JOB_ENV.get(name, {}))
    if name == "peer_raises":  # torchrun only prints its OMP_NUM_THREADS note when the variable is unset
        env.pop("OMP_NUM_THREADS")
    return R.run_torchrun(code, nproc=2, timeout=300, env=env, extra_args=extra)


def _rendezvous_timeout() -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text("import time\ntime.sleep(60)\n")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc_per_node=1",
               "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{R.free_port()}",
               "--rdzv-conf", "join_timeout=5", str(script)]
        return R._run(cmd, 240, R.child_env(), tmp)


def _agent_sigterm() -> tuple[int, str]:
    """Start torchrun, wait until both workers run, then SIGTERM the agent (as a scheduler would)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "train.py"
        script.write_text(f"import pathlib, os, time\npathlib.Path({tmp!r}, 'up-' + os.environ['RANK']).touch()\n"
                          "time.sleep(120)\n")
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               f"--master_port={R.free_port()}", str(script)]
        log = Path(tmp) / "log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=R.child_env(), cwd=tmp,
                                    start_new_session=True)
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline and not all((Path(tmp) / f"up-{r}").exists() for r in (0, 1)):
                time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                rc = proc.wait()
        return rc, log.read_text(errors="replace")


@pytest.fixture(scope="module")
def runs():
    with ThreadPoolExecutor(max_workers=3) as pool:
        single = pool.submit(R.run_python, SINGLE_CASES, 300, None, [str(R.free_port())])
        jobs = {name: pool.submit(_job, name) for name in JOBS}
        rdzv = pool.submit(_rendezvous_timeout)
        agent = pool.submit(_agent_sigterm)
        return {"single": R.split_cases(single.result()[1]),
                "jobs": {name: f.result() for name, f in jobs.items()},
                "rdzv": rdzv.result(), "agent": agent.result()}


def _ids(request) -> tuple[str, ...]:
    """The catalog ids a test provokes: the arguments of its `reproduces` mark (one source of truth)."""
    return request.node.get_closest_marker("reproduces").args


@pytest.mark.parametrize("name", SINGLE_PARAMS)
def test_single_process_case(runs, name, request):
    ids = _ids(request)
    text = runs["single"].get(name)
    assert text is not None, f"case {name} did not run; cases seen: {sorted(runs['single'])}"
    if not any(R.entry(i)["role"] == "warning" for i in ids):
        assert "NOERROR" not in text.splitlines(), f"case {name} raised nothing:\n{text[-2000:]}"
    for entry_id in ids:
        R.assert_reproduced(text, entry_id)


@pytest.mark.parametrize("name", JOB_PARAMS)
def test_torchrun_job(runs, name, request):
    ids = _ids(request)
    rc, out = runs["jobs"][name]
    assert rc != 0, out[-3000:]
    for entry_id in ids:
        R.assert_reproduced(out, entry_id)


@pytest.mark.reproduces("torch-elastic-rendezvous-timeout")
def test_c10d_rendezvous_timeout(runs):
    rc, out = runs["rdzv"]
    assert rc != 0
    R.assert_reproduced(out, "torch-elastic-rendezvous-timeout")


@pytest.mark.reproduces("torch-elastic-agent-got-signal")
def test_agent_receives_sigterm(runs):
    rc, out = runs["agent"]
    assert rc != 0
    R.assert_reproduced(out, "torch-elastic-agent-got-signal")
