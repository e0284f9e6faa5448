"""Fixtures for the Accelerate sibling sub-skills: real 2-process CPU launches.

Every launch runs `accelerate launch` from the test interpreter's environment
with a private HOME/HF_HOME/TMPDIR under pytest's tmp dir, offline switches
set, bytecode writing disabled and a free --main_process_port, so nothing is
written outside tmp and nothing touches the network. All launches of the
session run once (session-scoped fixtures) and the tests assert on the JSON
the example scripts write.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

LAUNCH_TIMEOUT_S = 180
TIMINGS: dict[str, float] = {}

# The one launch recipe the docs recommend for a 2-rank CPU data-parallel job.
MULTI_CPU = ["--multi_gpu", "--num_processes", "2"]
QUIET_DEFAULTS = ["--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


def accelerate_exe() -> str:
    exe = Path(sys.executable).parent / "accelerate"
    if not exe.exists():
        found = shutil.which("accelerate")
        if not found:
            pytest.fail("the `accelerate` console script is not installed next to the test interpreter")
        return found
    return str(exe)


def free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def sandbox_env(home: Path, use_cpu: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "FSDP_"))}
    for sub in ("home", "hf", "tmp", "cache"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env.update(
        HOME=str(home / "home"),
        HF_HOME=str(home / "hf"),  # no default_config.yaml here: only CLI flags count
        XDG_CACHE_HOME=str(home / "cache"),
        TMPDIR=str(home / "tmp"),
        TORCH_HOME=str(home / "cache" / "torch"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        WANDB_MODE="disabled",
        PYTHONDONTWRITEBYTECODE="1",  # no __pycache__ next to the example files
        OMP_NUM_THREADS="1",
    )
    if use_cpu:
        env["ACCELERATE_USE_CPU"] = "1"
    return env


def launch(name: str, tmp: Path, launch_args: list[str], script: Path, script_args: list[str],
           use_cpu: bool = True, port: bool = True, defaults: bool = True) -> subprocess.CompletedProcess:
    start = time.monotonic()
    for attempt in (1, 2):
        cmd = [accelerate_exe(), "launch", *launch_args, *(QUIET_DEFAULTS if defaults else [])]
        if port:
            cmd += ["--main_process_port", str(free_port())]
        cmd += [str(script), *script_args]
        proc = subprocess.run(cmd, cwd=tmp, env=sandbox_env(tmp / f"sandbox-{name}", use_cpu),
                              capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
        # A rank killed by a signal or a torn gloo connection on this loaded 2-core machine is
        # infrastructure, not a verdict on the example: launch once more on a fresh port.
        if proc.returncode == 0 or not _INFRA_FAILURE.search(proc.stderr or ""):
            break
    TIMINGS[name + ("(retried)" if attempt == 2 else "")] = round(time.monotonic() - start, 2)
    return proc


_INFRA_FAILURE = re.compile(r"SIGABRT|SIGSEGV|SIGKILL|Signal \d+|exitcode\s*:\s*-\d+|Connection (?:reset|closed)"
                            r"|Address already in use|EADDRINUSE|Broken pipe")


def read_json(path: Path) -> dict:
    if not path.exists():
        pytest.fail(f"the launch did not write {path}")
    return json.loads(path.read_text())


@pytest.fixture(scope="session")
def sandbox():
    """The environment builder used for every subprocess of this test area."""
    return sandbox_env


@pytest.fixture(scope="session")
def examples(repo_root) -> dict[str, Path]:
    return {
        "whoami": repo_root / "sub-skills/configuration-and-cli/examples/whoami.py",
        "loop": repo_root / "sub-skills/training-loop-integration/examples/loop_checks.py",
        "resume": repo_root / "sub-skills/checkpointing-and-tracking/examples/resume_checks.py",
        "dcp": repo_root / "sub-skills/checkpointing-and-tracking/examples/dcp_shards.py",
    }


def yaml_block(md: Path) -> str:
    """The first ```yaml fenced block of a Markdown file (the docs' minimal config)."""
    lines, block, inside = md.read_text().splitlines(), [], False
    for line in lines:
        if inside:
            if line.startswith("```"):
                return "\n".join(block) + "\n"
            block.append(line)
        elif line.strip() == "```yaml":
            inside = True
    pytest.fail(f"no yaml block in {md}")


MULTI_CPU_CONFIG = ("compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\n"
                    "num_processes: 2\nnum_machines: 1\nmixed_precision: 'no'\n")


def _topology_recipes(repo_root) -> dict:
    doc_yaml = yaml_block(repo_root / "sub-skills/configuration-and-cli/references/config-file-and-precedence.md")
    return {  # name: (launch args, ACCELERATE_USE_CPU=1?, add a free port?, script args, config text)
        "use_cpu_env+multi_gpu": (MULTI_CPU, True, True, [], None),
        "use_cpu_env+doc_yaml": ([], True, False, [], doc_yaml),
        "cpu_flag": (["--cpu", "--num_processes", "2"], False, False, [], None),
        "multi_gpu_without_env": (MULTI_CPU, False, True, [], None),
        "use_cpu_env+partial_state_first": (MULTI_CPU, True, True, ["--first", "partial_state"], None),
        "multi_cpu_config": ([], True, False, [], MULTI_CPU_CONFIG),
        "use_cpu_env+use_fsdp": (["--use_fsdp", "--fsdp_version", "2", "--num_processes", "2"],
                                 True, True, [], None),
    }


def _topology_run(tmp_path_factory, examples, name, recipe) -> list[dict]:
    """whoami.py under one launch recipe: one report per started process."""
    args, use_cpu, port, extra, config_text = recipe
    tmp = tmp_path_factory.mktemp(f"whoami-{name.replace('+', '-')}")
    if config_text is not None:
        (tmp / "config.yaml").write_text(config_text)
        args = ["--config_file", str(tmp / "config.yaml"), *args]
    proc = launch(f"whoami:{name}", tmp, args, examples["whoami"], ["--out", str(tmp), *extra],
                  use_cpu=use_cpu, port=port, defaults=config_text is None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(p.read_text()) for p in sorted(tmp.glob("proc-*.json"))]


def _merge_run(tmp_path_factory, examples) -> dict:
    """dcp_shards.py on 2 ranks, then `accelerate merge-weights` on its folder, on the checkpoint root
    and on a path that does not exist."""
    tmp = tmp_path_factory.mktemp("dcp")
    proc = launch("dcp_shards", tmp, MULTI_CPU, examples["dcp"], ["--out", str(tmp)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    env = sandbox_env(tmp / "sandbox-merge", use_cpu=False)
    runs = {}
    for name, src in (("folder", tmp / "pytorch_model_fsdp_0"), ("root", tmp), ("missing", tmp / "no-such-ckpt")):
        start = time.monotonic()
        runs[name] = subprocess.run([accelerate_exe(), "merge-weights", str(src), str(tmp / f"merged_{name}")],
                                    cwd=tmp, env=env, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S)
        TIMINGS[f"merge-weights:{name}"] = round(time.monotonic() - start, 2)
    return {"dir": tmp, "runs": runs, "dcp_files": read_json(tmp / "dcp_files.json")}


def _loop_run(tmp_path_factory, examples) -> dict:
    tmp = tmp_path_factory.mktemp("loop")
    proc = launch("loop_checks", tmp, MULTI_CPU, examples["loop"], ["--out", str(tmp)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"stdout": proc.stdout, "ranks": [read_json(tmp / f"rank{r}.json") for r in (0, 1)]}


def _resume_pair(tmp_path_factory, examples, variant: str) -> dict:
    tmp = tmp_path_factory.mktemp(f"resume-{variant}")
    result: dict = {"dir": tmp}
    for phase in ("save", "resume"):
        proc = launch(f"resume:{variant}:{phase}", tmp, MULTI_CPU, examples["resume"],
                      ["--phase", phase, "--out", str(tmp), "--loader-generator", variant])
        assert proc.returncode == 0, proc.stderr[-3000:]
        result[phase] = [read_json(tmp / f"{phase}_rank{r}.json") for r in (0, 1)]
    return result


class _Launches:
    """Every launch the collected tests need, started on first use, two at a time: a launch has
    single-process phases (the launcher's own imports, rendezvous, shutdown) that leave a core idle."""

    def __init__(self, tmp_path_factory, examples, repo_root, needed):
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="accel-launch")
        f, ex = tmp_path_factory, examples
        self.jobs = {  # fixture name: {part: callable}
            "topology_runs": {name: (lambda n=name, r=recipe: _topology_run(f, ex, n, r))
                              for name, recipe in _topology_recipes(repo_root).items()},
            "merge_run": {"": lambda: _merge_run(f, ex)},
            "loop_run": {"": lambda: _loop_run(f, ex)},
            "resume_run": {"": lambda: _resume_pair(f, ex, "own")},
            "resume_run_global_rng": {"": lambda: _resume_pair(f, ex, "global")},
        }
        self.futures: dict[str, dict] = {}
        for name in ("merge_run", "resume_run", "resume_run_global_rng", "loop_run", "topology_runs"):
            if name in needed:      # the longest first, the seven short whoami launches fill in
                self.submit(name)

    def submit(self, name):
        if name not in self.futures:
            self.futures[name] = {part: self.pool.submit(fn) for part, fn in self.jobs[name].items()}
        return self.futures[name]

    def get(self, name):
        parts = {part: fut.result() for part, fut in self.submit(name).items()}
        return parts[""] if list(parts) == [""] else parts


@pytest.fixture(scope="session")
def _launches(request, tmp_path_factory, examples, repo_root):
    needed = {n for item in request.session.items for n in getattr(item, "fixturenames", ())}
    launches = _Launches(tmp_path_factory, examples, repo_root, needed)
    yield launches
    launches.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="session")
def topology_runs(_launches) -> dict[str, list[dict]]:
    """whoami.py under seven launch recipes; value = one report per started process."""
    return _launches.get("topology_runs")


@pytest.fixture(scope="session")
def merge_run(_launches) -> dict:
    """dcp_shards.py on 2 ranks, then `accelerate merge-weights` on its folder, on the checkpoint root
    and on a path that does not exist."""
    return _launches.get("merge_run")


@pytest.fixture(scope="session")
def loop_run(_launches) -> dict:
    return _launches.get("loop_run")


@pytest.fixture(scope="session")
def resume_run(_launches) -> dict:
    return _launches.get("resume_run")


@pytest.fixture(scope="session")
def resume_run_global_rng(_launches) -> dict:
    return _launches.get("resume_run_global_rng")


def pytest_terminal_summary(terminalreporter):
    if TIMINGS:
        terminalreporter.write_line(
            "accel_siblings launch seconds: " + ", ".join(f"{k}={v}" for k, v in TIMINGS.items())
            + f"; total={round(sum(TIMINGS.values()), 1)}"
        )
