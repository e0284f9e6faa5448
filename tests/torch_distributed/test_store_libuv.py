"""Which TCPStore backend each launch path builds, and who reads USE_LIBUV (torch 2.13.0 CPU).

Set-19 miss s19-K8-02: the bundle said an exported USE_LIBUV=0 also reaches the store torchrun's agent
builds. It does not: torchrun's static and c10d rendezvous build TCPStore without use_libuv (the C++
default, True) and read neither USE_LIBUV nor an rdzv-conf key, and the workers' env:// store under
torchrun is a client built the same way. init_process_group without torchrun honours USE_LIBUV=0 and
?use_libuv=0. This wheel has libuv, so the rows read `store.libuvBackend` (what a build without libuv
would refuse with "use_libuv was requested but PyTorch was built without libuv support").

Jobs: _store_libuv_job.py (`paths`: every path in one process; `worker`: a gloo worker that reports its
store), started here with the environment under test.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _ports  # noqa: E402  (tests/_ports.py)

HERE = Path(__file__).resolve().parent
JOB = HERE / "_store_libuv_job.py"
SITE = Path(__import__("sysconfig").get_paths()["purelib"])


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def env_with(**kv):
    env = {k: v for k, v in os.environ.items() if k not in ("USE_LIBUV", "TORCHELASTIC_USE_AGENT_STORE",
                                                           "MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE",
                                                           "INIT_METHOD")}
    env.update(kv)
    return env


def flat(rows):
    return {k: (v if isinstance(v, bool) else v.get("ok", v.get("error"))) for k, v in rows.items()}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("libuv_paths")
    out = {}
    for label, extra in (("unset", {}), ("USE_LIBUV=0", {"USE_LIBUV": "0"})):
        subprocess.run([sys.executable, str(JOB), "paths", str(d / f"{label}.json")], env=env_with(**extra),
                       check=True, timeout=120, capture_output=True)
        out[label] = flat(json.loads((d / f"{label}.json").read_text()))
    return out


def test_init_process_group_handlers_read_the_query_then_USE_LIBUV_default_1(paths):
    u, z = paths["unset"], paths["USE_LIBUV=0"]
    assert (u["tcp://"], u["env://"]) == (True, True)                 # Linux default: libuv
    assert (z["tcp://"], z["env://"]) == (False, False)               # USE_LIBUV=0 honoured
    assert (u["tcp://?use_libuv=0"], u["env://?use_libuv=0"]) == (False, False)
    assert z["tcp://?use_libuv=1"] is True                            # the URL wins over the variable


def test_tcpstore_constructor_default_is_libuv_and_ignores_USE_LIBUV(paths):
    for env in paths.values():
        assert env["TCPStore()"] is True
        assert env["TCPStore(use_libuv=False)"] is False


def test_torchrun_agent_rendezvous_stores_ignore_USE_LIBUV_and_rdzv_conf(paths):
    for env in paths.values():
        for row in ("static rendezvous", "c10d rendezvous", "c10d rendezvous use_libuv=0 conf",
                    "c10d shared worker store"):
            assert env[row] is True, row


def test_agent_store_client_ignores_USE_LIBUV_and_the_url(paths):
    for env in paths.values():
        assert env["env:// agent-store client"] is True
        assert env["env://?use_libuv=0 agent-store client"] is True


def test_only_the_unused_elastic_helper_reads_USE_LIBUV(paths):
    assert paths["unset"]["elastic.utils create_c10d_store"] is True
    assert paths["USE_LIBUV=0"]["elastic.utils create_c10d_store"] is False
    callers = [p for p in (SITE / "torch").rglob("*.py")
               if "create_c10d_store(" in p.read_text(errors="ignore")
               and p.name not in ("distributed.py", "rendezvous.py")]
    assert callers == []                     # torchrun never calls elastic.utils.distributed.create_c10d_store
    readers = sorted(str(p.relative_to(SITE)) for p in (SITE / "torch/distributed").rglob("*.py")
                     if "USE_LIBUV" in p.read_text(errors="ignore"))
    assert readers == ["torch/distributed/elastic/utils/distributed.py", "torch/distributed/rendezvous.py"]
    for rel in ("elastic/rendezvous/static_tcp_rendezvous.py", "elastic/rendezvous/c10d_rendezvous_backend.py",
                "elastic/rendezvous/dynamic_rendezvous.py", "run.py", "launcher/api.py"):
        assert "use_libuv" not in (SITE / "torch/distributed" / rel).read_text(), rel


def test_the_error_is_in_the_wheel():
    lib = (SITE / "torch/lib/libtorch_cpu.so").read_bytes()
    assert b"use_libuv was requested but PyTorch was built without libuv support, run with USE_LIBUV=0 to disable it." in lib


def run_workers(tmp, launcher, **extra):
    out = tmp / launcher
    out.mkdir()
    if launcher == "python":
        port = str(free_port())
        procs = [subprocess.Popen([sys.executable, str(JOB), "worker", str(out)],
                                  env=env_with(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, RANK=str(r),
                                               WORLD_SIZE="2", **extra),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for r in range(2)]
        for p in procs:
            p.wait(timeout=90)
            assert p.returncode == 0, p.stderr.read().decode()[-2000:]
    else:
        rdzv = ["--master-port", str(free_port())] if launcher.startswith("static") else ["--standalone"]
        subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", *rdzv,
                        str(JOB), "worker", str(out)], env=env_with(**extra), check=True, timeout=120,
                       capture_output=True)
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


def test_plain_python_env_workers_honour_USE_LIBUV_0(tmp_path):
    for r in run_workers(tmp_path, "python", USE_LIBUV="0"):
        assert (r["libuvBackend"], r["agent_store"], r["all_reduce"]) == (False, None, 2.0)


@pytest.mark.parametrize("launcher", ["static", "c10d"])
def test_torchrun_workers_keep_libuv_with_USE_LIBUV_0(tmp_path, launcher):
    for r in run_workers(tmp_path, launcher, USE_LIBUV="0"):
        assert (r["libuvBackend"], r["agent_store"], r["USE_LIBUV"]) == (True, "True", "0")


def test_torchrun_workers_keep_libuv_with_use_libuv_0_in_the_url(tmp_path):
    for r in run_workers(tmp_path, "static-url", USE_LIBUV="0", INIT_METHOD="env://?use_libuv=0"):
        assert (r["libuvBackend"], r["agent_store"]) == (True, "True")
