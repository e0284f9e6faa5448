"""The failure grammar of issue 20 (sub-skills/failure-triage/scripts/triage/grammar.py), by class.

- every class's docstring examples (Matches / Not) hold, and each Matches line passes the one
  combined prefilter, so the engine sees it;
- real lines from the dev logs (tests/failure_triage/real_logs/, never the held-out part) are
  classified as their class; constructed lines cover the wordings the dev logs lack;
- roles: compiler/linker before a build's CalledProcessError, SIGKILL without a traceback, the first
  watchdog timeout, torchrun's root-cause block; multi-line messages; glued lines;
- timestamps and several files: the first failure in time wins, with its file and rank.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
DEV = HERE / "real_logs"
SCRIPTS = HERE.parents[1] / "sub-skills" / "failure-triage" / "scripts"


@pytest.fixture(scope="module")
def grammar(triage):
    return sys.modules["triage.grammar"]


def _classes():
    # the engine package beside triage_log.py (the script puts its folder on sys.path the same way)
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import triage.grammar
    return triage.grammar.CLASSES


CLASSES = _classes()


@pytest.mark.parametrize("fc", CLASSES, ids=[c.id for c in CLASSES])
def test_class_examples_hold_and_pass_the_prefilter(fc, triage, catalog):
    good, bad = fc.examples("Matches"), fc.examples("Not")
    assert len(good) >= 1 and len(bad) >= 1, fc.id
    assert fc.role in ("root", "fallback", "cascade", "warning")
    assert fc.cause and fc.fix and (SCRIPTS.parents[2] / fc.reference).is_file(), fc.id
    for line in good:
        s = triage.clean(line)[0].strip()
        assert fc.claim(s) is not None, (fc.id, line)
        assert catalog.prefilter.search("\n" + s), (fc.id, "prefilter drops", line)
    for line in bad:
        assert fc.claim(triage.clean(line)[0].strip()) is None, (fc.id, line)


# (dev log, 1-based line, class of that line) - real lines, cited by the log's labels.yaml source
REAL = [
    ("accelerate-1214.log", 9, "signal-kill"),            # torchrun failed (exitcode: -9), rich-logged
    ("deepspeed-1435.log", 1, "compiler-version"),        # ATen.h: #error C++14 or later ... required
    ("mambair-39.log", 9, "nccl-error"),                  # ncclInvalidUsage
    ("accelerate-314.log", 1, "watchdog-timeout"),        # [E ProcessGroupNCCL.cpp] Watchdog caught ...
    ("brain-score-vision-950.log", 2, "signal-kill"),     # srun: error: node107: task 0: Out Of Memory
    ("accelerate-1622.log", 1, "c10d-store"),             # server socket failed to bind (errno 98)
    ("deepspeed-6654.log", 2, "build-cascade"),           # ninja: build stopped
]


@pytest.mark.parametrize("name,line_no,klass", REAL, ids=[r[0] for r in REAL])
def test_real_dev_lines_are_classified(name, line_no, klass, triage):
    raw = (DEV / name).read_text(encoding="utf-8", errors="replace").splitlines()[line_no - 1]
    res = triage.triage_text(raw)
    classes = {f["class"] for f in res["findings"]} | {(res["root_cause"] or {}).get("class")}
    assert klass in classes, (raw, res)


def _root(triage, text):
    return triage.triage_text(text)["root_cause"]


def test_old_watchdog_wording_without_seqnum_is_a_failure(triage):
    root = _root(triage, "[E ProcessGroupNCCL.cpp:587] [Rank 0] Watchdog caught collective operation timeout: "
                         "WorkNCCL(OpType=BROADCAST, Timeout(ms)=1800000) ran for 1803170 milliseconds before timing out.")
    assert root is not None and root["signature"] == "nccl-watchdog-timeout" and root["class"] == "watchdog-timeout"


def test_exception_line_two_ranks_wrote_into(triage):
    log = ("[rank0]: Traceback (most recent call last):\n"
           '[rank0]:   File "train.py", line 3, in <module>\n'
           "[rank0]: ValueError: bad shape[rank1]: Traceback (most recent call last):\n"
           '[rank1]:   File "train.py", line 3, in <module>\n')
    root = _root(triage, log)
    assert root["line"] == 3 and root["rank"] == 0 and root["text"] == "ValueError: bad shape"


def test_glued_exception_inside_an_open_traceback_ends_it(triage):
    log = ("Traceback (most recent call last):\n"
           '  File "x.py", line 1, in <module>\n'
           "torch.distributedtorch.distributed.DistBackendError.: DistBackendErrorNCCL error in: "
           "ProcessGroupNCCL.cpp:1287, invalid usage, NCCL version 2.17.1\n"
           "ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n")
    root = _root(triage, log)
    assert root["line"] == 3 and root["class"] == "nccl-error"


def test_nccl_last_error_and_its_next_line_are_one_finding(triage):
    log = ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, unhandled system error, NCCL version 2.18.1\n"
           "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.\n"
           "Last error:\n"
           "socketStartConnect: Connect to 10.0.0.2<45123> failed : Software caused connection abort\n")
    res = triage.triage_text(log)
    assert res["root_cause"]["line"] == 1
    joined = [f for f in res["findings"] if "socketStartConnect" in f["text"]]
    assert joined and "Last error:" in joined[0]["text"] and joined[0]["line"] == 2
    assert not any(f["line"] == 4 for f in res["findings"])


@pytest.mark.parametrize("compiler_line,klass", [
    ("/usr/local/cuda/include/crt/host_config.h:132:2: error: #error -- unsupported GNU version! gcc versions "
     "later than 12 are not supported!", "compiler-version"),
    ("csrc/adam/multi_tensor_adam.cu:11:10: fatal error: cuda_runtime.h: No such file or directory", "missing-header"),
    ("/usr/bin/ld: cannot find -lcurand: No such file or directory", "linker-error"),
    ("csrc/x.cpp:8:10: error: 'bfloat16' is not a member of 'c10'", "compiler-error"),
])
def test_compiler_and_linker_lines_are_the_root_not_the_build_summary(triage, compiler_line, klass):
    log = "\n".join(["[1/3] c++ -MMD -c cpu_adam.cpp -o cpu_adam.o", "FAILED: cpu_adam.so", compiler_line,
                     "  note: in expansion of macro", "ninja: build stopped: subcommand failed.",
                     "Traceback (most recent call last):", '  File "setup.py", line 1, in <module>',
                     "subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
                     "", "The above exception was the direct cause of the following exception:", "",
                     "Traceback (most recent call last):", '  File "train.py", line 1, in <module>',
                     "RuntimeError: Error building extension 'cpu_adam'"])
    res = triage.triage_text(log)
    root = res["root_cause"]
    assert root["line"] == 3 and root["class"] == klass, res
    roles = {f["line"]: f["role"] for f in res["findings"]}
    # ninja's summary, and the chained CalledProcessError -> "Error building extension" (one finding at
    # its known link, line 14) are cascade of the compiler/linker line
    assert roles.get(5) == "cascade" and roles.get(14) == "cascade" and roles.get(3) == "root"


def test_linker_class_names_the_library_and_how_to_provide_it(triage):
    root = _root(triage, "/usr/bin/ld: cannot find -lcurand: No such file or directory\n"
                         "collect2: error: ld returned 1 exit status\n")
    assert root["class"] == "linker-error" and root["signature"] is None
    for word in ("libcurand", "LIBRARY_PATH", "lib64", "prebuilt wheel", "DS_BUILD_"):
        assert word in root["cause"] + root["fix"], word


@pytest.mark.parametrize("line,word", [
    ("[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).",
     "port"),
    ("[W socket.cpp:601] [c10d] The client socket has failed to connect to [node1]:29500 (errno: 111 - Connection refused).",
     "reachable"),
    ("[W socket.cpp:558] [c10d] The IPv6 network addresses of (node-7, 29500) cannot be retrieved (gai error: -2 - "
     "Name or service not known).", "resolve"),
])
def test_c10d_store_class_says_bind_connect_or_resolve(triage, catalog, line, word):
    fc, g = sys.modules["triage.grammar"].classify(triage.clean(line)[0].strip())
    assert fc.id == "c10d-store"
    assert word in fc.text("cause", g) + fc.text("fix", g)


def test_ipv6_family_warning_is_not_a_failure(triage):
    res = triage.triage_text("[W socket.cpp:663] [c10d] The client socket cannot be initialized to connect to "
                             "[localhost]:29500 (errno: 97 - Address family not supported by protocol).\nstep 1\n")
    assert res["root_cause"] is None or res["root_cause"]["signature"] is not None


def test_sigkill_without_traceback_is_host_memory_and_cascade_after_one(triage):
    kill = "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 0 (pid: 8180) of binary: /usr/bin/python3"
    root = _root(triage, "step 1\n" + kill)
    assert root["line"] == 2 and root["class"] == "signal-kill" and "memory" in root["cause"]
    res = triage.triage_text("RuntimeError: boom\n" + kill + "\nKilled\n")
    assert res["root_cause"]["line"] == 1
    assert {(f["line"], f["role"]) for f in res["findings"]} >= {(2, "cascade")}
    assert _root(triage, "Killed\n")["class"] == "signal-kill"


@pytest.mark.parametrize("code,klass", [("-9", "signal-kill"), ("-11", "segfault"), ("-6", "signal-abort"),
                                        ("1", "launcher-exit")])
def test_torchrun_root_cause_block_gives_rank_and_exit_class(triage, code, klass):
    block = ["torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
             "============================================================",
             "train.py FAILED", "------------------------------------------------------------",
             "Failures:", "  <NO_OTHER_FAILURES>", "------------------------------------------------------------",
             "Root Cause (first observed failure):", "[0]:", "  time      : 2026-12-01_12:00:01", "  host      : node3",
             "  rank      : 5 (local_rank: 1)", f"  exitcode  : {code} (pid: 4242)", "  error_file: <N/A>",
             "  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html",
             "============================================================"]
    res = triage.triage_text("\n".join(block))
    root = res["root_cause"]
    assert root["rank"] == 5 and root["line"] == 13 and root["class"] == klass, root


def test_first_watchdog_with_nothing_before_links_the_flight_recorder(triage):
    root = _root(triage, "[E ProcessGroupNCCL.cpp:587] [Rank 1] Watchdog caught collective operation timeout: "
                         "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800013 milliseconds before timing out.")
    cls = sys.modules["triage.grammar"].BY_ID["watchdog-timeout"]
    assert root["line"] == 1 and "flight-recorder.md" in cls.fix and "fell behind" in cls.fix


def test_cuda_device_assert_and_error_classes(triage):
    assert _root(triage, "/pytorch/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce_cuda_kernel_2d: "
                         "block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.")["class"] \
        == "cuda-device-assert"
    assert _root(triage, "RuntimeError: CUDA error: misaligned address")["class"] == "cuda-error"


# --------------------------------------------------------------------------- timestamps and files

def test_timestamps_of_each_wording(triage):
    ts = sys.modules["triage.clean"].timestamp
    a = ts("[E1201 12:00:01.123456 ProcessGroupNCCL.cpp:1] x")
    b = ts("[2026-12-01 12:00:02,000] [ERROR] [launch.py:1:main] x")
    c = ts("2026-12-01T12:00:03.5Z ERROR x")
    d = ts("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] x".split("]:", 1)[1])
    assert a is not None and b is not None and c is not None and d is not None
    assert a < b < c
    assert ts("step 12:00") is None and ts("loss 0.5") is None


def test_first_failure_in_time_wins_across_files(tmp_path):
    import json
    import subprocess
    r0 = tmp_path / "rank0.log"
    r1 = tmp_path / "rank1.log"
    r0.write_text("[2026-12-01 12:05:00,000] [INFO] step 10\n"
                  "[2026-12-01 12:10:00,000] [ERROR] RuntimeError: NCCL communicator was aborted on rank 0.\n")
    r1.write_text("[2026-12-01 12:00:00,000] [INFO] step 9\n"
                  "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
                  "ValueError: Tried to find /ckpt/x but folder does not exist\n")
    out = subprocess.run([sys.executable, str(SCRIPTS / "triage_log.py"), "--output", "json", str(r0), str(r1)],
                         capture_output=True, text=True, timeout=120)
    root = json.loads(out.stdout)["root_cause"]
    assert root["file"] == str(r1) and root["file_line"] == 4 and root["line"] == 6
    assert root["signature"] == "accelerate-load-state-missing-dir"


def test_same_file_without_timestamps_keeps_input_order(triage):
    res = triage.triage_text("[rank1]: ValueError: first\n[rank0]: KeyError: second\n")
    assert res["root_cause"]["line"] == 1


def test_glog_times_order_ranks_in_one_file(triage):
    line = ("[rank{r}]:[E626 06:24:{s} ProcessGroupNCCL.cpp:616] [Rank {r}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for "
            "600020 milliseconds before timing out.")
    res = triage.triage_text(line.format(r=1, s="44.903") + "\n" + line.format(r=0, s="44.159"))
    assert res["root_cause"]["line"] == 2 and res["root_cause"]["rank"] == 0


# Real lines from public threads (constructed logs around them), by class.
PUBLIC = [
    # https://github.com/deepspeedai/DeepSpeed/issues/7174 and #3929: a DeepSpeed op build that cannot link curand
    ("/usr/bin/ld: cannot find -lcurand: No such file or directory", "linker-error"),
    # https://github.com/NVIDIA/Megatron-LM/issues/935: the watchdog aborting a rank
    ("terminate called after throwing an instance of 'c10::DistBackendError'", "cpp-exception"),
    # deepspeed-889.log (dev): a missing CUDA header in a DeepSpeed op build
    ("/root/anaconda3/envs/x/lib/python3.8/site-packages/deepspeed/ops/csrc/includes/gemm_test.h:6:10: fatal error: "
     "cuda_profiler_api.h: No such file or directory", "missing-header"),
    # glm-4.log (dev)
    ("RuntimeError: CUDA error: invalid device ordinal", "cuda-error"),
    # basicsr-737.log (dev): the watchdog's follow-up line
    ("[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception "
     "(either an error or timeout) detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed "
     "NCCL work: 807.", "c10d-echo"),
]


@pytest.mark.parametrize("line,klass", PUBLIC, ids=[k for _, k in PUBLIC])
def test_public_lines_are_classified(line, klass, triage, catalog):
    s = triage.clean(line)[0].strip()
    assert catalog.prefilter.search("\n" + s)
    assert sys.modules["triage.grammar"].classify(s)[0].id == klass


def test_cpp_exception_takes_its_what_line(triage):
    log = ("terminate called after throwing an instance of 'c10::DistBackendError'\n"
           "  what():  [PG 1 Rank 7] Process group watchdog thread terminated with exception: [Rank 7] Watchdog caught "
           "collective operation timeout: WorkNCCL(SeqNum=199, OpType=_REDUCE_SCATTER_BASE, NumelIn=70, NumelOut=44, "
           "Timeout(ms)=600000) ran for 882725 milliseconds before timing out.\n")
    root = _root(triage, log)
    assert root["line"] == 1 and root["class"] == "cpp-exception" and root["signature"] == "nccl-watchdog-timeout"


# --------------------------------------------------------------------------- queries and the cache

def _cli(*args):
    import subprocess
    return subprocess.run([sys.executable, str(SCRIPTS / "triage_log.py"), *args], capture_output=True, text=True,
                          timeout=120)


def test_explain_prints_one_entry_with_wordings_and_a_class():
    import json
    r = _cli("--explain", "nccl-watchdog-timeout", "--output", "json")
    assert r.returncode == 0
    doc = json.loads(r.stdout)
    assert doc["id"] == "nccl-watchdog-timeout" and doc["cause"] and doc["fix"] and doc["versions"]
    assert len(doc["wordings"]) >= 2 and doc["class"] == "watchdog-timeout"
    r = _cli("--explain", "linker-error")
    assert r.returncode == 0 and "LIBRARY_PATH" in r.stdout
    r = _cli("--explain", "no-such-id")
    assert r.returncode == 1 and "no catalog entry or class" in r.stderr


def test_search_ranks_the_matching_entry_first():
    import json
    r = _cli("--search", "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                         "network address. port: 29500, useIpv6: false, code: -98, name: EADDRINUSE", "--output", "json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["entries"][0]["id"] == "torch-store-port-in-use" and doc["class"] == "c10d-store"
    r = _cli("--search", "watchdog timeout")
    assert r.returncode == 0 and "nccl-watchdog-timeout" in r.stdout
    assert _cli("--search", "zzzz qqqq").returncode == 1


def test_catalog_cache_is_rebuilt_when_the_yaml_changes(tmp_path, triage):
    import shutil
    src = SCRIPTS.parent / "catalog"
    cat_dir = tmp_path / "catalog"
    cat_dir.mkdir()
    for f in src.glob("*.yaml"):
        shutil.copy(f, cat_dir / f.name)
    first = triage.load_catalog(cat_dir)
    assert (cat_dir / ".compiled.json").is_file()
    again = triage.load_catalog(cat_dir)
    assert [e.id for e in again.ordered] == [e.id for e in first.ordered]
    y = cat_dir / "torch.yaml"
    y.write_text(y.read_text().replace("id: torch-env-var-not-set", "id: torch-env-var-not-set-renamed"))
    changed = triage.load_catalog(cat_dir)
    assert "torch-env-var-not-set-renamed" in changed.by_id and "torch-env-var-not-set" not in changed.by_id
    y.write_text("- {id: broken")
    with pytest.raises(triage.CatalogError):
        triage.load_catalog(cat_dir)


def test_catalog_cache_has_short_lines_and_reloads_from_itself(tmp_path, triage):
    """Agents grep the skill folder: the cache the tool writes beside the catalog keeps one entry (or one
    trigger/key item) per line, so a hit prints that entry, not the whole 350 KB file (a set-15 answer
    read 90k tokens through one such grep). The second load comes from the cache and matches the first."""
    import json
    import shutil
    cat_dir = tmp_path / "catalog"
    cat_dir.mkdir()
    for f in (SCRIPTS.parent / "catalog").glob("*.yaml"):
        shutil.copy(f, cat_dir / f.name)
    first = triage.load_catalog(cat_dir)
    text = (cat_dir / ".compiled.json").read_text(encoding="utf-8")
    doc = json.loads(text)
    assert len(doc["entries"]) == len(first.entries) > 100
    lines = text.splitlines()
    assert len(lines) > len(first.entries) and max(map(len, lines)) < 8000, max(map(len, lines))
    (cat_dir / "torch.yaml").touch()  # same bytes: the key is unchanged, so the cache is used
    again = triage.load_catalog(cat_dir)
    assert [e.id for e in again.ordered] == [e.id for e in first.ordered]
    assert again.trigger_of == first.trigger_of and again.keys == first.keys


def test_catalog_loads_without_a_writable_cache_and_without_the_c_loader(tmp_path, triage, monkeypatch):
    import yaml
    monkeypatch.setenv("TRIAGE_NO_CACHE", "1")
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    cat = triage.load_catalog(SCRIPTS.parent / "catalog")
    assert len(cat.entries) > 100
    assert triage.triage_text("ValueError: Tried to find /x but folder does not exist", cat)["root_cause"]["signature"] \
        == "accelerate-load-state-missing-dir"


def test_c10d_warnings_with_errno_join_the_error_after_them(triage):
    log = ("[W socket.cpp:426] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in use).\n"
           "[W socket.cpp:426] [c10d] The server socket has failed to bind to 0.0.0.0:29500 (errno: 98 - Address already in use).\n"
           "[E socket.cpp:462] [c10d] The server socket has failed to listen on any local network address.\n")
    root = _root(triage, log)
    assert root["line"] == 3 and root["class"] == "c10d-store" and len(root["more"]) == 2
    alone = _root(triage, log.splitlines()[0])
    assert alone["line"] == 1 and alone["class"] == "c10d-store" and "port" in alone["fix"]


def test_package_modules_stay_small_and_acyclic():
    """DEVELOPERS.md structure: no module over 1000 lines; each engine module imports only earlier ones."""
    order = ["clean", "grammar", "catalog", "engine", "reader"]
    for path in [SCRIPTS / "triage_log.py", *sorted((SCRIPTS / "triage").glob("*.py"))]:
        text = path.read_text(encoding="utf-8")
        assert text.count("\n") < 1000, path
        if path.parent.name == "triage" and path.stem in order:
            own = order.index(path.stem)
            for m in re.findall(r"^from \.(\w+) import|^\s+from \.(\w+) import", text, re.M):
                dep = m[0] or m[1]
                assert order.index(dep) < own, (path.stem, dep)


def test_every_catalog_example_and_wording_passes_the_prefilter(catalog, triage):
    """Lines the prefilter rejects are never analysed: each entry's example and listed wordings pass it."""
    missed = []
    for e in catalog.entries:
        for line in [str(e.raw["example"])] + [str(w["text"]) for w in e.wordings]:
            s = triage.clean(line)[0].strip()
            if not catalog.prefilter.search("\n" + s) or not catalog.prefilter_bytes.search(b"\n" + s.encode()):
                missed.append((e.id, line[:80]))
    assert not missed, missed
