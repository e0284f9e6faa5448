"""The torch side of the enroot/pyxis PyTorch hook (torch 2.13.0, CPU):

- rank 0's env:// store binds MASTER_PORT; a port that an *outgoing* connection on the node got as
  its ephemeral source port is taken, so the bind fails with EADDRINUSE (the hook's old 49152-65535
  range overlaps the kernel's ephemeral range; enroot 29541a8, issue #243);
- torchrun sets OMP_NUM_THREADS=1 only when it is unset and nproc_per_node > 1: an explicit value
  is passed through untouched.
Backs sub-skills/torch-distributed/references/schedulers-slurm-kubernetes.md#containers-pyxis-and-enroot.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap

INIT = textwrap.dedent("""
    import datetime, json, os, sys
    import torch.distributed as dist
    try:
        dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=5))
        out = {"ok": True}
    except Exception as e:
        out = {"type": type(e).__name__, "msg": str(e)}
    print("RESULT " + json.dumps(out))
""")


RANGE_FILE = "/proc/sys/net/ipv4/ip_local_port_range"


def test_master_port_taken_by_an_outgoing_connection_fails_rank0_bind():
    # a listener on an OS-chosen port, and an outgoing connection to it: the client socket's local port
    # is an ephemeral port handed out by the kernel (from ip_local_port_range), not listening
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    cli = socket.create_connection(srv.getsockname())
    conn, _ = srv.accept()
    eph = cli.getsockname()[1]
    if os.path.exists(RANGE_FILE):  # Linux: the port came from the kernel's ephemeral range
        lo, hi = map(int, open(RANGE_FILE).read().split())
        assert lo <= eph <= hi
    try:
        env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(eph), RANK="0", WORLD_SIZE="1",
                   OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="")
        p = subprocess.run([sys.executable, "-c", INIT], env=env, capture_output=True, text=True, timeout=120)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
        res = json.loads(line[len("RESULT "):])
    finally:
        for s in (conn, cli, srv):
            s.close()
    assert res.get("type") == "DistNetworkError", res
    assert "failed to listen on any local network address" in res["msg"]
    assert f"port: {eph}" in res["msg"] and "EADDRINUSE" in res["msg"]


def _torchrun_omp(monkeypatch, capfd, argv, preset):
    import torch.distributed.run as trun
    monkeypatch.setenv("OMP_NUM_THREADS", preset or "")
    if preset is None:
        monkeypatch.delenv("OMP_NUM_THREADS")
    args = trun.get_args_parser().parse_args(argv)
    monkeypatch.setattr(trun, "elastic_launch", lambda config, entrypoint: (lambda *a: None))
    # Record what run.py's module logger is asked to warn, whatever handlers earlier tests in this
    # worker left on the logging tree (under the full suite stderr stayed empty).
    warned = []
    real = trun.logger

    class _Recorder:
        def __getattr__(self, name):
            return getattr(real, name)

        def warning(self, msg, *a, **k):
            warned.append(msg % a if a else msg)
            return real.warning(msg, *a, **k)

    monkeypatch.setattr(trun, "logger", _Recorder())
    trun.run(args)
    capfd.readouterr()
    return os.environ.get("OMP_NUM_THREADS"), "\n".join(warned)


def test_torchrun_keeps_an_explicit_omp_num_threads(monkeypatch, capfd):
    omp, log = _torchrun_omp(monkeypatch, capfd, ["--nproc-per-node", "8", "t.py"], "6")
    assert omp == "6" and "Setting OMP_NUM_THREADS" not in log
    omp, log = _torchrun_omp(monkeypatch, capfd, ["--nproc-per-node", "8", "t.py"], None)
    assert omp == "1" and "Setting OMP_NUM_THREADS environment variable for each process to be 1" in log
