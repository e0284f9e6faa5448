"""Generate the port table of sub-skills/configuration-and-cli/references/launch-child-environment.md
("Ports on every launch path") by running accelerate 1.15.0's launch handling in this process for
every launcher path (MULTI_GPU, FSDP, DEEPSPEED on one node, DEEPSPEED on several nodes through
torchrun `standard` or the `deepspeed` runner, the simple launcher for --cpu / MULTI_CPU) and each
`main_process_port` setting: unset, an explicit free port, 0, and a port held by a listening socket
of this process.

What runs for real: launch_command_parser -> launch_command -> prepare_multi_gpu_env /
prepare_deepspeed_cmd_env / prepare_simple_launcher_cmd_env, accelerate's get_free_port and
is_port_in_use (a real socket is held for the busy rows), and torch's own
torch.distributed.run.run() up to the LaunchConfig it hands to elastic_launch (so the
`--standalone` rewrite and config_from_args run). Only the process start is recorded instead:
elastic_launch and subprocess.Popen. One machine fact is fixed: the default port 29500 is reported
free (the shared machine may hold it).

python tests/field_coverage/_accelerate_launch_ports.py [--write]"""
from __future__ import annotations

import contextlib
import socket
import sys
import tempfile
import warnings
from pathlib import Path
from unittest import mock

import _accelerate_launch_env as base

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

SCRIPT = base.SCRIPT
ONE = ["--num_processes", "2"]
TWO = ["--num_processes", "4", "--num_machines", "2", "--main_process_ip", "127.0.0.1"]

# (path label, argv before the port flag, stand-in mpirun or None, settings to run)
ALL = ("unset", "free", "0", "busy")
PATHS = [
    ("MULTI_GPU, 1 node", ["--multi_gpu", *ONE], None, ALL),
    ("FSDP, 1 node", ["--use_fsdp", *ONE], None, ALL),
    ("DEEPSPEED, 1 node (torchrun in-process)", ["--use_deepspeed", *ONE], None, ALL),
    ("--cpu, 2 processes (simple launcher)", ["--cpu", *ONE], None, ALL),
    ("MULTI_GPU, 2 nodes, rank 0", ["--multi_gpu", *TWO, "--machine_rank", "0"], None, ("0", "busy")),
    ("MULTI_GPU, 2 nodes, rank 1", ["--multi_gpu", *TWO, "--machine_rank", "1"], None, ("busy",)),
    ("DEEPSPEED, 2 nodes, standard (torchrun), rank 0",
     ["--use_deepspeed", *TWO, "--machine_rank", "0", "--deepspeed_multinode_launcher", "standard"], None,
     ("0", "busy")),
    ("DEEPSPEED, 2 nodes, pdsh (deepspeed runner)",
     ["--use_deepspeed", *TWO, "--machine_rank", "0", "--deepspeed_hostfile", "/job/hostfile"], None,
     ("0", "busy")),
    ("DEEPSPEED, 2 nodes, nossh, rank 1",
     ["--use_deepspeed", *TWO, "--machine_rank", "1", "--deepspeed_hostfile", "/job/hostfile",
      "--deepspeed_multinode_launcher", "nossh"], None, ("busy",)),
    ("MULTI_CPU, 2 nodes, mpirun", ["--cpu", *TWO, "--mpirun_hostfile", "/job/hostfile"], "openmpi",
     ("0", "busy")),
]
SETTING = {"unset": "unset", "free": "`<P>` (free)", "0": "`0`", "busy": "`<P>` (held by another process)"}


def _free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def run_port_case(argv, mpi, setting, tmp: Path):
    """Return dict(kind, argv, env, config, checked, warning, error, port, free) for one launch."""
    import accelerate.utils.launch as ul
    import torch.distributed.run as distrib_run
    real_run, real_in_use, real_free = distrib_run.run, ul.is_port_in_use, ul.get_free_port
    rec: dict = {"checked": [], "free": [], "config": None}

    def in_use(port=None):
        rec["checked"].append(port)
        return False if port in (None, 29500) else real_in_use(port)

    def free():
        rec["free"].append(real_free())
        return rec["free"][-1]

    def elastic_launch(config, entrypoint):
        rec["config"] = config
        return lambda *a: None

    held = None
    port = None
    if setting in ("free", "busy"):
        if setting == "busy":
            held = socket.socket()
            held.bind(("127.0.0.1", 0))
            held.listen(1)
            port = held.getsockname()[1]
        else:
            port = _free_port()
        argv = [*argv, "--main_process_port", str(port)]
    elif setting == "0":
        argv = [*argv, "--main_process_port", "0"]
    try:
        base._RECORD.clear()
        for f in tmp.iterdir():
            f.unlink()
        with base._machine(tmp, mpi) as cl, contextlib.ExitStack() as st:
            st.enter_context(mock.patch.object(distrib_run, "run", real_run))
            st.enter_context(mock.patch.object(distrib_run, "elastic_launch", elastic_launch))
            st.enter_context(mock.patch.object(ul, "is_port_in_use", in_use))
            st.enter_context(mock.patch.object(ul, "get_free_port", free))
            caught = st.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always")
            args = cl.launch_command_parser().parse_args([*argv, SCRIPT])
            try:
                cl.launch_command(args)
                err = None
            except Exception as exc:  # noqa: BLE001 - a refusal is a row too
                err = f"{type(exc).__name__}: {str(exc).split('. ')[0]}"
            warn = [str(w.message).split(". ")[0] for w in caught if "already in use" in str(w.message)]
    finally:
        if held is not None:
            held.close()
    out = {"checked": rec["checked"], "free": rec["free"], "config": rec["config"], "warning": warn,
           "error": err, "port": port, "kind": None, "argv": [], "env": {}}
    if base._RECORD:
        out["kind"], out["argv"], out["env"] = base._RECORD[-1]
    return out


def _sub(text, r) -> str:
    text = str(text)
    if r["port"] is not None:
        text = text.replace(str(r["port"]), "<P>")
    for p in r["free"]:
        text = text.replace(str(p), "<free>")
    return text


def _started(r) -> str:
    if r["error"]:
        return "refused: " + _sub(r["error"], r).replace("`", "'")
    if r["config"] is not None:
        cfg = r["config"]
        return (f"torchrun in-process: rendezvous `{cfg.rdzv_backend}` at `{_sub(cfg.rdzv_endpoint, r)}`"
                + (f", node rank {cfg.rdzv_configs.get('rank')}" if cfg.max_nodes > 1 else ""))
    argv = r["argv"]
    if argv and argv[0] == "deepspeed":
        i = argv.index("--master_port")
        return f"`deepspeed --master_port {_sub(argv[i + 1], r)} …` (Popen)"
    return f"`{' '.join('python' if a == sys.executable else a for a in argv)}` (Popen)"


def _workers(r) -> str:
    if r["error"]:
        return "nothing starts"
    cfg = r["config"]
    if cfg is not None:
        if cfg.rdzv_backend == "c10d" and cfg.rdzv_endpoint == "localhost:0":
            return "`MASTER_PORT=<free port chosen by torchrun>`"
        return f"`MASTER_PORT={_sub(cfg.rdzv_endpoint.rsplit(':', 1)[1], r)}`"
    argv = r["argv"]
    if argv and argv[0] == "deepspeed":
        return f"`MASTER_PORT={_sub(argv[argv.index('--master_port') + 1], r)}` (`deepspeed --master_port`)"
    return f"`MASTER_PORT={_sub(r['env'].get('MASTER_PORT'), r)}` (set by accelerate)"


def port_md(tmp: Path) -> str:
    rows = ["| # | Path | `main_process_port` | Port check at launch | What starts (port part) | Workers see |",
            "| --- | --- | --- | --- | --- | --- |"]
    n = 0
    for label, argv, mpi, settings in PATHS:
        for setting in settings:
            n += 1
            r = run_port_case(argv, mpi, setting, tmp)
            if not r["checked"]:
                check = "none"
            else:
                state = "busy" if setting == "busy" else "free"
                check = f"`{_sub(r['checked'][0], r)}` {state}"
                if setting == "0":
                    check = f"0 → `get_free_port()` = `<free>`; {check}"
                if r["warning"]:
                    check += ": warning '" + _sub(r["warning"][0], r).replace("`", "'") + "'"
            rows.append(f"| {n} | {label} | {SETTING[setting]} | {check} | {_started(r)} | {_workers(r)} |")
    return "\n".join(rows)


def generate() -> str:
    with tempfile.TemporaryDirectory() as d:
        return port_md(Path(d))


DOC = base.DOC
NAME = "launch ports"


def write_doc(out: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    start, end = f"<!-- generated: {NAME} -->\n", "<!-- end generated -->"
    pre, rest = text.split(start, 1)
    DOC.write_text(pre + start + out.strip() + "\n" + end + rest.split(end, 1)[1], encoding="utf-8")


if __name__ == "__main__":
    table = generate()
    if sys.argv[1:] == ["--write"]:
        write_doc(table)
    else:
        print(table)
