"""Facts in references/memory-planning.md that are not covered by the measurement tests: the
DeepSpeed and torch defaults it quotes, the flags and optimizer names it lists, its commands, and
the worked example's figures (recomputed by the planner)."""
from __future__ import annotations

import inspect
import os
import re
import shlex
import subprocess
import sys

import pytest

from _planner_helpers import REPO, candidate, plan_json, run_planner, write_config

os.environ.setdefault("DS_ACCELERATOR", "cpu")
REF = REPO / "sub-skills" / "distributed-training-backends" / "references" / "memory-planning.md"
TEXT = REF.read_text(encoding="utf-8")
LLAMA2_7B = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
             "num_key_value_heads": 32, "intermediate_size": 11008, "vocab_size": 32000}
GIB = 1024 ** 3


def section(title):
    return TEXT.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_deepspeed_defaults_quoted(planner):
    from deepspeed.runtime.zero.config import DeepSpeedZeroConfig
    from deepspeed.runtime.zero.offload_config import DeepSpeedZeroOffloadParamConfig
    z = DeepSpeedZeroConfig()
    assert z.reduce_bucket_size == 5 * 10 ** 8 == planner.memory.DS_REDUCE_BUCKET
    assert z.param_persistence_threshold == 10 ** 5
    off = DeepSpeedZeroOffloadParamConfig()
    assert (off.buffer_count, off.buffer_size) == (5, 10 ** 8)
    assert planner.memory.DS_NVME_BUFFERS == off.buffer_count * off.buffer_size
    for needle in ("reduce_bucket_size` default 5e8", "`stage3_param_persistence_threshold` (default 1e5",
                   "`buffer_count` 5 x `buffer_size` 1e8"):
        assert needle in TEXT, needle


def test_ddp_bucket_copy_is_what_torch_documents():
    from torch.nn.parallel import DistributedDataParallel as DDP
    assert inspect.signature(DDP.__init__).parameters["gradient_as_bucket_view"].default is False
    doc = " ".join(DDP.__doc__.split())
    assert "saved memory size will be equal to the total gradients size" in doc
    assert "`gradient_as_bucket_view=False` is the default" in TEXT


def test_fsdp2_names_exist():
    from torch.distributed import fsdp
    for name in ("fully_shard", "MixedPrecisionPolicy", "CPUOffloadPolicy"):
        assert hasattr(fsdp, name), name
        assert name in TEXT


def test_optimizer_table_lists_exactly_the_planner_optimizers(planner):
    rows = [ln for ln in section("Optimizer state bytes").splitlines() if ln.startswith("| `")]
    names = {n for row in rows[1:] for n in re.findall(r"`([a-z0-9-]+)`", row.split("|")[1])}
    assert names == set(planner.memory.OPTIMIZERS)


def test_every_flag_in_the_reference_is_in_help():
    help_text = run_planner("--help").stdout
    flags = set(re.findall(r"(--[a-z][a-z-]+)", TEXT))
    assert len(flags) > 15
    for flag in flags:
        if flag in ("--strict",):                     # the validator's flag, named for the emitted files
            continue
        assert flag in help_text, flag
    for line in ("0  plan printed and at least one candidate fits", "1  plan printed but no candidate fits",
                 "2  bad input"):
        assert line in help_text


def test_the_reference_commands_run(tmp_path):
    block = TEXT.split("```bash\n", 1)[1].split("```", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.strip()]
    assert len(lines) == 3
    cfg = write_config(tmp_path, LLAMA2_7B)
    for ln in lines:
        argv = shlex.split(ln)[1:]
        argv = [str(cfg) if a == "config.json" else str(tmp_path / "plan") if a == "plan/" else a for a in argv]
        r = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert r.returncode in (0, 1) and r.stderr == "", (ln, r.stderr)
    assert (tmp_path / "plan" / "accelerate.yaml").is_file()


@pytest.fixture(scope="module")
def worked(tmp_path_factory):
    cfg = write_config(tmp_path_factory.mktemp("l7"), LLAMA2_7B)
    return plan_json("--model-config", cfg, "--seq-len", 4096, "--activation-checkpointing",
                     "--gpus-per-node", 8, "--gpu-memory", "80GiB")


def test_worked_example_inputs(worked):
    assert worked["inputs"]["params"] == 6_738_415_616
    assert worked["inputs"]["largest_layer_params"] == 131_072_000
    assert worked["inputs"]["fsdp_unit_params"] == 262_148_096
    for n in ("6,738,415,616", "131,072,000", "262,148,096"):
        assert n in section("Worked example: Llama-2-7B on 8 GPUs")


def test_worked_example_table(worked):
    z3 = candidate(worked, "zero3")["per_gpu_bytes"]
    rows = {r.split("|")[1].strip(): float(r.split("|")[3].strip())
            for r in section("Worked example: Llama-2-7B on 8 GPUs").splitlines()
            if r.startswith("| ") and re.search(r"\| [\d.]+e9 \|$", r)}
    got = {"parameters": z3["parameters"], "gradients": z3["gradients"], "master": z3["master_weights"],
           "optimizer": z3["optimizer_states"], "gathered": z3["gathered_params"],
           "activations": z3["activations"], "activation workspace": z3["activation_workspace"]}
    assert set(rows) == set(got)
    for k, v in got.items():
        assert abs(rows[k] - v) <= 0.005 * v, (k, rows[k], v)


def test_worked_example_totals_and_ranking(worked):
    text = section("Worked example: Llama-2-7B on 8 GPUs")
    tot = {c["strategy"]: c for c in worked["candidates"] if c["offload"] == "none"}
    assert f"about {round(tot['zero3']['per_gpu_bytes']['total'] / GIB)} GiB per GPU for ZeRO-3" in text
    assert f"{tot['fsdp2']['per_gpu_bytes']['total'] / GIB:.1f} GiB for FSDP2" in text
    assert f"ZeRO-1 ({tot['zero1']['per_gpu_bytes']['total'] / GIB:.1f} GiB)" in text
    assert f"DDP needs\n{round(tot['ddp']['per_gpu_bytes']['total'] / GIB)} GiB" in text
    assert f"{tot['zero1']['comm_bytes_per_gpu'] / 1e9:.1f} GB per GPU per step against " \
           f"{tot['zero3']['comm_bytes_per_gpu'] / 1e9:.1f} GB" in text
    assert worked["recommended"]["strategy"] == "zero1" and not tot["ddp"]["fits"]


def test_activation_checkpointing_ratio_quoted():
    h, f, w = 4096, 11008, 2
    per_tok = 2 * (4 * h + 4 + 2 * w * h) + w * (2 * h + 2 * h + 4 * f) + 4 * 32
    assert round(per_tok / (w * h)) == 23
    assert "about 23x for\nLlama-2-7B" in TEXT
