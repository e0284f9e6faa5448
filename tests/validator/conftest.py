"""Fixtures for the validator tests.

The validator runs in-process (it is standard library + PyYAML). accelerate,
torch and deepspeed run only in ONE oracle subprocess per session
(tests/oracle/accelerate_oracle.py), fed every rule example and generated config
at once; the opt-in corpus layer runs a second one on the corpus (`corpus_oracle`).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "sub-skills" / "distributed-training-backends" / "scripts"
ORACLE = REPO / "tests" / "oracle" / "accelerate_oracle.py"

# The deepspeed_config_file the examples name, and an unparseable one.
DS_CONFIG = {"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto",
             "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"}}


def _import_validator():
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import backend_validator.cli as cli  # noqa: E402
    import backend_validator.core as core  # noqa: E402
    import backend_validator.docs as docs  # noqa: E402
    cli._rules_loaded()
    return cli, core, docs


@pytest.fixture(scope="session")
def bv():
    cli, core, docs = _import_validator()

    class NS:
        pass

    ns = NS()
    ns.cli, ns.core, ns.docs = cli, core, docs
    return ns


@pytest.fixture(scope="session")
def workspace(tmp_path_factory):
    d = tmp_path_factory.mktemp("launchdir")
    (d / "ds_config.json").write_text(json.dumps(DS_CONFIG), encoding="utf-8")
    (d / "broken.json").write_text('{"zero_optimization": {"stage": 2},}\n{', encoding="utf-8")
    return d


def reviewer_set():
    """The hand-written reviewer configs (tests/validator/reviewer_configs.py)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("reviewer_configs", Path(__file__).with_name("reviewer_configs.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.C


HOSTILE_VALUES = ([], {}, None, [1, "a"], {"a": 1}, 1.5, True, False, "", "x", -7, 0, "0", "none", "auto", "True", 3)
N_HOSTILE = 500


def hostile_variants():
    """A fixed sample of the reviewer configs (valid and defective) with one slot (top-level or nested
    key) replaced by a hostile value - the variants where the first differential runs found
    disagreements."""
    import copy
    import random

    import yaml
    out = []
    for _cid, text, _expect, name in reviewer_set():
        if name != "config.yaml":
            continue
        try:
            base = yaml.safe_load(text)
        except yaml.YAMLError:
            continue
        if not isinstance(base, dict):
            continue
        paths = [(k,) for k in base] + [(k, k2) for k, v in base.items() if isinstance(v, dict) for k2 in v]
        for path in paths:
            for bad in HOSTILE_VALUES:
                d = copy.deepcopy(base)
                (d if len(path) == 1 else d[path[0]])[path[-1]] = bad
                out.append(yaml.safe_dump(d, sort_keys=False))
    return random.Random(GEN_SEED).sample(out, min(N_HOSTILE, len(out)))


@pytest.fixture(scope="session")
def hostile():
    return hostile_variants()


@pytest.fixture(scope="session")
def reviewer():
    return reviewer_set()


def own_rule(rid: str) -> bool:
    return rid.startswith(("acc-", "yaml-", "input-"))


@pytest.fixture(scope="session")
def rule_examples(bv):
    """[(rule, label, lang, text)] for every rule of this area (acc-/yaml-/input-)."""
    out = []
    for r in sorted(bv.core.REGISTRY.values(), key=lambda r: r.id):
        if not own_rule(r.id):
            continue
        _, ex = bv.docs.parse_doc(r.doc)
        for label in ("Fails", "Passes"):
            if label in ex:
                lang, text = ex[label]
                out.append((r, label, lang, text))
    return out


def example_name(lang: str) -> str:
    return "config.json" if lang == "json" else "config.yaml"


def corpus_files(corpus_dir: Path):
    files = sorted(p for p in (corpus_dir / "accelerate").iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    files += sorted(p for p in (corpus_dir / "broken").iterdir() if p.suffix in (".yaml", ".yml"))
    return files


def _run_oracle(python_exe, configs, facts=True):
    """One accelerate_oracle.py process for every config; return {id: result} plus __meta__ keys."""
    proc = subprocess.run([python_exe, str(ORACLE)], input=json.dumps({"configs": configs, "facts": facts}),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    answer = json.loads(proc.stdout)
    assert answer["versions"]["accelerate"] == "1.15.0", answer["versions"]
    results = {r["id"]: r for r in answer["results"]}
    results["__versions__"] = answer["versions"]
    results["__patches__"] = answer["patches"]
    results["__facts__"] = answer.get("facts")
    return results


@pytest.fixture(scope="session")
def oracle(rule_examples, workspace, python_exe, generated):
    """Run the oracle once on every rule example and in-repo config set; return {id: result}."""
    configs = []
    for r, label, lang, text in rule_examples:
        configs.append({"id": f"{r.id}:{label}", "text": text, "name": example_name(lang), "cwd": str(workspace)})
    for i, (text, name) in enumerate(generated):
        configs.append({"id": f"gen:{i}", "text": text, "name": name, "cwd": str(workspace)})
    for cid, text, _expect, name in reviewer_set():
        configs.append({"id": f"rev:{cid}", "text": text, "name": name, "cwd": str(workspace)})
    for i, text in enumerate(hostile_variants()):
        configs.append({"id": f"hos:{i}", "text": text, "name": "config.yaml", "cwd": str(workspace)})
    return _run_oracle(python_exe, configs)


@pytest.fixture(scope="session")
def corpus_oracle(corpus_dir, python_exe):
    """The oracle on every corpus config (opt-in corpus layer); ids are corpus:<folder>/<name>."""
    configs = [{"id": f"corpus:{p.parent.name}/{p.name}", "path": str(p), "name": p.name}
               for p in corpus_files(corpus_dir)]
    return _run_oracle(python_exe, configs, facts=False)


@pytest.fixture(scope="session")
def run_validator(bv):
    """validate(text, name, cwd, check_imports=False) -> cli.FileResult (in-process)."""

    def validate(text, name, cwd, check_imports=False):
        opts = bv.core.Options(cwd=str(cwd), check_imports=check_imports)
        return bv.cli.validate_text(text, name, "auto", opts)

    return validate


@pytest.fixture(scope="session")
def helpers():
    class H:
        pass

    h = H()
    h.example_name = example_name
    h.corpus_files = corpus_files
    h.own_rule = own_rule
    return h


# ---------------------------------------------------------------------------------------------
# Generated configs for the differential test: plausible Accelerate configs mixing valid and
# invalid values for every block, drawn with a fixed seed (not hand-written fixtures).
N_GENERATED = 400
GEN_SEED = 20261130


def _gen_config(rng):
    from backend_validator.rules import accelerate_schema as S
    c = rng.choice
    dt = c(["NO", "MULTI_GPU", "MULTI_CPU", "DEEPSPEED", "FSDP", "FSDP", "DEEPSPEED", "MEGATRON_LM", "XLA",
            "multi_gpu", False])
    d = {"compute_environment": c(["LOCAL_MACHINE"] * 20 + ["local"]), "distributed_type": dt}
    if rng.random() < 0.9:
        d["num_processes"] = c([1, 2, 4, 8, 9, "2", 0, -1, 16])
    for key, p, vals in (("num_machines", 0.3, [1, 2, "2"]), ("machine_rank", 0.3, [0, 1, "0"]),
                         ("main_process_ip", 0.3, ["10.0.0.1", None]),
                         ("main_process_port", 0.3, [29500, 0, "xx", 70000, None]),
                         ("mixed_precision", 0.5, ["no", "fp16", "bf16", "fp8", "FP16", "fp32", False, None]),
                         ("gpu_ids", 0.3, ["all", "0", "0,1", 0, "0,1,2,3"]), ("use_cpu", 0.2, [True, False]),
                         ("debug", 0.2, [True, False, "false"])):
        if rng.random() < p:
            d[key] = c(vals)
    if rng.random() < 0.2:
        d[c(["rdzv_backend", "same_network", "enable_cpu_affinity"])] = c(["c10d", True, "static", False])
    if dt == "DEEPSPEED" or rng.random() < 0.1:
        opts = {"zero_stage": [0, 1, 2, 3, 4, "3"], "offload_optimizer_device": ["none", "cpu", "nvme", "gpu", "CPU"],
                "offload_param_device": ["none", "cpu", "nvme", "gpu"],
                "gradient_accumulation_steps": [1, 4, "auto", 2.0], "gradient_clipping": [1.0, "auto", "none", None],
                "zero3_init_flag": [True, False, "yes", "maybe"], "zero3_save_16bit_model": [True, False, "yes", 1],
                "deepspeed_config_file": ["ds_config.json", "missing.json"],
                "deepspeed_multinode_launcher": ["pdsh", "standard", "mpi", "nossh"]}
        d["deepspeed_config"] = {k: c(opts.get(k, ["x", None, 1])) for k in rng.sample(S.DEEPSPEED_KEYS, rng.randint(0, 5))}
    if dt == "FSDP" or rng.random() < 0.1:
        opts = {"fsdp_version": [1, 2, 2, "2", 3], "fsdp_sharding_strategy": ["FULL_SHARD", "SHARD_GRAD_OP", 1, "FULL"],
                "fsdp_reshard_after_forward": [True, False, "FULL_SHARD", "SHARD_GRAD_OP"],
                "fsdp_offload_params": [True, False, "maybe", None], "fsdp_min_num_params": [100000000, "1e8", 1.0e8],
                "fsdp_auto_wrap_policy": ["TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP",
                                          "transformer_based_wrap", "X"],
                "fsdp_transformer_layer_cls_to_wrap": ["LlamaDecoderLayer", ["A", "B"], None],
                "fsdp_backward_prefetch": ["BACKWARD_PRE", "NO_PREFETCH", "PRE", None],
                "fsdp_state_dict_type": ["FULL_STATE_DICT", "SHARDED_STATE_DICT", "LOCAL_STATE_DICT", "FULL"],
                "fsdp_cpu_ram_efficient_loading": [True, False, "false"],
                "fsdp_sync_module_states": [True, False, "false"], "fsdp_ignored_modules": [None, "lm_head"]}
        d["fsdp_config"] = {k: c(opts.get(k, [True, False])) for k in rng.sample(S.FSDP_KEYS, rng.randint(0, 7))}
    if rng.random() < 0.25:
        b = {}
        for k in rng.sample(S.PARALLELISM_KEYS, rng.randint(0, 4)):
            if k.endswith("_size"):
                b[k] = c([1, 2, 4, 0, "2"])
            elif k.endswith("cp_backend"):
                b[k] = c(["torch", "ring"])
            elif k.endswith("sp_backend"):
                b[k] = c(["deepspeed", "x"])
            elif k.endswith("comm_strategy"):
                b[k] = c(["allgather", "alltoall", "ring"])
            elif k.endswith("attn_implementation"):
                b[k] = c(["sdpa", "eager", "flash_attention_2", "org/flash-attn"])
            elif k.endswith("is_variable"):
                b[k] = c([True, False])
            else:
                b[k] = c([None, 1024, "x"])
        d["parallelism_config"] = b
    if d.get("mixed_precision") == "fp8" or rng.random() < 0.1:
        opts = {"backend": ["TE", "MSAMP", "AO", "te", "MS-AMP"], "fp8_format": ["HYBRID", "E4M3", "e5m2", "X"],
                "amax_history_len": [16, "x"], "amax_compute_algo": ["max", "MAX", "avg"],
                "override_linear_precision": [[False, False, False], "(false, false, false)"],
                "opt_level": ["O1", "O2", "O3"], "pad_inner_dim": [True, "x"], "margin": [0, "x"],
                "amax_history_length": [16]}
        d["fp8_config"] = {k: c(v) for k, v in rng.sample(sorted(opts.items()), rng.randint(0, 4))}
    if rng.random() < 0.15:
        d["dynamo_config"] = {k: c(v) for k, v in (("dynamo_backend", ["INDUCTOR", "inductor", "NO", "x", False]),
                                                    ("dynamo_mode", ["default", "fast", "max-autotune"]),
                                                    ("dynamo_use_fullgraph", [True, "maybe"])) if rng.random() < 0.7}
    if dt == "MEGATRON_LM" and rng.random() < 0.7:
        d["megatron_lm_config"] = {"megatron_lm_tp_degree": c([1, 2, "two"]), "megatron_lm_pp_degree": c([1, 2])}
    return d


N_GENERATED_RAW = 200
_RAW = ["no", "NO", "yes", "on", "off", "1e8", "010", "0,1", "0", "1", "2", "true", "False", "null", "~", "'no'",
        '"NO"', "1.0e+8", "1:30", "all", "fp16", "bf16", "FP8", "inductor", "INDUCTOR", "te", "TE", "AO",
        "FULL_SHARD", "[0, 1]", "{}", "[]", "''"]
_RAW_TOP = ["mixed_precision", "num_processes", "num_machines", "machine_rank", "gpu_ids", "main_process_port",
            "main_process_ip", "use_cpu", "debug", "same_network", "dynamo_backend"]
_RAW_NEST = {
    "fsdp_config": ["fsdp_version", "fsdp_sharding_strategy", "fsdp_offload_params", "fsdp_min_num_params",
                    "fsdp_auto_wrap_policy", "fsdp_state_dict_type", "fsdp_cpu_ram_efficient_loading",
                    "fsdp_sync_module_states", "fsdp_reshard_after_forward", "fsdp_activation_checkpointing"],
    "deepspeed_config": ["zero_stage", "offload_optimizer_device", "offload_param_device",
                         "gradient_accumulation_steps", "gradient_clipping", "zero3_init_flag"],
    "dynamo_config": ["dynamo_backend", "dynamo_mode", "dynamo_use_fullgraph"],
    "fp8_config": ["backend", "fp8_format", "amax_history_len", "override_linear_precision", "opt_level"],
    "parallelism_config": ["parallelism_config_dp_shard_size", "parallelism_config_tp_size",
                           "parallelism_config_cp_size"]}


def _gen_raw(rng):
    """YAML text written by hand: unquoted YAML 1.1 words, numbers and odd types in every slot."""
    lines = [f"distributed_type: {rng.choice(['NO', chr(39) + 'NO' + chr(39), 'MULTI_GPU', 'FSDP', 'DEEPSPEED', 'MULTI_CPU', 'no'])}"]
    if rng.random() < 0.85:
        lines.append(f"num_processes: {rng.choice(['1', '2', '4', '8', '2.0'])}")
    for k in rng.sample(_RAW_TOP, rng.randint(0, 4)):
        lines.append(f"{k}: {rng.choice(_RAW)}")
    for b in rng.sample(sorted(_RAW_NEST), rng.randint(0, 2)):
        lines.append(f"{b}:")
        for k in rng.sample(_RAW_NEST[b], rng.randint(1, 3)):
            lines.append(f"  {k}: {rng.choice(_RAW)}")
    return "\n".join(lines) + "\n"


def generated_configs():
    import random

    import yaml
    _import_validator()
    rng = random.Random(GEN_SEED)
    out = [(yaml.safe_dump(_gen_config(rng), sort_keys=False), "config.yaml") for _ in range(N_GENERATED)]
    out += [(_gen_raw(rng), "config.yaml") for _ in range(N_GENERATED_RAW)]
    return out + EDGE_CASES


# Syntax edge cases where PyYAML / json.load details decide accelerate's verdict.
EDGE_CASES = [
    ("\ufeffdistributed_type: MULTI_GPU\nnum_processes: 2\n", "config.yaml"),
    ('\ufeff{"distributed_type": "MULTI_GPU", "num_processes": 2}', "config.json"),
    ("distributed_type: MULTI_GPU\r\nnum_processes: 2\r\n", "config.yaml"),
    ("---\ndistributed_type: MULTI_GPU\nnum_processes: 2\n...\n", "config.yaml"),
    ("base: &b\n  fsdp_version: 2\ndistributed_type: FSDP\nnum_processes: 2\nfsdp_config:\n  <<: *b\n", "config.yaml"),
    ("distributed_type: FSDP\nnum_processes: 2\nfsdp_config: &b\n  fsdp_version: 2\n", "config.yaml"),
    ('{"distributed_type": "MULTI_GPU", "num_processes": 2}', "config.yaml"),
    ('{"distributed_type": "MULTI_GPU", "num_processes": 2, "main_process_port": NaN}', "config.json"),
    ('{"distributed_type": "NO", "num_processes": 1, // comment\n}', "config.json"),
    ("distributed_type: 'NO'\nnum_processes: 1\ntpu_name: 2024-01-01\n", "config.yaml"),
    ("distributed_type: 'NO'\nnum_processes:\t1\n", "config.yaml"),
    ("distributed_type: 'NO'\nnum_processes: 1\nfsdp_config: {}\ndeepspeed_config:\n", "config.yaml"),
    ("distributed_type:\nnum_processes: 1\n", "config.yaml"),
    ("distributed_type: 'NO'\nnum_processes: 1\ntpu_name: !!binary aGVsbG8=\n", "config.yaml"),
    ("distributed_type: 'NO'\nnum_processes: 1\ncommands: !!set {a, b}\n", "config.yaml"),
    ("distributed_type: !!str NO\nnum_processes: 1\n", "config.yaml"),
    ("distributed_type: 'NO'\nnum_processes: 1\n1: x\n", "config.yaml"),
    ("distributed_type: 'NO'\nnum_processes: !!python/tuple [1]\n", "config.yaml"),
    ("distributed_type: 'NO'\nnum_processes: 1\n---\ndebug: true\n", "config.yaml"),
    ("- distributed_type: 'NO'\n", "config.yaml"),
    ("", "config.yaml"),
]


@pytest.fixture(scope="session")
def generated():
    return generated_configs()
