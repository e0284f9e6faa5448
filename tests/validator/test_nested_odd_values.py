"""No rule may raise on an odd value in any nested Accelerate block key, and the CLI never prints
"internal error".

Accelerate copies every nested key onto the launch arguments, so a key the rules read can come
from a block it does not belong to (``parallelism_config: {deepspeed_config_file: x}`` under
DEEPSPEED once crashed acc-ds-config-file-conflict, which assumed a ``deepspeed_config`` block).
Every key of every block the schema knows (accelerate_schema *_KEYS) gets every odd value type,
in its own block and beside plausible siblings (seeded distributed_type), and in a foreign block
under each launch path's distributed_type; the blocks themselves also get odd values. All of it
goes through the CLI in one call.
"""
from __future__ import annotations

import io
import random

import yaml

ODD = [None, True, False, 0, -1, 1.5, float("nan"), float("inf"), 10 ** 20, "", "none", "auto", "x y",
       "1e8", [], [1, "a"], {}, {"k": None}]
TYPES = ["DEEPSPEED", "FSDP", "MEGATRON_LM", "MULTI_GPU", "XLA", "NO", "MULTI_CPU"]
LAUNCHERS = ["DEEPSPEED", "FSDP", "MEGATRON_LM", "MULTI_GPU", "XLA"]  # one distributed_type per launch path
SIBLINGS = {"deepspeed_config": {"zero_stage": 3, "deepspeed_config_file": "ds_config.json"},
            "fsdp_config": {"fsdp_version": 2, "fsdp_sharding_strategy": "FULL_SHARD"},
            "parallelism_config": {"parallelism_config_dp_shard_size": 2, "parallelism_config_tp_size": 1},
            "fp8_config": {"backend": "TE"}, "dynamo_config": {"dynamo_backend": "INDUCTOR"},
            "megatron_lm_config": {"megatron_lm_tp_degree": 2}, "mpirun_config": {"mpirun_hostfile": "hosts"}}


def _blocks():
    from backend_validator.rules import accelerate_schema as S
    return {"deepspeed_config": S.DEEPSPEED_KEYS, "fsdp_config": S.FSDP_KEYS,
            "parallelism_config": S.PARALLELISM_KEYS, "fp8_config": S.FP8_KEYS, "dynamo_config": S.DYNAMO_KEYS,
            "megatron_lm_config": S.MEGATRON_KEYS, "mpirun_config": S.MPIRUN_KEYS}


def _configs():
    rng = random.Random(20261201)
    blocks = _blocks()
    names = sorted(blocks)
    values = ODD + ["ds_config.json"]  # a plausible string too: the foreign-block crash needed one
    out = []
    for block in names:
        for key in blocks[block]:
            for j, value in enumerate(values):
                # a key in a foreign block, under every launcher (accelerate flattens the blocks)
                for t in LAUNCHERS:
                    d = {"distributed_type": t, "num_processes": 2,
                         rng.choice([b for b in names if b != block]): {key: value}}
                    out.append((f"{block}.{key}.{j}.foreign.{t}", d))
                for placement in ("own", "siblings"):
                    d = {"distributed_type": rng.choice(TYPES), "num_processes": 2,
                         block: dict(SIBLINGS[block] if placement == "siblings" else {}, **{key: value})}
                    if rng.random() < 0.3:
                        d["mixed_precision"] = rng.choice(["bf16", "fp8", "no", None, 3])
                    out.append((f"{block}.{key}.{j}.{placement}", d))
        for j, value in enumerate(ODD):
            for t in TYPES:
                out.append((f"{block}.BLOCK.{j}.{t}", {"distributed_type": t, "num_processes": 2, block: value}))
    return out


def test_regression_parallelism_block_names_the_deepspeed_file(bv, workspace):
    text = "distributed_type: DEEPSPEED\nnum_processes: 2\nparallelism_config:\n  deepspeed_config_file: x\n"
    res = bv.cli.validate_text(text, "c.yaml", "auto", bv.core.Options(cwd=str(workspace)))
    assert res.input_error is None and res.format == "accelerate"
    path = workspace / "parallelism-ds-file.yaml"
    path.write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    rc = bv.cli.main([str(path)], stdout=out, stderr=err)
    assert "internal error" not in out.getvalue() + err.getvalue() and rc in (0, 1), err.getvalue()


def test_odd_values_in_every_nested_key_never_crash_a_rule(bv, workspace):
    cases = _configs()
    assert len(cases) > 4000
    folder = workspace / "odd"
    folder.mkdir(exist_ok=True)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    paths = {}
    for name, d in cases:
        p = folder / f"{name}.yaml"
        p.write_text(yaml.dump(d, Dumper=dumper, sort_keys=False), encoding="utf-8")
        paths[str(p)] = d
    out, err = io.StringIO(), io.StringIO()
    rc = bv.cli.main(list(paths), stdout=out, stderr=err)
    crashed = [ln for ln in err.getvalue().splitlines() if "internal error" in ln]
    assert not crashed, f"{len(crashed)} crashed, e.g. {crashed[:3]} for {paths.get(crashed[0].split(': ')[0])}"
    assert "internal error" not in out.getvalue()
    assert rc in (0, 1, 2)
    assert f"in {len(paths)} file(s)" in err.getvalue().splitlines()[-1]
