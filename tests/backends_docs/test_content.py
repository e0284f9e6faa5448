"""Structured facts of the backend references checked against the installed packages:
class field lists, the config-key/env-var/plugin-field table, launch defaults, FSDP1->FSDP2
migration, DeepSpeed file exclusivity, minimum versions, ZeRO memory formulas, snippets."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

D = sys.modules["backends_docs__docs"]
API = D.REFS / "api-reference.md"
DSF = D.REFS / "deepspeed-fsdp.md"
PAP = D.REFS / "parallelism-and-precision.md"


def text(p):
    return p.read_text(encoding="utf-8")


# ------------------------------------------------------------------ snippets
def test_every_python_snippet_compiles(docs):
    n = 0
    for path, t in docs.items():
        for info, body in D.fenced_blocks(t):
            if info == "python":
                compile(body, str(path), "exec")
                n += 1
    assert n >= 6


def test_runnable_snippets_run_on_cpu(oracle):
    assert len(oracle["snippets"]) >= 5
    failed = {s["name"]: s["error"] for s in oracle["snippets"] if not s["ok"]}
    assert not failed, failed


def test_no_run_marker_is_rare(docs):
    # only snippets that need launched processes or GPU-only packages may skip execution
    marked = [b for t in docs.values() for i, b in D.fenced_blocks(t) if i == "python" and b.startswith("# cpu: no-run")]
    assert len(marked) <= 1


# ------------------------------------------------------------------ class field tables
def test_class_field_lists_are_exact(oracle):
    rows = D.table_rows(text(API), "Class")
    assert len(rows) >= 15
    for cells in rows:
        cls = D.spans_in(cells[0])[0]
        listed = D.spans_in(cells[2])
        assert listed == oracle["class_fields"][cls], f"{cls}: documented {listed}"


def test_class_import_locations_resolve(oracle, docs_mod):
    # "Import from" column: `module` + class must import; ask through the resolver's answers
    rows = D.table_rows(text(API), "Class")
    for cells in rows:
        cls, module = D.spans_in(cells[0])[0], D.spans_in(cells[1])[0]
        assert f"{module}.{cls}" in IMPORT_OK(oracle), f"{module}.{cls} not importable"


def IMPORT_OK(oracle):
    return {k for k, v in oracle["imports"].items() if v}


def test_megatron_field_count(oracle):
    assert "63 fields" in text(API)
    assert len(oracle["class_fields"]["MegatronLMPlugin"]) == 63


# ------------------------------------------------------------------ config key -> env var -> plugin field
def _mapping_rows():
    rows = D.table_rows(text(API), "Config key")
    out = []
    for c in rows:
        key, env, field = D.spans_in(c[0])[0], D.spans_in(c[1])[0], D.spans_in(c[2])[0]
        out.append((key, env, field, "not exported" in c[1]))
    return out


def _launch_sources():
    _, _, texts = D.source_index()
    return texts["accelerate/utils/launch.py"] + texts["accelerate/commands/launch.py"]


def _exported_by_launcher(key, env):
    src = _launch_sources()
    if f'"{env}"' in src:
        return True
    for pfx in set(re.findall(r'prefix = "([A-Z_]+)"', src)) | {"FSDP_", "PARALLELISM_CONFIG_"}:
        if env.startswith(pfx) and f'"{env[len(pfx):]}"' in src:
            return True
    # setup_fp8_env exports every fp8_* argument as ACCELERATE_<ARG>
    fp8_arg = key if key.startswith("fp8_") else "fp8_" + key
    return env == "ACCELERATE_" + fp8_arg.upper() and "def setup_fp8_env" in src


def test_mapping_table_keys_envs_fields(oracle):
    rows = _mapping_rows()
    assert len(rows) >= 45
    f = oracle["facts"]
    dests = set(f["launch_dests"]) | set(f["cluster_fields"]) | set(D.source_extras()[2])
    fields = oracle["fields"]
    bad = []
    for key, env, field, not_exported in rows:
        k = key if key in dests or key.startswith(("fsdp_", "dynamo_", "parallelism_config_")) else "fp8_" + key
        if k not in dests:
            bad.append(f"config key {key}")
        if _exported_by_launcher(key, env) == not_exported:
            bad.append(f"{env}: exported={not not_exported} is wrong")
        cls, attr = field.split(".")
        if not fields.get(field, False):
            bad.append(f"plugin field {field}")
        # the consumer class reads that variable (literally, or as prefix + suffix)
        _, _, texts = D.source_index()
        consumer = "".join(texts[p] for p in ("accelerate/utils/dataclasses.py", "accelerate/parallelism_config.py",
                                               "accelerate/state.py", "accelerate/accelerator.py"))
        suffixes = [env[len(p):] for p in ("ACCELERATE_DEEPSPEED_", "ACCELERATE_FP8_", "ACCELERATE_DYNAMO_", "FSDP_",
                                           "ACCELERATE_", "PARALLELISM_CONFIG_") if env.startswith(p)]
        if f'"{env}"' not in consumer and not any(f'"{s}"' in consumer for s in suffixes):
            bad.append(f"{env} not read by accelerate")
    assert not bad, bad


def test_mapping_rows_match_simulated_launch_env(oracle):
    """Behavioural: for each example that launched, every documented key present in its blocks
    produced the documented variable."""
    rows = {key: env for key, env, _, ne in _mapping_rows() if not ne}
    checked = 0
    for res in oracle["examples"]:
        if res.get("launch") != "ok":
            continue
        cfg = yaml.safe_load((D.REPO / res["path"]).read_text())
        present = set(cfg)
        for block in ("fsdp_config", "deepspeed_config", "parallelism_config", "dynamo_config", "fp8_config"):
            present |= set(cfg.get(block) or {})
        for key in present & set(rows):
            assert rows[key] in res["env"], f"{res['path']}: {key} did not export {rows[key]}"
            checked += 1
    assert checked >= 25


# ------------------------------------------------------------------ FSDP launch defaults
def test_fsdp_table_launch_defaults(oracle):
    rows = D.table_rows(text(DSF), "Key")
    assert len(rows) >= 15
    keys = [D.spans_in(c[0])[0] for c in rows]
    defaults = oracle["facts"]["launch_defaults"]
    getattr_only = D.source_extras()[2]
    for key, cells in zip(keys, rows):
        cell = cells[1]
        if key in getattr_only and key not in defaults:
            assert cell.startswith("unset"), key
            continue
        d = defaults[key]
        if d is None:
            assert cell.startswith("unset"), f"{key}: parser default None, doc says {cell}"
        else:
            shown = D.spans_in(cell)[0] if D.spans_in(cell) else cell.split()[0]
            assert str(d).lower() == shown.lower(), f"{key}: parser default {d!r}, doc says {cell}"


# ------------------------------------------------------------------ FSDP1 -> FSDP2 migration
def test_migration_table_matches_to_fsdp2(oracle):
    m = oracle["to_fsdp2"]["key_mapping"]
    rows = D.table_rows(text(DSF), "FSDP1 key")
    documented = {D.spans_in(c[0])[0]: c[1] for c in rows if D.spans_in(c[0])}
    for key, result in documented.items():
        target = m[key]
        if target == "REMOVED":
            assert result.startswith("removed"), key
        elif target == "NOT_YET_IMPLEMENTED":
            assert result.startswith("dropped"), key
        else:
            assert f"`{target}`" in result, key
    # every FSDP1 key that to-fsdp2 removes, drops or renames is in the table
    changed = {k for k, v in m.items() if v != k}
    assert changed <= set(documented), changed - set(documented)
    vm = oracle["to_fsdp2"]["value_mapping"]["fsdp_sharding_strategy"]
    row = documented["fsdp_sharding_strategy"]
    for strat, val in vm.items():
        part = row.split("→ true")[0] if val else row.split("→ true")[1]
        assert f"`{strat}`" in part, (strat, val)


def test_fsdp1_example_converts_to_documented_fsdp2(oracle):
    conv = oracle["to_fsdp2"]["converted"]["sub-skills/distributed-training-backends/examples/fsdp1.yaml"]
    fc = conv["fsdp_config"]
    assert fc["fsdp_version"] == 2 and fc["fsdp_reshard_after_forward"] is True
    for gone in ("fsdp_backward_prefetch", "fsdp_sync_module_states", "fsdp_use_orig_params",
                 "fsdp_forward_prefetch", "fsdp_sharding_strategy"):
        assert gone not in fc


# ------------------------------------------------------------------ DeepSpeed file exclusivity
def test_deepspeed_file_exclusive_keys_match_accelerate():
    _, _, texts = D.source_index()
    src = texts["accelerate/utils/dataclasses.py"]
    body = src[src.index("def _deepspeed_config_checks"):]
    envs = re.findall(r'"(ACCELERATE_[A-Z0-9_]+)"', body[:body.index("env_variable_names_to_ignore = [\n            name")])
    names = {e.replace("ACCELERATE_", "").replace("DEEPSPEED_", "").lower() for e in envs}
    names = {n.replace("zero_stage", "zero_stage") for n in names}
    t = text(DSF)
    para = t[t.index("With `deepspeed_config_file`, these must not"):]
    para = para[:para.index("Pass precision")]
    documented = set(D.CODE_SPAN.findall(para)) - {"deepspeed_config_file", "'no'",
                                                    "accelerate/utils/dataclasses.py::DeepSpeedPlugin._deepspeed_config_checks"}
    assert documented == names, (documented ^ names)


# ------------------------------------------------------------------ minimum versions
def test_version_constants(oracle, docs):
    consts = oracle["facts"]["constants"]
    seen = 0
    for path, t in docs.items():
        for name, ver in re.findall(r"`([A-Z][A-Z0-9_]*_VERSION)` \((\d+\.\d+\.\d+)\)", t):
            assert consts[name] == ver, (path.name, name)
            seen += 1
        for cells in D.table_rows(t, "Constant"):
            name = D.spans_in(cells[0])[0]
            assert consts[name] == cells[1], name
            seen += 1
    assert seen >= 10


def test_references_state_verified_versions(docs, oracle):
    v = oracle["versions"]
    want = f"accelerate {v['accelerate']}, deepspeed {v['deepspeed']}, torch {v['torch'].split('+')[0]}"
    for path, t in docs.items():
        if path.name == "SKILL.md":
            continue
        assert "Verified against " + want in " ".join(t.split()), path


# ------------------------------------------------------------------ ZeRO memory formulas
# memory-planning.md owns the per-parameter arithmetic (measured by tests/planner); DeepSpeed's own
# estimator formulas sit there in one `memory` block, compared here with the installed estimators.
MEM = D.REFS / "memory-planning.md"


def _formulas():
    blocks = [b for i, b in D.fenced_blocks(text(MEM)) if i == "memory"]
    assert len(blocks) == 1
    rows = {}
    for line in blocks[0].splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        stage, offload, gpu, cpu = re.split(r"\s{2,}", line.strip())
        rows[f"{stage} {offload}"] = (gpu, cpu)
    return rows


def _eval(expr, P, K, G, M):
    tree = ast.parse(expr, mode="eval")
    allowed = (ast.Expression, ast.BinOp, ast.Name, ast.Constant, ast.Call, ast.Load, ast.Mult, ast.Add,
               ast.Div, ast.Sub)
    assert all(isinstance(n, allowed) for n in ast.walk(tree)), expr
    return eval(compile(tree, expr, "eval"), {"__builtins__": {}, "max": max},
                {"P": P, "K": K, "G": G, "M": M, "N": G * M})


def test_memory_formulas_match_deepspeed_estimators(oracle):
    rows = _formulas()
    assert sorted(rows) == ["zero2 none", "zero2 optimizer", "zero3 none", "zero3 optimizer",
                            "zero3 optimizer+param"]
    assert len(oracle["estimates"]) >= 4
    for est in oracle["estimates"]:
        # the oracle's "L" is DeepSpeed's largest_layer_params, K in the reference (L there is layers)
        P, K, G, M = est["P"], est["L"], est["G"], est["M"]
        for name in rows:
            gpu_doc, cpu_doc = (_eval(e, P, K, G, M) for e in rows[name])
            gpu_ds, cpu_ds = est[name]
            assert abs(gpu_doc - gpu_ds) <= 1, (name, est, gpu_doc, gpu_ds)
            assert abs(cpu_doc - cpu_ds) <= 1, (name, est, cpu_doc, cpu_ds)


def test_deepspeed_fsdp_links_to_the_memory_arithmetic_instead_of_restating_it():
    t = text(DSF)
    sec = t.split("## ZeRO stages and memory per parameter\n", 1)[1].split("\n## ", 1)[0]
    assert "](memory-planning.md#model-states-per-gpu)" in sec
    assert "## Model states per GPU\n" in text(MEM)
    # no bytes-per-parameter arithmetic of its own (it said 16 for ZeRO-0/1; the measured figure is 20)
    assert not re.search(r"\b1[68]\s*(bytes|·P|\*P)|```memory", sec), sec
    assert "```memory" not in t
    # ZeRO-1 as measured: a gradient partition like ZeRO-2 at gradient_accumulation_steps 1
    # (tests/planner/test_model_states.py), the full gradients between micro-batches above 1
    # (tests/audit/test_run_claims.py::test_zero1_holds_full_gradients_between_micro_batches)
    row1 = next(r for r in D.table_rows(t, "`zero_stage`") if r[0].strip() == "1")
    assert "gradient partition" in row1[1] and "`gradient_accumulation_steps` > 1" in row1[1], row1
    assert "gradients" not in row1[2].replace("the full gradients while accumulating", ""), row1


def test_estimator_for_a_real_model_exists_in_deepspeed():
    import importlib.util
    spec = importlib.util.find_spec("deepspeed")
    assert spec and spec.origin
    stage3 = Path(spec.origin).parent / "runtime" / "zero" / "stage3.py"
    assert "def estimate_zero3_model_states_mem_needs_all_live(" in stage3.read_text(encoding="utf-8")
    assert "`estimate_zero3_model_states_mem_needs_all_live(model, num_gpus_per_node=8," in text(MEM)


