"""One helper for every test that hands a launcher a port: `free_port()`.

Why not the usual bind(("127.0.0.1", 0)) and close: that port comes from the kernel's ephemeral range
(/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 by default), the same range every outgoing
connection and every other bind(0) on the machine draws from. Between close() and the launcher's own
bind, any of them may take it. CI stop 32 failed that way: torchrun's TCPStore on a port handed out a
moment earlier raised DistNetworkError EADDRINUSE (test_repro_torch.py, collective_mismatch).

Here the port comes from below the ephemeral range, where the kernel never assigns one by itself, is
checked to be bindable on every IPv4 address (TCPStore listens on all of them), and is reserved for
RESERVE_S seconds with an O_EXCL file, so two pytest-xdist workers or two matrix scripts of one run
never receive the same port. Where the machine leaves no such range, it falls back to bind(0).

Standard library only: the matrix scripts run it in plain child interpreters.
"""
from __future__ import annotations

import os
import random
import socket
import tempfile
import time
from pathlib import Path

RESERVE_S = 900            # a reservation older than this may be handed out again
LOWEST = 10000             # stay clear of well-known and registered service ports below this
FALLBACK_RANGE = (32768, 60999)


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The kernel's ephemeral port range; Linux's default where it cannot be read."""
    try:
        lo, hi = (int(x) for x in Path(path).read_text().split()[:2])
        return (lo, hi) if 0 < lo <= hi <= 65535 else FALLBACK_RANGE
    except (OSError, ValueError):
        return FALLBACK_RANGE


def candidate_range(ephemeral: tuple[int, int]) -> tuple[int, int] | None:
    """Ports the kernel never hands out by itself: below the ephemeral range, else above it; None if neither has room."""
    lo, hi = ephemeral
    if lo - 1 - LOWEST >= 1000:
        return LOWEST, lo - 1
    if 65535 - (hi + 1) >= 1000:
        return hi + 1, 65535
    return None


def _bindable(port: int) -> bool:
    for host in ("", "127.0.0.1"):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def _reserve(port: int, folder: Path) -> bool:
    """Create folder/<port> exclusively; a reservation older than RESERVE_S is taken over."""
    path = folder / str(port)
    for _ in range(2):
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            return True
        except FileExistsError:
            try:
                if time.time() - path.stat().st_mtime < RESERVE_S:
                    return False
                path.unlink()
            except FileNotFoundError:
                pass
    return False


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port(tries: int = 200) -> int:
    """A TCP port that is free now, outside the ephemeral range, and reserved against this run's other callers."""
    span = candidate_range(ephemeral_range())
    if span is None:
        return _kernel_port()
    folder = Path(tempfile.gettempdir()) / f"pdt-ports-{os.getuid() if hasattr(os, 'getuid') else 'u'}"
    folder.mkdir(mode=0o700, exist_ok=True)
    rng = random.SystemRandom()
    for _ in range(tries):
        port = rng.randint(*span)
        if _bindable(port) and _reserve(port, folder):
            return port
    return _kernel_port()
