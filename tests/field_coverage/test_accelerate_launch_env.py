"""Every row of sub-skills/configuration-and-cli/references/launch-child-environment.md: what
`accelerate launch` (accelerate 1.15.0) starts and which variables it adds for the children, for each
configuration of _accelerate_launch_env.CASES, generated in this process by the real
launch_command_parser -> launch_command with Popen / torch.distributed.run.run recorded instead of
run. Both tables are regenerated and compared verbatim, so the reference cannot drift from the code."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

import _accelerate_launch_env as gen

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _generated_blocks as gb  # noqa: E402

HERE = Path(__file__).resolve().parent
DOC = HERE.parents[1] / "sub-skills" / "configuration-and-cli" / "references" / "launch-child-environment.md"
MATRIX_DOC = DOC.with_name("launch-child-matrix.md")


@pytest.fixture(scope="module")
def out():
    return gen.generate()


@pytest.fixture(scope="module")
def doc():
    return DOC.read_text(encoding="utf-8")


def test_matrix_is_the_generated_one(out):
    assert gb.block(MATRIX_DOC.read_text(encoding="utf-8"), "launch matrix").strip() == out["matrix"].strip()


def test_dropped_keys_table_is_the_generated_one(out, doc):
    assert gb.block(doc, "dropped keys").strip() == out["dropped"].strip()


def rows(out):
    return {r.split(" | ")[1]: r for r in out["matrix"].splitlines() if r.startswith("| ") and r[2].isdigit()}


def test_key_cells(out):
    r = rows(out)
    # --cpu --num_processes 4 starts ONE python process, with a rendezvous address for it
    assert "| `python train.py` |" in r["CPU, 4 processes asked"] and "`MASTER_PORT=29500`" in r["CPU, 4 processes asked"]
    assert "`OMP_NUM_THREADS=2`" in r["CPU, 4 processes asked"]          # 8 physical cores // 4
    # multi-node without --same_network: torchrun gets an endpoint, never --master_addr; static stays static
    static = r["multi-node rank 1, static"]
    assert "--rdzv_endpoint=10.0.0.1:29500" in static and "--master_addr" not in static and "rdzv_backend" not in static
    assert "--master_addr=10.0.0.1 --master_port=29500" in r["multi-node rank 1, --same_network"]
    # the file's rdzv_backend / same_network are not applied
    assert "--rdzv_endpoint=10.0.0.1:29500" in r["multi-node from a config file, rank 1"]
    assert "c10d" not in r["multi-node from a config file, rank 1"].split(" | ")[3]
    # DeepSpeed path: no dynamo and no OMP variable; PYTHONPATH gains the working directory
    for name in ("DeepSpeed inline keys, 1 node", "DeepSpeed 2 nodes, pdsh (default)"):
        assert "ACCELERATE_DYNAMO" not in r[name] and "**D**" not in r[name] and "OMP_NUM_THREADS" not in r[name]
        assert "`PYTHONPATH=<cwd>`" in r[name] and "`PYTORCH_NVML_BASED_CUDA_CHECK=1`" in r[name]
    assert "| `deepspeed --hostfile /job/hostfile --no_local_rank --launcher pdsh --num_gpus 8" in \
        r["DeepSpeed 2 nodes, pdsh (default)"]
    assert "--node_rank 1 --no_ssh" in r["DeepSpeed 2 nodes, nossh, rank 1"]
    assert "torch.distributed.run --nnodes=2 --node_rank=1" in r["DeepSpeed 2 nodes, standard (torchrun), rank 1"]
    assert "**`.deepspeed_env` (cwd) gets**" in r["DeepSpeed 2 nodes, pdsh (default)"]
    assert "OMP_NUM_THREADS" not in r["DeepSpeed + --num_cpu_threads_per_process 4"]    # the flag is not exported
    assert "`PARALLELISM_CONFIG_TP_SIZE=1`" in r["FSDP v1 flags + --use_parallelism_config (accepted)"]
    assert "`FSDP_VERSION=1`" in r["FSDP v1 flags + --use_parallelism_config (accepted)"]
    shell = r["CPU, 4 processes, shell has MASTER_PORT=12345 OMP_NUM_THREADS=3"]
    assert "`MASTER_PORT=29500`" in shell and "kept from the shell: `OMP_NUM_THREADS=3`" in shell
    assert "--master_port=29500" in r["multi-GPU, shell has MASTER_ADDR=10.9.9.9 MASTER_PORT=12345"]
    assert "AttributeError: 'SageMakerConfig' object has no attribute 'parallelism_config'" in \
        r["refused: SageMaker file (every one, 1.15.0)"]
    assert "`ACCELERATE_CONFIG_DS_FIELDS=`" in r["DeepSpeed flags only, 1 node"]
    assert "`FSDP_VERSION=2`" in r["FSDP v2 from file"] and "`FSDP_SHARDING_STRATEGY=FULL_SHARD`" in r["FSDP v2 from file"]
    assert "`CUDA_VISIBLE_DEVICES=0,1`" in r["multi-GPU + gpu_ids, bf16, debug, threads"]
    assert "ACCELERATE_USE_CPU" not in r["multi-GPU, 1 node"]
    assert "mpirun --hostfile /job/hostfile --npernode 4 -n 8 --bind-to socket python train.py" in \
        r["CPU multi-node, Open MPI mpirun"]
    assert "mpirun -f /job/hostfile -ppn 4 -n 8 python train.py" in \
        r["CPU multi-node, Intel MPI / MVAPICH mpirun, from file"]


def test_dropped_keys(out):
    lines = out["dropped"].splitlines()[2:]
    assert len(lines) == len(gen.PATHS)
    for line in lines:
        for key in ("rdzv_backend", "same_network", "enable_cpu_affinity", "downcast_bf16", "tpu_use_sudo"):
            assert f"`{key}`" in line.split(" | ")[1], (key, line)
    assert "`machine_rank`" in lines[-1].split(" | ")[2]           # simple launcher never reads it
    assert "`machine_rank`" not in lines[0].split(" | ")[2]


def test_every_variable_is_in_the_names_table(out):
    """Cross-check with scripts/lookup.py's table (references/facts/names.json, an AST scan of the
    pinned packages): every variable the generated rows show is a name accelerate (or deepspeed)
    sets; the scan and the run agree."""
    import json
    import re
    names = json.loads((HERE.parents[1] / "references" / "facts" / "names.json").read_text(encoding="utf-8"))
    known = {e["n"] for e in names["entries"] if e["s"] in ("accelerate-env", "deepspeed-env")}
    shown = set(re.findall(r"`([A-Z][A-Z0-9_]+)=", out["matrix"]))
    assert len(shown) > 60 and not shown - known, sorted(shown - known)


def test_row_numbers_named_in_the_prose(out, doc):
    doc = doc + MATRIX_DOC.read_text(encoding="utf-8")   # the matrix page's intro quotes rows too
    number = {r.split(" | ")[1]: r.split(" | ")[0].strip("| ") for r in rows(out).values()}
    assert f"Row {number['DeepSpeed deepspeed_config_file, 1 node']} launches" in doc
    first_shell = number["CPU, 4 processes, shell has MASTER_PORT=12345 OMP_NUM_THREADS=3"]
    assert f"(rows {first_shell}–{int(first_shell) + 1})" in doc
    assert f"Rows {number['multi-node rank 0, static']}–{number['multi-node from a config file, rank 1']}:" in doc
