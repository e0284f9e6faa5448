"""Helpers for the failure-triage reproduction tests.

Each reproduction test makes a real library fail on CPU (a subprocess: plain
python, or `torchrun` with 2 gloo ranks), captures everything it printed and
checks that the signature catalog recognises the exact text:

- some cleaned output line matches the entry's ``pattern``;
- on that line, the entry is the FIRST matching entry of the whole catalog in
  the order triage_log.py uses (root entries, then cascade, then warning; inside
  a role, catalog files sorted by name and entries in file order), so a broader
  entry elsewhere cannot shadow it.

Line cleaning mirrors what triage_log.py does before matching: ANSI escape
codes and carriage returns removed, then one leading ``[rankN]:`` /
``[defaultN]:`` prefix (torchrun ``--tee``/``--local-ranks-filter`` and
accelerate) or a DeepSpeed multi-node launcher ``host: `` prefix stripped.
"""
from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
from functools import lru_cache
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
CATALOG_DIR = REPO / "sub-skills" / "failure-triage" / "catalog"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_RANK_PREFIX = re.compile(r"^\s*\[(?:rank|default)\d+\]:\s?")
# DeepSpeed's pdsh/ssh multi-node launcher prefixes every line with "hostname: ".
# Host names are taken as lower-case tokens with a digit or a dash (worker-1, node07,
# 10.0.0.5) or "localhost", so "binascii.Error: ..." or "torch.distributed.X: ..." stay.
_HOST_PREFIX = re.compile(r"^(?:localhost|(?=[a-z0-9.-]*[0-9-])[a-z0-9][a-z0-9.-]*): (?=\S)")
_MARK = "=== CASE "


def clean_line(line: str) -> str:
    line = _ANSI.sub("", line).replace("\r", "")
    stripped = _RANK_PREFIX.sub("", line, count=1)
    if stripped == line:
        stripped = _HOST_PREFIX.sub("", line, count=1)
    return stripped


@lru_cache(maxsize=1)
def catalog() -> tuple[dict, ...]:
    entries: list[dict] = []
    for path in sorted(CATALOG_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        if isinstance(data, dict):  # tolerate {entries: [...]} layouts
            data = data.get("entries") or data.get("signatures") or []
        for entry in data:
            entry = dict(entry)
            entry["_file"] = path.name
            entry["_re"] = re.compile(entry["pattern"])
            entries.append(entry)
    return tuple(entries)


def entry(entry_id: str) -> dict:
    for e in catalog():
        if e["id"] == entry_id:
            return e
    raise KeyError(f"no catalog entry {entry_id!r}")


_ROLE_ORDER = {"root": 0, "cascade": 1, "warning": 2}


@lru_cache(maxsize=1)
def _ordered() -> tuple[dict, ...]:
    """Match order of triage_log.py: root entries, then cascade, then warning; file order inside."""
    return tuple(sorted(catalog(), key=lambda e: _ROLE_ORDER[e["role"]]))


def first_match(line: str) -> dict | None:
    for e in _ordered():
        if e["_re"].search(line):
            return e
    return None


def assert_reproduced(output: str, entry_id: str) -> str:
    """Assert that `output` holds a line the catalog attributes to `entry_id`.

    Returns the matching cleaned line.
    """
    target = entry(entry_id)
    shadowed = []
    for raw in output.splitlines():
        line = clean_line(raw)
        if not target["_re"].search(line):
            continue
        first = first_match(line)
        if first is target:
            return line
        shadowed.append((line, first["id"]))
    if shadowed:
        raise AssertionError(f"{entry_id}: its pattern matched, but another entry comes first: {shadowed[:3]}")
    tail = "\n".join(output.splitlines()[-40:])
    raise AssertionError(f"{entry_id}: pattern {target['pattern']!r} matched no line of the output; tail:\n{tail}")


def split_cases(output: str) -> dict[str, str]:
    """Split an output that prints `=== CASE name` markers into {name: text}."""
    cases: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        if line.startswith(_MARK):
            current = line[len(_MARK):].strip()
            cases[current] = []
        elif current is not None:
            cases[current].append(line)
    return {k: "\n".join(v) for k, v in cases.items()}


CASE_PRELUDE = textwrap.dedent('''
    import sys, traceback
    def case(name, fn):
        print("=== CASE " + name, flush=True)
        try:
            fn()
            print("NOERROR", flush=True)
        except BaseException:
            sys.stdout.flush()
            traceback.print_exc(limit=0, file=sys.stdout)
            sys.stdout.flush()
''')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                        "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "PYTHONWARNINGS")}
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="",
               TORCH_CPP_LOG_LEVEL="WARNING")
    env.update(extra)
    return env


def _run(cmd: list[str], timeout: float, env: dict, cwd: str) -> tuple[int, str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{cmd[:4]} still running after {timeout}s; output:\n"
                             + out.decode("utf-8", "replace")[-4000:])
    return proc.returncode, out.decode("utf-8", "replace")


def run_python(code: str, timeout: float = 240, env: dict | None = None, args: list[str] | None = None) -> tuple[int, str]:
    """Run `code` in a fresh interpreter; return (exit code, combined output)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "repro.py"
        script.write_text(textwrap.dedent(code))
        return _run([sys.executable, str(script), *(args or [])], timeout, env or child_env(), tmp)


def run_torchrun(code: str, nproc: int = 2, timeout: float = 240, env: dict | None = None,
                 extra_args: list[str] | None = None) -> tuple[int, str]:
    """Run `code` as `nproc` ranks under a real `torchrun`; return (exit code, combined output)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "repro.py"
        script.write_text(textwrap.dedent(code))
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}",
               f"--master_port={free_port()}", *(extra_args or []), str(script)]
        return _run(cmd, timeout, env or child_env(), tmp)
