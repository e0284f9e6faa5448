"""Property test: DeepSpeed-shaped documents with arbitrary values never crash a DeepSpeed or
cross-file rule, for every consumer and with or without a world size; every finding carries a
rule id, a severity, a one-line message and a position."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ds_support import SCRIPTS  # noqa: F401
from backend_validator import core, deepspeed as D, loader_json
import ds_examples

ds_examples.load_rules()

KEYS = sorted(set(D.TOP_LEVEL_KEYS) | set(D.REMOVED_TOP_LEVEL) | {k for b in D.STRICT_BLOCKS.values() for k in b[0]}
              | {f.alias for b in D.STRICT_BLOCKS.values() for f in b[0].values() if f.alias}
              | {k for ks in D.LENIENT_BLOCKS.values() for k in ks} | set(D.REMOVED_ZERO)
              | {"type", "params", "device", "nvme_path", "ratio", "stage", "enabled", "lr", "warmup_num_steps",
                 "total_num_steps", "max_grad_norm", "curriculum_learning", "data_sampling", "autotp_size"})
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**10), st.floats(allow_nan=True),
                    st.sampled_from(["auto", "true", "false", "cpu", "nvme", "gpu", "none", "sum", "mean", "fp32",
                                     "bf16", "AdamW", "Lamb", "OneBitAdam", "sgd", "SGD", "WarmupLR", "StepLR",
                                     "Muon", "8", "1e9", "", "x"]))
VALUES = st.recursive(SCALARS, lambda ch: st.one_of(st.lists(ch, max_size=3),
                                                     st.dictionaries(st.sampled_from(KEYS), ch, max_size=5)),
                      max_leaves=25)
DOCS = st.dictionaries(st.sampled_from(KEYS), VALUES, min_size=1, max_size=8)


def _check(findings):
    for f in findings:
        assert f.rule and f.severity in core.SEVERITIES and f.message and "\n" not in f.message


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # 1000 took 14.5 s on a loaded 2-core machine
@given(DOCS, st.sampled_from([None, "deepspeed", "accelerate", "transformers"]), st.sampled_from([None, 1, 3, 8]))
def test_ds_rules_never_crash(data, consumer, world):
    text = json.dumps(data, allow_nan=True)
    doc = loader_json.load_text(text, "p.json")
    ctx = core.Context(doc=doc, options=core.Options(consumer=consumer, world_size=world))
    ctx.consumer, ctx.consumer_reason = D.resolve_consumer(doc, consumer, False)
    fs = core.run_rules(ctx, "deepspeed")
    _check(fs)
    for f in fs:
        assert f.line is not None and f.col is not None, f


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])  # 600 took 7.8 s loaded
@given(DOCS, st.dictionaries(st.sampled_from(["mixed_precision", "distributed_type", "deepspeed_config",
                                                "fp8_config", "num_processes"]),
                             st.one_of(SCALARS, st.fixed_dictionaries(
                                 {"deepspeed_config_file": st.just("ds.json")},
                                 optional={"zero3_init_flag": SCALARS, "gradient_accumulation_steps": SCALARS,
                                           "backend": SCALARS})), max_size=5))
def test_cross_rules_never_crash(ds, acc):
    doc = loader_json.load_text(json.dumps(acc or {"a": 1}, allow_nan=True), "acc.json")
    rel = loader_json.load_text(json.dumps(ds, allow_nan=True), "ds.json")
    ctx = core.Context(doc=doc, options=core.Options(cwd="/nonexistent"), consumer="accelerate")
    ctx.related["deepspeed"] = rel
    _check(core.run_rules(ctx, "cross"))
    ctx2 = core.Context(doc=doc, options=core.Options(cwd="/nonexistent"), consumer="accelerate")
    _check(core.run_rules(ctx2, "cross"))
