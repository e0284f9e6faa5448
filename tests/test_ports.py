"""tests/_ports.py: the port every launcher test is handed is outside the kernel's ephemeral range,
bindable, and reserved against the run's other callers; each branch of the range choice is forced."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _ports  # noqa: E402


def test_port_is_free_and_outside_the_ephemeral_range():
    lo, hi = _ports.ephemeral_range()
    span = _ports.candidate_range((lo, hi))
    ports = {_ports.free_port() for _ in range(20)}
    assert len(ports) == 20, "a reserved port was handed out twice"
    for port in ports:
        if span is not None:
            assert span[0] <= port <= span[1] and not lo <= port <= hi, (port, lo, hi)
        with socket.socket() as s:
            s.bind(("", port))           # TCPStore listens on every address: the port must be free there


def test_reservation_is_exclusive_until_stale(tmp_path):
    assert _ports._reserve(23456, tmp_path)
    assert not _ports._reserve(23456, tmp_path)
    old = (tmp_path / "23456").stat().st_mtime - _ports.RESERVE_S - 5
    os.utime(tmp_path / "23456", (old, old))
    assert _ports._reserve(23456, tmp_path), "a reservation older than RESERVE_S is taken over"


def test_a_held_port_is_not_bindable():
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        assert not _ports._bindable(held.getsockname()[1])


def test_candidate_range_branches():
    assert _ports.candidate_range((32768, 60999)) == (_ports.LOWEST, 32767)
    assert _ports.candidate_range((1024, 50000)) == (50001, 65535)   # no room below: above
    assert _ports.candidate_range((1024, 65000)) is None             # room nowhere: the kernel's bind(0)


def test_ephemeral_range_parsing(tmp_path):
    good = tmp_path / "range"
    good.write_text("40000\t50000\n")
    assert _ports.ephemeral_range(str(good)) == (40000, 50000)
    for text in ("", "x y", "50000 40000", "0 70000"):
        good.write_text(text)
        assert _ports.ephemeral_range(str(good)) == _ports.FALLBACK_RANGE, text
    assert _ports.ephemeral_range(str(tmp_path / "missing")) == _ports.FALLBACK_RANGE


def test_fallback_when_no_range_has_room(monkeypatch):
    monkeypatch.setattr(_ports, "ephemeral_range", lambda: (1024, 65535))
    port = _ports.free_port()
    assert 1024 <= port <= 65535


def test_no_test_hands_out_a_kernel_port():
    """A bind to port 0 that is closed again, then given to a launcher, is the race of CI stop 32. Every
    such bind in tests/ and benchmarks/ must hold the socket (listen) for the test's own use; a port for
    a launcher comes from _ports.free_port(). Device scripts run alone on their machine and are exempt."""
    root = Path(__file__).resolve().parent.parent
    offenders = []
    for path in sorted([*root.joinpath("tests").rglob("*.py"), *root.joinpath("benchmarks").rglob("*.py")]):
        if path.name in ("_ports.py", "test_ports.py") or path.name.startswith("device_check"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if '.bind(("127.0.0.1", 0))' in line or ".bind(('127.0.0.1', 0))" in line or '.bind(("", 0))' in line:
                window = " ".join(lines[i:i + 4])
                if ".listen(" not in window:
                    offenders.append(f"{path.relative_to(root)}:{i + 1}")
    assert not offenders, offenders
