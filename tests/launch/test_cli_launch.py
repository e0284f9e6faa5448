"""validate_backend_config.py --launch-command / --env / --node-set / --explain, end to end and in process:
exit codes, positions, origins, JSON shape, the default config location, hostile input."""
from __future__ import annotations

import io
import json
import random
import subprocess
import sys

import pytest
import yaml

from backend_validator import cli
from backend_validator.launch.argv import CommandError, split_words
from backend_validator.launch.check import check_command, check_node_set

from launch_grid import SCRIPTS

SCRIPT = SCRIPTS / "validate_backend_config.py"
MULTI = "distributed_type: MULTI_GPU\nnum_processes: 16\nnum_machines: 2\nmachine_rank: 0\n" \
        "main_process_ip: 10.0.0.1\nmain_process_port: 29500\n"


def run(argv, cwd):
    out, err = io.StringIO(), io.StringIO()
    old = __import__("os").getcwd()
    try:
        __import__("os").chdir(cwd)
        rc = cli.main(argv, stdout=out, stderr=err)
    finally:
        __import__("os").chdir(old)
    return rc, out.getvalue(), err.getvalue()


def test_split_words_matches_shlex_and_records_positions():
    import shlex
    cmd = "accelerate launch \\\n  --config_file 'my cfg.yaml' --gpu_ids \"0,1\" train.py --msg a\\ b"
    words = split_words(cmd)
    assert [w.text for w in words] == shlex.split(cmd.replace("\\\n", " "))
    w = next(x for x in words if x.text == "--config_file")
    assert (w.line, w.col) == (2, 3)
    with pytest.raises(CommandError):
        split_words("accelerate launch 'open")


def test_finding_on_a_flag_points_at_the_flag(tmp_path):
    (tmp_path / "c.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    r = check_command("accelerate launch --config_file c.yaml \\\n    --num_processes 0 train.py", env={}, cwd=str(tmp_path))
    f = [f for f in r.findings if f.severity == "error"]
    assert f and all(x.file == "<launch-command>" and (x.line, x.col) == (2, 5) for x in f), f
    # the same value from the file points at the file line
    (tmp_path / "c.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 0\n")
    r = check_command("accelerate launch --config_file c.yaml train.py", env={}, cwd=str(tmp_path))
    f = [f for f in r.findings if f.severity == "error"]
    assert f and all(x.file == "c.yaml" and x.line == 2 for x in f), f


def test_exit_codes_text_and_json(tmp_path):
    (tmp_path / "c.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    assert run(["--launch-command", "accelerate launch --config_file c.yaml train.py"], tmp_path)[0] == 0
    rc, out, err = run(["--launch-command", "accelerate launch --config_file c.yaml --num_processes x train.py"],
                       tmp_path)
    assert rc == 1 and "<launch-command>:1:40: error launch-parse-error" in out
    rc, out, _ = run(["--launch-command", "accelerate launch --config_file c.yaml --zero_stage 2 train.py",
                      "--strict"], tmp_path)
    assert rc == 1 and "launch-flag-ignored" in out
    rc, out, _ = run(["--output", "json", "--explain", "--launch-command",
                      "accelerate launch --config_file c.yaml --num_processes 4 train.py"], tmp_path)
    doc = json.loads(out)
    assert rc == 0 and doc["launch"][0]["effective"]["num_processes"] == 4
    rows = {r["setting"]: r for r in doc["launch"][0]["explain"]}
    assert rows["num_processes"]["origin"].startswith("flag --num_processes")
    assert rows["launcher"]["value"] == "torchrun" and rows["gpu_ids"]["origin"].startswith("default")


@pytest.mark.parametrize("argv,msg", [
    (["--launch-command", "ls -la"], "not a launcher"),
    (["--launch-command", "accelerate launch 'x"], "unterminated"),
    (["--launch-command", "accelerate env"], "only `accelerate launch`"),
    (["--env", "NOEQUALS", "--launch-command", "torchrun t.py"], "KEY=VALUE"),
    (["c.yaml", "--launch-command", "torchrun t.py"], "cannot be combined"),
    (["--node-set"], "--node-set needs"),
])
def test_bad_invocations_are_one_line_exit_2(tmp_path, argv, msg):
    (tmp_path / "c.yaml").write_text("distributed_type: NO\n")
    rc, out, err = run(argv, tmp_path)
    assert rc == 2 and msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_default_config_from_hf_home_and_cpu_skips_it(tmp_path):
    (tmp_path / "hf" / "accelerate").mkdir(parents=True)
    (tmp_path / "hf" / "accelerate" / "default_config.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 3\n")
    rc, out, _ = run(["--env", f"HF_HOME={tmp_path / 'hf'}", "--explain", "--launch-command",
                      "accelerate launch train.py"], tmp_path)
    assert "num_processes" in out and "3" in out.split("num_processes", 1)[1].splitlines()[0]
    assert "default location" in out
    r = check_command("accelerate launch --cpu --num_processes 1 train.py", env={"HF_HOME": str(tmp_path / "hf")},
                      cwd=str(tmp_path))
    assert r.effective["config_file"] is None and r.effective["launcher"] == "simple"


def test_torchrun_reads_pet_environment(tmp_path):
    r = check_command("torchrun --nproc-per-node 2 train.py", env={"PET_NNODES": "3"}, cwd=str(tmp_path))
    assert r.effective["nnodes"] == "3"
    assert "launch-torchrun-multinode-rendezvous" in {f.rule for f in r.findings}
    r = check_command("env PET_NPROC_PER_NODE=4 torchrun train.py", env={}, cwd=str(tmp_path))
    assert r.effective["world_size"] == 4


def test_node_set_from_commands_and_files(tmp_path):
    (tmp_path / "n.yaml").write_text(MULTI)
    same = "accelerate launch --config_file n.yaml train.py"
    r = check_node_set([], [same, same], {}, str(tmp_path))
    assert "nodeset-machine-rank" in {f.rule for f in r.findings}
    r = check_node_set([], [same, same.replace("train.py", "--machine_rank 1 train.py")], {}, str(tmp_path))
    assert not [f for f in r.findings if f.rule.startswith("nodeset-")], r.findings
    (tmp_path / "m.yaml").write_text(MULTI.replace("machine_rank: 0", "machine_rank: 1")
                                     .replace("num_processes: 16", "num_processes: 8"))
    rc, out, _ = run(["--node-set", "n.yaml", "m.yaml"], tmp_path)
    assert rc == 1 and "m.yaml:2:1: error nodeset-mismatch: num_processes differs" in out


def test_script_end_to_end_subprocess(tmp_path):
    (tmp_path / "c.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  zero_stage: 2\n")
    p = subprocess.run([sys.executable, str(SCRIPT), "--launch-command",
                        "accelerate launch --config_file c.yaml --use_fsdp train.py", "--explain"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "launch-paradigm-flag-overrides-file" in p.stdout and "launcher" in p.stdout
    h = subprocess.run([sys.executable, str(SCRIPT), "--help"], capture_output=True, text=True, timeout=120)
    for flag in ("--launch-command", "--env", "--node-set", "--explain"):
        assert flag in h.stdout


VALS = [[], {}, None, [1, "a"], {"a": 1}, 1.5, True, False, "", "x", -7, 0, "0", "none", "auto", 3, "2", 2 ** 70]
KEYS = ["distributed_type", "num_processes", "num_machines", "machine_rank", "gpu_ids", "main_process_ip",
        "main_process_port", "mixed_precision", "same_network", "debug", "deepspeed_config", "fsdp_config",
        "parallelism_config", "dynamo_config", "compute_environment", "fp16", "dynamo_backend"]
SUB = ["zero_stage", "deepspeed_config_file", "fsdp_version", "deepspeed_multinode_launcher", "fsdp_sync_module_states"]
FLAGS = ["--multi_gpu", "--cpu", "--use_deepspeed", "--use_fsdp", "--num_processes 2", "--num_machines 2",
         "--machine_rank 1", "--gpu_ids 0", "--zero_stage 3", "--mixed_precision fp16", "--same_network",
         "--use_parallelism_config", "--deepspeed_config_file ds.json", "--num_processes -3", "--tpu",
         "--use_megatron_lm", "--main_process_port 0", "--fsdp_version 2", "--gradient_accumulation_steps 2"]
WORDS = ["accelerate", "launch", "torchrun", "deepspeed", "--", "-", "-m", "--nnodes", "2:x", "'", '"', "\\", "=",
         "--num_processes", "train.py", "--hostfile", "hostfile", "--include", "--standalone", "-H", "--nproc", "\n",
         "-1", "--config_file", "c.yaml", "--cpu", "python", "torch.distributed.run", "PET_NNODES=3", "--no_ssh",
         "--node_rank", "5", "--num_nodes", "--launcher", "--local-ranks-filter", ",", "--nnodes=0:", "-t3"]


def test_hostile_input_never_crashes(tmp_path):
    """Seeded: odd config values under odd flags, and random word salad; only CommandError may escape."""
    rng = random.Random(20261201)
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "hostfile").write_text("a slots=2\nbad line\n")
    for _ in range(300):
        base = {"distributed_type": rng.choice(["MULTI_GPU", "DEEPSPEED", "FSDP", "NO", "XLA", "MEGATRON_LM", 3])}
        for _ in range(rng.randint(0, 4)):
            base[rng.choice(KEYS)] = rng.choice(VALS) if rng.random() < 0.5 else {
                rng.choice(SUB): rng.choice(VALS) for _ in range(rng.randint(0, 3))}
        (tmp_path / "c.yaml").write_text(yaml.safe_dump(base))
        cmd = "accelerate launch --config_file c.yaml " + " ".join(rng.sample(FLAGS, rng.randint(0, 5))) + " t.py"
        check_command(cmd, env={}, cwd=str(tmp_path))
        check_node_set(["c.yaml", "c.yaml"], [cmd], {}, str(tmp_path))
    for _ in range(600):
        cmd = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 9)))
        try:
            check_command(cmd, env={}, cwd=str(tmp_path))
        except CommandError:
            pass


def test_paths_resolve_against_the_launch_directory(tmp_path):
    run_dir = tmp_path / "job"
    run_dir.mkdir()
    (run_dir / "c.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 2\n"
                                    "deepspeed_config:\n  deepspeed_config_file: ds.json\n")
    (run_dir / "ds.json").write_text('{"zero_optimization": ')  # not JSON at all
    cmd = "accelerate launch --config_file c.yaml train.py"
    rc, out, err = run(["--cwd", str(run_dir), "--launch-command", cmd], tmp_path)
    assert rc == 1 and "c.yaml:4:3: error input-related-file-unreadable" in out, out + err
    rc, out, err = run(["--launch-command", cmd], tmp_path)  # from another directory the file is not there
    assert rc == 1 and "launch-config-file-missing" in out
    # a JSON named by the flag is read too, and the finding points at the flag
    (run_dir / "c.yaml").write_text("distributed_type: DEEPSPEED\nnum_processes: 2\n")
    rc, out, err = run(["--cwd", str(run_dir), "--launch-command",
                        "accelerate launch --config_file c.yaml --deepspeed_config_file ds.json train.py"], tmp_path)
    assert rc == 1 and "<launch-command>:1:40: error input-related-file-unreadable" in out, out + err


def test_parse_errors_match_argparse_order(tmp_path):
    """s5-acl-01: like accelerate's argparse (tests/audit/test_launch_argv.py), a missing SCRIPT is
    reported before an unknown flag, and a flag after SCRIPT belongs to the script."""
    def parse_error(command):
        r = check_command(command, env={}, cwd=str(tmp_path))
        return [f.message for f in r.findings if f.rule == "launch-parse-error"]
    assert parse_error("accelerate launch --config_file /x/train.py --config-path") == [
        "accelerate: the following arguments are required: training_script, training_script_args"]
    assert parse_error("accelerate launch --config-path x.yaml train.py") == [
        "accelerate: unrecognized arguments: --config-path"]
    assert parse_error("accelerate launch train.py --config-path x.yaml --num_processes 3") == []
