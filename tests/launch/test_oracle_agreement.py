"""The validator agrees with the launchers' own code on a generated grid of command lines x configs:
same verdict (error exactly when the launcher stops), and the same final values where it runs."""
from __future__ import annotations

import os

import pytest

from launch_grid import CONFIGS, accelerate_grid, runner_grid

from backend_validator.launch.check import check_command


def _validate(command, cfg_text, launch_dir):
    d = launch_dir / "cases"
    d.mkdir(exist_ok=True)
    if cfg_text is not None:
        (d / "config.yaml").write_text(cfg_text)
    elif (d / "config.yaml").exists():
        (d / "config.yaml").unlink()
    for n in ("ds.json", "hostfile", "bad_hostfile", "dup_hostfile"):
        if not (d / n).exists():
            (d / n).write_text((launch_dir / n).read_text())
    return check_command(command, env={"HF_HOME": str(launch_dir / "hf_home")}, cwd=str(d))


COMPARE = ("num_processes", "num_machines", "machine_rank", "main_process_ip", "mixed_precision", "gpu_ids",
           "use_deepspeed", "use_fsdp", "multi_gpu", "zero_stage", "fsdp_version", "same_network", "dynamo_backend",
           "debug", "use_megatron_lm", "tpu", "cpu", "rdzv_backend", "deepspeed_multinode_launcher",
           "fsdp_sharding_strategy", "main_process_port")
AFTER_ENV = ("nproc_per_node", "nnodes", "node_rank", "master_addr", "master_port", "rdzv_endpoint")


def test_accelerate_grid_agrees(acc_oracle, launch_dir):
    bad = []
    n_reject = n_values = 0
    for case in accelerate_grid():
        o = acc_oracle[case["id"]]
        r = _validate(case["command"], CONFIGS[case["config"]], launch_dir)
        errs = sorted({f.rule for f in r.findings if f.severity == "error"} |
                      {"input:" + e["file"] for e in r.input_errors})
        rejects = o["verdict"] == "reject"
        n_reject += rejects
        if bool(errs) != rejects:
            bad.append((case["id"], case["config"], case["command"], o["stage"], (o.get("message") or "")[:120], errs))
            continue
        if rejects or o.get("launcher") is None:
            continue
        got, want = r.effective, o.get("args_after_env", {})
        if got.get("launcher") != o["launcher"]:
            bad.append((case["id"], case["command"], "launcher", got.get("launcher"), o["launcher"]))
        for k in COMPARE:
            if k == "main_process_port" and "--main_process_port 0" in case["command"]:
                continue
            if k in want and k in got and str(got[k]) != str(want[k]):
                bad.append((case["id"], case["config"], case["command"], k, got[k], want[k]))
        for k in AFTER_ENV:
            if "--main_process_port 0" in case["command"] and k in ("master_port", "rdzv_endpoint", "master_addr"):
                continue  # port 0: accelerate picks a free port on the launching machine
            ov = o["args"].get(k)
            if ov is not None and str(got.get(k)) != str(ov):
                bad.append((case["id"], case["config"], case["command"], k, got.get(k), ov))
        n_values += 1
    assert not bad, f"{len(bad)} disagreements:\n" + "\n".join(map(str, bad[:40]))
    print(f"accelerate grid: {len(accelerate_grid())} commands, {n_reject} rejected, {n_values} value-compared")
    assert n_reject >= 60 and n_values >= 60, (n_reject, n_values)  # the grid exercises both sides


def test_runner_grid_agrees(run_oracle, launch_dir):
    bad = []
    for case in runner_grid():
        o = run_oracle[case["id"]]
        r = _validate(case["command"], None, launch_dir)
        launch_errs = sorted({f.rule for f in r.findings if f.severity == "error" and f.rule.startswith("launch-")})
        if bool(launch_errs) != (o["verdict"] == "reject"):
            bad.append((case["id"], case["command"], o["stage"], o["message"], launch_errs))
            continue
        if o["verdict"] == "accept" and case["launcher"] == "torchrun":
            v = o["values"]
            e = r.effective
            if str(e.get("rdzv_backend")) != str(v["rdzv_backend"]) or str(e.get("rdzv_endpoint")) != str(v["rdzv_endpoint"]):
                bad.append((case["id"], "rdzv", e.get("rdzv_backend"), e.get("rdzv_endpoint"), v))
            if v["min_nodes"] == v["max_nodes"] and isinstance(e.get("world_size"), int) and \
                    e["world_size"] != v["nproc_per_node"] * v["max_nodes"]:
                bad.append((case["id"], "world", e["world_size"], v))
        if o["verdict"] == "accept" and case["launcher"] == "deepspeed" and o["values"].get("hosts", 0) > 0:
            if r.effective.get("world_size") not in (None, o["values"]["world_size"]):
                bad.append((case["id"], "world", r.effective.get("world_size"), o["values"]))
    assert not bad, f"{len(bad)} disagreements:\n" + "\n".join(map(str, bad[:40]))
