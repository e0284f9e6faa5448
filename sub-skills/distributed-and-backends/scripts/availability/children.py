"""Run the probe / CUDA children: own session and process group, a timeout, capped output.

A child is the same interpreter with the same flags (-I/-E/-s/-S), the same
environment and the parent's sys.path.  The checker never imports what it
probes.  Outcomes: ok, not_installed, import_error, error (exception type and
first line), killed (signal name), timed_out, exited (ended without a result).
"""

import json
import os
import selectors
import signal
import subprocess
import sys
import time

_CODE = None
STDERR_CAP = 64 * 1024
CRASH_STATES = ("killed", "timed_out", "exited")


def _child_code():
    global _CODE
    if _CODE is None:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_code.py"), encoding="utf-8") as fh:
            _CODE = fh.read()
    return _CODE


def interpreter_flags():
    f = sys.flags
    if f.isolated:
        flags = ["-I"]
    else:
        flags = []
        if f.ignore_environment:
            flags.append("-E")
        if f.no_user_site:
            flags.append("-s")
    if f.no_site:
        flags.append("-S")
    flags.append("-B")  # never write .pyc files
    return flags


def _close(sel, ch):
    for f in (ch.proc.stdout, ch.proc.stderr):
        try:
            sel.unregister(f)
        except (KeyError, ValueError):
            pass
        try:
            f.close()
        except OSError:
            pass
    ch.open = 0


class _Child:
    def __init__(self, key, argv, timeout, meta):
        self.key = key
        self.meta = meta
        self.timeout = timeout
        self.out = bytearray()
        self.err = bytearray()
        self.start = time.monotonic()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
        self.open = 2
        self.timed_out = False
        self.exited_at = None

    def kill_group(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


def run_children(jobs, timeout, parallel, path):
    """jobs: list of (key, mode, payload_dict, meta); path: the sys.path children use.

    Returns {key: result dict}."""
    code = _child_code()
    base = [sys.executable] + interpreter_flags() + ["-c", code]
    pending = list(jobs)
    running = {}
    results = {}
    sel = selectors.DefaultSelector()

    def start(job):
        key, mode, payload, meta = job
        payload = dict(payload, path=list(path))
        ch = _Child(key, base + [mode, json.dumps(payload)], timeout, meta)
        running[key] = ch
        sel.register(ch.proc.stdout, selectors.EVENT_READ, (ch, "out"))
        sel.register(ch.proc.stderr, selectors.EVENT_READ, (ch, "err"))

    def finish(ch):
        try:
            rc = ch.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            ch.kill_group()
            rc = ch.proc.wait()
        ch.kill_group()  # leftovers (grandchildren) in the child's group
        elapsed = round(time.monotonic() - ch.start, 3)
        res = None
        for line in bytes(ch.out).decode("utf-8", "replace").splitlines():
            line = line.strip()
            if line.startswith("{"):
                try:
                    res = json.loads(line)
                except ValueError:
                    pass
        if ch.timed_out:
            res = {"status": "timed_out", "timeout": timeout}
        elif res is None:
            if rc < 0:
                try:
                    signame = signal.Signals(-rc).name
                except ValueError:
                    signame = "signal %d" % -rc
                res = {"status": "killed", "signal": signame, "returncode": rc}
            else:
                res = {"status": "exited", "returncode": rc}
        res.setdefault("module", ch.meta.get("module"))
        res["wall_seconds"] = elapsed
        tail = bytes(ch.err[-4000:]).decode("utf-8", "replace").strip().splitlines()[-8:]
        if tail and res["status"] != "ok":
            res["stderr_tail"] = tail
        results[ch.key] = res
        del running[ch.key]

    try:
        _loop(pending, running, results, sel, start, finish, parallel)
    finally:
        # interrupted (Ctrl-C, SIGTERM turned into SystemExit by the CLI) or failed: children run in
        # their own sessions, so nothing else would stop a hanging one from outliving the checker
        for ch in list(running.values()):
            ch.kill_group()
            try:
                ch.proc.kill()
                ch.proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        sel.close()
    return results


def _loop(pending, running, results, sel, start, finish, parallel):
    while pending or running:
        while pending and len(running) < max(1, parallel):
            job = pending.pop(0)
            try:
                start(job)
            except OSError as exc:
                results[job[0]] = {"status": "exited", "returncode": None, "module": job[3].get("module"),
                                   "message": "cannot start %s: %s" % (sys.executable, exc)}
        now = time.monotonic()
        wait = min([ch.start + ch.timeout - now for ch in running.values()] + [0.5])
        for skey, _ev in sel.select(timeout=max(0.0, wait)):
            ch, which = skey.data
            try:
                chunk = os.read(skey.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(skey.fileobj)
                skey.fileobj.close()
                ch.open -= 1
                continue
            buf = ch.out if which == "out" else ch.err
            buf += chunk
            if which == "err" and len(buf) > STDERR_CAP:
                del buf[: len(buf) - STDERR_CAP]
        now = time.monotonic()
        for ch in list(running.values()):
            if ch.open > 0 and ch.proc.poll() is not None:
                # the child is gone but something it started still holds the pipes
                ch.exited_at = ch.exited_at or now
                if now - ch.exited_at > 0.5:
                    ch.kill_group()
                    _close(sel, ch)
            if ch.open == 0:
                finish(ch)
            elif now - ch.start > ch.timeout:
                ch.timed_out = True
                ch.kill_group()
                _close(sel, ch)
                finish(ch)
