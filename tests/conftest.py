"""Shared test configuration.

Under CI (the CI environment variable is set) a skipped test is turned into a
failure: the bundle's facts are only proven when every oracle package is
installed, so a skip would hide a missing install step in `.ci/run`.

The real-world config corpus lives outside the repository. Tests that read it
request the `corpus_dir` fixture; they form an opt-in layer that runs only when
PDT_CORPUS names the corpus folder (`make test-corpus`, `.ci/run`). Without it
they are deselected (not skipped), so a bare clone passes `make test`; with it
set to a folder that does not exist, they fail.

What DeepSpeed's CPU accelerator accepts depends on the processor: fp16 only where oneDNN has fp16
kernels (torch.ops.mkldnn._is_mkldnn_fp16_supported(); AVX512-FP16 / AMX-FP16). Tests detect the
answer (the `cpu_fp16_supported` fixture, or what their child process printed) and assert what applies;
they run the other branch by forcing the probe. PDT_FORCE_CPU_FP16=0|1 forces the answer for the whole
run, in this process and in every Python child (tests/_capability/sitecustomize.py, put first on
PYTHONPATH here), so one machine can run the suite as both kinds of CPU (`make test-no-fp16`,
`make test-fp16`).
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CORPUS_ENV = "PDT_CORPUS"
CAPABILITY_DIR = REPO / "tests" / "_capability"


def _capability():
    """tests/_capability/sitecustomize.py as a module (importing it applies PDT_FORCE_CPU_FP16 here)."""
    name = "pdt_capability_switch"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, CAPABILITY_DIR / "sitecustomize.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def _force_capability() -> bool | None:
    """Apply PDT_FORCE_CPU_FP16 to this process and, through PYTHONPATH, to every child it starts."""
    if not os.environ.get("PDT_FORCE_CPU_FP16", "").strip():
        return None
    cap = _capability()
    try:
        value = cap.forced()
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    cap.install(value)
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(CAPABILITY_DIR) not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([str(CAPABILITY_DIR), *paths])
    return value


FORCED_FP16 = _force_capability()


STALE_BUILD_LOCK_S = 600


def _own_extension_dir() -> Path | None:
    """Give this checkout's torch its own JIT-extension folder, for this process and every child.

    DeepSpeed's CPU accelerator JIT-builds its shared-memory comm op (deepspeed_shm_comm) in every
    process that calls deepspeed.init_distributed/initialize; a process finding the build current only
    runs a no-op ninja check. The build's flags name the torch/deepspeed install path, so checkouts or
    venvs sharing ~/.cache/torch_extensions rebuild it for each other (40-170 s on 2 cores) and wait on
    each other's build lock. One folder per torch install path: each checkout compiles once and reuses
    it. A lock older than STALE_BUILD_LOCK_S is left by a killed build (torch waits on it forever).
    An explicit TORCH_EXTENSIONS_DIR is kept as given."""
    if os.environ.get("TORCH_EXTENSIONS_DIR", "").strip():
        return None
    spec = importlib.util.find_spec("torch")          # finds the package without importing it
    if spec is None or not spec.origin:
        return None
    key = hashlib.sha256(os.path.dirname(spec.origin).encode()).hexdigest()[:12]
    cache = os.environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    folder = Path(cache) / "torch_extensions" / f"pdt-{key}"
    for lock in folder.glob("*/lock"):
        try:
            if time.time() - lock.stat().st_mtime > STALE_BUILD_LOCK_S:
                lock.unlink()
        except OSError:
            pass
    os.environ["TORCH_EXTENSIONS_DIR"] = str(folder)
    return folder


EXTENSION_DIR = _own_extension_dir()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def corpus_path() -> Path | None:
    """The corpus folder named by PDT_CORPUS, or None when the corpus layer is off."""
    value = os.environ.get(CORPUS_ENV, "").strip()
    return Path(value).resolve() if value else None


def pytest_report_header(config):
    if FORCED_FP16 is None:
        return "cpu fp16 (DeepSpeed CPU accelerator): as this CPU reports (force with PDT_FORCE_CPU_FP16=0|1)"
    return (f"cpu fp16 (DeepSpeed CPU accelerator): forced {'present' if FORCED_FP16 else 'absent'} "
            f"(PDT_FORCE_CPU_FP16={int(FORCED_FP16)}, children via PYTHONPATH={CAPABILITY_DIR})")


def pytest_configure(config):
    config.addinivalue_line("markers", "corpus: reads the out-of-tree config corpus (opt-in: set PDT_CORPUS)")


MAX_AUTO_WORKERS = 8


@pytest.hookimpl(optionalhook=True)      # a pytest-xdist hook: without the plugin (-p no:xdist) it is not called
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (make test): one worker per usable core, capped at MAX_AUTO_WORKERS; none on one core.

    Usable cores are the process's CPU affinity (taskset, a cgroup cpuset), not the machine's count. On one
    core the suite runs serially in this process (0 workers), without a worker's start-up cost. Each worker
    builds its own session fixtures, so workers beyond the number of test-directory groups only add work.
    PYTEST_XDIST_AUTO_NUM_WORKERS still overrides the count, as in pytest-xdist."""
    env = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "").strip()
    if env.isdigit():
        return int(env)
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return 0 if cores < 2 else min(cores, MAX_AUTO_WORKERS)


def xdist_scope(nodeid: str) -> str:
    """The work unit of a test under `--dist loadscope`: its directory under tests/, else its file.

    A directory's session-scoped fixtures (real launcher and oracle runs, 10-50 s each) are built once
    per worker that runs any of its tests; keeping each test directory on one worker builds them once, as
    in a serial run. An explicit xdist_group mark (`name@group` node ids) keeps its own group."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        return nodeid.rsplit("@", 1)[1]
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 and parts[0] == "tests" else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope` (make test) schedules whole test directories (xdist_scope) instead of modules.

    Not `--dist loadgroup` with xdist_group marks: pytest-xdist 3.8.0 tags a grouped test by assigning
    item._nodeid, which pytest 9.2's Node.nodeid (built from item._id) no longer reads, so every test
    became its own unit and each worker started every directory's runs."""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class DirectoryScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_scope(nodeid)

    return DirectoryScheduling(config, log)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark every test that requests `corpus_dir`; deselect them while the corpus layer is off."""
    on = corpus_path() is not None
    keep, dropped = [], []
    for item in items:
        if "corpus_dir" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.corpus)
            (keep if on else dropped).append(item)
        else:
            keep.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if _in_ci() and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped under CI (a skip hides a missing install): {reason}"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    path = corpus_path()
    if path is None:
        pytest.fail(f"corpus layer is off: set {CORPUS_ENV} to the corpus folder (make test-corpus)")
    if not (path / "accelerate").is_dir() or not (path / "deepspeed").is_dir():
        pytest.fail(f"{CORPUS_ENV}={path} is not a config corpus (needs accelerate/ and deepspeed/)")
    return path


@pytest.fixture(scope="session")
def python_exe() -> str:
    return sys.executable


def cpu_fp16_supported() -> bool:
    """What DeepSpeed's CPU accelerator asks (CPU_Accelerator.is_fp16_supported): the oneDNN fp16 probe,
    as forced by PDT_FORCE_CPU_FP16 when set."""
    import torch
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_fp16_supported())
    except Exception:  # noqa: BLE001 - DeepSpeed reads a failing probe as "no fp16"
        return False


@pytest.fixture(scope="session", name="cpu_fp16_supported")
def cpu_fp16_supported_fixture() -> bool:
    return cpu_fp16_supported()
