"""Flight-recorder dumps: real 2-rank gloo runs under torchrun that skip or reorder a collective,
each rank's dump (torch 2.13.0, CPU), and triage_log.py / fr_dump.py naming the rank and
collective that diverged. Also: what torch records on gloo (buffer size variables, no automatic
dump), torch's fr_trace analyser on the same dumps, and hostile input (a malicious pickle is
refused and never runs; truncated or malformed dumps get a one-line error and exit 2).

Each run is bounded: a 3 s process-group timeout, and the whole process group of the launcher is
killed when it outlives its limit.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pickle
import signal
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SCRIPTS = REPO / "sub-skills" / "failure-triage" / "scripts"
TRIAGE = SCRIPTS / "triage_log.py"
FR_DUMP = SCRIPTS / "fr_dump.py"
WORKER = HERE / "_fr_worker.py"
PG_TIMEOUT = "3"
RUN_LIMIT = 150


def _fr():
    spec = importlib.util.spec_from_file_location("fr_dump_under_test", FR_DUMP)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fr = _fr()


def _env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TORCH_FR_", "TORCH_NCCL_", "RANK", "WORLD_SIZE", "LOCAL_", "MASTER_",
                                "TORCHELASTIC", "PYTHONWARNINGS"))}
    env.update(PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES="",
               TORCH_CPP_LOG_LEVEL="WARNING")
    env.update(extra)
    return env


def _run(cmd: list, env: dict, cwd, limit: float = RUN_LIMIT) -> tuple[int, str]:
    """Run cmd in its own session; on timeout kill the whole tree and fail."""
    proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, cwd=str(cwd), start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError(f"{cmd[:3]} still running after {limit}s:\n" + out.decode("utf-8", "replace")[-3000:])
    return proc.returncode, out.decode("utf-8", "replace")


def _free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _torchrun(scenario: str, out: Path, **env) -> str:
    out.mkdir(parents=True, exist_ok=True)
    cache = out / "cache"
    cache.mkdir(exist_ok=True)
    e = _env(FR_TEST_PREFIX=str(out / "fr_"), TORCH_FR_DUMP_TEMP_FILE=str(out / "auto_"),
             XDG_CACHE_HOME=str(cache), **env)
    code, text = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                       f"--master_port={_free_port()}", WORKER, scenario, PG_TIMEOUT], e, out)
    if scenario not in ("size", "sigterm"):   # the worker exits 0 after dumping, also after a timeout
        assert code == 0, f"torchrun exit {code}:\n{text[-3000:]}"
    return text


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The four scenarios, once per module: {name: (folder, combined output)}."""
    base = tmp_path_factory.mktemp("fr")
    env = {"healthy": {},                               # the buffer size left unset: on by default
           "skip": {"TORCH_FR_BUFFER_SIZE": "64"}, "order": {"TORCH_FR_BUFFER_SIZE": "64"},
           # a ring of 3 entries: torchrun hands the variable to its workers, the oldest entries go
           "subgroup": {"TORCH_FR_BUFFER_SIZE": "3"}}
    # two at a time: the desynchronised runs spend their 3 s group timeout idle
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(_torchrun, name, base / name, **e) for name, e in env.items()}
        return {name: (base / name, f.result()) for name, f in futures.items()}


def _triage(*args, cwd=None) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, str(TRIAGE), *map(str, args)], capture_output=True, text=True,
                          timeout=60, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def _json_dumps(folder: Path) -> list[Path]:
    return [folder / "fr_0.json", folder / "fr_1.json"]


def _pickle_dumps(folder: Path) -> list[Path]:
    return [folder / "fr_0", folder / "fr_1"]


# --------------------------------------------------------------------------- what torch does on gloo


def test_every_rank_dumped_and_gloo_wrote_no_file_of_its_own(runs):
    for name, (folder, out) in runs.items():
        assert "DUMPED 0" in out and "DUMPED 1" in out, (name, out[-2000:])
        for p in _json_dumps(folder) + _pickle_dumps(folder):
            assert p.stat().st_size > 0
        # TORCH_FR_DUMP_TEMP_FILE and the default location stay empty: gloo has no dump on timeout
        assert not list(folder.glob("auto_*")), name
        assert not list((folder / "cache").rglob("*trace_rank*")), name


def test_the_timeout_is_what_ended_the_desynchronised_runs(runs):
    for name in ("skip", "order", "subgroup"):
        out = runs[name][1]
        assert "DUMPED 0 RuntimeError" in out, out[-2000:]
        assert "Timed out waiting 3000ms" in out, out[-2000:]


def test_gloo_dump_content_in_2_13(runs):
    """What a gloo dump of torch 2.13.0 holds: per-group sequence numbers, gloo: names, sizes;
    state stays 'scheduled' and pg_config does not name the groups the entries use."""
    folder = runs["subgroup"][0]
    d = json.loads((folder / "fr_0.json").read_bytes())
    assert d["version"] == "2.10"
    assert set(d) == {"comm_lib_version", "entries", "nccl_comm_state", "pg_config", "pg_status", "version"}
    assert {"record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id", "is_p2p", "op_id",
            "profiling_name", "input_sizes", "output_sizes", "input_dtypes", "output_dtypes", "state",
            "retired", "time_created_ns", "time_discovered_started_ns", "time_discovered_completed_ns",
            "timeout_ms", "thread_name"} <= set(d["entries"][0])
    assert d["entries"][0]["timeout_ms"] == 3000 and d["entries"][0]["retired"] is True
    # pg_status says the timed-out seq 2 of "side" completed
    assert d["pg_status"]["1"]["last_completed_collective"] == d["pg_status"]["1"]["last_enqueued_collective"] == "2"
    names = [(e["process_group"][0], e["process_group"][1], e["collective_seq_id"], e["profiling_name"])
             for e in d["entries"]]
    # five collectives ran on rank 0 (seq 1-3 of the default group, seq 1-2 of "side"); the ring
    # of TORCH_FR_BUFFER_SIZE=3 kept the newest three, record_id counts on across groups
    assert names == [("0", "default_pg", 3, "gloo:all_reduce"), ("1", "side", 1, "gloo:all_reduce"),
                     ("1", "side", 2, "gloo:all_reduce")]
    assert [e["record_id"] for e in d["entries"]] == [2, 3, 4]
    assert {e["state"] for e in d["entries"]} == {"scheduled"}
    assert set(d["pg_config"]) == {""}          # not "0" and "1": fr_trace cannot map the entries
    assert d["entries"][0]["input_sizes"] == [[4]] and d["entries"][0]["input_dtypes"] == ["Float"]
    assert "frames" not in d["entries"][0]      # the JSON form carries no stack
    assert fr.load_pickle_restricted((folder / "fr_0").read_bytes())["entries"][0]["frames"]


def test_restricted_loader_builds_what_pickle_builds(runs):
    for name, (folder, _) in runs.items():
        for p in _pickle_dumps(folder):
            data = p.read_bytes()           # written by torch in this test: trusted here
            assert fr.load_pickle_restricted(data) == pickle.loads(data), p


_PROBES = r"""
# One interpreter imports torch once, then forks a child per variant: each child sets its variables,
# creates its first process group (where torch reads them) and reports on its own stdout/stderr file.
import datetime, json, os, sys, traceback, torch, torch.distributed as dist
from torch._C import _distributed_c10d as c10d
folder, variants = sys.argv[1], json.loads(sys.argv[2])


def probe(i, v):
    os.environ.update(v["env"])
    store = "file://" + os.path.join(folder, f"store{i}")
    if v["mode"] == "probe":            # 3 all_reduces under the variables in v["env"]
        dist.init_process_group("gloo", init_method=store, rank=0, world_size=1,
                                timeout=datetime.timedelta(seconds=5))
        for _ in range(3):
            dist.all_reduce(torch.ones(2))
        d = json.loads(c10d._dump_fr_trace_json())
        print("ENTRIES", len(d.get("entries", [])), "KEYS", ",".join(sorted(d)))
        return
    if v["mode"] == "before":           # TORCH_FR_BUFFER_SIZE=1 set before / after the first group
        os.environ["TORCH_FR_BUFFER_SIZE"] = "1"
    dist.init_process_group("gloo", init_method=store, rank=0, world_size=1)
    if v["mode"] == "after":
        os.environ["TORCH_FR_BUFFER_SIZE"] = "1"
    for _ in range(3):
        dist.all_reduce(torch.ones(2))
    print("ENTRIES", len(json.loads(c10d._dump_fr_trace_json()).get("entries", [])))


for i, v in enumerate(variants):
    pid = os.fork()
    if pid == 0:
        fd = os.open(os.path.join(folder, f"out{i}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1); os.dup2(fd, 2)
        code = 0
        try:
            probe(i, v)
        except BaseException:
            traceback.print_exc(); code = 1
        sys.stdout.flush(); sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    with open(os.path.join(folder, f"code{i}"), "w") as fh:
        fh.write(str(os.waitstatus_to_exitcode(status)))
"""

BUFFER_CASES = [
    ({}, 3, False),                                                   # on by default
    ({"TORCH_FR_BUFFER_SIZE": "0"}, 0, False),                        # off
    ({"TORCH_FR_BUFFER_SIZE": "2"}, 2, False),                        # a ring: the newest 2
    ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2"}, 2, True),                 # the old name still works
    ({"TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_TRACE_BUFFER_SIZE": "50"}, 0, True),  # the new name wins
]
WHEN_CASES = [("before", 1), ("after", 3)]


@pytest.fixture(scope="module")
def probes(tmp_path_factory):
    """Every single-process variant below from one interpreter (one torch import, a fork each):
    {(mode, env as JSON): (exit code, output)}."""
    folder = tmp_path_factory.mktemp("fr_probes")
    variants = [{"mode": "probe", "env": env} for env, _, _ in BUFFER_CASES]
    variants += [{"mode": when, "env": {}} for when, _ in WHEN_CASES]
    script = folder / "probes.py"
    script.write_text(_PROBES)
    code, out = _run([sys.executable, script, folder, json.dumps(variants)], _env(), folder, limit=150)
    assert code == 0, out
    return {(v["mode"], json.dumps(v["env"], sort_keys=True)):
            (int((folder / f"code{i}").read_text()), (folder / f"out{i}").read_text())
            for i, v in enumerate(variants)}


@pytest.mark.parametrize("env, entries, deprecated", BUFFER_CASES)
def test_buffer_size_variables_on_gloo(probes, env, entries, deprecated):
    code, out = probes["probe", json.dumps(env, sort_keys=True)]
    assert code == 0, out
    line = next(l for l in out.splitlines() if l.startswith("ENTRIES"))
    assert line.split()[1] == str(entries), out
    assert ("entries" in line.split()[3].split(",")) == (entries > 0)
    assert ("TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated" in out) == deprecated, out


@pytest.mark.reproduces("torch-env-var-deprecated-name")
def test_old_variable_name_warning_is_triaged_as_the_deprecated_name_entry(probes):
    """Both the old name alone and both names together print the warning; the catalog entry takes it."""
    import _repro as R
    for env in ({"TORCH_NCCL_TRACE_BUFFER_SIZE": "2"}, {"TORCH_FR_BUFFER_SIZE": "0", "TORCH_NCCL_TRACE_BUFFER_SIZE": "50"}):
        code, out = probes["probe", json.dumps(env, sort_keys=True)]
        assert code == 0, out
        line = R.assert_reproduced(out, "torch-env-var-deprecated-name")
        assert "Environment variable TORCH_NCCL_TRACE_BUFFER_SIZE is deprecated; use TORCH_FR_BUFFER_SIZE instead" in line


@pytest.mark.parametrize("when, entries", WHEN_CASES)
def test_variables_are_read_when_the_first_group_is_created(probes, when, entries):
    code, out = probes[when, "{}"]
    assert code == 0 and f"ENTRIES {entries}" in out, out


def test_gloo_size_mismatch_aborts_before_any_dump(tmp_path):
    """All-reducing 4 elements on one rank and 8 on the other: gloo's enforce aborts a process
    (SIGABRT), so the program's except clause never runs and that rank leaves no dump."""
    out = _torchrun("size", tmp_path / "size", TORCH_FR_BUFFER_SIZE="64")
    assert "Received data size doesn't match expected size" in out, out[-3000:]
    assert "SIGABRT" in out or "exitcode: -6" in out, out[-3000:]
    assert len(list((tmp_path / "size").glob("fr_*.json"))) < 2


# --------------------------------------------------------------------------- triage on real dumps


@pytest.mark.parametrize("form", ["json", "pickle", "folder"])
def test_skipped_collective_names_rank_1_and_the_all_reduce(runs, form):
    folder = runs["skip"][0]
    args = {"json": _json_dumps(folder), "pickle": _pickle_dumps(folder), "folder": [folder]}[form]
    code, out, err = _triage("--output", "json", *args)
    assert code == 0, err
    div = json.loads(out)["divergence"]
    assert div["type"] == "missing" and div["ranks"] == [1] and div["reference_ranks"] == [0]
    assert div["seq"] == 4 and div["expected"] == "all_reduce" and div["group_desc"] == "default_pg"
    assert div["per_rank"]["1"]["last_seq"] == 3
    code, text, _ = _triage(*args)
    assert code == 0
    assert text.startswith("DIVERGED: rank 1 at collective seq 4 of process group 0 (default_pg): never issued it")
    if form == "pickle":   # the pickle carries the stack: the program's own line is shown
        assert "_fr_worker.py" in text


def test_reordered_collectives_name_rank_1_broadcast_against_all_reduce(runs):
    code, out, err = _triage("--output", "json", *_json_dumps(runs["order"][0]))
    assert code == 0, err
    div = json.loads(out)["divergence"]
    assert div["type"] == "op_mismatch" and div["ranks"] == [1] and div["seq"] == 3
    assert div["collective"] == "broadcast" and div["expected"] == "all_reduce"
    assert div["tie"] is True         # two ranks: the dumps alone cannot say which side is wrong
    code, text, _ = _triage(*_pickle_dumps(runs["order"][0]))
    assert code == 0 and "ran a different collective" in text and "broadcast [[4]]" in text


def test_skip_in_a_second_group_names_that_group(runs):
    """Ring buffers of 3 entries: the default group's common span agrees, "side" diverges."""
    code, out, _ = _triage("--output", "json", *_json_dumps(runs["subgroup"][0]))
    assert code == 0
    rep = json.loads(out)
    div = rep["divergence"]
    assert (div["type"], div["group"], div["group_desc"], div["seq"], div["ranks"]) == ("missing", "1", "side", 2, [1])
    assert [g["desc"] for g in rep["groups"]] == ["default_pg", "side"]


def test_healthy_run_has_no_divergence_and_exit_1(runs):
    code, out, err = _triage("--output", "json", *_json_dumps(runs["healthy"][0]))
    assert code == 1, err
    rep = json.loads(out)
    assert rep["divergence"] is None and rep["ranks"] == [0, 1]
    assert rep["groups"][0]["last_seq"] == {"0": 4, "1": 4}
    code, text, _ = _triage(runs["healthy"][0])
    assert code == 1 and text.startswith("No divergence found")


def test_fr_dump_runs_standalone_with_the_same_report(runs):
    proc = subprocess.run([sys.executable, str(FR_DUMP), *map(str, _json_dumps(runs["order"][0]))],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    code, text, _ = _triage(*_json_dumps(runs["order"][0]))
    assert proc.stdout == text


def _variant(src: Path, dst: Path, rank: int, edit) -> Path:
    d = json.loads(src.read_bytes())
    edit(d)
    p = dst / f"fr_{rank}.json"
    p.write_text(json.dumps(d))
    return p


def test_majority_names_the_odd_rank_out_of_three(runs, tmp_path):
    """Three ranks from the healthy dumps (rank 2 is a copy of rank 1): rank 2's last collective
    gets a different size, then a different dtype."""
    src = runs["healthy"][0]
    base = [_variant(src / "fr_0.json", tmp_path, 0, lambda d: None),
            _variant(src / "fr_1.json", tmp_path, 1, lambda d: None)]

    def resize(d):
        d["entries"][-2]["input_sizes"] = [[8]]
        d["entries"][-2]["output_sizes"] = [[8]]

    _variant(src / "fr_1.json", tmp_path, 2, resize)
    code, out, _ = _triage("--output", "json", *base, tmp_path / "fr_2.json")
    div = json.loads(out)["divergence"]
    assert code == 0 and div["type"] == "size_mismatch" and div["ranks"] == [2] and div["tie"] is False
    assert div["reference_ranks"] == [0, 1] and div["seq"] == 3

    def retype(d):
        d["entries"][-2]["input_dtypes"] = ["Half"]

    _variant(src / "fr_1.json", tmp_path, 2, retype)
    code, out, _ = _triage("--output", "json", *base, tmp_path / "fr_2.json")
    div = json.loads(out)["divergence"]
    assert code == 0 and div["type"] == "dtype_mismatch" and div["ranks"] == [2]


def test_nccl_names_and_states_are_read_too(runs, tmp_path):
    """The healthy gloo dumps recast as NCCL writes them (nccl: names, started/completed states):
    no divergence, and the rank whose last collective is still 'started' is pointed at."""
    def recast(state):
        def edit(d):
            for e in d["entries"]:
                e["profiling_name"] = e["profiling_name"].replace("gloo:", "nccl:")
                e["state"] = "completed"
            d["entries"][-1]["state"] = state
        return edit
    src = runs["healthy"][0]
    a = _variant(src / "fr_0.json", tmp_path, 0, recast("completed"))
    b = _variant(src / "fr_1.json", tmp_path, 1, recast("started"))
    code, out, _ = _triage("--output", "json", a, b)
    rep = json.loads(out)
    assert code == 1 and rep["divergence"] is None
    assert any("'started' on rank 1" in n and "'completed' on rank 0" in n for n in rep["notes"]), rep["notes"]


def test_one_rank_alone_cannot_be_compared(runs):
    code, out, _ = _triage("--output", "json", runs["skip"][0] / "fr_0.json")
    rep = json.loads(out)
    assert code == 1 and rep["divergence"] is None
    assert any("only one rank" in n for n in rep["notes"])


def test_ring_buffer_start_is_aligned(runs, tmp_path):
    """Rank 0 kept its whole ring, rank 1 lost its oldest entries: only the common span is compared."""
    src = runs["skip"][0]
    a = _variant(src / "fr_0.json", tmp_path, 0, lambda d: None)
    b = _variant(src / "fr_1.json", tmp_path, 1, lambda d: d.update(entries=d["entries"][2:]))
    code, out, _ = _triage("--output", "json", a, b)
    div = json.loads(out)["divergence"]
    assert code == 0 and div["seq"] == 4 and div["ranks"] == [1]


# --------------------------------------------------------------------------- other launchers, a live dump


def _launcher_skip(cmd_head: list, out: Path, **env) -> str:
    out.mkdir()
    e = _env(FR_TEST_PREFIX=str(out / "fr_"), TORCH_FR_BUFFER_SIZE="2", **env)
    code, text = _run([*cmd_head, WORKER, "skip", PG_TIMEOUT], e, out, limit=240)
    assert code == 0 and "DUMPED 0" in text and "DUMPED 1" in text, text[-3000:]
    return text


def _assert_skip_with_ring_of_2(folder: Path):
    for r in (0, 1):   # TORCH_FR_BUFFER_SIZE=2 reached both workers
        assert len(json.loads((folder / f"fr_{r}.json").read_bytes())["entries"]) == 2
    code, out, _ = _triage("--output", "json", folder / "fr_0.json", folder / "fr_1.json")
    div = json.loads(out)["divergence"]
    assert code == 0 and (div["type"], div["seq"], div["ranks"]) == ("missing", 4, [1])


def test_accelerate_launch_passes_the_variables_to_every_rank(tmp_path):
    """accelerate launch (2 CPU processes through torchrun, as cpu-multiprocess.md runs it)."""
    accelerate = Path(sys.executable).parent / "accelerate"
    _launcher_skip([accelerate, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                    "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", _free_port()],
                   tmp_path / "acc", ACCELERATE_USE_CPU="1")
    _assert_skip_with_ring_of_2(tmp_path / "acc")


def test_deepspeed_launcher_passes_the_variables_to_local_ranks(tmp_path):
    env_path = str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", "")
    _launcher_skip([sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", "2", "--no_local_rank",
                    "--master_port", _free_port()], tmp_path / "ds", DS_ACCELERATOR="cpu", LOCAL_SIZE="2",
                   PATH=env_path)
    _assert_skip_with_ring_of_2(tmp_path / "ds")


def test_deepspeed_multinode_exports_skip_the_flight_recorder_variables(tmp_path):
    """The pdsh/MPI runners forward only names starting with EXPORT_ENVS or the accelerator's
    prefixes; TORCH_FR_* and TORCH_NCCL_* need .deepspeed_env (runner.main)."""
    code, out = _run([sys.executable, "-c",
                      "from deepspeed.launcher.runner import EXPORT_ENVS, DEEPSPEED_ENVIRONMENT_NAME\n"
                      "from deepspeed.accelerator.cuda_accelerator import CUDA_Accelerator\n"
                      "p = EXPORT_ENVS + CUDA_Accelerator.export_envs(None)\n"
                      "names = ['TORCH_FR_BUFFER_SIZE', 'TORCH_NCCL_DUMP_ON_TIMEOUT', 'TORCH_FR_DUMP_TEMP_FILE']\n"
                      "print('FORWARDED', [n for n in names if any(n.startswith(x) for x in p)], p, "
                      "DEEPSPEED_ENVIRONMENT_NAME)"], _env(DS_ACCELERATOR="cpu"), tmp_path, limit=120)
    line = next(l for l in out.splitlines() if l.startswith("FORWARDED"))
    assert line.startswith("FORWARDED []") and "'NCCL'" in line and line.endswith(".deepspeed_env"), out[-2000:]


def test_a_sigterm_handler_dumps_the_rank_torchrun_stops(tmp_path):
    """Rank 0 times out, dumps and exits 1; torchrun then sends SIGTERM to rank 1, which skipped
    the collective and never timed out: its handler writes the dump."""
    out = _torchrun("sigterm", tmp_path / "sig", TORCH_FR_BUFFER_SIZE="64")
    assert "Sending process" in out and "closing signal SIGTERM" in out, out[-3000:]
    assert "DUMPED 1 SIGTERM" in out and "DUMPED 0 RuntimeError" in out, out[-3000:]
    code, rep, _ = _triage("--output", "json", tmp_path / "sig" / "fr_0.json", tmp_path / "sig" / "fr_1.json")
    div = json.loads(rep)["divergence"]
    assert code == 0 and (div["type"], div["seq"], div["ranks"]) == ("missing", 4, [1])


def test_a_hung_rank_serves_its_dump_over_http(tmp_path):
    """torch's per-rank debug worker server answers POST /handler/fr_trace_json from its own
    thread while the main thread waits in the collective rank 1 skipped (30 s timeout)."""
    import threading
    import time
    import urllib.request
    out = tmp_path / "serve"
    out.mkdir()
    pre = str(out / "fr_")
    result = {}

    def launch():
        result["run"] = _run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                              f"--master_port={_free_port()}", WORKER, "serve", "30"],
                             _env(FR_TEST_PREFIX=pre), out, limit=150)

    t = threading.Thread(target=launch)
    t.start()
    try:
        def fetch(r):
            port = Path(f"{pre}port{r}").read_text()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/handler/fr_trace_json", data=b"",
                                         method="POST")
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.read()

        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not all(Path(f"{pre}port{r}").exists() for r in (0, 1)):
            time.sleep(0.2)
        while time.monotonic() < deadline:
            if any(e["collective_seq_id"] == 4 for e in json.loads(fetch(0)).get("entries", [])):
                break
            time.sleep(0.2)
        live = [out / f"live_{r}.json" for r in (0, 1)]
        for r in (0, 1):
            live[r].write_bytes(fetch(r))
    finally:
        Path(f"{pre}release").touch()
        t.join(200)
    assert "DUMPED 1" not in result["run"][1]           # rank 1 never dumped by itself
    code, rep, _ = _triage("--output", "json", *live)
    div = json.loads(rep)["divergence"]
    assert code == 0 and (div["type"], div["seq"], div["ranks"], div["expected"]) == ("missing", 4, [1], "all_reduce")


# --------------------------------------------------------------------------- fr_trace


def _repaired(folder: Path, dst: Path) -> Path:
    """torch's fr_trace reads pickles named <prefix><rank>; give it the run's entries with a
    pg_config that names the groups the entries use (the gloo dumps do not)."""
    dst.mkdir()
    for r in (0, 1):
        d = json.loads((folder / f"fr_{r}.json").read_bytes())
        groups = {}
        for e in d["entries"]:
            e["process_group"] = tuple(e["process_group"])
            groups[e["process_group"]] = None
        d["pg_config"] = {n: {"name": n, "desc": desc, "ranks": "[0, 1]"} for n, desc in groups}
        (dst / f"rank_{r}").write_bytes(pickle.dumps(d, protocol=2))
    return dst


def _fr_trace(folder: Path) -> tuple[int, str]:
    return _run([sys.executable, "-m", "torch.distributed.flight_recorder.fr_trace", folder],
                _env(), folder, limit=90)


def test_fr_trace_of_2_13_crashes_on_raw_gloo_dumps(runs, tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    for r in (0, 1):
        (raw / f"rank_{r}").write_bytes((runs["order"][0] / f"fr_{r}").read_bytes())
    code, out = _fr_trace(raw)
    assert code != 0 and "KeyError: ('0', 0)" in out, out[-2000:]


@pytest.mark.parametrize("scenario, kind, seq, collective", [
    ("order", "op_mismatch", 3, "broadcast"),
    ("skip", "missing", 4, None),
])
def test_fr_trace_text_is_read(runs, tmp_path, scenario, kind, seq, collective):
    code, out = _fr_trace(_repaired(runs[scenario][0], tmp_path / "fx"))
    assert code == 0, out
    (tmp_path / "fr_trace.txt").write_text(out)
    code, rep, err = _triage("--output", "json", tmp_path / "fr_trace.txt")
    assert code == 0, err
    div = json.loads(rep)["divergence"]
    assert (div["type"], div["seq"], div["ranks"], div["collective"]) == (kind, seq, [1], collective)
    assert div["group"] == "0" and div["group_desc"] == "default_pg"


def test_fr_trace_text_of_a_healthy_run_is_not_taken_for_a_dump(runs, tmp_path):
    code, out = _fr_trace(_repaired(runs["healthy"][0], tmp_path / "fx"))
    assert code == 0 and "sequence number" not in out
    assert fr.looks_like_dump(out.encode()) is None


# --------------------------------------------------------------------------- hostile input


class _Evil:
    def __init__(self, cmd):
        self.cmd = cmd

    def __reduce__(self):
        return (os.system, (self.cmd,))


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_malicious_pickle_is_refused_and_never_runs(runs, tmp_path, protocol):
    marker = tmp_path / "pwned"
    evil = {"version": "2.10", "entries": [_Evil(f"touch {marker}")], "pg_config": {}}
    data = pickle.dumps(evil, protocol=protocol)
    folder = tmp_path / "dumps"
    folder.mkdir()
    (folder / "fr_0.json").write_bytes((runs["healthy"][0] / "fr_0.json").read_bytes())
    (folder / "fr_1").write_bytes(data)
    for args in ([folder / "fr_1"], [folder], ["--fr-dump", folder / "fr_1"]):
        code, out, err = _triage(*args)
        assert code == 2, (args, out, err)
        assert err.count("\n") == 1 and "refused pickle opcode" in err and "GLOBAL" in err, err
        assert out == ""
    assert not marker.exists()
    with pytest.raises(fr.FrDumpError, match="refused"):
        fr.load_pickle_restricted(data)
    assert not marker.exists()


def test_protocol_0_pickle_is_not_a_dump_and_is_not_loaded(tmp_path):
    marker = tmp_path / "pwned"
    p = tmp_path / "fr_0"
    p.write_bytes(pickle.dumps(_Evil(f"touch {marker}"), protocol=0))
    code, out, err = _triage("--fr-dump", p)
    assert code == 2 and "not a flight-recorder dump" in err and err.count("\n") == 1
    assert not marker.exists()


def _put(path: Path, data) -> Path:
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


def _cut(src: Path, dst: Path, frac: float = 0.5) -> Path:
    data = src.read_bytes()
    dst.write_bytes(data[: int(len(data) * frac)])
    return dst


@pytest.mark.parametrize("make, message", [
    (lambda s, t: _cut(s / "fr_0.json", t / "fr_0.json"), "malformed or truncated JSON"),
    (lambda s, t: _cut(s / "fr_0", t / "fr_0"), "truncated"),
    (lambda s, t: _cut(s / "fr_0", t / "fr_0", 0.02), "truncated"),
    (lambda s, t: _put(t / "fr_0.json", '{"version": "2.10", "entries": 5, "pg_status": {}}'), "not a list"),
    (lambda s, t: _put(t / "fr_0.json", '{"pg_config": ' + "[" * 100000 + "]" * 100000 + "}"), "JSON"),
    (lambda s, t: _put(t / "fr_0", b"\x80\x02" + bytes(range(256)) * 2), "pickle"),
    (lambda s, t: _put(t / "fr_0", b"\x80\x02]q\x00(]q\x01h\x01e."), "not a flight-recorder dump"),
    (lambda s, t: _put(t / "fr_0", pickle.dumps({(1, 2): [1]}, protocol=2)), "not a flight-recorder dump"),
    (lambda s, t: _put(t / "fr_0", b"\x80\x02}q\x00]q\x01K\x01aNs."), "malformed pickle"),
])
def test_malformed_dumps_get_one_line_and_exit_2(runs, tmp_path, make, message):
    p = make(runs["skip"][0], tmp_path)
    code, out, err = _triage("--fr-dump", p)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err


def test_dump_without_rank_in_its_name_and_duplicates(runs, tmp_path):
    (tmp_path / "dump.json").write_bytes((runs["skip"][0] / "fr_0.json").read_bytes())
    code, _, err = _triage(tmp_path / "dump.json")
    assert code == 2 and "no rank at the end of the file name" in err
    a, b = tmp_path / "a_0.json", tmp_path / "b_0.json"
    a.write_bytes((runs["skip"][0] / "fr_0.json").read_bytes())
    b.write_bytes(a.read_bytes())
    code, _, err = _triage(a, b)
    assert code == 2 and "two dumps for rank 0" in err


def test_logs_are_still_triaged_as_logs(tmp_path):
    log = tmp_path / "train.log"
    log.write_text('{"level": "info", "msg": "step 1"}\nRuntimeError: boom\n')
    code, out, _ = _triage(log)
    assert code in (0, 1) and "ROOT CAUSE" in out
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = _triage(empty)
    assert code == 2 and "is a directory" in err


def test_control_characters_from_a_dump_are_not_printed(runs, tmp_path):
    a = _variant(runs["skip"][0] / "fr_0.json", tmp_path, 0, lambda d: None)

    def inject(d):
        d["entries"][-1]["profiling_name"] = "gloo:\x1b[31mall_reduce"
    b = _variant(runs["skip"][0] / "fr_1.json", tmp_path, 1, inject)
    code, out, _ = _triage(a, b)
    assert code == 0 and "\x1b" not in out and "?[31mall_reduce" in out


def test_size_bound_and_version(runs):
    code, out, err = _triage("--max-bytes", "100", runs["skip"][0] / "fr_0.json", runs["skip"][0] / "fr_1.json")
    assert code == 2 and "larger than 100 bytes" in err and err.count("\n") == 1
    proc = subprocess.run([sys.executable, str(FR_DUMP), "--version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("fr_dump.py ")
    proc = subprocess.run([sys.executable, str(FR_DUMP), str(WORKER)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not a flight-recorder dump" in proc.stderr and proc.stdout == ""


def test_triage_log_copied_alone_still_reads_logs(tmp_path):
    """Without fr_dump.py beside it (the script and its engine package copied), triage_log.py triages
    logs as before and refuses --fr-dump."""
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "triage_log.py").write_bytes(TRIAGE.read_bytes())
    shutil.copytree(TRIAGE.parent / "triage", alone / "triage", ignore=shutil.ignore_patterns("__pycache__"))
    log = tmp_path / "train.log"
    log.write_text("RuntimeError: boom\n")
    cat = ["--catalog", str(TRIAGE.parent.parent / "catalog")]
    r = subprocess.run([sys.executable, str(alone / "triage_log.py"), *cat, str(log)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode in (0, 1) and "ROOT CAUSE" in r.stdout and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, str(alone / "triage_log.py"), *cat, "--fr-dump", str(log)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "needs fr_dump.py" in r.stderr and r.stderr.count("\n") == 1


def test_sniffing():
    assert fr.looks_like_dump(b"\x80\x02}q\x00") == "pickle"
    assert fr.looks_like_dump(b'{"comm_lib_version":"","entries":[{"collective_seq_id":1') == "json"
    assert fr.looks_like_dump(b'{"level": "info", "entries": 3}') is None
    assert fr.looks_like_dump(b"RuntimeError: x\n") is None
    assert fr.looks_like_dump(b"") is None
