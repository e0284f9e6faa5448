"""Cross-check: the validator's own schema tables (backend_validator/deepspeed_tables.json and
accelerate_tables.json, both written by hand from deepspeed 0.19.8 / accelerate 1.15.0) against the
name tables generated from the same packages (references/facts/names.json), at every level, both
ways. A name in one and not the other is either a validator bug (it warns about a key the package
reads, or stays silent about one the package ignores) or a gap of the source scan. The sets of known
gaps below say which, with the reason; they may only shrink. Pure file reads: no package import."""
from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VAL = REPO / "sub-skills/distributed-training-backends/scripts/backend_validator"
DS = json.loads((VAL / "deepspeed_tables.json").read_text(encoding="utf-8"))
_ACC = json.loads((VAL / "accelerate_tables.json").read_text(encoding="utf-8"))
ACC = _ACC["tuples"]
NAMES = json.loads((REPO / "references/facts/names.json").read_text(encoding="utf-8"))["entries"]


def _names(section):
    return {n for e in NAMES if e["s"] == section for n in [e["n"], *e.get("a", [])]}


DSN = _names("deepspeed-config")
ACN = _names("accelerate-config")


def _children(names, path):
    pre = path + "."
    return {n[len(pre):].split(".")[0] for n in names if n.startswith(pre)}


# validator names deepspeed 0.19.8 does not read from the JSON: "msamp" is written into the dict by
# accelerate's DeepSpeedPlugin (enable_msamp) for MS-AMP's own deepspeed patch.
DS_TOP_ONLY_IN_VALIDATOR = {"msamp"}
# names.json top-level names the validator does not list as read (both sides agree they are not
# live keys): none expected.
DS_TOP_ONLY_IN_NAMES = {
    # read only by read_zero_config_deprecated (runtime/zero/config.py), i.e. when the file says
    # "zero_optimization": true (the pre-0.3 boolean form); the validator warns on it as unknown, which
    # holds for every config with a zero_optimization table
    "allgather_size",
}
# names the scan found only as constants, with no table: none left (the set may only shrink)
DS_UNRESOLVED: set = set()


def test_deepspeed_top_level_both_ways():
    t = DS["tables"]
    validator = set(t["TOP_LEVEL_KEYS"])
    unresolved = {e["n"] for e in NAMES if e["s"] == "deepspeed-config" and "not resolved" in e["k"]}
    assert unresolved <= DS_UNRESOLVED, sorted(unresolved - DS_UNRESOLVED)
    top = {n.split(".")[0] for n in DSN - unresolved}
    assert validator - top == DS_TOP_ONLY_IN_VALIDATOR, sorted(validator - top)
    known = validator | set(t["TOP_LEVEL_TOLERATED"]) | set(t["REMOVED_TOP_LEVEL"])
    assert top - known == DS_TOP_ONLY_IN_NAMES, sorted(top - known)


def test_zenflow_is_read_only_under_zero_optimization():
    # deepspeed 0.19.8 reads zenflow only as DeepSpeedZeroConfig.zenflow; a top-level block is ignored
    assert "zero_optimization.zenflow" in DSN and "zenflow" not in DSN
    assert "zenflow" not in DS["tables"]["TOP_LEVEL_KEYS"]


# lenient (.get) blocks: keys only one side lists, with the reason: none
DS_LENIENT_GAPS: dict = {}


def test_deepspeed_lenient_blocks_both_ways():
    bad = {}
    for blk, keys in DS["tables"]["LENIENT_BLOCKS"].items():
        got = _children(DSN, blk)
        a, b = set(keys) - got, got - set(keys)
        known = DS_LENIENT_GAPS.get(blk, (set(), set()))
        if (a, b) != tuple(map(set, known)):
            bad[blk] = {"only_validator": sorted(a), "only_names": sorted(b)}
    assert not bad, bad


def test_deepspeed_strict_blocks_both_ways():
    fields, bad = DS["fields"], {}
    for name, (spec, path) in DS["strict_blocks"].items():
        if spec not in fields:
            continue
        dotted = ".".join(path)
        got = _children(DSN, dotted)
        keys = set(fields[spec]) | {v["alias"] for v in fields[spec].values() if v.get("alias")}
        if got != keys:
            bad[dotted] = {"only_validator": sorted(keys - got), "only_names": sorted(got - keys)}
    assert bad == DS_STRICT_GAPS, bad


DS_STRICT_GAPS: dict = {}


# accelerate config file: (validator tuple, table in the file or "" for the top level)
ACC_TABLES = [("DEEPSPEED_KEYS", "deepspeed_config"), ("FSDP_KEYS", "fsdp_config"),
              ("PARALLELISM_KEYS", "parallelism_config"), ("FP8_KEYS", "fp8_config"),
              ("DYNAMO_KEYS", "dynamo_config"), ("MEGATRON_KEYS", "megatron_lm_config"),
              ("MPIRUN_KEYS", "mpirun_config")]
ACC_GAPS: dict = {}  # none left (the dict may only shrink)
PREFIX = {"fsdp_config": "fsdp", "fp8_config": "fp8", "dynamo_config": "dynamo_"}


def _launch_name(table, key):
    """The args attribute a nested key is copied to (commands/launch.py::_validate_launch_command adds
    the table's prefix when the key lacks it), so `fsdp_config.version` is `fsdp_version`."""
    p = PREFIX.get(table)
    if p and not key.startswith(p):
        return ("fsdp_" if table == "fsdp_config" else "fp8_" if table == "fp8_config" else p) + key
    return key


def test_accelerate_config_tables_both_ways():
    bad = {}
    for tup, table in ACC_TABLES:
        got = {_launch_name(table, k) for k in _children(ACN, table)}
        keys = set(ACC[tup])
        if table == "fp8_config":  # names the questionnaire writes, which the validator knows as misnamed
            keys |= set(_ACC["dicts"]["FP8_QUESTIONNAIRE_NAMES"])
        if got != keys:
            bad[table] = {"only_validator": sorted(keys - got), "only_names": sorted(got - keys)}
    top = {n for n in ACN if "." not in n}
    keys = set(ACC["CLUSTER_FIELDS"]) | set(ACC["LEGACY_TOP_LEVEL"])
    if top != keys:
        bad[""] = {"only_validator": sorted(keys - top), "only_names": sorted(top - keys)}
    assert bad == ACC_GAPS, bad


def _same_default(spec_default, names_default):
    if repr(spec_default) == names_default:
        return True
    try:  # 0 and 0.0 (pydantic keeps a default as written: fp16.loss_scale = 0 in a float field)
        return float(spec_default) == float(names_default)
    except (TypeError, ValueError):
        return False


def test_strict_block_defaults_agree():
    """Every default the validator states for a pydantic (strict) block field is the one the model
    declares (names.json reads it from the model class)."""
    by_name = {n: e for e in NAMES if e["s"] == "deepspeed-config" for n in [e["n"], *e.get("a", [])]}
    bad, checked = [], 0
    for spec, path in DS["strict_blocks"].values():
        for field, v in DS["fields"].get(spec, {}).items():
            if "default" in v:
                e = by_name[".".join(path + [field])]
                checked += 1
                if not _same_default(v["default"], e.get("d")):
                    bad.append((".".join(path + [field]), v["default"], e.get("d")))
    assert checked > 100 and not bad, bad


def test_accelerate_fsdp_launch_defaults_agree():
    by_name = {e["n"]: e for e in NAMES if e["s"] == "accelerate-config"}
    d = _ACC["dicts"]["FSDP_LAUNCH_DEFAULTS"]
    bad = {k: (v, by_name[f"fsdp_config.{k}"].get("d")) for k, v in d.items()
           if repr(v) != by_name[f"fsdp_config.{k}"].get("d")}
    assert len(d) >= 10 and not bad, bad


def test_validator_points_a_top_level_zenflow_to_zero_optimization(tmp_path):
    import subprocess
    import sys
    cfg = tmp_path / "ds.json"
    cfg.write_text(json.dumps({"train_batch_size": 8, "zenflow": {"topk_ratio": 0.1}}))
    p = subprocess.run([sys.executable, str(VAL.parent / "validate_backend_config.py"), "--format", "deepspeed",
                        str(cfg)], capture_output=True, text=True, timeout=60)
    assert "'zenflow' is silently ignored" in p.stdout and "zero_optimization.zenflow" in p.stdout, p.stdout
