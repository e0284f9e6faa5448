"""Every row of sub-skills/distributed-training-backends/references/deepspeed-multinode-runners.md:
the per-node commands of the six multinode runners of deepspeed 0.19.8, built by the installed
runner.main with two fake hosts (_ds_multinode_probe.py, one process, no ssh, no GPU), and what
deepspeed.launcher.launch does on one node. The flag table is regenerated and compared verbatim, so
the reference cannot drift from the installed code."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _torchrun import result  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DOC = REPO / "sub-skills" / "distributed-training-backends" / "references" / "deepspeed-multinode-runners.md"
LAUNCH_DIR = "LAUNCHER_DIR"


@pytest.fixture(scope="module")
def probe(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("dsmultinode")
    # without an inherited OMP_NUM_THREADS (an in-process Accelerator of an earlier test may export it): the
    # probe records the variables launch.py itself sets for each rank
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"} | {"DS_ACCELERATOR": "cpu"}
    proc = subprocess.run([sys.executable, str(HERE / "_ds_multinode_probe.py"), str(scratch)], env=env,
                          cwd=scratch, capture_output=True, text=True, timeout=300)
    out = result(proc)
    out["_scratch"] = os.path.realpath(scratch)
    return out


@pytest.fixture(scope="module")
def doc():
    return DOC.read_text(encoding="utf-8")


def line(cmd):
    return " ".join(" ".join(cmd).split())


def test_flag_table_is_the_generated_one(probe, doc):
    start, end = "<!-- generated: flag table -->\n", "\n<!-- end generated -->"
    assert start in doc and end in doc
    assert doc.split(start, 1)[1].split(end, 1)[0].strip() == probe["matrix_md"].strip()


def test_base_commands_are_the_ones_shown(probe, doc):
    for name, res in probe["base"].items():
        assert line(res["cmd"]) in " ".join(doc.split()), name
    pdsh = probe["base"]["pdsh"]["cmd"]
    assert pdsh[:6] == ["pdsh", "-S", "-f", "1024", "-w", "node-a,node-b"]
    assert "--node_rank=%n" in pdsh and "--enable_each_rank_log=None" in pdsh     # always sent, default "None"
    assert "--log_level=info" not in pdsh                                          # pdsh drops --log_level
    assert "--log_level=info" in probe["base"]["--no_ssh --node_rank 1"]["cmd"]
    for name in ("openmpi", "mpich", "impi", "slurm", "mvapich"):                  # no launch.py under MPI/slurm
        assert "deepspeed.launcher.launch" not in probe["base"][name]["cmd"], name
        assert not any(t.startswith("--local_rank") for t in probe["base"][name]["cmd"]), name


def test_matrix_key_cells(probe):
    m = probe["matrix"]
    assert m["--module"]["slurm"] == m["--no_python"]["slurm"] == "not forwarded"
    assert m["--module"]["mpich"] == "+ `-m`; + `--module`"         # `python -u -m .../launcher_helper.py`
    assert m["--enable_each_rank_log logs"]["pdsh"].endswith("`--enable_each_rank_log=logs`")
    for name in ("openmpi", "mpich", "impi", "slurm", "mvapich"):
        assert m["--enable_each_rank_log logs"][name] == "not forwarded"
        assert m["--save_pid"][name] == m["--no_local_rank"][name] == "not forwarded"
        assert m["--include node-b"][name].startswith("1 host left: runs locally")
    assert m["--bind_cores_to_rank"]["pdsh"] == "not forwarded"
    assert "OMP_NUM_THREADS" in m["--bind_cores_to_rank"]["impi"]
    assert m["--master_port 29600"]["openmpi"] == m["--master_port 29600"]["slurm"] == "not forwarded"
    assert m["--num_gpus 1"]["slurm"] == "`4` → `2 --gpus-per-node 1`"
    assert m["--ssh_port 2222"]["pdsh"] == "not forwarded"      # goes through PDSH_SSH_ARGS_APPEND instead
    assert m["--venv_script /v/activate"]["pdsh"] == "+ `source /v/activate;`"


def test_exports(probe):
    scratch = probe["_scratch"]
    pdsh = probe["exports"]["pdsh"]["cmd"][6]
    for part in ("export NCCL_DEBUG=WARN;", "export NCCL_IB_HCA=mlx5;", "export PYTHONFAULTHANDLER=1;",
                 "export MLFLOW_RUN_ID=r1;", "export UCX_TLS=rc;", "export MV2_X=1;", "export PYTHONPATH=DIR:/extra;",
                 "export HF_HOME=/cwd-file;", "export FROM_HOME=1;", 'export SPACED="a b";',
                 'export DOLLAR="$HOME/x";'):
        assert part in pdsh, part
    assert "CUDA_HOME" not in pdsh and "LD_LIBRARY_PATH" not in pdsh
    assert "NCCL_IB_HCA" not in probe["exports_aisc"]["cmd"][6]                     # AISC_JOB_NAME set
    assert "export NCCL_DEBUG=WARN;" in probe["exports_aisc"]["cmd"][6]
    assert probe["exports_aisc"]["env"]["PYTHONPATH"] == scratch + ":/extra"
    om = probe["exports"]["openmpi"]["cmd"]
    assert "UCX_TLS=rc" in om and "UCX_TLS=tcp" not in om                          # user value replaces the default
    assert "UCX_TLS=tcp" in probe["base"]["openmpi"]["cmd"]
    assert "-genv NCCL_DEBUG=WARN" in line(probe["exports"]["mpich"]["cmd"])
    assert "-genv NCCL_DEBUG WARN" in line(probe["exports"]["impi"]["cmd"])
    assert "-env NCCL_DEBUG=WARN" in line(probe["exports"]["mvapich"]["cmd"])
    assert "-x NCCL_DEBUG=WARN" in line(om)
    srun = [t for t in probe["exports"]["slurm"]["cmd"] if t.startswith("--export=")][0]
    assert srun.startswith("--export=ALL,NCCL_DEBUG=WARN,") and 'SPACED="a b"' in srun
    assert probe["exports_ssh_port_env"] == {"PDSH_SSH_ARGS_APPEND": "-i key             -p 2222",
                                             "PDSH_RCMD_TYPE": "ssh"}
    assert probe["exports_ssh_port_ssh"] == [["ssh", "-o", "PasswordAuthentication=no", "-p", "2222", "node-a",
                                              "hostname"], ["ssh", "-p", "2222", "node-a", "hostname", "-I"]]
    assert "export CUSTOM=1;" in probe["exports_ds_env_file"]["cmd"][6]               # DS_ENV_FILE's name
    assert probe["ds_env_blank_line"]["error"] == "ValueError: not enough values to unpack (expected 2, got 1)"
    assert probe["ds_env_comment"] == probe["ds_env_blank_line"]


def test_paths_and_refusals(probe):
    assert probe["one_host"]["cmd"][:4] == ["PY", "-u", "-m", "deepspeed.launcher.launch"]
    assert probe["one_host_force_multi"]["cmd"][:6] == ["pdsh", "-S", "-f", "1024", "-w", "node-a"]
    assert probe["one_host_unknown_launcher"]["cmd"][3] == "deepspeed.launcher.launch"
    assert probe["unknown_launcher"]["error"] == "NotImplementedError: Unknown launcher foo"
    assert probe["upper_case_launcher"]["cmd"][0] == "mpirun"
    assert "--master_addr=10.0.0.7" in probe["no_master_addr"]["cmd"]
    assert probe["ssh_check"]["ssh"] == [["ssh", "-o", "PasswordAuthentication=no", "node-a", "hostname"]]
    nossh = probe["no_ssh_no_master_addr"]                          # the hostname -I lookup still runs
    assert nossh["ssh"] == [["ssh", "node-a", "hostname", "-I"]] and "--master_addr=10.0.0.7" in nossh["cmd"]
    msg = "AssertionError: Launching training without ssh, but --node_rank is not set correctly."
    assert probe["no_ssh_bad_rank"]["error"] == probe["no_ssh_no_rank"]["error"] == msg
    assert probe["include_and_num_gpus"]["error"] == "ValueError: Cannot specify num_nodes/gpus with include/exclude"
    un = probe["uneven"]
    assert un["pdsh"]["cmd"][0] == "pdsh" and un["openmpi"]["cmd"][:3] == ["mpirun", "-n", "3"]
    assert un["mpich"]["error"] == "ValueError: MPICH requires same number of devices per node"
    assert un["impi"]["error"] == "ValueError: Intel MPI requires same number of devices per node"
    assert un["mvapich"]["error"] == "ValueError: mvapich requires same number of devices per node"
    assert un["slurm"]["error"].startswith("ValueError: slurm backend needs the same slot count on every host")
    assert probe["slurm_include_slot1"]["error"].startswith("ValueError: slurm backend cannot select specific device")
    assert probe["slurm_include_one_host"]["cmd"][3] == "deepspeed.launcher.launch"
    btl = probe["openmpi_btl_override"]["cmd"]
    assert "eth0" not in btl and line(btl).count("btl_tcp_if_include") == 1
    assert probe["elastic_training"]["error"] == "SystemExit: 2"
    assert probe["pdsh_arg_with_space"]["cmd"][-1] == '"say \\"hi\\" now"'
    assert probe["pdsh_missing"]["error"] == "RuntimeError: launcher 'pdsh' not installed."
    assert probe["mvapich_hostfile_text"] == "node-a\nnode-b\n"


def test_what_launch_does_on_a_node(probe):
    node1 = probe["launch_node1"]["spawned"]                       # world {node-a:[0,1,2], node-b:[2,3]}
    assert [(s["env"]["RANK"], s["env"]["LOCAL_RANK"]) for s in node1] == [("3", "1"), ("4", "0")]
    assert [s["cmd"][3] for s in node1] == ["--local_rank=1", "--local_rank=0"]
    assert {s["env"]["CUDA_VISIBLE_DEVICES"] for s in node1} == {"2,3"}
    assert node1[0]["env"] | {"RANK": "", "LOCAL_RANK": ""} == {
        "RANK": "", "LOCAL_RANK": "", "WORLD_SIZE": "5", "LOCAL_SIZE": "2", "CROSS_RANK": "1", "CROSS_SIZE": "2",
        "MASTER_ADDR": "node-a", "MASTER_PORT": "29600", "CUDA_VISIBLE_DEVICES": "2,3"}
    logs = probe["launch_node1_logs"]["spawned"]
    assert all(s["same_fd"] for s in logs)
    assert [re.sub(r"\d{14}", "TS", s["log"]) for s in logs] == ["rank_logs/TS_rank3.log", "rank_logs/TS_rank4.log"]
    assert [re.sub(r"\d{14}", "TS", f) for f in probe["launch_log_dir_listing"]] == ["TS_rank3.log", "TS_rank4.log"]
    assert probe["launch_log_is_file"]["error"] == "ValueError: a_file should not be a file, it should be a directory."
    assert probe["launch_pid_files"] == {"777.deepspeed": str(probe["launch_launcher_pid"])}
    assert probe["launch_save_pid_again"]["error"] == "AssertionError: pid file exists but shouldn't"
    assert probe["launch_no_python_module"]["error"].startswith("ValueError: Don't use both the '--no_python'")
    assert probe["launch_node_rank_out_of_range"]["error"] == "IndexError: list index out of range"


def test_mpich_module_runs_the_helper_path_as_a_module():
    import sysconfig
    helper = Path(sysconfig.get_paths()["purelib"]) / "deepspeed" / "launcher" / "launcher_helper.py"
    assert helper.read_text(encoding="utf-8").startswith("# Copyright")            # no #! line
    proc = subprocess.run([sys.executable, "-u", "-m", str(helper), "--launcher", "mpich", "x"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "Error while finding module specification" in proc.stderr
