"""mixed-precision-sources.md and the state-singleton block of state-in-effect.md are what
transformers 5.25.0 / accelerate 1.15.0 / deepspeed 0.19.8 do (session 9, set-9 misses s9-acb-a01, s9-acb-a02,
s9-acl-a06, close call s9-acb-g04): _precision_matrix.py ran one child per path and its capture is committed.
The pages' generated blocks must equal the rendering of the capture word for word; the mechanism facts the
prose states are asserted on the capture; the auto-wrap check (no `_no_split_modules`) is rerun live in-process
(about 1 s). The children are rerun by `python tests/backends_docs/_precision_matrix.py --check` (about 3 min)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _precision_matrix as gen  # noqa: E402

REFS = gen.REFS


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_pages_are_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.REF, gen.render(data))


def test_every_case_ran(data):
    assert set(data) == set(gen.CASES)
    for case, got in data.items():
        assert "crash" not in got, (case, got.get("crash"))


def test_trainer_flag_beats_launcher_before_zero_init(data):
    t = {k[8:]: v for k, v in data.items() if k.startswith("trainer:")}
    # s9-acb-a01: --bf16 overrides ACCELERATE_MIXED_PRECISION in TrainingArguments, before zero.Init
    for row in ("launch env no, --bf16", "launch env fp16, --bf16"):
        assert (t[row]["args_mixed_precision"], t[row]["param_dtype"], t[row]["partitioned"]) == ("bf16", "bfloat16", True)
    assert t["launch env no, no flag"]["param_dtype"] == "float32"
    assert t["launch env bf16, --fp16"]["param_dtype"] == "float16"
    # a bf16 config without --bf16 is refused at train()
    assert t["launch env bf16, no flag"]["mismatches"] == ["- ds bf16.enabled=True vs hf bf16|bf16_full_eval=False"]
    # a --deepspeed JSON without a precision block: fp32 shards, bf16 training (the all-gather type clash)
    nb = t["--deepspeed no blocks, --bf16"]
    assert (nb["param_dtype"], nb["ds_after_args"], nb["ds_after_trainer"]) == (
        "float32", "fp16=absent bf16=absent", "fp16=False bf16=True")
    assert t["launch env fp16 + file bf16 true"]["args_error"].startswith("ValueError: `--mixed_precision` arg cannot")
    page = (REFS / "mixed-precision-sources.md").read_text(encoding="utf-8")
    assert "**the script flag wins over\n   the launcher**" in page


def test_accelerator_argument_and_fsdp_policy(data):
    a = {k[6:]: v for k, v in data.items() if k.startswith("accel:")}
    assert a["env fp16, Accelerator(mixed_precision=bf16)"]["mixed_precision"] == "bf16"
    assert a["JSON bf16 true, mixed_precision=fp16"]["error"].startswith("ValueError: `--mixed_precision` arg")
    assert a["DeepSpeedPlugin(zero_stage=3), mixed_precision=bf16"]["zero_init_dtype"] == "bfloat16"
    assert a["DeepSpeedPlugin(zero_stage=3), no mixed_precision"]["zero_init_dtype"] == "float32"
    own = a["FSDP2 plugin with its own policy (fp16), mixed_precision=bf16"]
    assert own["fsdp_policy"].startswith("param_dtype=float16") and own["mixed_precision"] == "bf16"


def test_fsdp_fields_per_version(data):
    f = data["fsdp_fields"]
    # s9-acb-a02: on torch < 2.7 FSDP2 ignored_modules is dropped with a warning, never raised
    forced = f["ignored_modules (torch < 2.7 forced)='lm_head'|v2"]
    assert forced.startswith("warned, now None: FSDP2 ignored_params/ignored_modules is not available")
    assert f["ignored_modules='lm_head'|v2"] == "kept: lm_head"
    assert f["forward_prefetch=True|v2"].startswith("raises ValueError")
    assert "sharding_strategy is deprecated in favor of reshard_after_forward" in f["sharding_strategy='SHARD_GRAD_OP'|v1"]
    assert f["use_orig_params=True|v2"].startswith("warned, now None")
    assert f["state_dict_type='LOCAL_STATE_DICT'|v2"].startswith("raises ValueError: FSDP2 does not support")
    fsdp = (REFS / "deepspeed-fsdp.md").read_text(encoding="utf-8")
    checks = (REFS / "backend-checks.md").read_text(encoding="utf-8")
    assert "older torch raises" not in fsdp
    assert "sets `ignored_modules` to `None`, so those modules are sharded" in fsdp
    assert "torch < 2.7: set to `None` with a logged warning" in checks
    assert "deprecated in favor of reshard_after_forward\"" in checks
    from accelerate.utils import FullyShardedDataParallelPlugin
    fields = set(FullyShardedDataParallelPlugin.__dataclass_fields__)
    assert "ignored_modules" in fields and not fields & {"ignored_states", "process_group", "device_mesh", "kwargs"}


def test_auto_wrap_without_no_split_modules_live(data):
    # s9-acb-g04: the two pages now agree: nothing wrapped below the root, no error, FSDP1 and FSDP2
    live = gen.wrap_without_no_split()
    assert live == data["fsdp_fields"]["wrap"]
    assert live["no_split=absent names=None|v1"] == live["no_split=absent names=None|v2"] == "wraps nothing below the root"
    assert live["no_split=Blk names=None|v2"] == "wraps blocks.0, blocks.1"
    assert "class  ReLU" in live["no_split=absent names=Linear, ReLU|v1"]
    rules = (REFS / "validator-rules.md").read_text(encoding="utf-8")
    assert "fails at ``prepare`` for models that do not define it" not in rules
    assert "nothing below the root is wrapped (no error, FSDP1 and FSDP2)" in " ".join(rules.split())


def test_state_singletons(data):
    steps = dict(data["singletons"]["steps"])
    assert steps["`AcceleratorState()` afterwards"] == "same state: True, mixed_precision bf16"
    assert steps["`AcceleratorState(mixed_precision='fp16')`"].startswith(
        "raises ValueError: AcceleratorState has already been initialized and cannot be changed")
    assert steps["`Accelerator(cpu=True)` right after that failed call"].startswith("raises AttributeError")
    assert steps["`AcceleratorState._reset_state(True)`, then `Accelerator(cpu=True, mixed_precision='fp16')`"] == \
        "ok, mixed_precision fp16"
    assert steps["`Accelerator(gradient_accumulation_steps=4)` (a second one)"] == \
        "ok, first Accelerator's gradient_accumulation_steps now 4, GradientState num_steps 4"
