"""Property test: 10,000 generated inputs through the whole validator, in-process, and no
exception other than the documented InputError (exit 2) ever escapes. Findings must be
well-formed (known rule id, severity, 1-based positions).

The 10,000: N_STRUCTURED + N_TEXT = 8,000 in `make test`, N_MUTATED = 2,000 mutants of the real
configs in the corpus layer (`make test-corpus`, which needs the out-of-tree corpus)."""
from __future__ import annotations

import json

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

N_STRUCTURED = 5600
N_TEXT = 2400
N_MUTATED = 2000

SETTINGS = dict(deadline=None, database=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def _check(bv, text, name, cwd):
    try:
        res = bv.cli.validate_text(text, name, "auto", bv.core.Options(cwd=str(cwd)))
    except bv.core.InputError as e:
        assert str(e) and "\n" not in str(e)
        return
    for f in res.findings:
        assert f.rule in bv.core.REGISTRY or f.rule.startswith(("json-", "yaml-", "input-")), f.rule
        assert f.severity in bv.core.SEVERITIES
        assert f.line is None or f.line >= 1
        assert f.message
        if f.rule.startswith(("acc-", "yaml-", "input-")):  # this area's rules: one-line messages
            assert "\n" not in f.message and "\n" not in f.hint, f
    json.dumps([f.as_dict() for f in res.findings], default=str)


def _key_pool(bv):
    from backend_validator.rules import accelerate_schema as S
    top = list(S.CLUSTER_FIELDS) + list(S.SAGEMAKER_FIELDS) + ["fp16", "dynamo_backend", "ipex_config", "x"]
    nested = list(S.FSDP_KEYS) + list(S.DEEPSPEED_KEYS) + list(S.PARALLELISM_KEYS) + list(S.FP8_KEYS) + \
        list(S.DYNAMO_KEYS) + list(S.MEGATRON_KEYS) + ["backend", "fp8_format", "amax_history_length",
                                                        "dp_shard_size", "zero_stage", "version"]
    words = list(S.DISTRIBUTED_TYPES) + list(S.PRECISIONS) + list(S.DYNAMO_BACKENDS) + list(S.FP8_BACKENDS) + \
        list(S.FSDP_SHARDING_STRATEGY) + list(S.FSDP_AUTO_WRAP_POLICY) + list(S.FSDP_STATE_DICT_TYPE) + \
        ["LOCAL_MACHINE", "AMAZON_SAGEMAKER", "auto", "none", "cpu", "nvme", "all", "0,1", "te", "MS-AMP",
         "1e8", "yes", "no", "(false, false, false)", "ds_config.json", "sdpa", "eager", "O3", ""]
    return top, nested, words


def _random_value(rng, words, depth=0):
    r = rng.random()
    if depth < 2 and r < 0.08:
        return [_random_value(rng, words, depth + 1) for _ in range(rng.randint(0, 3))]
    if depth < 2 and r < 0.14:
        return {rng.choice(words): _random_value(rng, words, depth + 1) for _ in range(rng.randint(0, 3))}
    return rng.choice([
        lambda: rng.choice(words), lambda: rng.randint(-3, 20), lambda: rng.random() < 0.5, lambda: None,
        lambda: rng.choice([0.5, 2.0, 1e8, float("inf"), float("nan"), -1.5]),
        lambda: "".join(rng.choice("abcXYZ_-:'\"\n 0123") for _ in range(rng.randint(0, 8))),
    ])()


def _random_config(rng, top, nested, words):
    blocks = ("fsdp_config", "deepspeed_config", "parallelism_config", "fp8_config", "dynamo_config",
              "megatron_lm_config", "mpirun_config")
    d = {}
    for _ in range(rng.randint(0, 10)):
        k = rng.choice(top)
        if k in blocks or rng.random() < 0.05:
            d[k] = {rng.choice(nested): _random_value(rng, words) for _ in range(rng.randint(0, 6))}
        else:
            d[k] = _random_value(rng, words)
    if rng.random() < 0.7:  # mostly plausible configs, so the deeper rules run
        d.setdefault("distributed_type", rng.choice(words[:14] + ["DEEPSPEED", "FSDP", "FSDP", "MULTI_GPU"]))
    return d


def test_structured_configs(bv, workspace):
    """Configs drawn from the schema's own key and value vocabulary (plus junk), as YAML or JSON."""
    import random

    top, nested, words = _key_pool(bv)
    count = 0

    @settings(max_examples=N_STRUCTURED, **SETTINGS)
    @given(st.integers(0, 2**63), st.booleans())
    def inner(seed, as_json):
        nonlocal count
        count += 1
        d = _random_config(random.Random(seed), top, nested, words)
        if as_json:
            text, name = json.dumps(d, default=str), "config.json"
        else:
            text, name = yaml.dump(d, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False), \
                "config.yaml"
        _check(bv, text, name, workspace)

    inner()
    assert count >= N_STRUCTURED


def test_random_text(bv, workspace):
    alphabet = st.sampled_from(list(":-{}[],&*!|>'\"#?% \n\t") + list("abcNOyes01e.") + ["\x00", "\ufeff", "é"])
    count = 0

    @settings(max_examples=N_TEXT, **SETTINGS)
    @given(st.text(alphabet=alphabet, max_size=120), st.sampled_from(["c.yaml", "c.json", "<stdin>"]))
    def inner(text, name):
        nonlocal count
        count += 1
        _check(bv, text, name, workspace)

    inner()
    assert count >= N_TEXT


def test_mutated_corpus(bv, workspace, corpus_dir, helpers):
    texts = [p.read_text(encoding="utf-8") for p in helpers.corpus_files(corpus_dir)]
    count = 0

    @settings(max_examples=N_MUTATED, **SETTINGS)
    @given(st.sampled_from(texts), st.integers(0, 4000), st.integers(0, 200),
           st.text(alphabet=st.sampled_from(list(" :-\n'\"{}[]&*!0aNO")), max_size=12))
    def inner(text, at, cut, insert):
        nonlocal count
        count += 1
        at = at % (len(text) + 1)
        _check(bv, text[:at] + insert + text[at + cut:], "mutant.yaml", workspace)

    inner()
    assert count >= N_MUTATED
    assert N_STRUCTURED + N_TEXT + N_MUTATED == 10_000
