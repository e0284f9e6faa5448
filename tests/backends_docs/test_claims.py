"""Statements a user acts on (defaults, silent substitutions, launcher command lines, hardware
floors, CLI checks) compared with what the installed packages do. The facts come from one
subprocess (`_claims_probe.py`); each test pins the documented wording to the measured fact,
so a wrong or stale sentence fails here and not on the user's cluster."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

D = sys.modules["backends_docs__docs"]
DSF = D.REFS / "deepspeed-fsdp.md"
PAP = D.REFS / "parallelism-and-precision.md"
TRB = D.REFS / "troubleshooting.md"
MATRIX = D.REPO / "references" / "backend-matrix.md"
CLI = D.REPO / "sub-skills" / "configuration-and-cli" / "references"


def text(p):
    return p.read_text(encoding="utf-8")


def row(md, first_cell_start):
    rows = [r for r in text(md).splitlines() if r.startswith("| " + first_cell_start)]
    assert len(rows) == 1, f"expected one row starting {first_cell_start!r} in {md.name}, got {len(rows)}"
    return [c.strip() for c in rows[0].strip("|").split(" | ")]


@pytest.fixture(scope="session")
def facts(tmp_path_factory):
    home = tmp_path_factory.mktemp("claims_home")
    proc = subprocess.run([sys.executable, str(Path(__file__).with_name("_claims_probe.py")), str(home)],
                          capture_output=True, text=True, cwd=home, timeout=120)
    if proc.returncode != 0:
        pytest.fail(f"claims probe failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ ZeRO offload
def test_optimizer_offload_stages(facts):
    # stage 1 and 2 share DeepSpeedZeroOptimizer, which receives the offload_optimizer config
    assert facts["ds_stage1_and_2_pass_offload_optimizer"]
    stages = row(DSF, "`offload_optimizer_device: cpu`")[2]
    assert stages.startswith("1, 2, 3"), stages


def test_param_offload_is_stage3_only(facts):
    assert not facts["ds_stage1_and_2_pass_offload_param"]
    assert row(DSF, "`offload_param_device: cpu`")[2].startswith("3 only")


def test_nvme_below_stage3_is_cpu(facts):
    assert facts["ds_z12_any_offload_device_is_cpu"] and not facts["ds_z12_reads_nvme_path"]
    cell = row(DSF, "`nvme` for either")[2]
    assert cell.startswith("3 only") and "behaves as `cpu`" in cell, cell


def test_torch_optimizer_swapped_under_offload(facts):
    assert facts["ds_prepare_maps_optimizer"]
    t = re.sub(r"\s+", " ", text(DSF))
    m = re.search(r"`(DeepSpeedCPU\w+)` for anything .*? only `(\w+)` and `(\w+)` are copied as the new defaults", t)
    assert m, "the optimizer-swap trap is missing from deepspeed-fsdp.md"
    assert m.group(1) == facts["ds_map_default_class"]
    assert sorted(m.group(2, 3)) == facts["ds_map_kept_keys"]
    # the ZeRO-Offload exception row names exactly the classes DeepSpeed accepts
    cause = row(TRB, '`ZeRORuntimeException` "ZeRO-Offload')[1]
    assert set(re.findall(r"`(DeepSpeedCPU\w+)`", cause)) >= set(facts["ds_offload_accepted_classes"])
    assert "`DeepSpeedCPUAdagrad`" in cause  # the one mapped class the check rejects


# ------------------------------------------------------------------ DeepSpeed defaults
def test_default_gradient_clipping(facts):
    assert facts["ds_inline_clipping"] == "auto"
    fill = facts["ds_prepare_clipping_fill"]
    assert facts["ds_clipping_after_fill"] == fill
    inline = row(DSF, "inline")[2]
    assert f"unset `zero_stage` is {facts['ds_default_zero_stage']}" in inline
    assert f"`gradient_clipping` is `auto`, which `prepare` turns into {fill}" in inline
    assert facts["ds_zero3_init_default"] == {"2": False, "3": True}
    assert "an unset `zero3_init_flag` is true at stage 3" in inline
    assert f"| `gradient_clipping` | {fill} when nothing" in text(DSF)
    assert f"clipped at {fill}" in text(TRB)


def test_json_without_accumulation_key_overrides_accelerator(facts):
    assert facts["ds_prepare_prefers_json_gas"]
    n = facts["ds_json_missing_gas"]
    ga = D.REPO / "sub-skills" / "training-loop-integration" / "references" / "gradient-accumulation.md"
    t = re.sub(r"\s+", " ", text(ga))
    assert f"A JSON **without** the key counts as {n}" in t and f"silently reduced to {n}" in t
    assert '"gradient_accumulation_steps": "auto"' in t


def test_compile_under_deepspeed_only_from_code(facts):
    floor = facts["ds_compile_min_version"]
    assert floor, "Accelerator._prepare_deepspeed no longer calls engine.compile"
    cells = row(DSF, "`torch.compile`")
    assert cells[1] == "any; under DeepSpeed only from code"
    assert f"`engine.compile` (deepspeed >= {floor})" in cells[2]


# ------------------------------------------------------------------ launchers
def test_multinode_deepspeed_command_lines(facts):
    pdsh, nossh, standard = (facts["ds_cmd"][k] for k in ("pdsh", "nossh", "standard"))
    assert standard is None  # torchrun on every node
    assert pdsh[0] == "deepspeed" and "--launcher" in pdsh and "--no_local_rank" in pdsh
    assert "--no_ssh" in nossh and "--launcher" not in nossh and "--no_local_rank" not in nossh
    nossh_row = " | ".join(row(DSF, "`DEEPSPEED`, `deepspeed_multinode_launcher: nossh`"))
    for needle in ("`--no_ssh --node_rank <machine_rank>`", "no `--launcher`", "no `--no_local_rank`",
                   "on every node"):
        assert needle in nossh_row, needle
    ssh_row = " | ".join(row(DSF, "`DEEPSPEED`, `num_machines` > 1"))
    assert "`--launcher NAME`" in ssh_row and "nossh" not in ssh_row
    assert "run once on the main node" in ssh_row
    for cmd in (pdsh, nossh):   # main_process_ip / main_process_port reach the deepspeed runner (accelerate 1.15.0)
        assert cmd[cmd.index("--master_addr") + 1] == "10.0.0.1" and cmd[cmd.index("--master_port") + 1] == "29555"


def test_busy_port_behaviour(facts):
    one, two = facts["busy_port"]["one_machine"], facts["busy_port"]["two_machines"]
    assert one == {"standalone": True, "warning": True} and two == "ConnectionError"
    cell = row(CLI / "commands.md", "`--main_process_port`")[2]
    assert "switches torchrun to standalone mode" in cell and "raises `ConnectionError`" in cell
    cpu = re.sub(r"\s+", " ", text(CLI / "cpu-multiprocess.md"))
    assert "standalone mode on a free port" in cpu and "the default 29500 collides" not in cpu
    assert "port busy with several machines" in text(TRB)


# ------------------------------------------------------------------ hardware
def test_fp8_capability_floor_and_fallback(facts):
    major, minor = facts["fp8_min_capability"]
    fb = facts["fp8_fallback_precision"]
    assert re.search(rf"compute capability >= {major}\.{minor}\b.*?falls back to {fb}",
                     re.sub(r"\s+", " ", text(PAP)))
    assert re.search(rf"compute capability {major}\.{minor} or newer.*?falls back to {fb}",
                     re.sub(r"\s+", " ", text(MATRIX)))
    assert f"training runs in {fb}" in " ".join(row(TRB, "warning, then training runs in"))


def test_deepspeed_cpu_fp16_is_conditional(facts):
    assert facts["ds_cpu_fp16_depends_on_onednn"]
    for md in (PAP, MATRIX, TRB):
        t = text(md)
        assert not re.search(r"CPU accelerator (rejects fp16|has no fp16)\b(?! only)", t), md.name
    assert "_is_mkldnn_fp16_supported" in text(PAP) and "_is_mkldnn_fp16_supported" in text(TRB)


# ------------------------------------------------------------------ CLI checks
def test_use_parallelism_config_flag(facts):
    pc = facts["pc_flag"]
    assert pc["fsdp_default_version"] == pc["fsdp_version_1"] == "accepted"  # the version check never fires
    assert pc["deepspeed"].startswith("ValueError") and pc["multi_gpu"].startswith("ValueError")
    for md in (PAP, CLI / "commands.md", CLI / "config-file-and-precedence.md"):
        t = re.sub(r"\s+", " ", text(md))
        assert not re.search(r"only valid together with `--use_fsdp --fsdp_version 2`", t), md.name
        assert not re.search(r"needs `--use_fsdp --fsdp_version 2`\)", t), md.name
        assert re.search(r"never fires|FSDP1 passes here", t), md.name
    assert "cannot use it" in re.sub(r"\s+", " ", text(PAP))


def test_fsdp2_forward_prefetch_in_code_raises_even_false(facts):
    assert facts["fsdp2_forward_prefetch_false"].startswith("ValueError")
    fsdp2_cell = row(DSF, "`fsdp_forward_prefetch` | false")[3]
    assert "plugin value raises" in fsdp2_cell and "even `False`" in fsdp2_cell


def test_fsdp_plugin_ignored_in_plain_single_process(facts):
    got = facts["fsdp_plugin_single_process"]
    assert got == {"distributed_type": "DistributedType.NO", "prepared": "Linear"}
    t = re.sub(r"\s+", " ", text(DSF))
    assert "in a plain `python train.py` (one process, type `NO`) an FSDP plugin is ignored" in t
    assert "`prepare` returns the bare module" in t


def test_to_fsdp2_later_key_wins(facts):
    # SHARD_GRAD_OP -> False and FULL_SHARD -> True: the value tells which key was used
    assert facts["to_fsdp2_both_keys"] == {"strategy_first": True, "strategy_last": False}
    t = re.sub(r"\s+", " ", text(DSF))
    assert "the one written **later** in the file wins" in t


def test_fsdp_plugin_defaults_without_launcher(facts):
    t = re.sub(r"\s+", " ", text(DSF))
    para = t[t.index("Under plain `torchrun` (no `accelerate launch`)"):]
    para = para[:para.index("| Key |")]
    documented = {k: v for k, v in re.findall(r"`(\w+)` (\d+|true|false)", para)}
    actual = facts["fsdp_plugin_defaults"]
    assert set(documented) == set(actual), documented
    for k, v in documented.items():
        assert str(actual[k]).lower() == v, (k, v, actual[k])


def test_fsdp2_sharding_strategy_alone_raises(facts):
    got = facts["fsdp2_strategy_only"]
    m = re.search(r'alone with `fsdp_version=2` it raises "([^"]+)"', re.sub(r"\s+", " ", text(DSF)))
    assert m and got.startswith("ValueError") and m.group(1) in got, got
