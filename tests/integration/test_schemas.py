"""Editor JSON Schemas (schemas/*.schema.json): generated from the validator's tables, never stale,
and in agreement with the validator.

* the committed files equal the generator's output (a drift fails here);
* every valid example (examples/, rule docstring "Passes" examples without errors) validates;
* the documents the validator gives a key-level error (a type, enum, unknown or removed key:
  SCHEMA_CLASS below) are schema errors, and a schema error never hits a document the validator
  accepts. Measured on the rule examples plus single-key mutations of every valid example
  (printed with -s); the corpus layer measures the real-world configs the same way.
"""
from __future__ import annotations

import copy
import json
import os
import sys

import pytest
import yaml

from integ_common import EXAMPLES, SCHEMAS, SKILL

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is pinned in requirements-test.txt")

SCRIPTS = SKILL / "scripts"
if str(SCRIPTS) not in sys.path:
    sys.path.insert(0, str(SCRIPTS))
from backend_validator import cli, core, docs, schemas  # noqa: E402
from backend_validator.core import InputError, Options  # noqa: E402

cli._rules_loaded()

# Validator rules that judge one key on its own: its type, enum, name or presence. A schema can say
# the same; cross-key rules (FSDP2 + LOCAL_STATE_DICT, batch arithmetic ...) it cannot.
SCHEMA_CLASS = {
    "acc-unknown-top-level-key", "acc-int-value", "acc-gpu-ids-not-string", "acc-invalid-mixed-precision",
    "acc-invalid-compute-environment", "acc-invalid-distributed-type", "acc-invalid-dynamo-backend",
    "acc-port-out-of-range", "acc-use-cpu-invalid", "acc-fsdp-sharding-strategy-invalid", "acc-fsdp-version-invalid",
    "acc-fsdp-bool-value", "acc-fsdp-min-num-params-invalid", "acc-fsdp-state-dict-type-invalid",
    "acc-fsdp-auto-wrap-policy-invalid", "acc-fsdp-backward-prefetch-invalid", "acc-fsdp-reshard-after-forward-invalid",
    "acc-ds-zero-stage-invalid", "acc-ds-offload-device-invalid", "acc-ds-bool-value",
    "acc-ds-multinode-launcher-invalid", "acc-fp8-backend-invalid", "acc-dynamo-bool-value",
    "acc-parallelism-size-invalid", "acc-megatron-value-invalid", "acc-ds-gradient-accumulation-invalid",
    "acc-ds-gradient-clipping-invalid", "acc-parallelism-backend-invalid",
    "ds-removed-key", "ds-unknown-key-strict", "ds-invalid-value", "ds-unknown-optimizer", "ds-unknown-scheduler",
}
VALIDATORS = {}


def schema_for(kind: str):
    if kind not in VALIDATORS:
        s = json.loads((SCHEMAS / schemas.FILES[kind]).read_text(encoding="utf-8"))
        VALIDATORS[kind] = jsonschema.Draft7Validator(s)
    return VALIDATORS[kind]


def check(text: str, name: str):
    """(format, data, validator error rules, schema errors, validator warning rules) for one document,
    or None if unreadable."""
    opts = Options(cwd=str(EXAMPLES))
    try:
        doc = cli.parse_input(text, name, None, "auto")
        res = cli.validate_doc(doc, "auto", opts)
    except InputError:
        return None
    errors = {f.rule for f in res.findings if f.severity == "error"}
    warnings = {f.rule for f in res.findings if f.severity == "warning"}
    schema_errors = list(schema_for(res.format).iter_errors(doc.data))
    return res.format, doc.data, errors, schema_errors, warnings


def rule_examples():
    out = []
    for r in sorted(core.REGISTRY.values(), key=lambda r: r.id):
        _desc, ex = docs.parse_doc(r.doc)
        for label in ("Fails", "Passes"):
            if label in ex:
                lang, text = ex[label]
                out.append((f"{r.id}:{label}", "x.json" if lang == "json" else "x.yaml", text))
    return out


def example_files():
    return [(p.name, p.name, p.read_text(encoding="utf-8")) for p in sorted(EXAMPLES.iterdir()) if p.is_file()]


def dump(data, name: str) -> str:
    return json.dumps(data) if name.endswith(".json") else yaml.safe_dump(data, sort_keys=False)


MUTANTS = ("zz-not-a-value", 12345.5, ["x"], {"zz": 1}, -7)


def mutations(data, name):
    """Single-key changes: each scalar leaf (depth <= 3) replaced by each MUTANT, and an unknown key
    added to each mapping."""
    def walk(node, path):
        if isinstance(node, dict) and len(path) <= 2:
            yield path + ("zz_unknown_key",), "add"
            for k, v in node.items():
                if isinstance(v, dict):
                    yield from walk(v, path + (k,))
                elif not isinstance(v, list):
                    yield path + (k,), "leaf"
    for path, kind in walk(data, ()):
        for value in ((1,) if kind == "add" else MUTANTS):
            d = copy.deepcopy(data)
            cur = d
            for k in path[:-1]:
                cur = cur[k]
            cur[path[-1]] = value
            yield f"{'.'.join(map(str, path))}={value!r}", dump(d, name)


class Tally:
    """Confusion counts between the validator and a schema."""

    def __init__(self):
        self.n = self.key_errors = self.caught = 0
        self.warned = self.warned_schema = self.silent = self.silent_schema = 0
        self.misses, self.stricter = [], []

    def add(self, label, r):
        _fmt, _data, errors, schema_errors, warnings = r
        self.n += 1
        if errors & SCHEMA_CLASS:
            self.key_errors += 1
            if schema_errors:
                self.caught += 1
            else:
                self.misses.append((label, sorted(errors & SCHEMA_CLASS)))
        if errors:
            return
        # the validator accepts: with warnings (a value silently lost), or silently
        if warnings:
            self.warned += 1
            self.warned_schema += bool(schema_errors)
        else:
            self.silent += 1
            self.silent_schema += bool(schema_errors)
            if schema_errors:
                self.stricter.append((label, schema_errors[0].message[:100]))

    def recall(self):
        return self.caught / self.key_errors if self.key_errors else 1.0

    def report(self, title):
        print(f"\n{title}: {self.n} documents")
        print(f"  validator key-level errors: {self.key_errors}; also schema errors: {self.caught} "
              f"({self.recall():.1%})")
        print(f"  validator accepts with warnings: {self.warned}; schema rejects {self.warned_schema}")
        print(f"  validator accepts silently: {self.silent}; schema rejects {self.silent_schema}")
        for label, rules in self.misses[:6]:
            print(f"  missed by the schema: {label} {rules}")
        for label, msg in self.stricter[:6]:
            print(f"  schema stricter than the validator: {label}: {msg}")


def test_committed_schemas_are_generated():
    for name, text in schemas.render().items():
        path = SCHEMAS / name
        assert path.is_file(), f"{path} missing; run: {schemas.REGEN}"
        assert path.read_text(encoding="utf-8") == text, f"{name} drifted from the tables; run: {schemas.REGEN}"


def test_schemas_are_valid_draft7_with_descriptions_and_enums():
    for kind in schemas.FILES:
        s = json.loads((SCHEMAS / schemas.FILES[kind]).read_text())
        jsonschema.Draft7Validator.check_schema(s)
        assert s["$schema"] == "http://json-schema.org/draft-07/schema#"
        assert "accelerate 1.15.0" in s["description"] and "deepspeed 0.19.8" in s["description"]
    acc = json.loads((SCHEMAS / schemas.FILES["accelerate"]).read_text())
    assert acc["additionalProperties"] is False
    assert acc["properties"]["distributed_type"]["anyOf"][0]["enum"][:2] == ["NO", "MULTI_CPU"]
    fsdp = acc["properties"]["fsdp_config"]["anyOf"][0]["properties"]
    assert "FULL_SHARD" in fsdp["fsdp_sharding_strategy"]["anyOf"][0]["enum"]
    assert fsdp["fsdp_sharding_strategy"]["description"].startswith("Launch argument --fsdp_sharding_strategy.")
    ds = json.loads((SCHEMAS / schemas.FILES["deepspeed"]).read_text())
    zero = ds["definitions"]["zero_optimization"]
    assert zero["additionalProperties"] is False
    assert zero["properties"]["stage"]["anyOf"][0]["enum"] == [0, 1, 2, 3]
    assert zero["properties"]["stage3_prefetch_bucket_size"]["description"].startswith("Alias of prefetch_bucket_size")
    assert ds["definitions"]["offload_optimizer"]["properties"]["device"]["anyOf"][0]["enum"] == ["none", "cpu", "nvme"]


def test_generator_check_mode_detects_drift(tmp_path, monkeypatch):
    monkeypatch.setattr(schemas, "OUT_DIR", str(tmp_path))
    assert schemas.main(["--check"]) == 1
    assert schemas.main(["--write"]) == 0
    assert schemas.main(["--check"]) == 0
    (tmp_path / schemas.FILES["deepspeed"]).write_text("{}\n")
    assert schemas.main(["--check"]) == 1


def test_every_valid_example_validates():
    clean = 0
    for label, name, text in example_files() + [e for e in rule_examples() if e[0].endswith(":Passes")]:
        r = check(text, name)
        if r is None or r[2]:
            continue  # unreadable on purpose, or an error of another rule (cross-key)
        clean += 1
        assert not r[3], f"{label}: schema error {r[3][0].message[:200]} at {list(r[3][0].absolute_path)}"
    assert clean > 100


def test_agreement_on_rule_examples_and_mutations():
    t = Tally()
    for label, name, text in rule_examples() + example_files():
        r = check(text, name)
        if r is not None:
            t.add(label, r)
    t.report("rule examples and example files")
    m = Tally()
    for label, name, text in example_files() + [e for e in rule_examples() if e[0].endswith(":Passes")]:
        r = check(text, name)
        if r is None or r[2]:
            continue
        for mlabel, mtext in mutations(r[1], name):
            mr = check(mtext, name)
            if mr is not None:
                m.add(f"{label} {mlabel}", mr)
    m.report("single-key mutations of the valid examples")
    # every document the validator accepts without a word also passes the schema ...
    assert t.silent and t.silent_schema == 0, t.stricter
    # ... and the schema catches the key-level errors the validator reports
    assert t.recall() >= 0.9 and m.recall() >= 0.95, (t.misses, m.misses[:20])
    assert m.n > 1000
    # Mutations the validator accepts silently but the schema rejects: a value of the wrong type for the
    # key where the consumer happens not to read it (num_processes: 12345.5 under distributed_type NO,
    # main_process_ip: -7 for one machine). The schema states the key's type; measured, kept bounded.
    assert m.silent_schema <= 0.5 * m.silent


def test_agreement_on_corpus(corpus_dir):
    """Opt-in corpus layer: the real-world configs in the corpus named by PDT_CORPUS."""
    t = Tally()
    for root, _dirs, files in os.walk(corpus_dir):
        for f in sorted(files):
            if f.endswith((".yaml", ".yml", ".json")):
                p = os.path.join(root, f)
                try:
                    with open(p, encoding="utf-8") as fh:
                        text = fh.read()
                except (OSError, UnicodeDecodeError):
                    continue
                r = check(text, p)
                if r is not None:
                    t.add(os.path.relpath(p, corpus_dir), r)
    t.report("shared corpus")
    assert t.n > 0
    assert t.silent_schema == 0, t.stricter[:5]
    assert t.recall() >= 0.9, t.misses
