"""triage_log.py against hostile input: every case ends with exit 0 or 1, valid JSON, no traceback.

Sizes follow the issue (200 MB of noise through a pipe, one 10 MB line, endless stdin); the
script's byte cap (--max-bytes, default 64 MiB) is what keeps them bounded, so the big cases
also check the notice on stderr. Runtime is measured in benchmarks/bench_triage.py, not here.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
LOAD = b"ValueError: Tried to find /ckpt/x but folder does not exist\n"
TIMEOUT = 300  # only catches a real hang on a busy 2-core machine


def _check(r, expect_rc=(0, 1)):
    assert r.returncode in expect_rc, (r.returncode, r.stderr[-500:])
    assert b"Traceback (most recent call last)" not in r.stderr
    doc = json.loads(r.stdout)
    assert set(doc) == {"root_cause", "findings"}
    return doc


def _run_file(path, *extra):
    return subprocess.run([sys.executable, str(SCRIPT), "--output", "json", *extra, str(path)],
                          capture_output=True, timeout=TIMEOUT)


def _run_stream(writer, *extra):
    """Run with stdin fed by writer(pipe) in a thread; the writer stops when the pipe closes."""
    import tempfile
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([sys.executable, str(SCRIPT), "--output", "json", *extra, "-"],
                             stdin=subprocess.PIPE, stdout=out, stderr=err)

        def feed():
            try:
                writer(p.stdin)
            except (BrokenPipeError, OSError, ValueError):
                pass
            finally:
                try:
                    p.stdin.close()
                except (BrokenPipeError, OSError):
                    pass

        t = threading.Thread(target=feed, daemon=True)
        t.start()
        rc = p.wait(timeout=TIMEOUT)
        t.join(timeout=30)
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(p.args, rc, out.read(), err.read())


def test_binary_file(tmp_path):
    f = tmp_path / "core.bin"
    f.write_bytes(random.Random(0).randbytes(3 * 1024 * 1024))
    _check(_run_file(f))


def test_nul_bytes_and_invalid_utf8_keep_the_error(tmp_path):
    f = tmp_path / "nul.log"
    f.write_bytes(b"\x00" * 1000 + b"\n\xff\xfe\xfd\n" + LOAD.replace(b"folder", b"fol\x00der") + b"\xc3\x28\n")
    doc = _check(_run_file(f), (0,))
    assert doc["root_cause"]["line"] == 3 and doc["root_cause"]["signature"] == "accelerate-load-state-missing-dir"


def test_one_10mb_line_then_the_error(tmp_path):
    f = tmp_path / "long.log"
    with open(f, "wb") as fh:
        fh.write(b"A" * (10 * 1024 * 1024) + b"\n")
        fh.write(LOAD)
    r = _run_file(f)
    doc = _check(r, (0,))
    assert doc["root_cause"]["line"] == 2
    assert b"longer than" in r.stderr  # the cut is announced


def test_one_10mb_line_without_newline(tmp_path):
    f = tmp_path / "long.log"
    f.write_bytes(b"Traceback (most recent call last):\n" + b"B" * (10 * 1024 * 1024))
    _check(_run_file(f))


def test_200mb_of_noise_through_a_pipe_is_cut_with_a_notice():
    line = b"step 123 loss=0.4321 lr=1e-4 grad_norm=0.98 tokens/s=12345 " + b"x" * 60 + b"\n"
    total = 200 * 1024 * 1024

    def writer(pipe):
        block = line * 8192
        sent = 0
        while sent < total:
            pipe.write(block)
            sent += len(block)

    r = _run_stream(writer)
    doc = _check(r)
    assert doc["root_cause"] is None
    assert b"stopped after" in r.stderr


def test_endless_stdin_is_cut_at_the_limit():
    def writer(pipe):
        while True:
            pipe.write(b"Traceback (most recent call last):\n  File \"x\", line 1\n" * 1000)

    r = _run_stream(writer, "--max-bytes", "2000000")
    _check(r)
    assert b"stopped after 2000000 bytes" in r.stderr


def test_huge_file_reads_the_tail_and_keeps_line_numbers(tmp_path):
    f = tmp_path / "big.log"
    with open(f, "wb") as fh:
        for _ in range(30000):
            fh.write(b"step loss 0.1\n")
        fh.write(LOAD)
    r = _run_file(f, "--max-bytes", "100000")
    doc = _check(r, (0,))
    assert doc["root_cause"]["line"] == 30001
    assert b"only the last 100000 bytes" in r.stderr


def test_a_fifo_is_read_as_a_stream(tmp_path):
    fifo = tmp_path / "p"
    os.mkfifo(fifo)

    def writer():
        with open(fifo, "wb") as fh:
            fh.write(LOAD)

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    doc = _check(_run_file(fifo), (0,))
    t.join(10)
    assert doc["root_cause"]["line"] == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=4000) | st.text(max_size=2000))
def test_fuzz_api_never_raises_and_keeps_the_shape(triage, catalog, data):
    res = triage.triage_text(data, catalog)
    assert set(res) == {"root_cause", "findings"}
    if res["root_cause"] is not None:
        assert isinstance(res["root_cause"]["line"], int) and res["root_cause"]["line"] >= 1
    for f in res["findings"]:
        assert f["role"] in ("root", "cascade", "warning")
    json.dumps(res)


def test_time_budget_stops_the_analysis_with_a_notice():
    # a prefilter anchor and a catalog trigger word on every line: every line is analysed (the slow path)
    line = b"RuntimeError: Tried to find " * 70 + b"\n"

    def writer(pipe):
        for _ in range(2000):
            pipe.write(line * 50)

    r = _run_stream(writer, "--max-seconds", "1")
    _check(r)
    assert b"analysis stopped at line" in r.stderr


def test_pattern_trigger_words_on_every_line_stay_bounded(tmp_path):
    f = tmp_path / "trig.log"
    f.write_bytes((b"Tried to find " * 140 + b"\n") * 500 + LOAD)
    doc = _check(_run_file(f), (0,))
    assert doc["root_cause"]["line"] == 501
