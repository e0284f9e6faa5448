"""--help describes --output json: every key of a real document (top level and the records in its
lists) is named in the help text, for file checks and for launch checks."""
from __future__ import annotations

import json
import re

DS = '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 1}}'
YAML = "distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n" \
       "  zero_stage: 9\n"


def _help(run):
    rc, out, _ = run(["--help"])
    assert rc == 0
    return out


def _keys(doc):
    """{top-level key} and {key of a record inside a top-level list or dict}."""
    top, inner = set(doc), set()
    for v in doc.values():
        for rec in (v if isinstance(v, list) else [v]):
            if isinstance(rec, dict):
                inner |= set(rec)
    return top, inner


def _named(help_text, key):
    return re.search(rf"(?<![\w-]){re.escape(key)}(?![\w-])", help_text) is not None


def test_every_json_key_of_a_file_check_is_in_help(run, tmp_path):
    (tmp_path / "ds.json").write_text(DS)
    (tmp_path / "alone.json").write_text(DS)
    (tmp_path / "a.yaml").write_text(YAML)
    rc, out, _ = run(["--output", "json", "a.yaml", "alone.json", "missing.yaml"], cwd=tmp_path)
    doc = json.loads(out)
    assert rc == 2 and doc["skipped_checks"] and doc["findings"] and doc["input_errors"], doc
    top, inner = _keys(doc)
    assert {"skipped_checks", "files", "findings", "summary"} <= top
    assert {"check", "reason", "option"} <= inner  # the skipped_checks record
    text = _help(run)
    missing = sorted(k for k in top | inner if not _named(text, k))
    assert missing == [], f"--help does not name these JSON keys: {missing}"


def test_every_json_key_of_a_launch_check_is_in_help(run, tmp_path):
    (tmp_path / "c.yaml").write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    rc, out, _ = run(["--output", "json", "--explain", "--launch-command",
                      "accelerate launch --config_file c.yaml --num_processes 0 train.py"], cwd=tmp_path)
    doc = json.loads(out)
    assert rc == 1 and doc["launch"] and doc["findings"], doc
    top, inner = _keys(doc)
    text = _help(run)
    missing = sorted(k for k in top | inner if not _named(text, k))
    assert missing == [], f"--help does not name these JSON keys: {missing}"
