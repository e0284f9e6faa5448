"""Builds, in one process, every per-node command the `deepspeed` runner (deepspeed 0.19.8,
deepspeed/launcher/runner.py::main) would start for each multinode runner (PDSH, OpenMPI, MPICH,
IMPI, SLURM, MVAPICH) and each launcher flag, with two fake hosts: subprocess.Popen, the ssh
check (check_call), the `hostname -I` lookup (check_output), the backends' `backend_exists` and
the numactl lookup are stand-ins, everything else is the installed code. Then drives
deepspeed/launcher/launch.py::main (what each node runs) with a recorded Popen, to show the
environment, local ranks, per-rank log files and pid files it produces on its node.

argv[1]: a scratch directory (it becomes the working directory and HOME). Prints `RESULT <json>`;
`--markdown` prints the generated flag table instead (pasted into deepspeed-multinode-runners.md).
"""
import base64
import contextlib
import difflib
import json
import os
import sys

SCRATCH = os.path.realpath(sys.argv[1])
MARKDOWN = "--markdown" in sys.argv[2:]
os.makedirs(os.path.join(SCRATCH, "home"), exist_ok=True)
os.chdir(SCRATCH)
os.environ["HOME"] = os.path.join(SCRATCH, "home")
for k in list(os.environ):
    if k.startswith(("NCCL", "MLFLOW", "UCX", "MV2", "PYTHON", "AISC")) or k == "CUDA_VISIBLE_DEVICES":
        del os.environ[k]

from deepspeed.launcher import launch, multinode_runner, runner  # noqa: E402
from deepspeed.utils import logger  # noqa: E402

for handler in logger.handlers:          # the runners' log lines go to stderr, stdout stays the result
    if hasattr(handler, "setStream"):
        handler.setStream(sys.stderr)

RUNNERS = ["pdsh", "openmpi", "mpich", "impi", "slurm", "mvapich"]
CLASSES = [multinode_runner.PDSHRunner, multinode_runner.OpenMPIRunner, multinode_runner.MPICHRunner,
           multinode_runner.IMPIRunner, multinode_runner.SlurmRunner, multinode_runner.MVAPICHRunner]
MVAPICH_FILE = multinode_runner.MVAPICH_TMP_HOSTFILE  # /tmp/deepspeed_mvapich_hostfile in 0.19.8
multinode_runner.MVAPICH_TMP_HOSTFILE = os.path.join(SCRATCH, "mvapich_hostfile")


class Cuda:
    """What the CUDA accelerator answers for the runner (cuda_accelerator.py: export_envs ['NCCL'])."""

    def device_count(self):
        return 2

    def visible_devices_envs(self):
        return ["CUDA_VISIBLE_DEVICES"]

    def export_envs(self):
        return ["NCCL"]

    def device_name(self):
        return "cuda"


runner.get_accelerator = multinode_runner.get_accelerator = lambda: Cuda()
multinode_runner.get_numactl_cmd = lambda core_list, n, local_rank: (4, ["numactl", "-C", f"CORES{local_rank}"])
EXISTS = {cls: True for cls in CLASSES}
for cls in CLASSES:
    cls.backend_exists = lambda self, cls=cls: EXISTS[cls]

SEEN = {}


class Recorder:
    def __init__(self, cmd, env=None, **kw):
        SEEN["cmd"], SEEN["env"] = [str(a) for a in cmd], dict(env or {})
        self.returncode = 0
        self.pid = 4242

    def wait(self):
        return 0

    def poll(self):
        return 0


def fake_check_call(cmd, *a, **k):
    SEEN.setdefault("check_call", []).append(cmd)
    return 0


def fake_check_output(cmd, *a, **k):
    SEEN.setdefault("check_output", []).append(cmd)
    return b"10.0.0.7 172.17.0.1\n"


runner.subprocess.Popen = Recorder
runner.subprocess.check_call = fake_check_call
runner.subprocess.check_output = fake_check_output


def hostfile(name, text):
    path = os.path.join(SCRATCH, name)
    with open(path, "w") as f:
        f.write(text)
    return path


TWO = hostfile("hostfile", "node-a slots=2\nnode-b slots=2\n")
ONE = hostfile("hostfile1", "node-a slots=2\n")
UNEVEN = hostfile("hostfile_uneven", "node-a slots=2\nnode-b slots=1\n")
BASE = ["--hostfile", TWO, "--master_addr", "node-a"]


def norm(tokens):
    out = []
    for t in tokens:
        t = t.replace(multinode_runner.MVAPICH_TMP_HOSTFILE, MVAPICH_FILE)
        t = t.replace(sys.executable, "PY").replace(SCRATCH + "/home", "~").replace(SCRATCH, "DIR")
        t = t.replace(os.path.dirname(os.path.realpath(multinode_runner.__file__)), "LAUNCHER_DIR")
        if t.startswith("--world_info="):
            world = json.loads(base64.urlsafe_b64decode(t.split("=", 1)[1]))
            t = "--world_info=" + json.dumps(world, separators=(",", ":")).replace('"', "")
        if t.startswith("--save_pid") or t.isdigit() and int(t) == os.getpid():
            t = t.replace(str(os.getpid()), "PID")
        out.append(t)
    return out


def run(argv, env_extra=None, script=("train.py", "--lr", "1")):
    SEEN.clear()
    saved = dict(os.environ)
    os.environ.update(env_extra or {})
    try:
        with contextlib.redirect_stdout(sys.stderr):     # IMPIRunner.get_cmd prints its command
            runner.main(list(argv) + list(script))
        return {"cmd": norm(SEEN.get("cmd", [])), "env": {k: v for k, v in SEEN.get("env", {}).items() if k.startswith(("PDSH", "PYTHONPATH"))},
                "ssh": [norm(c) for c in SEEN.get("check_call", []) + SEEN.get("check_output", [])]}
    except SystemExit as e:
        return {"error": f"SystemExit: {e.code}"}
    except BaseException as e:  # noqa: BLE001 - the refusal is the result
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        os.environ.clear()
        os.environ.update(saved)


# ---- flags x runners: the tokens each flag adds to (+) or removes from (-) the base command ----
FLAGS = [
    ("--module", ["--module"]),
    ("--no_python", ["--no_python"]),
    ("--no_local_rank", ["--no_local_rank"]),
    ("--save_pid", ["--save_pid"]),
    ("--enable_each_rank_log logs", ["--enable_each_rank_log", "logs"]),
    ("--bind_cores_to_rank", ["--bind_cores_to_rank"]),
    ("--bind_core_list 0-7", ["--bind_core_list", "0-7"]),
    ("--log_level debug", ["--log_level", "debug"]),
    ("--quiet", ["--quiet"]),
    ("--venv_script /v/activate", ["--venv_script", "/v/activate"]),
    ("--ssh_port 2222", ["--ssh_port", "2222"]),
    ("--launcher_args \"-X Y\"", ["--launcher_args", "-X Y"]),
    ("--master_port 29600", ["--master_port", "29600"]),
    ("--num_nodes 1", ["--num_nodes", "1"]),
    ("--num_gpus 1", ["--num_gpus", "1"]),
    ("--include node-b", ["--include", "node-b"]),
    ("--exclude node-b:1", ["--exclude", "node-b:1"]),
]
LOCAL = "--no_ssh --node_rank 1"


def diff(base, other):
    """The change a flag makes to the base command, as contiguous token runs (difflib opcodes)."""
    if "error" in other:
        return "refused: " + other["error"].split(":", 1)[1].strip().split(". ")[0]
    b, o = base["cmd"], other["cmd"]
    if b[:1] != o[:1]:
        return "1 host left: runs locally, no `" + b[0] + "`"
    parts, counts = [], {}
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, b, o, autojunk=False).get_opcodes():
        old, new = " ".join(b[i1:i2]).strip(), " ".join(o[j1:j2]).strip()
        text = {"insert": f"+ `{new}`", "delete": f"drops `{old}`", "replace": f"`{old}` → `{new}`"}.get(op)
        if text:
            if text not in counts:
                parts.append(text)
            counts[text] = counts.get(text, 0) + 1
    if not parts:
        return "not forwarded"
    return "; ".join(t + (f" (×{counts[t]})" if counts[t] > 1 else "") for t in parts)


def launcher_argv(name):
    if name == LOCAL:
        return BASE + ["--no_ssh", "--node_rank", "1"]
    return BASE + ["--launcher", name, "--no_ssh_check"]


base_cmds = {name: run(launcher_argv(name)) for name in RUNNERS + [LOCAL]}
matrix = {}
for flag, tokens in FLAGS:
    matrix[flag] = {name: diff(base_cmds[name], run(launcher_argv(name) + tokens)) for name in RUNNERS + [LOCAL]}


def markdown():
    cols = RUNNERS + [LOCAL]
    lines = ["| flag | " + " | ".join(f"`{c}`" for c in cols) + " |", "| --- " * (len(cols) + 1) + "|"]
    for flag, _ in FLAGS:
        lines.append(f"| `{flag}` | " + " | ".join(matrix[flag][c].replace("|", "\\|") for c in cols) + " |")
    return "\n".join(lines)


cases = {"base": base_cmds, "matrix": matrix}

# ---- exports: what reaches the other nodes, and how ----
with open(os.path.join(SCRATCH, "home", ".deepspeed_env"), "w") as f:
    f.write("HF_HOME=/home-file\nFROM_HOME=1\nNCCL_DEBUG=WARN\n")
with open(os.path.join(SCRATCH, ".deepspeed_env"), "w") as f:
    f.write("HF_HOME=/cwd-file\nSPACED=a b\nDOLLAR=$HOME/x\n")
ENV = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "PYTHONFAULTHANDLER": "1", "MLFLOW_RUN_ID": "r1",
       "UCX_TLS": "rc", "MV2_X": "1", "CUDA_HOME": "/usr/local/cuda", "LD_LIBRARY_PATH": "/opt/lib",
       "PYTHONPATH": "/extra"}
cases["exports"] = {name: run(launcher_argv(name), ENV) for name in RUNNERS}
cases["exports_aisc"] = run(launcher_argv("pdsh"), dict(ENV, AISC_JOB_NAME="j"))
cases["exports_ssh_port_env"] = {k: v for k, v in run(launcher_argv("pdsh") + ["--ssh_port", "2222"], {
    "PDSH_SSH_ARGS_APPEND": "-i key"})["env"].items() if k.startswith("PDSH")}
cases["exports_ssh_port_ssh"] = run(BASE[:2] + ["--ssh_port", "2222"])["ssh"]
os.remove(os.path.join(SCRATCH, ".deepspeed_env"))
runner.DEEPSPEED_ENVIRONMENT_NAME = "custom.env"   # what DS_ENV_FILE=custom.env sets at import
with open(os.path.join(SCRATCH, "custom.env"), "w") as f:
    f.write("CUSTOM=1\n")
cases["exports_ds_env_file"] = run(launcher_argv("pdsh"))
with open(os.path.join(SCRATCH, "custom.env"), "w") as f:
    f.write("CUSTOM=1\n\n")
cases["ds_env_blank_line"] = run(launcher_argv("pdsh"))
with open(os.path.join(SCRATCH, "custom.env"), "w") as f:
    f.write("# a comment\n")
cases["ds_env_comment"] = run(launcher_argv("pdsh"))
os.remove(os.path.join(SCRATCH, "custom.env"))
os.remove(os.path.join(SCRATCH, "home", ".deepspeed_env"))
runner.DEEPSPEED_ENVIRONMENT_NAME = ".deepspeed_env"

# ---- path choice, refusals ----
cases["one_host"] = run(["--hostfile", ONE, "--master_addr", "node-a", "--no_ssh_check"])
cases["one_host_force_multi"] = run(["--hostfile", ONE, "--master_addr", "node-a", "--no_ssh_check", "--force_multi"])
cases["one_host_unknown_launcher"] = run(["--hostfile", ONE, "--master_addr", "node-a", "--launcher", "foo"])
cases["unknown_launcher"] = run(BASE + ["--launcher", "foo", "--no_ssh_check"])
cases["upper_case_launcher"] = run(BASE + ["--launcher", "OpenMPI", "--no_ssh_check"])
cases["ssh_check"] = run(BASE)
cases["no_master_addr"] = run(["--hostfile", TWO, "--no_ssh_check"])
cases["no_ssh_no_master_addr"] = run(["--hostfile", TWO, "--no_ssh", "--node_rank", "1"])
cases["no_ssh_bad_rank"] = run(BASE + ["--no_ssh", "--node_rank", "2"])
cases["no_ssh_no_rank"] = run(BASE + ["--no_ssh"])
cases["include_and_num_gpus"] = run(BASE + ["--include", "node-a", "--num_gpus", "1", "--no_ssh_check"])
cases["uneven"] = {n: run(["--hostfile", UNEVEN, "--master_addr", "node-a", "--launcher", n, "--no_ssh_check"])
                   for n in RUNNERS}
cases["slurm_include_slot1"] = run(launcher_argv("slurm") + ["--include", "node-a:1@node-b:1"])
cases["slurm_include_one_host"] = run(launcher_argv("slurm") + ["--include", "node-a"])
cases["openmpi_btl_override"] = run(launcher_argv("openmpi") + ["--launcher_args", "--mca btl_tcp_if_include ib0"])
cases["elastic_training"] = run(BASE + ["--elastic_training"])
cases["pdsh_arg_with_space"] = run(launcher_argv("pdsh"), script=("train.py", "--msg", 'say "hi" now'))
EXISTS[multinode_runner.PDSHRunner] = False
cases["pdsh_missing"] = run(launcher_argv("pdsh"))
EXISTS[multinode_runner.PDSHRunner] = True
cases["mvapich_hostfile_text"] = open(multinode_runner.MVAPICH_TMP_HOSTFILE).read()

# ---- what deepspeed.launcher.launch does on one node ----
launch.PID_FILE_BASEPATH = os.path.join(SCRATCH, "pids")
os.makedirs(launch.PID_FILE_BASEPATH, exist_ok=True)
launch.time.sleep = lambda s: None
SPAWNED = []


class LaunchRecorder:
    def __init__(self, cmd, env=None, stdout=None, stderr=None, **kw):
        keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_SIZE", "CROSS_RANK", "CROSS_SIZE", "MASTER_ADDR",
                "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS")
        SPAWNED.append({"cmd": norm(cmd), "env": {k: env[k] for k in keys if k in env},
                        "log": os.path.relpath(stdout.name, SCRATCH) if stdout is not None else None,
                        "same_fd": stdout is not None and stdout is stderr})
        self.pid, self.returncode = 5000 + len(SPAWNED), 0

    def poll(self):
        return 0


launch.subprocess.Popen = LaunchRecorder


def node(world, rank, extra=()):
    SPAWNED.clear()
    info = base64.urlsafe_b64encode(json.dumps(world).encode()).decode()
    sys.argv = ["launch", f"--world_info={info}", f"--node_rank={rank}", "--master_addr=node-a",
                "--master_port=29600"] + list(extra) + ["train.py", "--lr", "1"]
    try:
        with contextlib.redirect_stdout(sys.stderr):     # launch.main prints "launcher pid"
            launch.main()
    except SystemExit as e:
        return {"error": f"SystemExit: {e.code}", "spawned": list(SPAWNED)}
    except BaseException as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}
    return {"spawned": list(SPAWNED)}


UNEVEN_WORLD = {"node-a": [0, 1, 2], "node-b": [2, 3]}
cases["launch_node1"] = node(UNEVEN_WORLD, 1)
cases["launch_node1_logs"] = node(UNEVEN_WORLD, 1, ["--enable_each_rank_log=rank_logs"])
cases["launch_log_dir_listing"] = sorted(os.listdir(os.path.join(SCRATCH, "rank_logs")))
open(os.path.join(SCRATCH, "a_file"), "w").close()
cases["launch_log_is_file"] = node(UNEVEN_WORLD, 1, ["--enable_each_rank_log=a_file"])
cases["launch_save_pid"] = node(UNEVEN_WORLD, 0, ["--save_pid", "777"])
cases["launch_pid_files"] = {n: open(os.path.join(launch.PID_FILE_BASEPATH, n)).read()
                             for n in os.listdir(launch.PID_FILE_BASEPATH)}
cases["launch_save_pid_again"] = node(UNEVEN_WORLD, 0, ["--save_pid", "777"])
cases["launch_no_python_module"] = node(UNEVEN_WORLD, 0, ["--no_python", "--module"])
cases["launch_node_rank_out_of_range"] = node(UNEVEN_WORLD, 2)
cases["launch_launcher_pid"] = os.getpid()

if MARKDOWN:
    print(markdown())
else:
    cases["matrix_md"] = markdown()
    print("RESULT " + json.dumps(cases))
