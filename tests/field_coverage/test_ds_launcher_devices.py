"""Behaviour claims of sub-skills/distributed-training-backends/references/deepspeed-launcher-devices.md
and deepspeed-launcher-nodes.md (the `nodes` cases: the commands the runner starts for several hosts):
the `deepspeed` runner's device selection (runner.main with a stand-in device count and a recorded
Popen) and what deepspeed.launcher.launch gives each worker (a real launch with DS_ACCELERATOR=cpu,
whose accelerator sets CUDA_VISIBLE_DEVICES the same way as the CUDA one)."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _torchrun import free_port, result  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOC = REPO / "sub-skills" / "distributed-training-backends" / "references" / "deepspeed-launcher-devices.md"
NODES_DOC = DOC.with_name("deepspeed-launcher-nodes.md")


@pytest.fixture(scope="module")
def cases(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dslaunch")
    env = dict(os.environ, DS_ACCELERATOR="cpu")
    proc = subprocess.run([sys.executable, str(HERE / "_ds_launcher_probe.py"), str(scratch)], env=env,
                          cwd=scratch, capture_output=True, text=True, timeout=300)
    out = result(proc)
    out["_launch_dir"] = os.path.realpath(scratch)     # what the runner's os.path.abspath(".") sees
    return out


@pytest.fixture(scope="module")
def workers(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dsworkers")
    info = base64.urlsafe_b64encode(json.dumps({"localhost": [1, 3]}).encode()).decode()
    env = dict(os.environ, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="5,6,7")
    proc = subprocess.run([sys.executable, "-m", "deepspeed.launcher.launch", f"--world_info={info}",
                           "--master_addr=127.0.0.1", f"--master_port={free_port()}",
                           "--enable_each_rank_log=logs/sub",  # relative: resolved in the cwd, created
                           str(HERE / "_envprint.py"), str(scratch)],
                          env=env, cwd=scratch, capture_output=True, text=True, timeout=300)
    files = sorted(scratch.glob("env_*.json"))
    assert proc.returncode == 0 and len(files) == 2, (proc.stdout + proc.stderr)[-3000:]
    _rank_logs[:] = [(p.name, p.read_text(), proc.stdout + proc.stderr) for p in sorted((scratch / "logs" / "sub").iterdir())]
    return [json.loads(f.read_text()) for f in files]


_rank_logs: list = []


def test_default_uses_every_device(cases):
    assert cases["plain"]["world_info"] == {"localhost": [0, 1, 2, 3]}


def test_cuda_visible_devices_becomes_include_and_is_removed(cases):
    assert cases["cvd_1_3"] == {"world_info": {"localhost": [1, 3]}, "cvd_for_launch": None}


def test_any_resource_flag_drops_cuda_visible_devices(cases):
    # CUDA_VISIBLE_DEVICES=1,3 with --num_gpus 1 runs on device 0
    assert cases["cvd_1_3_with_num_gpus"] == {"world_info": {"localhost": [0]}, "cvd_for_launch": None}


def test_include_and_exclude(cases):
    assert cases["include_1_3"]["world_info"] == {"localhost": [1, 3]}
    assert cases["exclude_0"]["world_info"] == {"localhost": [1, 2, 3]}


def test_include_with_num_gpus_is_rejected(cases):
    assert cases["include_with_num_gpus"]["error"] == "ValueError: Cannot specify num_nodes/gpus with include/exclude"


def test_ids_must_exist_in_the_pool(cases):
    assert cases["include_beyond_count"]["error"] == "ValueError: No slot '2' specified on host 'localhost'"


def test_hostfile_ignores_cuda_visible_devices(cases):
    assert cases["hostfile_cvd_1_3"] == {"world_info": {"localhost": [0, 1, 2, 3]}, "cvd_for_launch": "1,3"}


def test_missing_hostfile_falls_back_to_local(cases):
    assert cases["missing_hostfile"]["world_info"] == {"localhost": [0, 1]}


def test_launch_sets_visible_devices_and_local_rank(workers):
    assert workers == [
        {"CUDA_VISIBLE_DEVICES": "1,3", "LOCAL_RANK": "0", "RANK": "0", "WORLD_SIZE": "2"},
        {"CUDA_VISIBLE_DEVICES": "1,3", "LOCAL_RANK": "1", "RANK": "1", "WORLD_SIZE": "2"},
    ]


def test_reference_states_what_the_runs_show():
    text = DOC.read_text()
    for phrase in ["Cannot specify num_nodes/gpus with include/exclude", "No slot '2' specified on host 'localhost'",
                   "silently ignored", "`LOCAL_RANK`", "`--include localhost:1,3`", "`/job/hostfile`"]:
        assert phrase in text, phrase


def _world_info(cmd):
    info = [a.split("=", 1)[1] for a in cmd if a.startswith("--world_info=")]
    return json.loads(base64.urlsafe_b64decode(info[0]))


def test_pdsh_runs_one_launch_per_host_with_the_given_master(cases):
    cmd = cases["nodes"]["pdsh"]["cmd"]
    assert cmd[:6] == ["pdsh", "-S", "-f", "1024", "-w", "node-a,node-b"]
    assert "deepspeed.launcher.launch" in cmd and "--node_rank=%n" in cmd
    assert "--master_addr=node-a" in cmd and "--master_port=29600" in cmd
    assert _world_info(cmd) == {"node-a": [0, 1], "node-b": [0, 1]}       # hostfile order, comment skipped
    # the launching node's absolute cwd and its interpreter path, reused verbatim on every host
    cd = cmd.index(f"cd {cases['_launch_dir']};")
    assert cmd[cd + 1:cd + 5] == [sys.executable, "-u", "-m", "deepspeed.launcher.launch"]


def test_master_addr_defaults_to_first_hosts_first_hostname_i_address(cases):
    res = cases["nodes"]["pdsh_no_master_addr"]
    assert res["ssh"] == ["ssh", "node-a", "hostname", "-I"]
    assert "--master_addr=10.0.0.7" in res["cmd"] and "--master_port=29500" in res["cmd"]


def test_no_ssh_starts_the_local_launch_with_the_given_node_rank(cases):
    cmd = cases["nodes"]["nossh_node1"]["cmd"]
    assert "pdsh" not in cmd and "deepspeed.launcher.launch" in cmd
    assert "--node_rank=1" in cmd and "--master_addr=node-a" in cmd
    assert _world_info(cmd) == {"node-a": [0, 1], "node-b": [0, 1]}


def test_slurm_launcher_runs_the_script_directly_under_srun(cases):
    cmd = cases["nodes"]["slurm"]["cmd"]
    assert cmd[:3] == ["srun", "-n", "4"] and cmd[3].startswith("--export=ALL")
    assert "deepspeed.launcher.launch" not in " ".join(cmd) and "train.py" in cmd


def test_no_hostfile_forces_localhost_master(cases):
    assert "--master_addr=127.0.0.1" in cases["nodes"]["no_hostfile_master_addr"]["cmd"]   # 10.1.1.1 was given


def test_hostfile_errors(cases):
    assert cases["nodes"]["no_hostfile_two_nodes"]["error"] == (
        "ValueError: Num nodes is >1 but no extra nodes available via hostfile")
    assert cases["nodes"]["bad_hostfile"]["error"] == (
        "ValueError: Hostfile contains a bad entry: node-a:2, unable to proceed with launching")


def test_nodes_reference_states_what_the_runs_show():
    text = NODES_DOC.read_text()
    for phrase in ["**hostfile order**", "replaced by `127.0.0.1`", "`ssh FIRST_HOST hostname -I`",
                   "Num nodes is >1 but no extra nodes available via hostfile", "Hostfile contains a bad entry",
                   "--node_rank=%n", "`srun -n <total devices>", "sed 's/$/ slots=8/'"]:
        assert phrase in text, phrase


def test_each_rank_log_one_file_per_rank_with_both_streams(workers):
    """set-5 s5-mn-01: deepspeed.launcher.launch creates the (relative) directory and writes
    <YYYYmmddHHMMSS>_rank<global rank>.log per worker holding its stdout and stderr."""
    import re
    names = [name for name, _, _ in _rank_logs]
    assert len(names) == 2 and all(re.fullmatch(r"\d{14}_rank[01]\.log", n) for n in names), names
    for name, text, console in _rank_logs:
        r = name[-5]
        assert f"out of rank {r}" in text and f"err of rank {r}" in text
        assert f"out of rank {r}" not in console


def test_pdsh_forwards_each_rank_log_but_not_core_binding(cases):
    """set-5 s5-mn-01: PDSHRunner appends --enable_each_rank_log (the string 'None' when unset)
    to every node's launch; --bind_cores_to_rank and --log_level are not carried; slurm runs the
    script directly, so the option has no effect there."""
    cmd = cases["nodes"]["pdsh_rank_log"]["cmd"]
    launch = cmd.index("deepspeed.launcher.launch")
    assert "--enable_each_rank_log=logs" in cmd[launch:cmd.index("train.py")]
    assert not any(a.startswith(("--bind_cores_to_rank", "--log_level")) for a in cmd)
    assert "--enable_each_rank_log=None" in cases["nodes"]["pdsh"]["cmd"]
    slurm = cases["nodes"]["slurm_rank_log"]["cmd"]
    assert slurm[0] == "srun" and not any("enable_each_rank_log" in a for a in slurm)
