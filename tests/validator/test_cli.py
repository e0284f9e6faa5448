"""CLI contract: help, formats, exit codes, stdin, JSON output, related DeepSpeed file, imports."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys

SCRIPT = "sub-skills/distributed-training-backends/scripts/validate_backend_config.py"
LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+): (?P<sev>error|warning|info) (?P<rule>[a-z0-9-]+): .+$")


def run(bv, argv, stdin_text=None):
    out, err = io.StringIO(), io.StringIO()
    stdin = io.StringIO(stdin_text) if stdin_text is not None else None
    rc = bv.cli.main(argv, stdin=stdin, stdout=out, stderr=err)
    return rc, out.getvalue(), err.getvalue()


def test_help_documents_usage_exit_codes_and_limits(bv):
    rc, out, _ = run(bv, ["--help"])
    assert rc == 0
    for needle in ("--format", "--output", "--strict", "--list-rules", "--check-imports", "--consumer",
                   "--world-size", "exit codes", "MiB", "nesting depth", "alias", "examples:", "'-'"):
        assert needle in out, needle


def test_list_rules_text_and_json(bv):
    rc, out, _ = run(bv, ["--list-rules"])
    assert rc == 0 and "acc-unknown-top-level-key" in out and "yaml-duplicate-key" in out
    rc, out, _ = run(bv, ["--list-rules", "--output", "json"])
    rows = json.loads(out)["rules"]
    assert rc == 0 and {r["id"] for r in rows} == set(bv.core.REGISTRY)


def test_text_output_and_exit_1(bv, tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("distributed_type: MULTI_GPU\nnum_process: 2\n")
    rc, out, err = run(bv, [str(p)])
    assert rc == 1
    lines = out.splitlines()
    i = next(i for i, x in enumerate(lines) if "acc-unknown-top-level-key" in x)
    m = LINE.match(lines[i])
    assert m and m["file"] == str(p) and m["line"] == "2" and m["col"] == "1", lines[i]
    assert "num_process" in lines[i]
    assert lines[i + 1].startswith("    hint: did you mean 'num_processes'?")
    assert all(LINE.match(x) or x.startswith("    hint: ") for x in lines)
    assert "error(s)" in err


def test_clean_config_exit_0_and_strict(bv, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\nmixed_precision: bf16\n")
    assert run(bv, [str(good)])[0] == 0
    warn = tmp_path / "warn.yaml"
    warn.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n")
    rc, out, _ = run(bv, [str(warn)])
    assert rc == 0 and "warning acc-block-ignored" in out
    assert run(bv, ["--strict", str(warn)])[0] == 1


def test_stdin(bv):
    rc, out, _ = run(bv, ["-"], "distributed_type: multi_gpu\nnum_processes: 2\n")
    assert rc == 1 and out.startswith("<stdin>:1:1: error acc-invalid-distributed-type")
    rc, out, _ = run(bv, ["-"], '{"distributed_type": "NO", "num_processes": 1}')
    assert rc == 0


def test_json_output_document(bv, tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("distributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  fsdp_version: 2\n"
                 "  fsdp_reshard_after_forward: FULL_SHARD\n")
    rc, out, _ = run(bv, ["--output", "json", str(p)])
    doc = json.loads(out)
    assert rc == 1
    f = next(x for x in doc["findings"] if x["rule"] == "acc-fsdp-reshard-after-forward-invalid")
    assert set(f) == {"file", "rule", "severity", "path", "line", "column", "message", "hint"}
    assert f["path"] == "fsdp_config.fsdp_reshard_after_forward" and f["line"] == 5 and f["column"] == 3
    assert doc["files"][0]["format"] == "accelerate" and doc["summary"]["errors"] >= 1


def test_related_deepspeed_file_is_loaded_and_resolved_against_cwd(bv, workspace, tmp_path):
    cfg = tmp_path / "acc.yaml"
    cfg.write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                   "  deepspeed_config_file: ds_config.json\n")
    rc, out, _ = run(bv, ["--output", "json", "--cwd", str(workspace), str(cfg)])
    doc = json.loads(out)
    rel = doc["files"][0].get("related") or []
    assert rel and rel[0]["file"] == "ds_config.json" and rel[0]["consumer"] == "accelerate", doc["files"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("distributed_type: DEEPSPEED\nnum_processes: 2\ndeepspeed_config:\n"
                   "  deepspeed_config_file: broken.json\n")
    rc, out, _ = run(bv, ["--cwd", str(workspace), str(bad)])
    assert rc == 1 and "input-related-file-unreadable" in out


def test_deepspeed_json_gets_consumer_and_reason(bv, tmp_path):
    p = tmp_path / "ds.json"
    p.write_text(json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 2}}))
    rc, out, _ = run(bv, ["--output", "json", str(p)])
    f = json.loads(out)["files"][0]
    assert f["format"] == "deepspeed" and f["consumer"] and f["consumer_reason"]
    rc, out, _ = run(bv, ["--output", "json", "--consumer", "transformers", str(p)])
    assert json.loads(out)["files"][0]["consumer"] == "transformers"


def test_check_imports_uses_find_spec_only(bv, tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("distributed_type: MEGATRON_LM\nnum_processes: 8\n")
    rc, out, _ = run(bv, ["--check-imports", str(p)])
    assert rc == 0 and "info acc-missing-package" in out and "megatron" in out
    assert "megatron" not in sys.modules


def test_script_runs_from_any_cwd_without_heavy_imports(repo_root, tmp_path, python_exe):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    code = (f"import runpy, sys; sys.argv = ['v', {str(cfg)!r}]\n"
            f"try:\n    runpy.run_path({str(repo_root / SCRIPT)!r}, run_name='__main__')\n"
            "except SystemExit as e:\n    rc = e.code\n"
            "heavy = [m for m in ('accelerate', 'torch', 'deepspeed', 'transformers') if m in sys.modules]\n"
            "print('HEAVY', heavy, 'RC', rc)\n")
    p = subprocess.run([python_exe, "-c", code], cwd=str(tmp_path), capture_output=True, text=True, timeout=60)
    assert "HEAVY [] RC 0" in p.stdout, p.stdout + p.stderr
