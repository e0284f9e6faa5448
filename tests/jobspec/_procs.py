"""Shared by the jobspec tests that start real launchers: a free local port, and waiting for every process
(killing them all if one overruns) while collecting the JSON lines each worker printed (one object per
line starting with "{")."""
from __future__ import annotations

import json
import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402


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
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()
