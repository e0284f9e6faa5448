"""Behaviour claims of sub-skills/torch-distributed that tests/torch_distributed did not run yet.

Each test runs the code path: the 2-rank gloo job in _jobs_audit.py (fixture audit_job), real
torchrun runs of _torchrun_audit_worker.py, or torch's own launcher and state-dict code called
in-process (torchrun's argument parser and run(), with only the final elastic_launch replaced so
that nothing is started). The claims each test backs are listed in tests/audit/claims/torch-distributed.yaml.
"""
from __future__ import annotations

import dataclasses
import datetime
import logging
import re
import subprocess
import sys

import pytest
import torch
import torch.distributed as dist


def ranks(run):
    out = [run.rank(r, "audit") for r in (0, 1)]
    for r in out:
        assert r and not any(k.endswith("traceback") for k in r), ({k: v for k, v in r.items()
                                                                      if k.endswith("traceback")}, run.log[-3000:])
    return out


def err(res):
    assert "error" in res, f"expected an error, got {res}"
    return res["error"]["msg"]


# ----------------------------------------------------------------------------- process groups

def test_new_group_timeout_none_is_the_backend_default_not_the_world_timeout(audit_job):
    for r in ranks(audit_job):
        assert r["world_timeout_s"] == 60.0                       # given to init_process_group
        assert r["new_group_default_timeout_s"] == 1800.0         # default_pg_timeout, not 60
        assert r["new_group_given_timeout_s"] == 5.0


def test_groups_other_code_creates_get_the_backend_default_timeout(audit_job):
    for r in ranks(audit_job):
        assert r["mesh_world_dim_is_world"] and r["mesh_world_dim_timeout_s"] == 60.0   # reuses the default group
        assert r["mesh_sub_dim_timeout_s"] == 1800.0                                     # a subgroup: backend default
        assert r["mesh_override_timeout_s"] == 7.0                                       # backend_override options
        assert r["new_subgroups_timeout_s"] == 1800.0


def test_new_group_renumbers_members_in_sorted_order(audit_job):
    j = ranks(audit_job)
    assert [x["sorted_rank"] for x in j] == [0, 1]                # new_group([1, 0]) sorted
    assert [x["unsorted_rank"] for x in j] == [1, 0]              # sort_ranks=False keeps the given order


def test_barrier_with_a_missing_rank_times_out_without_naming_it(audit_job):
    msg = err(ranks(audit_job)[0]["barrier_missing_rank"])
    assert "Timed out waiting 3000ms" in msg and not re.search(r"\brank 1\b", msg, re.I)


def test_op_mismatch_without_detail_times_out(audit_job):
    """all_reduce on rank 0, broadcast on rank 1, TORCH_DISTRIBUTED_DEBUG unset: no mismatch check, a timeout."""
    res = [r["op_mismatch_off"] for r in ranks(audit_job)]
    assert all("error" in x for x in res), res
    assert any("Timed out waiting 3000ms" in x["error"]["msg"] for x in res), res
    assert not any("mismatch" in x["error"]["msg"].lower() for x in res)     # a peer may see "Connection closed"


def test_backend_constants_of_this_wheel():
    assert dist.Backend.backend_list == ["undefined", "gloo", "nccl", "xccl", "ucc", "mpi", "fake"]
    cap = dist.Backend.backend_capability
    assert cap["gloo"] == ["cpu", "cuda"] and cap["nccl"] == ["cuda"] and cap["xccl"] == ["xpu"]
    assert cap["ucc"] == cap["mpi"] == ["cpu", "cuda"]
    assert dist.is_gloo_available()
    # this CPU wheel; a CUDA wheel answers True for NCCL, so assert what applies
    assert dist.is_nccl_available() == (torch.version.cuda is not None and dist.is_nccl_available())
    if torch.version.cuda is None:
        assert not (dist.is_nccl_available() or dist.is_mpi_available() or dist.is_ucc_available()
                    or dist.is_xccl_available())
    assert dist.constants.default_pg_timeout == datetime.timedelta(minutes=30)
    if torch.version.cuda is None:
        assert dist.constants.default_pg_nccl_timeout is None


def test_init_process_group_argument_rules():
    with pytest.raises(AssertionError, match="Cannot specify both init_method and store"):
        dist.init_process_group("gloo", init_method="env://", store=dist.HashStore())
    with pytest.raises(ValueError, match="rank parameter missing"):
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:1")
    assert not dist.is_initialized()


# ----------------------------------------------------------------------------- DDP

def test_ddp_init_sync_and_bucket_default(audit_job):
    j = ranks(audit_job)
    assert j[0]["init_sync_false_weight"] != j[1]["init_sync_false_weight"]     # ranks keep their own
    assert j[0]["init_sync_true_weight"] == j[1]["init_sync_true_weight"]
    assert j[0]["bucket_bytes_cap"] == 25 * 1024 * 1024


def test_ddp_parameter_shape_mismatch_fails_at_construction(audit_job):
    j = ranks(audit_job)
    msgs = [x["shape_mismatch_ctor"] for x in j]
    assert all("error" in m for m in msgs)
    named = [m["error"]["msg"] for m in msgs if "appears not to match sizes of the same param" in m["error"]["msg"]]
    assert named, msgs               # gloo: at least one rank names it, a peer may only time out
    assert all("Timed out" in m["error"]["msg"] or "appears not to match" in m["error"]["msg"] for m in msgs)


def test_ddp_check_reduction_only_warns(audit_job):
    w = ranks(audit_job)[0]["check_reduction_warnings"]
    assert any(x.startswith("FutureWarning: The `check_reduction` argument") and "deprecated" in x for x in w)


def test_gradient_as_bucket_view_makes_grads_views_of_one_bucket(audit_job):
    j = ranks(audit_job)[0]
    assert j["grad_storages_default"] == 4 and j["grad_storages_bucket_view"] == 1


def test_comm_hook_registration_rules(audit_job):
    for r in ranks(audit_job):
        assert "can only be called once" in err(r["comm_hook_twice"])
        assert r["comm_hook_after_backward"]["ok"] is None          # not refused after a backward
        assert "required CUDA 11+ and NCCL 2.10+ or XPU and XCCL" in err(r["bf16_compress_hook_gloo"])
        assert r["fp16_compress_hook_grad"]["ok"] == [1.5] * 3       # averaged (1 + 2) / 2


# ----------------------------------------------------------------------------- FSDP2 and state dicts

def test_fully_shard_defaults_and_parameter_replacement(audit_job):
    for r in ranks(audit_job):
        assert r["params_replaced"] is True                           # optimizer must come after
        assert r["default_mesh"] == {"ndim": 1, "size": 2}
        assert r["after_forward_types"] == {"child_l1": "DTensor", "root_l2": "Parameter"}
        assert r["after_backward_types"] == {"child_l1": "DTensor", "root_l2": "DTensor"}
        assert r["cast_forward_inputs_seen"] == "torch.bfloat16"
        assert r["ignored_param_type"] == "Parameter" and r["sharded_param_type"] == "DTensor"
        assert r["ignored_grad_same_on_all_ranks"] is False           # never reduced across ranks


def test_set_requires_gradient_sync_false_defers_the_reduction(audit_job):
    for r in ranks(audit_job):
        assert r["no_sync_grad_is_none"] is True
        assert r["sync_after_no_sync_matches_mean_of_sums"] is True


def test_state_dict_options_on_fsdp2(audit_job):
    j = ranks(audit_job)
    for r in j:
        assert r["keys_ignore_frozen"] == ["l1.bias", "l1.weight"]
        assert 'Missing key(s) in state_dict: "l1.bias"' in err(r["strict_missing_key"])
        assert "missing_keys=['l1.bias']" in r["non_strict_missing_key"]["ok"]
        assert r["broadcast_from_rank0_load"]["ok"] == "done"
    assert j[0]["broadcast_from_rank0_equal"] is True


def test_state_dict_options_defaults():
    from torch.distributed.checkpoint.state_dict import StateDictOptions
    from torch.distributed.fsdp import MixedPrecisionPolicy
    o = StateDictOptions()
    assert (o.full_state_dict, o.cpu_offload, o.broadcast_from_rank0, o.strict, o.ignore_frozen_params) == (
        False, False, False, True, False)
    p = MixedPrecisionPolicy()
    assert (p.param_dtype, p.reduce_dtype, p.output_dtype, p.cast_forward_inputs) == (None, None, None, True)


def test_async_save_returns_a_future_and_writes_every_rank(audit_job):
    for r in ranks(audit_job):
        assert r["async_save_type"] == "Future" and r["async_save_has_result"] is True
        assert r["async_save_files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]


def test_torch_save_to_dcp_and_back_in_one_process(tmp_path):
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save, torch_save_to_dcp
    sd = {"w": torch.arange(6.0).reshape(2, 3)}
    torch.save(sd, tmp_path / "a.pt")
    torch_save_to_dcp(tmp_path / "a.pt", tmp_path / "dcp")
    assert sorted(p.name for p in (tmp_path / "dcp").iterdir()) == [".metadata", "__0_0.distcp"]
    dcp_to_torch_save(tmp_path / "dcp", tmp_path / "b.pt")
    assert torch.equal(torch.load(tmp_path / "b.pt")["w"], sd["w"])
    assert not dist.is_initialized()


class _UserClass:
    pass


def test_torch_load_weights_only_escapes(tmp_path):
    path = tmp_path / "c.pt"
    torch.save({"obj": _UserClass(), "t": torch.ones(1)}, path)
    import pickle
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        torch.load(path)
    assert isinstance(torch.load(path, weights_only=False)["obj"], _UserClass)
    with torch.serialization.safe_globals([_UserClass]):
        assert isinstance(torch.load(path)["obj"], _UserClass)
    assert torch.load(path, map_location="cpu", weights_only=False)["t"].device.type == "cpu"


# ----------------------------------------------------------------------------- data loading

def test_set_epoch_keeps_shards_disjoint_and_complete(audit_job):
    j = ranks(audit_job)
    orders = []
    for epoch in ("0", "1", "2"):
        a, b = j[0]["sampler_epochs"][epoch], j[1]["sampler_epochs"][epoch]
        assert sorted(a + b) == list(range(10))
        orders.append(a)
    assert len({tuple(o) for o in orders}) == 3


def test_sharing_strategy_on_linux():
    import torch.multiprocessing as tmp
    assert tmp.get_sharing_strategy() == "file_descriptor"
    assert tmp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}


# ----------------------------------------------------------------------------- torchrun, in-process

ARG_DEFAULTS = {"nnodes": "1:1", "nproc_per_node": "1", "rdzv_backend": "static", "rdzv_endpoint": "",
                "rdzv_id": "none", "rdzv_conf": "", "standalone": False, "max_restarts": 0,
                "monitor_interval": 0.1, "start_method": "spawn", "node_rank": 0, "master_addr": "127.0.0.1",
                "master_port": None, "log_dir": None, "redirects": "0", "tee": "0", "local_ranks_filter": "",
                "module": False, "no_python": False, "run_path": False,
                "signals_to_handle": "SIGTERM,SIGINT,SIGHUP,SIGQUIT", "shutdown_timeout": None,
                "virtual_local_rank": False}


def _parse(argv, monkeypatch, **env):
    from torch.distributed.run import get_args_parser
    for k in [k for k in list(__import__("os").environ) if k.startswith("PET_")]:
        monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return get_args_parser().parse_args(argv)


def test_torchrun_flag_defaults_pet_env_and_spellings(monkeypatch):
    args = _parse(["t.py"], monkeypatch)
    assert {k: getattr(args, k) for k in ARG_DEFAULTS} == ARG_DEFAULTS
    assert _parse(["t.py"], monkeypatch, PET_NPROC_PER_NODE="2").nproc_per_node == "2"
    assert _parse(["--nproc-per-node", "3", "t.py"], monkeypatch, PET_NPROC_PER_NODE="2").nproc_per_node == "3"
    assert _parse(["--nproc_per_node", "4", "t.py"], monkeypatch).nproc_per_node == "4"


def _run_captured(argv, monkeypatch, caplog, **env):
    """torch.distributed.run.run(args) with elastic_launch replaced: returns the LaunchConfig and OMP_NUM_THREADS."""
    import torch.distributed.run as trun
    # run() writes os.environ["OMP_NUM_THREADS"] = "1" itself: setenv first so the teardown restores the
    # variable's absence (a bare delenv of an unset variable records nothing, and "1" leaked into later tests)
    monkeypatch.setenv("OMP_NUM_THREADS", "")
    monkeypatch.delenv("OMP_NUM_THREADS")
    args = _parse(argv, monkeypatch, **env)
    got = {}

    def fake_launch(config, entrypoint):
        got["config"] = config
        return lambda *a: None
    monkeypatch.setattr(trun, "elastic_launch", fake_launch)
    with caplog.at_level(logging.WARNING):
        trun.run(args)
    import os
    return got["config"], args, os.environ.get("OMP_NUM_THREADS"), caplog.text


def test_torchrun_single_node_switches_to_c10d_on_a_free_port(monkeypatch, caplog):
    cfg, args, _, _ = _run_captured(["--nproc-per-node", "2", "t.py"], monkeypatch, caplog)
    assert (cfg.rdzv_backend, cfg.rdzv_endpoint) == ("c10d", "localhost:0") and cfg.run_id != "none"
    cfg, args, _, _ = _run_captured(["--master-port", "29511", "t.py"], monkeypatch, caplog)
    assert cfg.rdzv_backend == "static" and cfg.rdzv_endpoint == "127.0.0.1:29511"
    cfg, args, _, _ = _run_captured(["--nnodes", "2", "t.py"], monkeypatch, caplog)
    assert cfg.rdzv_backend == "static" and cfg.rdzv_endpoint == "127.0.0.1:29500"     # static default port
    cfg, args, _, _ = _run_captured(["--standalone", "--rdzv-backend", "static", "--rdzv-id", "x",
                                     "--rdzv-endpoint", "h:1", "t.py"], monkeypatch, caplog)
    assert (cfg.rdzv_backend, cfg.rdzv_endpoint) == ("c10d", "localhost:0") and cfg.run_id != "x"


def test_torchrun_omp_num_threads_and_node_rank_warning(monkeypatch, caplog):
    _, _, omp, log = _run_captured(["--nproc-per-node", "2", "t.py"], monkeypatch, caplog)
    assert omp == "1" and "Setting OMP_NUM_THREADS environment variable" in log
    caplog.clear()
    _, _, omp, log = _run_captured(["--nproc-per-node", "1", "t.py"], monkeypatch, caplog)
    assert omp is None and "OMP_NUM_THREADS" not in log          # one worker per node: left unset
    caplog.clear()
    _, _, _, log = _run_captured(["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1",
                                  "--node-rank", "1", "t.py"], monkeypatch, caplog)
    assert "node_rank is only used for static rdzv_backend. It will be ignored" in log
    caplog.clear()
    _, _, _, log = _run_captured(["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "h:1",
                                  "t.py"], monkeypatch, caplog)
    assert "node_rank is only used" not in log                    # node rank 0: no warning


def test_torchrun_shutdown_timeout_default(monkeypatch, caplog):
    cfg, *_ = _run_captured(["t.py"], monkeypatch, caplog)
    assert cfg.shutdown_timeout == 30
    cfg, *_ = _run_captured(["t.py"], monkeypatch, caplog, TORCH_ELASTIC_SHUTDOWN_TIMEOUT="7")
    assert cfg.shutdown_timeout == 7


# ----------------------------------------------------------------------------- torchrun, real runs

def _root_block(run):
    return run.log.split("Root Cause (first observed failure):", 1)[1]


def test_record_puts_the_traceback_in_the_summary_and_others_get_sigterm(torchrun_record):
    run = torchrun_record
    assert run.rc != 0
    root = _root_block(run)
    assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)", root) and re.search(r"exitcode\s*:\s*1\b", root)
    assert re.search(r"error_file: \S+attempt_0/1/error\.json", root)
    assert "ValueError: rank 1 failed under record" in root
    # rank 0 printed an error first but did not exit: the summary's root is the first rank that exited
    assert run.log.index("rank 0 printed this error first") < run.log.index("rank 1 failed under record")
    assert re.search(r"Sending process \d+ closing signal SIGTERM", run.log)
    others = run.log.split("Failures:", 1)[1].split("Root Cause", 1)[0]
    assert re.search(r"rank\s*:\s*0 .*\n.*exitcode\s*:\s*-15", others)


def test_sigkill_shows_exitcode_minus_9_without_error_file(torchrun_sigkill):
    root = _root_block(torchrun_sigkill)
    assert re.search(r"exitcode\s*:\s*-9 .*\(SIGKILL\)", root)
    assert "error_file: <N/A>" in root and "Signal 9 (SIGKILL) received by PID" in root


# ----------------------------------------------------------------------------- debug variables

def _py(code, clean_env=None, **env):
    import os
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_DISTRIBUTED", "TORCH_SHOW", "MASTER_"))}
    base.update(env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=base, stdin=subprocess.DEVNULL)


def test_torch_distributed_debug_is_read_at_import():
    """TORCH_DISTRIBUTED_DEBUG: OFF when unset; DETAIL set with os.environ after `import torch.distributed`
    changes nothing, before or after init_process_group; set before the process starts, DETAIL and INFO hold.
    (Merged with tests/torch_distributed/test_names.py's former test_debug_level_defaults_to_off_and_is_read_at_import:
    one child per environment at import instead of two pairs.)"""
    code = ("import os, torch.distributed as dist\n"
            "print('LEVEL', dist.get_debug_level())\n"
            "os.environ['TORCH_DISTRIBUTED_DEBUG'] = 'DETAIL'\n"
            "print('LEVEL', dist.get_debug_level())\n"
            "dist.init_process_group('gloo', init_method='tcp://127.0.0.1:0', rank=0, world_size=1)\n"
            "print('LEVEL', dist.get_debug_level())\n")
    late = _py(code)
    early = _py(code, TORCH_DISTRIBUTED_DEBUG="DETAIL")
    info = _py("import torch.distributed as d; print('LEVEL', d.get_debug_level())", TORCH_DISTRIBUTED_DEBUG="INFO")
    def levels(res):
        return [line for line in res.stdout.splitlines() if line.startswith("LEVEL")]
    assert levels(late) == ["LEVEL DebugLevel.OFF"] * 3, late.stderr[-2000:]     # unset; set late; after init
    assert levels(early) == ["LEVEL DebugLevel.DETAIL"] * 3, early.stderr[-2000:]
    assert info.stdout.split() == ["LEVEL", "DebugLevel.INFO"], info.stderr[-2000:]


def test_torch_show_cpp_stacktraces_adds_the_cpp_stack():
    code = ("import datetime, torch.distributed as dist\n"
            "try:\n dist.TCPStore('127.0.0.1', 1, 2, False, timeout=datetime.timedelta(seconds=1))\n"
            "except Exception as e:\n print('MSG', 'Exception raised from' in str(e), len(str(e)))\n")
    off, on = _py(code), _py(code, TORCH_SHOW_CPP_STACKTRACES="1")
    assert "MSG False" in off.stdout, off.stderr[-2000:]
    assert "MSG True" in on.stdout, on.stderr[-2000:]


def _signal_torchrun(tmp_path, harness, here, mode):
    """torchrun (torch.distributed.run.main via _torchrun_signal_race.py) with 2 workers and --max-restarts 1.

    mode "plain": SIGTERM to the launcher only once both workers are up, as a scheduler stopping the job
    would; mode "window": the agent signals itself inside the metrics wrapper's window.  Returns (rc, stderr).
    """
    import os
    import signal
    import time
    cmd = [sys.executable, str(here / "_torchrun_signal_race.py"), mode, "--standalone", "--nproc-per-node", "2",
           "--max-restarts", "1", str(here / "_torchrun_signal_worker.py")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
                            start_new_session=True, env=harness._clean_env(), cwd=tmp_path)
    try:
        if mode == "plain":
            end = time.monotonic() + 90
            while not all((tmp_path / f"ready_rank{r}_attempt0").exists() for r in (0, 1)) and time.monotonic() < end:
                time.sleep(0.1)
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    return proc.returncode, err


# The agent's SIGTERM handler raises SignalException wherever the main thread is.  In a few bytecodes of
# torch/distributed/elastic/metrics/api.py `prof` (the `start = time.time()` inside its try) that exception is
# replaced by UnboundLocalError from the finally clause; a real SIGTERM hit that window once in CI (2 loaded cores).
_WINDOW_ERROR = "UnboundLocalError: cannot access local variable 'start' where it is not associated with a value"


def _assert_stopped_without_restart(tmp_path, rc, err):
    assert all((tmp_path / f"sigterm_rank{r}_attempt0").exists() for r in (0, 1)), err[-2000:]
    assert not list(tmp_path.glob("ready_rank*_attempt1")), err[-2000:]    # --max-restarts 1 unused: no new attempt
    assert re.search(r"Sending process \d+ closing signal SIGTERM", err), err[-2000:]
    assert re.search(r"SignalException: Process \d+ got signal: (15|Signals\.SIGTERM)", err), err[-2000:]
    assert rc == 1, err[-2000:]


def test_sigterm_to_torchrun_reaches_every_worker_and_ends_the_job_without_restart(tmp_path, torchrun_harness):
    """launch-torchrun.md "When torchrun itself gets a signal": SIGTERM to the agent (scancel, kubectl delete).

    Asserts the usual path; when the signal landed in the metrics wrapper's window (rare, timing), asserts that
    path instead, which test_sigterm_inside_the_metrics_wrapper_window forces every run."""
    here, harness = torchrun_harness
    rc, err = _signal_torchrun(tmp_path, harness, here, "plain")
    _assert_stopped_without_restart(tmp_path, rc, err)
    if _WINDOW_ERROR in err:
        assert (tmp_path / "rdzv_shutdown").exists(), err[-2000:]
        return
    # the signal prints as 15 on Python >= 3.11 (IntEnum str), Signals.SIGTERM before
    assert re.search(r"Received (15|Signals\.SIGTERM) death signal, shutting down workers", err), err[-2000:]
    assert not (tmp_path / "rdzv_shutdown").exists(), err[-2000:]   # launch_agent leaves the rendezvous open


def test_sigterm_inside_the_metrics_wrapper_window(tmp_path, torchrun_harness):
    """launch-torchrun.md: the rare SIGTERM that lands in `prof`'s window before `start` is bound."""
    import json
    here, harness = torchrun_harness
    rc, err = _signal_torchrun(tmp_path, harness, here, "window")
    _assert_stopped_without_restart(tmp_path, rc, err)          # workers still get SIGTERM, still exit 1
    assert err.rstrip().endswith(_WINDOW_ERROR), err[-2000:]    # the last line, the SignalException above it
    assert "During handling of the above exception, another exception occurred" in err
    assert "get_elapsed_time_ms(start)" in err
    assert not re.search(r"death signal, shutting down workers", err)   # run()'s except SignalException missed
    assert (tmp_path / "rdzv_shutdown").exists()                # launch_agent treats it as any exception

    triage = here.parents[1] / "sub-skills/failure-triage/scripts/triage_log.py"
    log = tmp_path / "agent.log"

    def root(text):
        log.write_text(text)
        out = subprocess.run([sys.executable, str(triage), "--output", "json", str(log)], capture_output=True, text=True)
        return json.loads(out.stdout)["root_cause"]["signature"], out.stdout[:2000]

    # the whole log: the signal is the root; a paste of the last traceback only: the wrapper's frame names it
    sig, report = root(err)
    assert sig == "torch-elastic-agent-got-signal", report
    sig, report = root(err[err.rindex("Traceback (most recent call last)"):])
    assert sig == "torch-elastic-metrics-window-unbound-start", report


def test_nproc_per_node_strings_resolve_per_device(monkeypatch):
    """set-5 s5-td-06: `cpu` (and `auto` without an accelerator) count the affinity mask, not
    os.cpu_count(); `gpu` without CUDA raises; `auto` with an accelerator counts its devices;
    the default is the string '1'."""
    import os

    from torch.distributed import run as trun

    assert trun.get_args_parser().parse_args(["x.py"]).nproc_per_node == "1"
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 3, 5}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: False)
    assert trun.determine_local_world_size("cpu") == 3
    assert trun.determine_local_world_size("auto") == 3
    assert trun.determine_local_world_size("7") == 7
    with pytest.raises(ValueError, match="Cuda is not available"):
        trun.determine_local_world_size("gpu")
    with pytest.raises(ValueError, match="Unsupported nproc_per_node value: gpus"):
        trun.determine_local_world_size("gpus")
    # forced accelerator branch: auto counts devices, not cores
    monkeypatch.setattr(torch.accelerator, "is_available", lambda: True)
    monkeypatch.setattr(torch.accelerator, "device_count", lambda: 8)
    monkeypatch.setattr(torch.accelerator, "current_accelerator", lambda: torch.device("cuda"))
    assert trun.determine_local_world_size("auto") == 8
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert trun.determine_local_world_size("gpu") == 4


def test_fsdp1_hybrid_shard_groups_and_sync_order(audit_job):
    """set-5 s5-mn-06: HYBRID_SHARD without process_group/device_mesh needs an auto_wrap_policy;
    sync_module_states broadcasts over the replicate (inter-node) group first, then the shard group,
    with buffers in both; one device per node clamps to NO_SHARD and nothing crosses nodes."""
    r0, r1 = ranks(audit_job)
    assert "requires explicit specification of process group or device_mesh" in err(r0["hybrid_manual_error"])
    assert r0["hybrid_tuple_calls"] == r1["hybrid_tuple_calls"] == [["replicate", 1], ["shard", 1]]
    one0, one1 = r0["hybrid_one_per_node"], r1["hybrid_one_per_node"]
    assert one0["strategy"] == one1["strategy"] == "ShardingStrategy.NO_SHARD"
    assert (one0["shard_group"], one1["shard_group"]) == ([0], [1]) and one0["replicate_group"] == [0, 1]
    assert one0["broadcast_groups"] == [[0], [0]] and one1["broadcast_groups"] == [[1], [1]]
    assert one0["weight_sum"] == 16.0 and one1["weight_sum"] == 0.0      # rank 0's weights never reach rank 1
    assert one0["grad_sum"] != one1["grad_sum"]                           # gradients not averaged across nodes


def test_dcp_save_to_node_local_folders_leaves_metadata_on_rank0_only(audit_job):
    """set-5 s5-mn-05: with a different folder per rank (node-local disks) each rank writes only its
    own .distcp file and only the coordinator (rank 0) writes .metadata."""
    r0, r1 = ranks(audit_job)
    assert r0["dcp_node_local_files"] == [".metadata", "__0_0.distcp"]
    assert r1["dcp_node_local_files"] == ["__1_0.distcp"]


def test_fsdp_lora_mixed_requires_grad(audit_job):
    """A frozen base Linear beside trainable LoRA layers in one wrap unit: FSDP1 refuses it without
    use_orig_params; with it the flat parameter requires grad and each rank sees only its slice of each
    original parameter (a LoRA weight outside this rank's shard has 0 elements and no grad); LoRA layers in
    their own units (PEFT's fsdp_auto_wrap_policy) and FSDP2 need neither; frozen weights never get a grad."""
    r0, r1 = ranks(audit_job)
    for r in (r0, r1):
        assert r["lora_fsdp1_flat"]["error"]["type"] == "ValueError"
        assert err(r["lora_fsdp1_flat"]) == "Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`"
        assert r["lora_fsdp1_orig_flat_requires_grad"] == [True]
        assert not r["lora_fsdp1_orig_grads"]["base.weight"] and not r["lora_fsdp1_orig_grads"]["base.bias"]
        assert r["lora_fsdp1_own_units_grads"] == {"base._flat_param": False, "lora_A._flat_param": True,
                                                   "lora_B._flat_param": True}
        assert r["lora_fsdp2_grads"] == {"base.weight": False, "base.bias": False, "lora_A.weight": True,
                                         "lora_B.weight": True}
        assert r["lora_fsdp2_base_requires_grad"] is False
    held = [{n.split(".", 1)[1]: k for n, k in r["lora_fsdp1_orig_local_numel"].items()} for r in (r0, r1)]
    assert held[0]["base.weight"] + held[1]["base.weight"] == 64      # 104 elements, 52 per rank
    assert held[0]["lora_A.weight"] == 0 and held[1]["lora_A.weight"] == 16
    assert not r0["lora_fsdp1_orig_grads"]["lora_A.weight"] and r1["lora_fsdp1_orig_grads"]["lora_A.weight"]
    # the sharded gradient is as large as the shard even on rank 0, whose shard is all frozen weight
    assert r0["lora_fsdp1_orig_flat_grad"] == r1["lora_fsdp1_orig_flat_grad"] == [52, 52]
