"""Shared by the jobspec tests that start real launchers: wait for every process, kill them all if one
overruns, and collect the JSON lines each worker printed (one object per line starting with "{")."""
from __future__ import annotations

import json


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
