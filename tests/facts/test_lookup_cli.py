"""scripts/lookup.py as agents run it: found, not found with suggestions and the coverage line, json,
bad input, --help, a name in two sections, C++-side variables, and no heavy import."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOOKUP = REPO / "scripts" / "lookup.py"


def run(*args, data=None):
    extra = ["--data", str(data)] if data else []
    p = subprocess.run([sys.executable, str(LOOKUP), *args, *extra], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def test_found_flag_with_dashes_folded_and_its_links():
    rc, out, err = run("--nproc-per-node")
    assert rc == 0 and err == ""
    assert out.startswith("torchrun  --nproc-per-node") and "PET_NPROC_PER_NODE" in out and "torch 2.13.0" in out
    rc2, out2, _ = run("NPROC_PER_NODE", "--section", "torchrun")
    assert rc2 == 0 and "--nproc-per-node" in out2


def test_flag_only_accelerate_flag_says_no_config_key():
    rc, out, _ = run("num_cpu_threads_per_process")
    assert rc == 0 and "flag-only" in out and "rejects" in out and "accelerate-env:OMP_NUM_THREADS" in out
    assert "accelerate-config" not in out.split("\n")[0]


def test_dotted_path_and_bare_leaf():
    rc, out, _ = run("offload_optimizer.device")
    assert rc == 0 and "zero_optimization.offload_optimizer.device" in out and "cpu" in out
    rc, out, _ = run("zero_optimization.offload_optimizer.device", "--output", "json")
    hits = json.loads(out)["hits"]
    assert rc == 0 and hits[0]["n"] == "zero_optimization.offload_optimizer.device"
    assert hits[0]["package"] == "deepspeed 0.19.8"


def test_name_in_two_sections():
    rc, out, _ = run("use_cpu", "--output", "json")
    secs = {h["s"] for h in json.loads(out)["hits"]}
    assert rc == 0 and {"accelerate-config", "trainer-args"} <= secs


def test_not_found_gives_suggestions_and_coverage():
    rc, out, err = run("fsdp_transformer_layer_cls_to_warp")
    assert rc == 1 and err == ""
    assert "not found" in out and "accelerate-launch:--fsdp_transformer_layer_cls_to_wrap" in out
    assert "searched: accelerate 1.15.0" in out and "Not indexed" in out
    rc, out, _ = run("fsdp_transformer_layer_cls_to_warp", "--output", "json")
    doc = json.loads(out)
    assert rc == 1 and doc["found"] is False and doc["closest"] and "transformers 5.25.0" in doc["coverage"]


def test_miss_inside_a_free_accelerate_table_says_it_would_load_silently():
    rc, out, _ = run("fsdp_config.fsdp_sharding_stratgy")
    assert rc == 1 and "fsdp_config: accelerate's config loader does not check the keys" in out
    assert "accelerate-config:fsdp_config.fsdp_sharding_strategy" in out


def test_cxx_side_variable_is_not_called_nonexistent():
    rc, out, _ = run("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC")
    assert rc == 1 and "C++-side" in out and "says nothing about it" in out
    assert "sub-skills/torch-distributed/references/debugging-and-env.md" in out


def test_search_and_cap():
    rc, out, _ = run("--search", "fsdp", "--limit", "5")
    lines = out.strip().splitlines()
    assert rc == 0 and len(lines) == 6 and lines[-1].endswith("more, narrow with --section")
    rc, out, _ = run("--search", "zzzz_no_such_thing")
    assert rc == 1


def test_list_sections_counts_match_entries():
    rc, out, _ = run("--list-sections", "--output", "json")
    doc = json.loads(out)
    data = json.loads((REPO / "references" / "facts" / "names.json").read_text())
    counts = {}
    for e in data["entries"]:
        counts[e["s"]] = counts.get(e["s"], 0) + 1
    assert rc == 0 and {k: v["count"] for k, v in doc["sections"].items()} == counts
    assert set(counts) >= {"accelerate-launch", "accelerate-config", "accelerate-env", "accelerate-api",
                           "deepspeed-config", "deepspeed-launcher", "deepspeed-removed", "deepspeed-env", "torchrun", "torch-env",
                           "trainer-args", "transformers-4-to-5", "torch-dynamo-config", "deepspeed-inference-config"}


def test_bad_input_exit_2_one_line(tmp_path):
    for args in (["a b"], [""], ["x", "--section", "nope"], ["--limit", "0", "x"], [], ["a", "b"]):
        rc, out, err = run(*args)
        assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1 and "Traceback" not in err, args
    broken = tmp_path / "names.json"
    broken.write_text("{not json")
    rc, out, err = run("x", data=broken)
    assert rc == 2 and "cannot read the name tables" in err and "Traceback" not in err


def test_version_names_the_bundle_and_the_packages():
    rc, out, _ = run("--version")
    version = (REPO / "VERSION").read_text().strip()
    assert rc == 0 and out.startswith(f"lookup.py {version} ") and "deepspeed 0.19.8" in out


def test_help_has_examples_and_exit_codes():
    rc, out, _ = run("--help")
    assert rc == 0 and "examples:" in out and "exit codes:" in out and "lookup.py --list-sections" in out


def test_never_imports_the_packages():
    code = ("import runpy, sys; sys.argv=['lookup.py', 'eval_strategy']\n"
            "try:\n runpy.run_path(%r, run_name='__main__')\nexcept SystemExit:\n pass\n"
            "print('MODS', sorted(m for m in sys.modules if m.split('.')[0] in "
            "('torch', 'accelerate', 'deepspeed', 'transformers', 'yaml', 'numpy')))" % str(LOOKUP))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "MODS []" in p.stdout, p.stdout[-500:]


def test_deepspeed_top_level_keys_agree_with_the_validator_schema():
    """The validator's DeepSpeed top-level key list (checked against deepspeed 0.19.8 by its own
    oracle tests) and the generated name table must agree, so `lookup.py optimizer` is never a
    miss. The names listed here are the known gaps of the source scan (read through helpers the
    AST walk does not follow); the list may only shrink."""
    tables = json.loads((REPO / "sub-skills/distributed-training-backends/scripts/backend_validator/"
                         "deepspeed_tables.json").read_text(encoding="utf-8"))
    names = json.loads((REPO / "references/facts/names.json").read_text(encoding="utf-8"))
    ds = [e for e in names["entries"] if e["s"] == "deepspeed-config"]
    top = {n.split(".")[0] for e in ds for n in [e["n"], *e.get("a", [])]}
    known_gaps = {"msamp"}  # written by accelerate's DeepSpeedPlugin, not read by deepspeed itself
    missing = set(tables["tables"]["TOP_LEVEL_KEYS"]) - top
    assert missing <= known_gaps, sorted(missing - known_gaps)
    assert {"optimizer", "scheduler", "pipeline", "checkpoint", "data_types"} <= top
    full = {e["n"] for e in ds}
    assert {"data_types.grad_accum_dtype", "checkpoint.use_node_local_storage",
            "checkpoint.parallel_write.pipeline_stage", "data_efficiency.data_sampling.dynamic_batching.max_tokens",
            "checkpoint.writer.io_buffer_size", "seq_parallel_communication_data_type"} <= full


def test_keyword_env_default_with_its_unit_and_removed_deepspeed_keys():
    # os.getenv("DEEPSPEED_TIMEOUT", default=10) inside timedelta(minutes=...): the table once said "None (unset)"
    rc, out, _ = run("DEEPSPEED_TIMEOUT")
    assert rc == 0 and "default: 10 (minutes, timedelta)" in out
    # a key deepspeed 0.19 removed is found, in its own section, with the refusal
    rc, out, _ = run("elasticity", "--output", "json")
    hit = json.loads(out)["hits"][0]
    assert rc == 0 and hit["s"] == "deepspeed-removed" and "DeepSpeedConfigError" in hit["o"]
