"""Who holds a launcher's port, and what a relaunch on it does (torch 2.13.0, CPU, gloo, the real torchrun).

Backs the "Address already in use" section of
sub-skills/torch-distributed/references/init-method-matrix.md and the triage entry torch-store-port-in-use
(set-19 misses s19-K1-05, s19-K4-10):

- a run that is still alive (its workers hang or sleep) keeps the port: the LISTEN socket on --master-port
  belongs to the torchrun **agent** (thread name `pt_elastic`), not to a worker; a second torchrun on that
  port fails at once in the agent with DistNetworkError ... EADDRINUSE and starts no worker;
- SIGKILL of that agent (what `fuser -k PORT/tcp` sends) frees the port even though its workers live on
  as orphans (they are store clients only, spawn and fork start methods alike), and the same port is
  reused at once although TIME_WAIT / FIN_WAIT2 sockets of the old run are still on it (a plain socket
  without SO_REUSEADDR cannot bind it at that moment); a second clean run right after also starts;
- TCPStore's listening socket has SO_REUSEADDR set (read back from the fd);
- `--rdzv-backend c10d --rdzv-endpoint HOST:PORT` with a store already listening there does not fail:
  the agent's server attempt fails silently, it joins that store as a client and the job runs, leaving
  its rendezvous keys in the foreign store.
"""
from __future__ import annotations

import datetime
import errno
import glob
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.append(str(HERE.parent))
import _ports  # noqa: E402


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_DISTRIBUTED", "TORCH_CPP", "MASTER_", "PET_", "TORCHELASTIC", "GLOO_", "NCCL_"))
           and k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS")}
    env.update(extra)
    return env

JOB = str(HERE / "_port_in_use_job.py")


def _torchrun(out, tag, args, hold=0.0, start_method="spawn"):
    env = _clean_env(OUT_DIR=str(out), TAG=tag, HOLD_S=str(hold), OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
    return subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", "2",
         "--start-method", start_method, *args, JOB],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _listen_inodes(port):
    inodes = set()
    for fn in ("/proc/net/tcp", "/proc/net/tcp6"):
        for ln in Path(fn).read_text().splitlines()[1:]:
            f = ln.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port and f[3] == "0A":  # 0A = LISTEN
                inodes.add(f[9])
    return inodes


def _listening_pids(port):
    """Pids holding a LISTEN socket on port: what `ss -ltnp 'sport = :PORT'` or `lsof -iTCP:PORT -sTCP:LISTEN` show."""
    inodes, pids = _listen_inodes(port), set()
    for d in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            link = os.readlink(d)
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            pids.add(int(d.split("/")[2]))
    return pids


def _ready(out, tag, n=2, wait=120):
    t0 = time.time()
    while len(glob.glob(f"{out}/ready-{tag}-*.json")) < n and time.time() - t0 < wait:
        time.sleep(0.2)
    return [json.loads(Path(f).read_text()) for f in sorted(glob.glob(f"{out}/ready-{tag}-*.json"))]


def _plain_bind(port):
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", port))
        return 0
    except OSError as e:
        return e.errno
    finally:
        s.close()


@pytest.mark.parametrize("start_method", ["spawn", "fork"])
def test_live_run_holds_port_in_agent_and_kill_frees_it_despite_time_wait(tmp_path, start_method):
    port = _ports.free_port()
    r1 = _torchrun(tmp_path, "r1", ["--master-port", str(port)], hold=300, start_method=start_method)
    workers = []
    try:
        ready = _ready(tmp_path, "r1")
        assert len(ready) == 2, r1.communicate(timeout=5)[0] if r1.poll() is not None else "r1 not ready"
        workers = [r["pid"] for r in ready]
        # the holder is the agent, not a worker
        assert _listening_pids(port) == {r1.pid}
        assert Path(f"/proc/{r1.pid}/comm").read_text().strip() == "pt_elastic"
        # a relaunch on the same port while r1 lives: the agent fails at once, no worker starts
        t = time.time()
        r2 = _torchrun(tmp_path, "r2", ["--master-port", str(port)])
        out2 = r2.communicate(timeout=150)[0]
        assert r2.returncode != 0 and time.time() - t < 60
        assert (f"DistNetworkError: The server socket has failed to listen on any local network address. port: {port}"
                in out2 and "EADDRINUSE" in out2), out2[-2000:]
        assert not glob.glob(f"{tmp_path}/ready-r2-*")
        # `fuser -k PORT/tcp` (SIGKILL to every process with a socket on local port PORT: the agent
        # only); os.kill of the listening pid where psmisc's fuser is not installed
        if shutil.which("fuser"):
            subprocess.run(["fuser", "-k", f"{port}/tcp"], capture_output=True, timeout=30)
        else:
            os.kill(r1.pid, signal.SIGKILL)
        r1.wait(timeout=30)
        assert r1.returncode == -signal.SIGKILL
        time.sleep(0.5)
        assert all(Path(f"/proc/{p}").exists() for p in workers), "workers outlive the agent (orphans)"
        assert _listening_pids(port) == set(), "orphaned workers do not hold the port"
        # the old run's server-side sockets are still on the port: a bind without SO_REUSEADDR fails ...
        assert _plain_bind(port) == errno.EADDRINUSE
        # ... the relaunch on the same port starts at once and runs
        r3 = _torchrun(tmp_path, "r3", ["--master-port", str(port)])
        out3 = r3.communicate(timeout=150)[0]
        assert r3.returncode == 0, out3[-2000:]
        assert [r["sum"] for r in _ready(tmp_path, "r3", wait=1)] == [3.0, 3.0]
        # and after a clean exit the port is free for the next run at once
        r4 = _torchrun(tmp_path, "r4", ["--master-port", str(port)])
        out4 = r4.communicate(timeout=150)[0]
        assert r4.returncode == 0, out4[-2000:]
    finally:
        for p in [r1.pid, *workers]:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def test_tcpstore_listen_socket_sets_so_reuseaddr():
    from torch.distributed import TCPStore
    port = _ports.free_port()
    store = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                     timeout=datetime.timedelta(seconds=30))
    inodes, flags = _listen_inodes(port), []
    for d in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{d}")
        except OSError:
            continue
        if link[8:-1] in inodes:
            sk = socket.socket(fileno=os.dup(int(d)))
            flags.append(sk.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR))
            sk.close()
    del store
    assert flags and all(f != 0 for f in flags), flags


def test_c10d_endpoint_with_a_live_store_joins_it_silently(tmp_path):
    from torch.distributed import TCPStore
    port = _ports.free_port()
    foreign = TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                       timeout=datetime.timedelta(seconds=60))
    p = _torchrun(tmp_path, "c", ["--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                                  "--rdzv-id", "job7"])
    out = p.communicate(timeout=200)[0]
    assert p.returncode == 0, out[-2000:]
    assert [r["sum"] for r in _ready(tmp_path, "c", wait=1)] == [3.0, 3.0]
    assert "EADDRINUSE" not in out and "address already in use" not in out.lower()
    assert foreign.check(["torch.rendezvous.job7"])  # its rendezvous state went into the foreign store
    # the same port under static rendezvous fails instead
    p = _torchrun(tmp_path, "s", ["--master-port", str(port)])
    out = p.communicate(timeout=150)[0]
    assert p.returncode != 0 and "EADDRINUSE" in out


def _tcp_states(port):
    states = set()
    for fn in ("/proc/net/tcp", "/proc/net/tcp6"):
        for ln in Path(fn).read_text().splitlines()[1:]:
            f = ln.split()
            if int(f[1].rsplit(":", 1)[1], 16) == port:
                states.add(f[3])
    return states


def test_outgoing_connection_holds_its_source_port_without_listening():
    # the rare case: a port that an outgoing connection got as its ephemeral source port. It shows as an
    # ESTABLISHED socket (01) on that local port with no LISTEN socket (0A), unlike a leftover store server
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.create_connection(srv.getsockname())
    conn, _ = srv.accept()
    try:
        eph = cli.getsockname()[1]
        lo, hi = _ports.ephemeral_range()
        assert lo <= eph <= hi
        assert _tcp_states(eph) == {"01"} and _listening_pids(eph) == set()
        assert _plain_bind(eph) == errno.EADDRINUSE
    finally:
        for sk in (conn, cli, srv):
            sk.close()


def test_dist_network_error_is_a_runtime_error():
    import torch.distributed as dist
    assert issubclass(dist.DistNetworkError, RuntimeError)
