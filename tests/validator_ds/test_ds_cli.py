"""End to end through validate_backend_config.py: DeepSpeed JSON, consumers, world size,
an Accelerate YAML reaching a JSON, bad input (exit codes, one-line errors, no traceback)."""
from __future__ import annotations

import json
import subprocess
import sys

from ds_support import SCRIPTS

CLI = SCRIPTS / "validate_backend_config.py"


def run(*args, cwd=None, stdin=None):
    p = subprocess.run([sys.executable, str(CLI), *map(str, args)], capture_output=True, text=True, cwd=cwd,
                       input=stdin, timeout=60)
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    return p


def findings(p):
    return json.loads(p.stdout)["findings"]


HJSON = '{\n  // per device\n  "train_micro_batch_size_per_gpu": 4,\n  "zero_optimization": {"stage": 2},\n}\n'


def test_consumer_decides_hjson_and_is_reported(tmp_path):
    f = tmp_path / "ds.json"
    f.write_text(HJSON)
    p = run("--format", "deepspeed", "--consumer", "deepspeed", "--output", "json", f)
    assert p.returncode == 0, p.stdout
    doc = json.loads(p.stdout)
    assert doc["files"][0]["consumer"] == "deepspeed" and doc["files"][0]["format"] == "deepspeed"
    p = run("--consumer", "accelerate", "--output", "json", f)
    assert p.returncode == 1
    (fd,) = [x for x in findings(p) if x["rule"] == "ds-json-syntax" and "comment" in x["message"]]
    assert (fd["line"], fd["column"]) == (2, 3)
    p = run(f)  # no "auto" -> plain deepspeed, and the text output says so
    assert p.returncode == 0 and "consumer deepspeed" in p.stdout + p.stderr


def test_byte_order_mark_survives_file_reading(tmp_path):
    """json.load (Accelerate, the Trainer) rejects a BOM; the CLI once stripped it while reading
    the file, so only the loader-level tests saw it."""
    body = '{"train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2}}'
    f = tmp_path / "ds.json"
    f.write_bytes(b"\xef\xbb\xbf" + body.encode())
    p = run("--consumer", "accelerate", "--output", "json", f)
    assert p.returncode == 1 and any(x["rule"] == "ds-json-syntax" and "bom" in x["message"] for x in findings(p))
    assert run("--consumer", "deepspeed", f).returncode == 0
    y = tmp_path / "acc.yaml"  # the same JSON reached through an Accelerate config
    y.write_text(f"distributed_type: DEEPSPEED\nnum_processes: 1\ndeepspeed_config:\n  deepspeed_config_file: {f}\n")
    p = run("--output", "json", y)
    assert p.returncode == 1 and any(x["rule"] == "ds-json-syntax" for x in findings(p))
    y.write_bytes(b"\xef\xbb\xbfdistributed_type: MULTI_GPU\nnum_processes: 2\n")  # YAML skips a BOM
    assert run(y).returncode == 0


def test_world_size_option(tmp_path):
    f = tmp_path / "ds.json"
    f.write_text('{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}')
    assert run("--world-size", "2", f).returncode == 0
    p = run("--world-size", "3", "--output", "json", f)
    assert p.returncode == 1 and [x for x in findings(p) if x["rule"] == "ds-batch-size-invalid"]
    assert run(f).returncode == 0  # 16 = 4 x 2 x 2 is possible: no error without a world size


def test_auto_consumer_and_strict(tmp_path):
    f = tmp_path / "ds.json"
    f.write_text('{"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2, '
                 '"overlap_comm": "auto"}}')
    p = run("--output", "json", f)
    doc = json.loads(p.stdout)
    assert doc["files"][0]["consumer"] == "transformers" and "auto" in doc["files"][0]["consumer_reason"]
    assert p.returncode == 1 and [x for x in findings(p) if x["rule"] == "ds-auto-unfillable"]
    p = run("--consumer", "deepspeed", "--output", "json", f)
    rules = {x["rule"] for x in findings(p)}
    assert "ds-auto-unsupported" in rules and "ds-auto-dropped" in rules


def test_yaml_reaching_json_reports_json_positions(tmp_path):
    (tmp_path / "ds.json").write_text('{\n  "train_micro_batch_size_per_gpu": "auto",\n  "amp": {"enabled": false},'
                                      '\n  "zero_optimization": {"stage": 2, "stage3_prefetch_bucket_size": 1.5}\n}\n')
    y = tmp_path / "acc.yaml"
    y.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 2\n"
                 "deepspeed_config:\n  deepspeed_config_file: ds.json\n  zero3_init_flag: true\n")
    p = run("--output", "json", y, cwd=tmp_path)
    assert p.returncode == 1
    fs = findings(p)
    amp = [x for x in fs if x["rule"] == "ds-removed-key"]
    assert amp and amp[0]["file"].endswith("ds.json") and (amp[0]["line"], amp[0]["column"]) == (3, 3)
    z3 = [x for x in fs if x["rule"] == "xf-zero3-init-not-stage3"]
    assert z3 and z3[0]["file"].endswith("acc.yaml") and z3[0]["line"] == 6
    doc = json.loads(p.stdout)
    (rel,) = doc["files"][0]["related"]
    assert rel["file"] == "ds.json" and rel["consumer"] == "accelerate" and "deepspeed_config_file" in \
        rel["consumer_reason"]
    # launched from elsewhere: the relative JSON path no longer resolves
    other = tmp_path / "elsewhere"
    other.mkdir()
    p = run("--output", "json", y, cwd=other)
    miss = [x for x in findings(p) if x["rule"] == "xf-config-file-missing"]
    assert miss and miss[0]["severity"] == "warning"


def test_bad_json_inputs(tmp_path):
    cases = {
        "deep.json": '{"a": ' + "[" * 10000 + "]" * 10000 + "}",
        "empty.json": "",
        "list.json": "[1, 2]",
        "broken.json": '{"train_batch_size": 8,\n "fp16": {"enabled": true\n',
    }
    for name, text in cases.items():
        f = tmp_path / name
        f.write_text(text)
        p = run("--format", "deepspeed", f)
        assert p.returncode == 2, (name, p.stdout, p.stderr)
        err = [ln for ln in p.stderr.splitlines() if name in ln]
        assert err and len(err) == 1, (name, p.stderr)
    b = tmp_path / "bin.json"
    b.write_bytes(b'{"a": "\xff\xfe"}')
    assert run("--format", "deepspeed", b).returncode == 2
    d = tmp_path / "dup.json"
    d.write_text('{"train_batch_size": 8,\n "train_batch_size": 16}')
    p = run("--format", "deepspeed", "--output", "json", d)
    (dup,) = [x for x in findings(p) if x["rule"] == "json-duplicate-key"]
    assert p.returncode == 1 and "line 2" in dup["message"] and "line 1" in dup["message"]


def test_stdin_and_list_rules():
    p = run("--format", "deepspeed", "--consumer", "deepspeed", "-", stdin='{"train_batch_size": 8, "amp": {}}')
    assert p.returncode == 1 and "ds-removed-key" in p.stdout
    p = run("--list-rules")
    assert p.returncode == 0
    for rid in ("ds-removed-key", "ds-auto-unfillable", "xf-precision-auto-off", "ds-batch-size-invalid"):
        assert rid in p.stdout
