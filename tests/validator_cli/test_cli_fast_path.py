"""A plain file check (config paths only) skips argparse (cli.plain_args): its options must be the
ones the parser gives, and it must not import argparse or the parser module (cli_args.py), which is
what saves its start-up time without bytecode (benchmarks/bench_validator.py --start-only)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "sub-skills" / "distributed-training-backends" / "scripts"
EX = SCRIPTS.parent / "examples"
sys.path.insert(0, str(SCRIPTS))
from backend_validator import cli  # noqa: E402


def test_plain_args_equal_the_parsers_defaults():
    for argv in (["a.yaml"], ["a.yaml", "b.json", "c d.yml", "x=1", ""]):
        assert vars(cli.plain_args(argv)) == vars(cli.build_parser().parse_args(argv)), argv


def test_anything_with_an_option_or_no_argument_goes_to_argparse():
    for argv in ([], ["-"], ["a.yaml", "--strict"], ["--", "a.yaml"], ["-h"], ["a.yaml", "-1"]):
        assert cli.plain_args(argv) is None, argv


PROBE = r"""
import io, json, sys
sys.path.insert(0, sys.argv[1])
from backend_validator import cli
o, e = io.StringIO(), io.StringIO()
rc = cli.main(sys.argv[2:], stdout=o, stderr=e)
print(json.dumps({"rc": rc, "out": o.getvalue(), "err": e.getvalue(),
                  "argparse": "argparse" in sys.modules, "cli_args": "backend_validator.cli_args" in sys.modules,
                  "modules": sorted(m for m in sys.modules if m.startswith("backend_validator.")),
                  "yaml": "yaml" in sys.modules}))
"""


def _run(*argv, cwd=EX):
    r = subprocess.run([sys.executable, "-c", PROBE, str(SCRIPTS), *argv], capture_output=True, text=True,
                       timeout=120, cwd=str(cwd))
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_a_plain_check_imports_no_argparse_and_prints_what_the_parsed_run_prints():
    fast = _run("bad-fsdp2-local-state-dict.yaml", "ds-zero3.json")
    assert fast["argparse"] is False and fast["cli_args"] is False
    parsed = _run("--format", "auto", "bad-fsdp2-local-state-dict.yaml", "ds-zero3.json")
    assert parsed["argparse"] is True
    assert (fast["rc"], fast["out"], fast["err"]) == (parsed["rc"], parsed["out"], parsed["err"])
    assert fast["rc"] == 1 and "acc-fsdp2-local-state-dict" in fast["out"]


def test_a_check_compiles_only_the_helpers_its_input_needs(tmp_path):
    """A clean Accelerate config loads no unknown-key reporting, no related-JSON handling and no DeepSpeed
    code; one naming a DeepSpeed JSON that is not there loads the DeepSpeed value helpers (ds_values) but not
    the DeepSpeed tables (deepspeed.py); an inline ZeRO-3 offload block loads neither, the same block at stage 2
    the plugin model and the ZeRO rules; a DeepSpeed JSON loads the tables."""
    run = _run("fsdp2.yaml")
    fsdp = run["modules"]
    assert run["yaml"] is False and "backend_validator._pyyaml.loader" in fsdp  # PyYAML's loading half only
    assert fsdp and not {"backend_validator.rules._acc_unknown", "backend_validator.engine_related",
                         "backend_validator.ds_values", "backend_validator.deepspeed",
                         "backend_validator.loader_json"} & set(fsdp), fsdp
    unknown = _run("bad-fsdp2-local-state-dict.yaml", "--strict")["modules"]  # argparse path, same modules
    assert "backend_validator.rules._acc_unknown" not in unknown
    r = _run("deepspeed-file.yaml")  # from examples/ the JSON path is absent
    assert "backend_validator.ds_values" in r["modules"] and "backend_validator.deepspeed" not in r["modules"], r
    # inline ZeRO-3 offload: the plugin's block keeps stage 3, where no offload is ignored, so neither the plugin
    # model nor the DeepSpeed ZeRO rules are compiled; below stage 3 they are, and the offload is reported
    r = _run("deepspeed-zero3-offload.yaml")
    assert not {"backend_validator.ds_values", "backend_validator.deepspeed", "backend_validator.consumer_model",
                "backend_validator.rules.deepspeed_zero"} & set(r["modules"]), r
    stage2 = tmp_path / "stage2.yaml"
    stage2.write_text((EX / "deepspeed-zero3-offload.yaml").read_text().replace("zero_stage: 3", "zero_stage: 2"))
    r = _run(str(stage2))
    assert {"backend_validator.consumer_model", "backend_validator.rules.deepspeed_zero"} <= set(r["modules"]), r
    assert "acc-ds-offload-ignored-by-stage" in r["out"], r["out"]
    # a strict-JSON DeepSpeed file is read by json's C scanner (loader_json_strict.py); the position-tracking
    # parser (loader_json.py) is compiled only when a finding needs a line, or for HJSON
    clean = _run("ds-zero3.json")
    assert "backend_validator.loader_json_strict" in clean["modules"], clean
    assert "backend_validator.loader_json" not in clean["modules"] and clean["rc"] == 0, clean
    bad = tmp_path / "bad.json"
    bad.write_text('{"train_batch_size": 8, "amp": {"enabled": false}}')
    r = _run(str(bad))
    assert "backend_validator.loader_json" in r["modules"] and ":1:25: error ds-removed-key" in r["out"], r
    assert "backend_validator.engine_related" in _run("deepspeed-file.yaml")["modules"]
    assert "backend_validator.deepspeed" in _run("ds-zero3.json")["modules"]
