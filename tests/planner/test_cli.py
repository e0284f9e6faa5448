"""plan_backend.py as agents run it: JSON contract, ranking, --help, bad input (one line, exit 2,
no traceback), config.json derivation (exact parameter counts for Llama-, Mistral-, Qwen2- and
GPT-2-shaped configs, tied embeddings, GQA) and --emit files that pass validate_backend_config.py."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from _planner_helpers import REPO, VALIDATOR, candidate, plan_json, run_inproc, run_planner, write_config

STRATEGIES = {"ddp", "zero1", "zero2", "zero3", "fsdp-full-shard", "fsdp-shard-grad-op", "fsdp-hybrid-shard",
              "fsdp2", "hsdp"}
OFFLOADS = {"none", "optimizer", "optimizer+params"}


# ------------------------------------------------------------------ JSON contract and ranking

def test_json_contract():
    res = plan_json("--params", "7e9", "--largest-layer-params", "131e6", "--nodes", "2", "--host-memory", "1TiB")
    assert {c["strategy"] for c in res["candidates"]} == STRATEGIES
    for c in res["candidates"]:
        assert c["offload"] in OFFLOADS
        g = c["per_gpu_bytes"]
        for key in ("model_states", "activations", "total", "parameters", "gradients", "master_weights",
                    "optimizer_states", "communication_buffers", "allocator_overhead"):
            assert isinstance(g[key], int) and g[key] >= 0, (c["strategy"], key)
        assert g["model_states"] == sum(g[k] for k in ("parameters", "gradients", "master_weights",
                                                       "optimizer_states", "gathered_params"))
        assert g["total"] == g["model_states"] + g["activations"] + g["activation_workspace"] + \
            g["communication_buffers"] + g["allocator_overhead"]
        assert isinstance(c["host_bytes_per_node"], int) and isinstance(c["fits"], bool)
        assert isinstance(c["why"], str) and c["why"]
        assert ("deepspeed_estimate" in c) == (c["strategy"] in ("zero2", "zero3"))
    assert res["recommended"] in res["candidates"]
    assert [c["rank"] for c in res["candidates"]] == list(range(1, len(res["candidates"]) + 1))


def test_small_model_gets_ddp_and_big_model_gets_sharding():
    small = plan_json("--params", "125M", "--gpu-memory", "80GiB")
    assert small["recommended"]["strategy"] == "ddp" and small["recommended"]["fits"]
    big = plan_json("--params", "13B", "--gpu-memory", "80GiB", "--activation-checkpointing")
    rec = big["recommended"]
    assert rec["strategy"] != "ddp" and rec["fits"]
    assert not candidate(big, "ddp")["fits"]
    assert "least sharding that fits" in rec["why"]


def test_sharding_order_of_memory():
    res = plan_json("--params", "7e9", "--largest-layer-params", "131e6")
    tot = {c["strategy"]: c["per_gpu_bytes"]["model_states"] for c in res["candidates"] if c["offload"] == "none"}
    assert tot["ddp"] > tot["zero1"] >= tot["zero2"] > tot["zero3"]
    assert tot["fsdp-shard-grad-op"] > tot["fsdp-full-shard"] == tot["fsdp2"]


def test_nothing_fits_exits_1_and_recommends_the_smallest():
    r = run_planner("--params", "1T", "--gpus-per-node", "1", "--gpu-memory", "8GiB", "--output", "json")
    assert r.returncode == 1, r.stderr
    res = json.loads(r.stdout)
    assert not res["recommended"]["fits"]
    assert res["recommended"]["per_gpu_bytes"]["total"] == min(c["per_gpu_bytes"]["total"] for c in res["candidates"])


def test_host_memory_limits_offload():
    roomy = plan_json("--params", "70B", "--host-memory", "4TiB", "--gpu-memory", "24GiB")
    tight = plan_json("--params", "70B", "--host-memory", "64GiB", "--gpu-memory", "24GiB")
    off = candidate(roomy, "zero3", "optimizer+params", "cpu")
    assert off["fits_host"] is True
    assert candidate(tight, "zero3", "optimizer+params", "cpu")["fits_host"] is False
    assert not candidate(tight, "zero3", "optimizer+params", "cpu")["fits"]


def test_lora_fraction_shrinks_only_trainable_states():
    full = candidate(plan_json("--params", "7e9"), "ddp")["per_gpu_bytes"]
    lora = candidate(plan_json("--params", "7e9", "--trainable-fraction", "0.01"), "ddp")["per_gpu_bytes"]
    assert lora["parameters"] == full["parameters"]
    assert lora["optimizer_states"] * 100 == full["optimizer_states"]


@pytest.mark.parametrize("opt,per_param", [("adamw", 8), ("sgd", 0), ("sgd-momentum", 4), ("lion", 4)])
def test_optimizer_state_bytes(opt, per_param):
    res = plan_json("--params", "1e9", "--optimizer", opt, "--gpus-per-node", "1")
    assert candidate(res, "ddp")["per_gpu_bytes"]["optimizer_states"] == per_param * 10 ** 9


def test_text_output_is_a_ranked_table():
    r = run_planner("--params", "7e9")
    assert r.returncode == 0 and r.stderr == ""
    assert "recommended:" in r.stdout and "fsdp2" in r.stdout and "zero3" in r.stdout


# ------------------------------------------------------------------ help and bad input

def test_help_has_examples_exit_codes_and_the_contract_flags():
    r = run_planner("--help")
    assert r.returncode == 0
    for text in ("examples:", "exit codes:", "--params", "--largest-layer-params", "--model-config",
                 "--seq-len", "--micro-batch", "--precision", "--optimizer", "--activation-checkpointing",
                 "--gpus-per-node", "--nodes", "--gpu-memory", "--host-memory", "--output", "--emit",
                 "fp8", "80GiB", "2TiB"):
        assert text in r.stdout, text


BAD = [
    ["--params", "-5"], ["--params=-7e9"], ["--params", "0"], ["--params", "nan"], ["--params", "1e400"],
    ["--params", "seven"], ["--params", "7e9", "--optimizer", "adamx"], ["--params", "7e9", "--gpu-memory", "80"],
    ["--params", "7e9", "--gpu-memory=-80GiB"], ["--params", "7e9", "--gpu-memory", "80XB"],
    ["--params", "7e9", "--host-memory", "lots"], ["--params", "7e9", "--gpu-memory", "0GiB"],
    ["--params", "7e9", "--seq-len", "-1"], ["--params", "7e9", "--micro-batch", "0"],
    ["--params", "7e9", "--precision", "fp4"], ["--params", "7e9", "--nodes", "x"],
    ["--params", "7e9", "--largest-layer-params", "8e9"], ["--params", "7e9", "--trainable-fraction", "0"],
    [], ["--params", "7e9", "--emit-candidate", "zero3"], ["--model-config", "/nonexistent/config.json"],
    ["--model-config", "."],
]


@pytest.mark.parametrize("args", BAD, ids=lambda a: " ".join(a) or "no-args")
def test_bad_input_one_line_exit_2(planner, args):
    rc, out, err = run_inproc(planner.cli, *args)
    assert rc == 2, (rc, out[:300], err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0], err


@pytest.mark.parametrize("args", [BAD[0], BAD[6], BAD[-2]], ids=["negative", "optimizer", "missing-file"])
def test_bad_input_through_the_script(args):
    r = run_planner(*args)
    assert r.returncode == 2 and r.stdout == "", (r.returncode, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr


NOT_CONFIGS = {
    "not-json.json": b"model_type: llama\n",
    "list.json": b"[1, 2]",
    "no-type.json": b'{"hidden_size": 64}',
    "unsupported.json": b'{"model_type": "t5", "d_model": 512}',
    "bad-int.json": b'{"model_type": "llama", "hidden_size": "64", "num_hidden_layers": 2, "num_attention_heads": 4,'
                    b' "intermediate_size": 8, "vocab_size": 10}',
    "bool-int.json": b'{"model_type": "gpt2", "n_embd": true, "n_layer": 1, "n_head": 1, "n_positions": 8,'
                     b' "vocab_size": 10}',
    "negative.json": b'{"model_type": "llama", "hidden_size": -64, "num_hidden_layers": 2, "num_attention_heads": 4,'
                     b' "intermediate_size": 8, "vocab_size": 10}',
    "missing.json": b'{"model_type": "mistral", "hidden_size": 64}',
    "gqa-mismatch.json": b'{"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, '
                         b'"num_attention_heads": 4, "num_key_value_heads": 3, "intermediate_size": 8, "vocab_size": 10}',
    "nan.json": b'{"model_type": "llama", "hidden_size": NaN}',
    "binary.json": b"\xff\xfe\x00garbage",
    "empty.json": b"",
    "deep.json": b"[" * 100000,
    "tie-string.json": b'{"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,'
                       b' "intermediate_size": 8, "vocab_size": 10, "tie_word_embeddings": "yes"}',
}


@pytest.mark.parametrize("name", sorted(NOT_CONFIGS))
def test_config_that_is_not_one(tmp_path, planner, name):
    p = tmp_path / name
    p.write_bytes(NOT_CONFIGS[name])
    rc, out, err = run_inproc(planner.cli, "--model-config", p)
    assert rc == 2 and out == "", (rc, out[:200])
    assert len(err.strip().splitlines()) == 1, err


def test_unreadable_config_is_one_line(tmp_path, planner, monkeypatch, capsys):
    """A permission error on open (chmod 000 does not stop root, so the error is injected)."""
    p = write_config(tmp_path, {"model_type": "llama"})
    real_open = open

    def deny(path, *a, **k):
        if str(path) == str(p):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *a, **k)

    monkeypatch.setattr("builtins.open", deny)
    assert planner.cli.main(["--model-config", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Permission denied" in err


def test_unwritable_emit_folder(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    r = run_planner("--params", "1e9", "--emit", blocker / "sub")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


# ------------------------------------------------------------------ config.json derivation

def llama_count(V, h, L, a, kv, f, tied, d=None, qkv_bias=False, o_bias=False, mlp_bias=False):
    d = d or h // a
    per = (2 * h + h * a * d + 2 * h * kv * d + a * d * h + 3 * h * f
           + (a * d + 2 * kv * d if qkv_bias else 0) + (h if o_bias else 0) + (2 * f + h if mlp_bias else 0))
    return V * h + L * per + h + (0 if tied else V * h)


def gpt2_count(V, npos, h, L, f):
    return V * h + npos * h + L * (2 * h + 3 * h * h + 3 * h + h * h + h + 2 * h + h * f + f + f * h + h) + 2 * h


CONFIGS = [
    # published totals: Llama-2-7B 6,738,415,616; Mistral-7B-v0.1 7,241,732,096; GPT-2 small 124,439,808
    ("llama-2-7b", {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                    "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000,
                    "tie_word_embeddings": False}, 6_738_415_616, 32000 * 4096),
    ("mistral-7b-gqa", {"model_type": "mistral", "hidden_size": 4096, "num_hidden_layers": 32,
                        "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                        "vocab_size": 32000}, 7_241_732_096, 32000 * 4096),
    ("gpt2-small", {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
                    "vocab_size": 50257, "n_inner": None}, 124_439_808, 50257 * 768),
    ("tiny-llama-tied", {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                         "intermediate_size": 172, "vocab_size": 1000, "tie_word_embeddings": True},
     llama_count(1000, 64, 2, 4, 4, 172, True), 1000 * 64),
    ("tiny-llama-bias", {"model_type": "llama", "hidden_size": 96, "num_hidden_layers": 3, "num_attention_heads": 6,
                         "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 50,
                         "attention_bias": True, "mlp_bias": True, "head_dim": 32},
     llama_count(50, 96, 3, 6, 2, 256, False, d=32, qkv_bias=True, o_bias=True, mlp_bias=True), 256 * 96 + 256),
    ("tiny-qwen2", {"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                    "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 300,
                    "tie_word_embeddings": True}, llama_count(300, 64, 2, 4, 2, 128, True, qkv_bias=True), 300 * 64),
    ("tiny-gpt2-untied", {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "n_positions": 16,
                          "vocab_size": 100, "n_inner": 48, "tie_word_embeddings": False},
     gpt2_count(100, 16, 32, 2, 48), 100 * 32),
]


@pytest.mark.parametrize("name,cfg,params,largest", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_config_json_derivation(tmp_path, name, cfg, params, largest):
    res = plan_json("--model-config", write_config(tmp_path, cfg))
    assert res["inputs"]["params"] == params
    assert res["inputs"]["largest_layer_params"] == largest
    assert res["model"]["assumed"] is False


def test_config_params_flag_overrides_the_count(tmp_path):
    cfg = write_config(tmp_path, CONFIGS[0][1])
    assert plan_json("--model-config", cfg, "--params", "1e9")["inputs"]["params"] == 10 ** 9


# ------------------------------------------------------------------ --emit passes the validator

EMIT = ["ddp", "zero1", "zero2", "zero3", "zero1:optimizer", "zero2:optimizer", "zero3:optimizer",
        "zero3:optimizer+params", "zero3:optimizer+params@nvme", "fsdp-full-shard", "fsdp-shard-grad-op",
        "fsdp-hybrid-shard", "fsdp2", "fsdp2:optimizer+params", "hsdp"]


def test_every_emitted_config_passes_the_validator_strictly(tmp_path):
    yamls, jsons = [], []
    for i, (cand, prec, nodes) in enumerate([(c, p, n) for c in EMIT for p, n in (("bf16", 2), ("fp16", 1))]
                                            + [("fsdp2", "fp8", 1), ("ddp", "fp32", 1), ("zero3", "fp32", 1)]):
        out = tmp_path / f"e{i}"
        args = ["--params", "7e9", "--nodes", nodes, "--precision", prec, "--emit", out, "--emit-candidate", cand]
        if i % 2:
            args.append("--activation-checkpointing")
        r = run_planner(*args)
        assert r.returncode in (0, 1) and r.stderr == "", (cand, r.stderr)
        assert (out / "accelerate.yaml").is_file()
        yamls.append(out / "accelerate.yaml")
        if cand.startswith("zero"):
            jsons.append(out / "ds_config.json")
            assert f"wrote {out / 'ds_config.json'}" in r.stdout
        else:
            assert not (out / "ds_config.json").exists()
    r = subprocess.run([sys.executable, str(VALIDATOR), "--strict", "--output", "json", *map(str, yamls + jsons)],
                       capture_output=True, text=True, timeout=120, cwd=REPO)
    report = json.loads(r.stdout)
    assert report["findings"] == [] and report["input_errors"] == [], report["findings"][:3]
    assert r.returncode == 0
    assert len(report["files"]) == len(yamls) + len(jsons)


def test_default_emit_writes_the_recommendation(tmp_path):
    res = plan_json("--params", "13B", "--activation-checkpointing", "--emit", tmp_path)
    text = (tmp_path / "accelerate.yaml").read_text()
    rec = res["recommended"]
    assert f"candidate {rec['strategy']} " in text
    assert res["emitted"][0].endswith("accelerate.yaml") or res["emitted"][0].endswith("ds_config.json")


def test_emitted_deepspeed_json_matches_the_candidate(tmp_path):
    plan_json("--params", "7e9", "--emit", tmp_path, "--emit-candidate", "zero3:optimizer+params@nvme")
    ds = json.loads((tmp_path / "ds_config.json").read_text())
    zo = ds["zero_optimization"]
    assert zo["stage"] == 3 and zo["offload_optimizer"]["device"] == zo["offload_param"]["device"] == "nvme"
    assert ds["bf16"]["enabled"] is True


# ------------------------------------------------------------------ no argument list crashes it

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

FLAGS = ["--params", "--largest-layer-params", "--seq-len", "--micro-batch", "--precision", "--optimizer",
         "--activation-checkpointing", "--gpus-per-node", "--nodes", "--gpu-memory", "--host-memory",
         "--trainable-fraction", "--hidden-size", "--num-layers", "--num-heads", "--num-kv-heads", "--ffn-size",
         "--vocab-size", "--reserve", "--overhead-fraction", "--intra-node-bandwidth", "--inter-node-bandwidth",
         "--output"]
VALUES = ["7e9", "1", "0", "-1", "1e16", "1e17", "nan", "inf", "80GiB", "1B", "0.5", "json", "bf16", "fp8",
          "adafactor", "sgd", "", " ", "1TiB", "3", "4096", "99999999", "1.5KiB", "1e-300"]


@settings(max_examples=150, deadline=None)
@given(st.booleans(), st.lists(st.one_of(st.sampled_from(FLAGS), st.sampled_from(VALUES)), max_size=12))
def test_random_argument_lists_never_traceback(planner, with_model, argv):
    argv = (["--params", "7e9"] if with_model else []) + argv
    import contextlib
    import io
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            rc = planner.cli.main(argv)
        except SystemExit as exc:       # argparse's own usage errors
            rc = exc.code
    assert rc in (0, 1, 2)
    if rc == 2:
        assert len(err.getvalue().strip().splitlines()) == 1, err.getvalue()


def test_adafactor_states_from_matrix_shapes(tmp_path):
    """transformers Adafactor defaults: rows + cols fp32 per matrix, the full size per vector.
    tiny-llama-tied: embedding 1000+64; per layer 2 norms of 64, q/k/v/o 64+64 each, gate/up/down
    172+64 each; final norm 64; tied head adds nothing."""
    cfg = write_config(tmp_path, CONFIGS[3][1])
    res = plan_json("--model-config", cfg, "--optimizer", "adafactor", "--gpus-per-node", 1)
    per_layer = 2 * 64 + 4 * (64 + 64) + 3 * (172 + 64)
    assert candidate(res, "ddp")["per_gpu_bytes"]["optimizer_states"] == 4 * (1000 + 64 + 2 * per_layer + 64)
