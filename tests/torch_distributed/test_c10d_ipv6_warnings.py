"""c10d "errno: 97 - Address family not supported by protocol" warnings on hosts without IPv6
(torch 2.13.0 CPU, 2 gloo ranks; failure-triage multi-node.md "IPv6 warnings", set-20 miss s20-K5-07).

A host without IPv6 is stood in for by a seccomp filter (`_no_ipv6.install`, set through ctypes before
torch is imported: no C compiler needed) that makes socket(AF_INET6, ...) fail with EAFNOSUPPORT
(errno 97), as a kernel with IPv6 disabled does. Each scenario starts two plain `python` ranks (env://
rendezvous, a TCPStore on MASTER_PORT) and an all_reduce; the ranks' stderr is what the user sees.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
RANK = ("import os, sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import _no_ipv6\n"
        "assert _no_ipv6.install(), 'the kernel refused the seccomp filter'\n"
        "import torch, torch.distributed as dist\n"
        "dist.init_process_group('gloo', rank=int(os.environ['RANK']), world_size=2)\n"
        "t = torch.ones(1); dist.all_reduce(t); print('allreduce', t.item(), flush=True)\n"
        "os._exit(0)\n")
CLIENT = re.compile(r"\[W[^\]]*socket\.cpp:\d+\] \[c10d\] The client socket cannot be initialized to connect to "
                    r"\[[^\]]+\]:\d+ \(errno: 97 - Address family not supported by protocol\)")
SERVER = re.compile(r"\[W[^\]]*socket\.cpp:\d+\] \[c10d\] The server could not be initialized on any address "
                    r"for port=\d+, family=10")


def start(master_addr="localhost", **extra):
    """Start the two ranks of one scenario; all scenarios run at once, each on its own port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "MASTER_", "USE_LIBUV"))}
    env.update(MASTER_ADDR=master_addr, MASTER_PORT=str(_ports.free_port()), **extra)
    return [subprocess.Popen([sys.executable, "-c", RANK], env=dict(env, RANK=str(r)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL) for r in range(2)]


def finish(procs):
    outs = [p.communicate(timeout=180) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    return [o for o, _ in outs], "".join(e for _, e in outs)


@pytest.fixture(scope="module")
def runs():
    started = {
        "default": start(),
        "ipv4_addr": start(master_addr="127.0.0.1"),
        "no_libuv": start(USE_LIBUV="0"),
        "error_level_no_libuv": start(TORCH_CPP_LOG_LEVEL="ERROR", USE_LIBUV="0"),
    }
    return {k: finish(v) for k, v in started.items()}


def test_client_warns_errno_97_then_connects_over_ipv4(runs):
    """Each rank's store client tries the IPv6 form of the address first, logs one Warning-level
    line, falls back to IPv4, and the collective completes on both ranks."""
    out, err = runs["default"]
    assert out == ["allreduce 2.0\n", "allreduce 2.0\n"]
    assert len(CLIENT.findall(err)) == 2
    assert "[E" not in err and "failed to connect to any network address" not in err


def test_an_ipv4_master_addr_still_warns_in_2_13(runs):
    """127.0.0.1 is tried first as the IPv4-mapped [::ffff:127.0.0.1] over an AF_INET6 socket."""
    out, err = runs["ipv4_addr"]
    assert out == ["allreduce 2.0\n", "allreduce 2.0\n"]
    assert "[::ffff:127.0.0.1]" in err and len(CLIENT.findall(err)) == 2


def test_thread_based_store_server_also_warns_for_the_ipv6_family(runs):
    """USE_LIBUV=0 (the pre-libuv TCPStore server): the listening side logs family=10 (AF_INET6)."""
    out, err = runs["no_libuv"]
    assert out == ["allreduce 2.0\n", "allreduce 2.0\n"]
    assert len(SERVER.findall(err)) == 1 and len(CLIENT.findall(err)) == 2


def test_torch_cpp_log_level_error_silences_them(runs):
    """Both the client and the (USE_LIBUV=0) server lines are Warning level: ERROR hides them."""
    out, err = runs["error_level_no_libuv"]
    assert out == ["allreduce 2.0\n", "allreduce 2.0\n"]
    assert "errno: 97" not in err and "[c10d]" not in err



STAND_IN_CHECK = """
import socket, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
import _no_ipv6
print(_no_ipv6.install())
def v6():
    try:
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
        return "open"
    except OSError as e:
        return e.errno
socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
r = []
t = threading.Thread(target=lambda: r.append(v6()))
t.start(); t.join()
child = subprocess.run([sys.executable, sys.argv[2], "child"], capture_output=True, text=True).stdout.strip()
print(v6(), r[0], child)
"""
CHILD = """
import socket
try:
    socket.socket(socket.AF_INET6, socket.SOCK_STREAM).close()
    print("open")
except OSError as e:
    print(e.errno)
"""


def test_the_stand_in_fails_only_ipv6_sockets_in_the_process_its_threads_and_children(tmp_path):
    """The filter itself: AF_INET6 gives errno 97 in the process, a thread and a child; AF_INET works."""
    (tmp_path / "child.py").write_text(CHILD)
    r = subprocess.run([sys.executable, "-c", STAND_IN_CHECK, str(HERE), str(tmp_path / "child.py")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "97", "97", "97"]
