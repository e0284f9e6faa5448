#!/usr/bin/env python3
"""Benchmark validate_backend_config.py against accelerate's own verdict (prints figures; not a test).

    python benchmarks/bench_validator.py [--runs 10] [--file CONFIG]

Side by side, in one run:
  1. one config end to end, interpreter start included (target <= 0.1 s): a fresh
     `python validate_backend_config.py FILE` process, median of --runs;
  2. the whole shared corpus (accelerate/, deepspeed/, broken/) in ONE invocation (target <= 2 s);
  3. accelerate 1.15.0 itself reaching its verdict on the same file: a fresh process running
     tests/oracle/accelerate_oracle.py (config load, launch validation, env preparation, plugin
     construction; it imports accelerate, torch and deepspeed), median of 3 runs.
Also printed: bare interpreter start, the one-file time with no bytecode cache (as under
PYTHONDONTWRITEBYTECODE=1; the other figures use a cache kept in a temporary PYTHONPYCACHEPREFIX,
never in the repository), the in-process time per file, and whether PyYAML's C (libyaml) parser
is available. Needs the dev environment (accelerate installed) for figure 3.

Start cost per shipped example (issue 22: <= 5x the interpreter's start without bytecode): for every
config in sub-skills/*/examples/ (YAML/JSON), one validator run in a fresh process, as a multiple of a
bare `python -c pass` start with the same interpreter, measured interleaved (bare, warm, cold, floor,
bare, ...) so that load on a shared machine hits all alike. "bytecode": the cache filled beforehand in a
temporary PYTHONPYCACHEPREFIX; "no bytecode": PYTHONDONTWRITEBYTECODE=1 on a fresh copy of the scripts
folder with no __pycache__ anywhere (every helper module is compiled on every run, as from a read-only
skills folder). Each is printed as wall (elapsed) and CPU (user + system of the child, which load from
other processes disturbs less) multiples, with the load average. "floor" is what that run would cost if
it did nothing but import PyYAML as the validator does (backend_validator/pyyaml.py; JSON-only inputs
skip it) and compile, without running, exactly the validator modules it imports: only fewer or smaller
modules lower it. Each example ends with PASS or FAIL against 5x on the no-bytecode CPU median (wall is
printed beside it; on an idle machine the two agree). `--start-only` prints just that table.

`--instructions` (needs valgrind) prints a load-independent figure instead: the instructions each
example's no-bytecode run executes (callgrind, PYTHONHASHSEED=0), as a multiple of a bare start's, and
the share of them spent compiling the validator's source (Py_CompileStringObject, inclusive). It does
not equal the time multiple (a bare start spends more of its time outside counted instructions), but
it moves only when the code does: use it to compare two versions on a loaded machine.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "sub-skills" / "distributed-training-backends" / "scripts" / "validate_backend_config.py"
ORACLE = REPO / "tests" / "oracle" / "accelerate_oracle.py"
CORPUS = REPO.parent / "shared" / "corpus"
DEFAULT_FILE = CORPUS / "accelerate" / "huggingface__accelerate__tests__test_configs__latest_fsdp.yaml"


def timed(cmd, runs, stdin=None, env=None):
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, input=stdin, capture_output=True, text=True, cwd=str(REPO), env=env)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), min(times)


def examples():
    """Every shipped example config the validator reads (YAML or JSON under sub-skills/*/examples/)."""
    return sorted(p for p in REPO.glob("sub-skills/*/examples/*") if p.suffix in (".yaml", ".yml", ".json"))


def _run(cmd, env):
    """Wall and CPU seconds (user + system) of one fresh process."""
    import resource
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, capture_output=True, env=env, cwd=str(REPO))
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


# Bundle modules a run imports (printed by a probe that runs the validator's main in-process).
_MODULES_PROBE = r"""
import io, json, sys
sys.path.insert(0, sys.argv[1])
from backend_validator import cli
cli.main(sys.argv[2:], stdout=io.StringIO(), stderr=io.StringIO())
print(json.dumps(sorted(m.__file__ for n, m in list(sys.modules.items())
                        if n.startswith("backend_validator") and (getattr(m, "__file__", None) or "").startswith(sys.argv[1]))))
"""
# The floor of one input: PyYAML imported as the validator does (pyyaml.loading(), when the run imported
# pyyaml.py) plus compiling, without running, the source of every validator module the run imported.
_FLOOR_PROBE = r"""
import sys
files = sys.argv[2:]
if sys.argv[1] == "yaml":
    sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.dirname(files[0])))
    from backend_validator import pyyaml
    pyyaml.loading()
for f in files:
    with open(f, "rb") as fh:
        compile(fh.read(), f, "exec", dont_inherit=True)
"""
TARGET = 5.0


def needed_modules(py, scripts, args, env):
    """Source files of the validator modules one run on args imports (with whether PyYAML was among them)."""
    r = subprocess.run([py, "-c", _MODULES_PROBE, str(scripts)] + args, capture_output=True, text=True, env=env,
                       cwd=str(REPO))
    files = json.loads(r.stdout)
    return files, any(f.endswith("pyyaml.py") for f in files)


def start_table(py, runs):
    """Rows (example, bytecode wall x, bytecode CPU x, no-bytecode wall x, no-bytecode CPU x, floor CPU x)
    and the bare start (wall s, CPU s)."""
    import tempfile
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp, "scripts")
        shutil.copytree(SCRIPT.parent, fresh, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        warm = bytecode_env(str(Path(tmp, "pycache")))
        cold = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        cold.pop("PYTHONPYCACHEPREFIX", None)
        bare_all, bare_cpu_all = [], []
        for ex in examples():
            args = [str(ex)]
            warm_cmd = [py, str(SCRIPT)] + args
            cold_cmd = [py, str(fresh / SCRIPT.name)] + args
            files, uses_yaml = needed_modules(py, fresh, args, cold)
            floor_cmd = [py, "-c", _FLOOR_PROBE, "yaml" if uses_yaml else "json"] + files
            subprocess.run(warm_cmd, capture_output=True, env=warm, cwd=str(REPO))  # fill the cache
            t = {k: [] for k in ("bare", "warm", "cold", "floor", "bare_cpu", "warm_cpu", "cold_cpu", "floor_cpu")}
            for _ in range(runs):
                for key, cmd, env in (("bare", [py, "-c", "pass"], cold), ("warm", warm_cmd, warm),
                                      ("cold", cold_cmd, cold), ("floor", floor_cmd, cold)):
                    wall, cpu = _run(cmd, env)
                    t[key].append(wall)
                    t[key + "_cpu"].append(cpu)
            bare, bare_cpu = statistics.median(t["bare"]), statistics.median(t["bare_cpu"])
            bare_all += t["bare"]
            bare_cpu_all += t["bare_cpu"]
            name = str(ex.relative_to(REPO / "sub-skills")).replace("distributed-training-backends", "dtb")
            kb = sum(os.path.getsize(f) for f in files) / 1024
            rows.append((name, statistics.median(t["warm"]) / bare, statistics.median(t["warm_cpu"]) / bare_cpu,
                         statistics.median(t["cold"]) / bare, statistics.median(t["cold_cpu"]) / bare_cpu,
                         statistics.median(t["floor_cpu"]) / bare_cpu, len(files), kb))
        assert not list(fresh.rglob("__pycache__")), "the no-bytecode copy grew a cache"
    return rows, statistics.median(bare_all), statistics.median(bare_cpu_all)


def print_start_table(py, runs):
    rows, bare, bare_cpu = start_table(py, runs)
    print(f"start cost per shipped example, as a multiple of a bare interpreter start (python -c pass: "
          f"{bare * 1000:.0f} ms wall, {bare_cpu * 1000:.0f} ms CPU), median of {runs} interleaved runs; "
          f"target without bytecode <= {TARGET:.0f}x")
    print("wall: elapsed time of the fresh process; CPU: its user + system time, which other load on a shared "
          "machine disturbs less")
    print("floor: PyYAML imported as the validator does (YAML inputs) + compiling, not running, the validator "
          "modules the run imports (their count and KiB shown); only fewer or smaller modules lower it")
    print("examples under sub-skills/ (dtb = distributed-training-backends)")
    print(f"{'example':<46} {'bytecode':>8} {'bytecode':>8} {'no bytec.':>9} {'no bytec.':>9} {'floor':>6} "
          f"{'modules':>12}  verdict (no bytecode, CPU)")
    print(f"{'':<46} {'wall':>8} {'CPU':>8} {'wall':>9} {'CPU':>9} {'CPU':>6}")
    for name, w, wc, c, cc, fl, n, kb in rows:
        verdict = "PASS" if cc <= TARGET else ("FAIL (floor above target)" if fl > TARGET else "FAIL")
        print(f"{name:<46} {w:>7.1f}x {wc:>7.1f}x {c:>8.1f}x {cc:>8.1f}x {fl:>5.1f}x {n:>3} {kb:>4.0f} KiB  "
              f"{verdict} {cc:.2f}x vs {TARGET:.0f}x")
    print(f"{'worst':<46} " + " ".join(f"{max(r[i] for r in rows):>{n}.1f}x" for i, n in
                                       ((1, 7), (2, 7), (3, 8), (4, 8), (5, 5))))
    n_pass = sum(r[4] <= TARGET for r in rows)
    print(f"{n_pass} of {len(rows)} examples within {TARGET:.0f}x without bytecode (CPU median)")
    print(f"load average (1, 5, 15 min) at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def instructions(py, cmd, env):
    """(instructions, of them compiling) of one run under callgrind, or None without valgrind."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        r = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd,
                           capture_output=True, text=True, env=dict(env, PYTHONHASHSEED="0"), cwd=str(REPO))
        if not os.path.exists(out):
            raise SystemExit(f"callgrind failed: {r.stderr[-500:]}")
        ann = subprocess.run(["callgrind_annotate", "--inclusive=yes", out], capture_output=True, text=True).stdout
    total = compiling = 0
    for line in ann.splitlines():
        parts = line.split()
        if not parts or not parts[0][0].isdigit():
            continue
        n = int(parts[0].replace(",", ""))
        if "PROGRAM TOTALS" in line:
            total = n
        elif line.rstrip().split(":")[-1].split()[0] == "Py_CompileStringObject" and not compiling:
            compiling = n
    return total, compiling


def print_instruction_table(py):
    """Instructions per shipped example (no bytecode), as a multiple of a bare start's."""
    import tempfile
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        print("--instructions needs valgrind (callgrind)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp, "scripts")
        shutil.copytree(SCRIPT.parent, fresh, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        cold = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        cold.pop("PYTHONPYCACHEPREFIX", None)
        bare, _ = instructions(py, [py, "-c", "pass"], cold)
        print(f"instructions per shipped example without bytecode (callgrind, PYTHONHASHSEED=0); bare start "
              f"(python -c pass): {bare / 1e6:.1f} M")
        print(f"{'example':<46} {'instructions':>12} {'x bare':>7} {'compiling':>10}")
        for ex in examples():
            total, comp = instructions(py, [py, str(fresh / SCRIPT.name), str(ex)], cold)
            name = str(ex.relative_to(REPO / "sub-skills")).replace("distributed-training-backends", "dtb")
            print(f"{name:<46} {total / 1e6:>10.1f} M {total / bare:>6.2f}x {comp / max(total, 1):>9.0%}")


def bytecode_env(prefix):
    """Environment with Python's bytecode cache on, kept outside the repository."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = prefix
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--file", default=str(DEFAULT_FILE))
    ap.add_argument("--start-only", action="store_true", help="print only the per-example start table")
    ap.add_argument("--instructions", action="store_true",
                    help="print instructions per example under callgrind (load-independent; needs valgrind)")
    a = ap.parse_args()
    py = sys.executable
    if a.instructions:
        print_instruction_table(py)
        return 0
    if a.start_only:
        print_start_table(py, a.runs)
        return 0
    files = sorted(str(p) for d in ("accelerate", "deepspeed", "broken") for p in (CORPUS / d).iterdir()
                   if p.is_file()) if CORPUS.is_dir() else []

    import yaml
    sys.path.insert(0, str(SCRIPT.parent))
    from backend_validator import cli, core  # noqa: E402
    cli._rules_loaded()
    text = Path(a.file).read_text(encoding="utf-8")
    n = 200
    t0 = time.perf_counter()
    for _ in range(n):
        cli.validate_text(text, a.file, "auto", core.Options(cwd=str(REPO)))
    per_file_ms = (time.perf_counter() - t0) / n * 1000

    import tempfile
    cache = tempfile.mkdtemp(prefix="bench_pycache_")
    warm = bytecode_env(cache)
    subprocess.run([py, str(SCRIPT), a.file], capture_output=True, env=warm)  # fill the bytecode cache
    bare = timed([py, "-c", "pass"], a.runs)
    one = timed([py, str(SCRIPT), a.file], a.runs, env=warm)
    cold_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    cold_env.pop("PYTHONPYCACHEPREFIX", None)
    one_cold = timed([py, str(SCRIPT), a.file], a.runs, env=cold_env)
    corpus = timed([py, str(SCRIPT)] + files, max(3, a.runs // 2), env=warm) if files else (float("nan"),) * 2
    req = json.dumps({"configs": [{"id": "x", "path": a.file, "name": os.path.basename(a.file)}]})
    try:
        import accelerate  # noqa: F401
        acc = timed([py, str(ORACLE)], 3, stdin=req)
    except ImportError:
        acc = (float("nan"),) * 2

    print(f"validator benchmark  (python {sys.version.split()[0]}, PyYAML {yaml.__version__}, "
          f"libyaml C parser: {'yes' if getattr(yaml, '__with_libyaml__', False) else 'NO (pure Python)'}, "
          f"{os.cpu_count()} CPUs, {len(core.REGISTRY)} rules)")
    print(f"file: {os.path.relpath(a.file, REPO)}")
    print(f"{'measurement':<66} {'median s':>9} {'min s':>8} {'target':>8}")
    rows = [
        ("bare interpreter start (python -c pass)", bare, ""),
        ("validator, one file, end to end (fresh process)", one, "<= 0.1"),
        ("  same, no bytecode cache (every module compiled)", one_cold, ""),
        (f"validator, whole corpus in one invocation ({len(files)} files)", corpus, "<= 2"),
        ("accelerate 1.15.0's own verdict on the same file (fresh process)", acc, ""),
    ]
    for label, (med, mn), target in rows:
        print(f"{label:<66} {med:>9.3f} {mn:>8.3f} {target:>8}")
    print(f"{'validator in-process, per file (after import)':<66} {per_file_ms / 1000:>9.4f}")
    if acc[0] == acc[0] and one[0] > 0:
        print(f"accelerate / validator (one file, end to end): {acc[0] / one[0]:.0f}x")
    print()
    print_start_table(py, a.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
