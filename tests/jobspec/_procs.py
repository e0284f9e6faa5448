"""Shared by the jobspec tests that start real launchers: a free local port, and waiting for every process
(killing them all if one overruns) while collecting the JSON lines each worker printed (one object per
line starting with "{")."""
from __future__ import annotations

import json
import socket


def collect_json(procs, timeout: float = 120) -> list:
    outs = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except Exception:  # TimeoutExpired, or an interrupt: never leave launchers behind
            for q in procs:
                q.kill()
            raise
        assert p.returncode == 0, e[-3000:]
        outs.extend(json.loads(x) for x in o.splitlines() if x.startswith("{"))
    return outs


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
