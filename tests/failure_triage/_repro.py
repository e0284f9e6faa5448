"""Helpers for the failure-triage reproduction tests.

Each reproduction test makes a real library fail on CPU (a subprocess: plain
python, or `torchrun` with 2 gloo ranks), captures everything it printed and
checks that the signature catalog recognises the exact text:

- some output line, cleaned by triage_log.clean (ANSI codes, carriage returns, [rankN]: /
  [defaultN]: / host: prefixes), matches the entry's ``pattern``;
- on that line, the entry is what triage_log.py's own matcher (Catalog.match, the order of
  triage_log.match_order: role, then declared specificity, then file and position) returns, so a
  broader entry elsewhere cannot shadow it. Nothing here reimplements the order.
"""
from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
from functools import lru_cache
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CATALOG_DIR = REPO / "sub-skills" / "failure-triage" / "catalog"
SCRIPT = REPO / "sub-skills" / "failure-triage" / "scripts" / "triage_log.py"
_MARK = "=== CASE "


def _triage():
    """triage_log.py, imported from its path once (shared with conftest.load_triage)."""
    name = "triage_log_under_test"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, SCRIPT)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def clean_line(line: str) -> str:
    """The line as triage_log.py matches it."""
    return _triage().clean(line)[0].strip()


@lru_cache(maxsize=1)
def _loaded():
    return _triage().load_catalog(CATALOG_DIR)


@lru_cache(maxsize=1)
def catalog() -> tuple[dict, ...]:
    """The catalog entries as dicts (the YAML fields plus _file and _re), in file order."""
    out = []
    for e in _loaded().entries:
        d = dict(e.raw)
        d["_file"] = e.file
        d["_re"] = e.regex
        out.append(d)
    return tuple(out)


def entry(entry_id: str) -> dict:
    for e in catalog():
        if e["id"] == entry_id:
            return e
    raise KeyError(f"no catalog entry {entry_id!r}")


def first_match(line: str) -> dict | None:
    """The entry triage_log.py attributes the line to (its Catalog.match), or None."""
    got = _loaded().match(line)
    return entry(got.id) if got is not None else None


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
        if first is not None and first["id"] == entry_id:
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


# For child scripts: answer DeepSpeed's CPU fp16 question for one case. CPU_Accelerator.is_fp16_supported
# (deepspeed/accelerator/cpu_accelerator.py) asks torch.ops.mkldnn._is_mkldnn_fp16_supported(), true only
# on CPUs with oneDNN fp16 kernels (AVX512-FP16 / AMX-FP16); forcing that probe runs the code path
# DeepSpeed takes on the other kind of CPU, so a case reproduces the same text on every x86 CPU.
FP16_PROBE = textwrap.dedent('''
    import contextlib
    class _ForcedProbe:
        def __init__(self, real, value):
            self._real, self._value = real, value
        def __call__(self, *args, **kwargs):
            return self._value
        def __getattr__(self, name):
            return getattr(self._real, name)
    @contextlib.contextmanager
    def fp16_probe(value):
        import torch
        ns = torch.ops.mkldnn
        real = ns._is_mkldnn_fp16_supported
        ns._is_mkldnn_fp16_supported = _ForcedProbe(getattr(real, "_real", real), value)
        try:
            yield
        finally:
            ns._is_mkldnn_fp16_supported = real
    def fp16_here():
        import torch
        try:
            return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
        except Exception:
            return False
''')


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def child_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
                        "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID", "PYTHONWARNINGS")}
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="",
               TORCH_CPP_LOG_LEVEL="WARNING")
    env.update(extra)
    return env


def run_group(cmd: list[str], timeout: float, env: dict, cwd: str) -> tuple[int, bytes, bool]:
    """Run CMD in its own session; on timeout kill the whole process group (launcher and workers).
    Returns (exit code, combined output, timed out)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out, False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return proc.returncode, out, True


def _run(cmd: list[str], timeout: float, env: dict, cwd: str) -> tuple[int, str]:
    rc, out, timed_out = run_group(cmd, timeout, env, cwd)
    if timed_out:
        raise AssertionError(f"{cmd[:4]} still running after {timeout}s; output:\n"
                             + out.decode("utf-8", "replace")[-4000:])
    return rc, out.decode("utf-8", "replace")


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
