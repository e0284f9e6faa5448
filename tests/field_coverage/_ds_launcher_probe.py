"""Drives deepspeed.launcher.runner.main (deepspeed 0.19.8) in-process with a stand-in accelerator
that reports N devices (there is no GPU here) and a stand-in subprocess.Popen that records the
command instead of starting it; prints JSON: for each case, the devices the launcher hands to
deepspeed.launcher.launch (--world_info) and what is left of CUDA_VISIBLE_DEVICES for it.
argv[1] is a scratch directory (for a hostfile)."""
import base64
import json
import os
import subprocess
import sys

from deepspeed.launcher import runner

SCRATCH = sys.argv[1]


class Devices:
    def __init__(self, n):
        self.n = n

    def device_count(self):
        return self.n

    def visible_devices_envs(self):
        return ["CUDA_VISIBLE_DEVICES"]

    def export_envs(self):
        return ["NCCL"]  # what the CUDA accelerator forwards to the other nodes


def run(argv, cvd=None, n=4):
    seen = {}

    class Recorder:
        def __init__(self, cmd, env=None):
            seen["cmd"], seen["cvd"] = cmd, (env or {}).get("CUDA_VISIBLE_DEVICES")
            self.returncode = 0

        def wait(self):
            return 0

    runner.get_accelerator = lambda: Devices(n)
    real_popen, runner.subprocess.Popen = runner.subprocess.Popen, Recorder
    if cvd is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = cvd
    try:
        try:
            runner.main(argv + ["train.py"])
        except SystemExit:
            pass
        info = [a.split("=", 1)[1] for a in seen.get("cmd", []) if a.startswith("--world_info=")]
        return {"world_info": json.loads(base64.urlsafe_b64decode(info[0])) if info else None,
                "cvd_for_launch": seen.get("cvd")}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        runner.subprocess.Popen = real_popen


def run_cmd(argv, n=2):
    """The whole command the runner would start (multi-node path: pdsh/slurm found on PATH, and
    `ssh HOST hostname -I` answered with two addresses), or the error it raised."""
    seen = {}

    class Recorder:
        def __init__(self, cmd, env=None):
            seen["cmd"] = cmd
            self.returncode = 0

        def wait(self):
            return 0

    def fake_check_output(cmd, *a, **k):
        seen["ssh"] = cmd
        return b"10.0.0.7 172.17.0.1\n"

    runner.get_accelerator = lambda: Devices(n)
    for cls in (runner.PDSHRunner, runner.SlurmRunner):
        cls.backend_exists = lambda self: True
    saved = runner.subprocess.Popen, runner.subprocess.check_output
    runner.subprocess.Popen, runner.subprocess.check_output = Recorder, fake_check_output
    os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    try:
        try:
            runner.main(argv + ["train.py", "--x", "1"])
        except SystemExit:
            pass
        return {"cmd": [str(a) for a in seen.get("cmd", [])], "ssh": seen.get("ssh")}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        runner.subprocess.Popen, runner.subprocess.check_output = saved


hostfile = os.path.join(SCRATCH, "hostfile")
with open(hostfile, "w") as f:
    f.write("localhost slots=4\n")
cases = {
    "plain": run([]),
    "cvd_1_3": run([], "1,3"),
    "cvd_1_3_with_num_gpus": run(["--num_gpus", "1"], "1,3"),
    "include_1_3": run(["--include", "localhost:1,3"]),
    "exclude_0": run(["--exclude", "localhost:0"]),
    "include_with_num_gpus": run(["--include", "localhost:1", "--num_gpus", "1"]),
    "include_beyond_count": run(["--include", "localhost:0,2"], None, 2),
    "hostfile_cvd_1_3": run(["--hostfile", hostfile, "--no_ssh_check", "--master_addr", "127.0.0.1"], "1,3"),
    "missing_hostfile": run(["--hostfile", os.path.join(SCRATCH, "absent")], None, 2),
}
# several nodes: a hostfile written the way a SLURM job script builds it from its node list
two = os.path.join(SCRATCH, "hostfile2")
with open(two, "w") as f:
    f.write("# scontrol show hostnames | sed 's/$/ slots=2/'\nnode-a slots=2\nnode-b slots=2\n")
bad = os.path.join(SCRATCH, "hostfile_bad")
with open(bad, "w") as f:
    f.write("node-a:2\n")
absent = os.path.join(SCRATCH, "absent")
cases["nodes"] = {
    "pdsh": run_cmd(["--hostfile", two, "--no_ssh_check", "--master_addr", "node-a", "--master_port", "29600"]),
    "pdsh_no_master_addr": run_cmd(["--hostfile", two, "--no_ssh_check"]),
    "nossh_node1": run_cmd(["--hostfile", two, "--no_ssh", "--node_rank", "1", "--master_addr", "node-a"]),
    "slurm": run_cmd(["--hostfile", two, "--launcher", "slurm", "--no_ssh_check", "--master_addr", "node-a"]),
    # set-5 s5-mn-01: which per-node launch options the pdsh command carries
    "pdsh_rank_log": run_cmd(["--hostfile", two, "--no_ssh_check", "--master_addr", "node-a",
                              "--enable_each_rank_log", "logs", "--bind_cores_to_rank", "--log_level", "warning"]),
    "slurm_rank_log": run_cmd(["--hostfile", two, "--launcher", "slurm", "--no_ssh_check", "--master_addr", "node-a",
                               "--enable_each_rank_log", "logs"]),
    "no_hostfile_master_addr": run_cmd(["--hostfile", absent, "--master_addr", "10.1.1.1"]),
    "no_hostfile_two_nodes": run_cmd(["--hostfile", absent, "--num_nodes", "2"]),
    "bad_hostfile": run_cmd(["--hostfile", bad]),
}
print("RESULT " + json.dumps(cases))
