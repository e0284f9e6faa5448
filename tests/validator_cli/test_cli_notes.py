"""Validator CLI (issue 14 item 2): input errors in the summary, skipped checks named with the
option that turns them on, one note per file whatever the number of consumer paths, --cwd in
the missing-file hint and in the router."""
from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TBS_ONLY = '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}}'
YAML = "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: {f}\n"
SUMMARY = re.compile(r"^(\d+) error\(s\), (\d+) warning\(s\), (\d+) info(?:, (\d+) input error\(s\))? "
                     r"in (\d+) file\(s\)$", re.M)


def _summary(err):
    m = SUMMARY.findall(err)
    assert len(m) == 1, err
    return tuple(int(x) if x else 0 for x in m[0])


def test_summary_counts_input_errors(run, tmp_path):
    good = tmp_path / "ok.yaml"
    good.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    rc, out, err = run([tmp_path / "missing.yaml", good])
    assert rc == 2
    assert "no such file" in err
    assert _summary(err) == (0, 0, 0, 1, 2), err

    # nothing wrong: no input-error clause at all
    rc, out, err = run([good])
    assert rc == 0 and _summary(err) == (0, 0, 0, 0, 1) and "input error" not in err
    # JSON output has had the count all along; text and JSON agree
    rc, out, err = run(["--output", "json", tmp_path / "missing.yaml", good])
    assert json.loads(out)["summary"]["input_errors"] == 1


def _skip_lines(err):
    return [ln for ln in err.splitlines() if ": info: " in ln and "skipped" in ln]


def test_launch_summary_counts_input_errors(run, tmp_path):
    """The launch and node-set checks close with the same summary line as file checks."""
    rc, _out, err = run(["--node-set", tmp_path / "missing.yaml"])
    assert rc == 2 and "no such file" in err
    assert err.strip().splitlines()[-1] == "0 error(s), 0 warning(s), 0 info, 1 input error(s) in 1 launch check(s)"


def test_batch_arithmetic_without_world_size_says_so(run, tmp_path):
    p = tmp_path / "ds.json"
    p.write_text(TBS_ONLY)
    rc, out, err = run([p])
    lines = _skip_lines(err)
    assert rc == 0 and len(lines) == 1, err
    assert "ds-batch-size-invalid" in lines[0] and "--world-size" in lines[0]
    rc, out, err = run(["--output", "json", p])
    skipped = json.loads(out)["skipped_checks"]
    assert [(s["check"], s["option"]) for s in skipped] == [("ds-batch-size-invalid", "--world-size N")]
    assert "world size is unknown" in skipped[0]["reason"]
    # given the option, the check runs (world 8: grad_acc 1 is derived; world 3: 16 != 2 x 2 x 3)
    rc, out, err = run(["--world-size", "8", p])
    assert rc == 0 and not _skip_lines(err)
    rc, out, err = run(["--world-size", "3", p])
    assert rc == 1 and "ds-batch-size-invalid" in out and not _skip_lines(err)


def test_no_skip_note_when_nothing_depends_on_the_world_size(run, tmp_path):
    p = tmp_path / "ds.json"
    # micro and grad_acc only: deepspeed derives the total, there is no equation to check
    p.write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}')
    rc, out, err = run(["--output", "json", p])
    assert json.loads(out)["skipped_checks"] == []
    # a total no world size can satisfy is an error, not a skip
    p.write_text('{"train_batch_size": 10, "train_micro_batch_size_per_gpu": 3}')
    rc, out, err = run([p])
    assert rc == 1 and not _skip_lines(err)


def test_autotp_without_world_size_is_a_skip(run, tmp_path):
    p = tmp_path / "ds.json"
    p.write_text('{"train_micro_batch_size_per_gpu": 1, "tensor_parallel": {"autotp_size": 4}}')
    rc, out, err = run(["--output", "json", p])
    assert [s["check"] for s in json.loads(out)["skipped_checks"]] == ["ds-parallel-size-world"]


def test_accelerate_world_size_covers_the_batch_check(run, tmp_path):
    """Through an Accelerate config the world size is num_processes x num_machines
    (xf-batch-size-world), so the JSON's batch check is not reported as skipped."""
    (tmp_path / "ds.json").write_text(TBS_ONLY.replace("16", "4"))
    (tmp_path / "a.yaml").write_text(YAML.format(f="ds.json"))
    rc, out, err = run(["--output", "json", "a.yaml"], cwd=tmp_path)
    doc = json.loads(out)
    assert rc == 0 and doc["skipped_checks"] == [], doc


def test_same_note_for_the_same_file_once(run, tmp_path):
    """One DeepSpeed JSON reached through two Accelerate configs and given itself: each finding
    about the JSON, each consumer line and each skip note is printed once."""
    (tmp_path / "ds.json").write_text('{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, '
                                      '"zero_optimization": {"stage": 2, "cpu_offload": true}}')
    for n in ("a.yaml", "b.yaml"):
        (tmp_path / n).write_text(YAML.format(f="ds.json"))
    rc, out, err = run(["a.yaml", "b.yaml", "ds.json"], cwd=tmp_path)
    dep = [ln for ln in out.splitlines() if "ds-deprecated-key" in ln]
    assert len(dep) == 1, out
    assert err.count("ds.json: DeepSpeed config, consumer accelerate") == 1, err
    assert len(_skip_lines(err)) == 1, err
    rc, out, err = run(["--output", "json", "a.yaml", "b.yaml", "ds.json"], cwd=tmp_path)
    doc = json.loads(out)
    assert sum(f["rule"] == "ds-deprecated-key" for f in doc["findings"]) == 1
    # given itself, ds.json is also read as plain DeepSpeed's: the legacy offload then warns once about
    # the script's own optimizer (ds-offload-client-optimizer)
    assert doc["summary"]["warnings"] == 2
    assert sorted(f["rule"] for f in doc["findings"] if f["severity"] == "warning") == [
        "ds-deprecated-key", "ds-offload-client-optimizer"]
    # a finding that differs per path (the world size of each YAML) is kept per path
    (tmp_path / "b.yaml").write_text(YAML.format(f="ds.json").replace("num_processes: 2", "num_processes: 4"))
    rc, out, err = run(["--output", "json", "a.yaml", "b.yaml"], cwd=tmp_path)
    xf = [f for f in json.loads(out)["findings"] if f["rule"] == "xf-batch-size-world"]
    assert len(xf) == 2 and {("a.yaml" in f["message"]) for f in xf} == {True, False}


def test_missing_relative_json_hint_names_cwd(run, tmp_path):
    launch = tmp_path / "elsewhere"
    launch.mkdir()
    (tmp_path / "a.yaml").write_text(YAML.format(f="nothere.json"))
    rc, out, err = run([tmp_path / "a.yaml"], cwd=launch)
    assert rc == 1 and "xf-config-file-missing" in out
    hint = [ln for ln in out.splitlines() if "hint:" in ln][0]
    assert "--cwd" in hint, out
    # exists only beside the YAML: the warning's hint names --cwd too
    (tmp_path / "nothere.json").write_text('{"train_micro_batch_size_per_gpu": 1, "zero_optimization": {}}')
    rc, out, err = run([tmp_path / "a.yaml"], cwd=launch)
    assert rc == 0 and "--cwd" in out and "xf-config-file-missing" in out
    # ... and --cwd does what the hint says
    rc, out, err = run(["--cwd", tmp_path, tmp_path / "a.yaml"], cwd=launch)
    assert rc == 0 and "xf-config-file-missing" not in out
    # an absolute path that does not exist: --cwd cannot help, the hint does not name it
    (tmp_path / "abs.yaml").write_text(YAML.format(f=tmp_path / "gone.json"))
    rc, out, err = run([tmp_path / "abs.yaml"], cwd=launch)
    assert rc == 1 and "--cwd" not in out


def test_router_helper_section_mentions_cwd(cli):
    text = (REPO / "SKILL.md").read_text(encoding="utf-8")
    section = text.split("## Helper scripts", 1)[1].split("\n## ", 1)[0]
    assert "--cwd" in section and "deepspeed_config_file" in section
    opts = {o for a in cli.build_parser()._actions for o in a.option_strings}
    for flag in re.findall(r"`(--[a-z-]+)", section):
        if "validate_backend_config" in section.split(flag)[0].rsplit("\n- ", 1)[-1]:
            assert flag in opts, flag
