"""The failure-triage SKILL.md and references: every name they state is checked.

- every signature id they name is in the catalog;
- every identifier-like code span (snake_case names, --flags, UPPER_CASE variables, dotted paths)
  occurs in the installed pinned sources (accelerate, deepspeed, dalle_pytorch, parts of torch) or
  in the DALLE-pytorch script facts recorded at 58c1e1a, or is one of the few Transformers names
  listed below with the upstream file they were read from;
- behaviour the references describe is checked against the code that implements it.
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import sys
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SKILL = REPO / "sub-skills" / "failure-triage"
DOCS = [SKILL / "SKILL.md", *sorted((SKILL / "references").glob("*.md"))]
CATALOG_IDS = {e["id"] for p in (SKILL / "catalog").glob("*.yaml") for e in yaml.safe_load(p.read_text()) or []}
PREFIXES = ("accelerate-", "deepspeed-", "torch-", "transformers-", "dalle-", "tokenizers-", "nccl-", "cuda-",
            "os-", "python-")

# Transformers names the references state, with the installed transformers 5.25.0 file (relative to
# the package) and the text that must occur there (test_transformers_names_are_in_the_installed_package).
TRANSFORMERS_NAMES = {
    "per_device_train_batch_size": ("training_args.py", "per_device_train_batch_size: int"),
    "ddp_timeout": ("training_args.py", "ddp_timeout: int"),
    "predict_with_generate": ("training_args_seq2seq.py", "predict_with_generate: bool"),
    "synced_gpus": ("generation/utils.py", 'generation_mode_kwargs["synced_gpus"]'),
    "_update_model_kwargs_for_generation": ("generation/utils.py", "def _update_model_kwargs_for_generation("),
    "is_deepspeed_zero3_enabled": ("integrations/deepspeed.py", "def is_deepspeed_zero3_enabled("),
    "low_cpu_mem_usage": ("modeling_utils.py", '"low_cpu_mem_usage"'),
    "gradient_checkpointing": ("training_args.py", '("gradient_checkpointing", "activation_checkpointing")'),  # alias
    "resume_from_checkpoint": ("trainer.py", "resume_from_checkpoint: str | bool | None = None"),
    "global_stepN": ("integrations/deepspeed.py", 'glob.glob(f"{checkpoint_path}/global_step*")'),
    "checkpoint-N": ("trainer_utils.py", 'PREFIX_CHECKPOINT_DIR = "checkpoint"'),
    "prediction_step": ("trainer_seq2seq.py", "def prediction_step("),
    "_prepare_for_training": ("trainer.py", "def _prepare_for_training("),
    "trainer_seq2seq": ("trainer_seq2seq.py", "class Seq2SeqTrainer(Trainer)"),
    "deepspeed_optim_sched": ("integrations/deepspeed.py", "def deepspeed_optim_sched("),
    "MISSING": ("utils/loading_report.py", 'status = _style("MISSING", "red")'),   # the 5.x load report row
    # an encoder-decoder model's generate runs its encoder directly (the FSDP2 row)
    "get_encoder": ("generation/utils.py", "encoder = self.get_encoder()"),
    "_prepare_text_encoder_decoder_kwargs_for_generation": (
        "generation/utils.py", "def _prepare_text_encoder_decoder_kwargs_for_generation("),
}
TRANSFORMERS_ROOT = Path(importlib.util.find_spec("transformers").origin).parent

# Names that live outside the scanned Python sources (the loader, DeepSpeed's setup, tokenizers' Rust
# bindings), with where they were read.
OTHER_SOURCE_NAMES = {
    "TOKENIZERS_PARALLELISM": "huggingface/tokenizers bindings/python parallelism",
    "HF_HOME": "huggingface_hub constants (installed)",
    "LD_LIBRARY_PATH": "the dynamic loader",
    "CUDA_HOME": "deepspeed/ops/op_builder/builder.py reads it",
    # DeepSpeed's build switches: each op builder's BUILD_VAR is "DS_BUILD_<OP>"
    # (deepspeed/ops/op_builder/*.py); DS_BUILD_OPS is read by DeepSpeed's setup.py (repository, not installed)
    "DS_BUILD_": "deepspeed/ops/op_builder/*.py BUILD_VAR prefix",
    "DS_BUILD_OPS": "DeepSpeed setup.py (repository)",
    # read by the DALLE-pytorch scripts at 58c1e1a from torchvision (not installed)
    "make_grid": "torchvision utils.py, called by DALLE-pytorch train_vae.py line 262",
    "find_classes": "torchvision datasets/folder.py, reached from DALLE-pytorch train_vae.py ImageFolder",
    # transformers 4.x only (v4.57.1 source, not installed; 5.25.0 has no such field)
    "--adafactor": "transformers v4.57.1 src/transformers/training_args.py (TrainingArguments.adafactor)",
    # NCCL's own (not installed; cited upstream in tests/audit/claims/failure-triage.yaml)
    "NCCL_DEBUG": "NCCL src/debug.cc ncclParamDebugLevel",
    "NCCL_": "the prefix deepspeed/launcher/runner.py sends for the CUDA accelerator (export_envs)",
    "NCCL_SHM_DISABLE": "NCCL src/transport/shm.cc (cited upstream in tests/audit/claims/torch-distributed.yaml)",
    "NCCL_ALGO": "NCCL src/enqueue.cc / graph tuning (the IsaacLab workaround in runtime-errors.md)",
    "NCCL_P2P_LEVEL": "NCCL src/graph/paths.cc (the IsaacLab mitigations in runtime-errors.md)",
    # read by libc10 (c10/util/Logging.cpp); the CPU library holds the string, and
    # tests/torch_distributed/test_c10d_ipv6_warnings.py runs it
    "TORCH_CPP_LOG_LEVEL": "libc10.so c10/util/Logging.cpp",
    # TRL's GRPO arguments (huggingface/trl trl/trainer/grpo_config.py; TRL is not installed)
    "ds3_gather_for_generation": "trl/trainer/grpo_config.py GRPOConfig (not installed)",
    "use_vllm": "trl/trainer/grpo_config.py GRPOConfig (not installed)",
    # PEFT (not installed): PeftModel / AutoPeftModel.from_pretrained(..., is_trainable: bool = False) loads an
    # adapter frozen for inference (peft v0.20.0 src/peft/auto.py, peft_model.py); numerics.md GradScaler section
    "is_trainable": "peft PeftModel.from_pretrained signature (not installed)",
    # multi-node.md rows of set-23 (s23-K7-04/05): NCCL's IB variables and debug subsystems (cited upstream
    # in tests/audit/claims/torch-distributed.yaml), gloo's interface variable (read by libtorch_cpu.so's
    # ProcessGroupGloo, run in tests/torch_distributed/test_behaviour.py b38/b39), Ray's job options (ray 2.60.0 wheel)
    "NCCL_DEBUG_SUBSYS": "NCCL src/debug.cc (ncclDebugInit)",
    "NCCL_IB_GID_INDEX": "NCCL src/transport/net_ib/connect.cc ncclIbGetGidIndex",
    "NCCL_IB_TC": "NCCL src/transport/net_ib/connect.cc NCCL_PARAM(IbTc, \"IB_TC\", -1)",
    "GLOO_SOCKET_IFNAME": "libtorch_cpu.so ProcessGroupGloo (C++), run by tests/torch_distributed/test_behaviour.py",
    "runtime_env": "ray 2.60.0 wheel ray/runtime_env/runtime_env.py (not installed)",
    "--runtime-env-json": "ray 2.60.0 wheel ray/dashboard/modules/job/cli.py (not installed)",
}
# Flight-recorder names that live in torch's C++ sources, not in its Python files, with where they
# were read (pytorch/pytorch torch/csrc/distributed/c10d/). "cpu": the 2.13.0 CPU library contains
# the string (checked below); "nccl": ProcessGroupNCCL only, absent from the CPU build.
FLIGHT_RECORDER_NAMES = {
    "TORCH_FR_CPP_STACK": ("cpu", "FlightRecorder.hpp FlightRecorder::FlightRecorder"),
    "TORCH_NCCL_TRACE_CPP_STACK": ("cpu", "FlightRecorder.hpp FlightRecorder::FlightRecorder"),
    "TORCH_FR_DUMP_TEMP_FILE": ("cpu", "FlightRecorder.cpp DebugInfoWriter::getWriter"),
    "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": ("cpu", "FlightRecorder.cpp DebugInfoWriter::getWriter"),
    "TORCH_FR_DUMP_DYNAMIC_FILE_NAME": ("cpu", "FlightRecorder.cpp DebugInfoWriter::getWriter"),
    "XDG_CACHE_HOME": ("cpu", "FlightRecorder.cpp DebugInfoWriter::getWriter"),
    "HOME": ("cpu", "FlightRecorder.cpp DebugInfoWriter::getWriter, when XDG_CACHE_HOME is unset"),
    "comm_lib_trace_rank_": ("source", "FlightRecorder.cpp DebugInfoWriter::getWriter"),
    "_dump_fr_trace": ("cpu", "init.cpp binding of dump_fr_trace"),
    "dump_fr_trace": ("cpu", "FlightRecorder.cpp dump_fr_trace"),
    "dump_fr_trace_json": ("cpu", "FlightRecorder.cpp dump_fr_trace_json"),
    "pg_status": ("cpu", "FlightRecorder.hpp DEFINE_CONSTANT(pg_status_key)"),
    "nccl_comm_state": ("cpu", "FlightRecorder.hpp DEFINE_CONSTANT(nccl_comm_key)"),
    "comm_lib_version": ("cpu", "FlightRecorder.hpp DEFINE_CONSTANT(comm_lib_version_key)"),
    "timeout_ms": ("cpu", "FlightRecorder.hpp DEFINE_CONSTANT(timeout_key)"),
    "time_discovered_started_ns": ("cpu", "FlightRecorder.hpp DEFINE_CONSTANT(time_discovered_started_key)"),
    "time_discovered_completed_ns": ("cpu", "FlightRecorder.hpp DEFINE_CONSTANT(time_discovered_completed_key)"),
    "DEFINE_CONSTANT": ("source", "FlightRecorder.hpp"),
    "version_val": ("source", "FlightRecorder.hpp DEFINE_CONSTANT(version_val)"),
    "TORCH_FR_": ("cpu", "the prefix of the variables above"),
    "TORCH_NCCL_": ("cpu", "the prefix of the older names"),
    "TORCH_NCCL_DUMP_ON_TIMEOUT": ("nccl", "ProcessGroupNCCL.cpp HeartbeatMonitor::HeartbeatMonitor"),
    "TORCH_NCCL_ENABLE_MONITORING": ("nccl", "ProcessGroupNCCL.cpp HeartbeatMonitor::HeartbeatMonitor"),
    "TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": ("nccl", "ProcessGroupNCCL.cpp HeartbeatMonitor::HeartbeatMonitor"),
    "TORCH_NCCL_COORD_CHECK_MILSEC": ("nccl", "ProcessGroupNCCL.cpp HeartbeatMonitor::HeartbeatMonitor"),
    "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": ("nccl", "ProcessGroupNCCL.cpp HeartbeatMonitor::HeartbeatMonitor"),
}
# Spans that are shell commands, file names or values rather than names to look up.
NOT_NAMES = {"--shm-size", "dmesg", "nvcc", "ss", "E1201", "MESSAGE",  # E1201: a glog level+date; MESSAGE: a placeholder
             "unbound_buffer", "EADDRINUSE", "EAFNOSUPPORT", "MULTI_CPUS",  # failure-matrix.md: a gloo source file, an errno name, the invalid value it feeds
             "--run", "--write",  # the options of tests/failure_triage/generate_failure_matrix.py
             "--ddp_timeout", "--ddp_timeout N"}  # HfArgumentParser's flag for the TrainingArguments field ddp_timeout


def _spans(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`]+)`", text)


@pytest.fixture(scope="module")
def corpus() -> set[str]:
    return _corpus()


def _corpus() -> set[str]:
    words: set[str] = set()
    roots = []
    for top in ("accelerate", "deepspeed", "dalle_pytorch"):
        roots.append(Path(importlib.util.find_spec(top).origin).parent)
    torch_root = Path(importlib.util.find_spec("torch").origin).parent
    roots += [torch_root / "distributed", torch_root / "cuda", torch_root / "optim"]
    # JIT extension builds (TORCH_EXTENSIONS_DIR, _get_build_directory, _jit_compile)
    roots += [torch_root / "utils" / "cpp_extension.py"]
    for root in roots:
        for f in ([root] if root.is_file() else root.rglob("*.py")):
            words |= set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*|--[a-z][a-z0-9_-]*", f.read_text(errors="replace")))
    facts = json.loads((REPO / "tests" / "dalle_siblings" / "facts_58c1e1a.json").read_text())
    for script in facts["scripts"].values():
        for flag in script.get("flags", []):
            words |= set(flag["flags"])
    return words


def _names(span: str) -> list[str]:
    out = []
    for tok in re.findall(r"--[a-z][a-z0-9_-]*|[A-Za-z_][A-Za-z0-9_.\-]*", span):
        tok = tok.rstrip(".-")
        if tok.startswith(PREFIXES) and tok.count("-") >= 2:
            continue  # a signature id, checked separately
        if tok.startswith("--") or "_" in tok or (tok.isupper() and len(tok) > 3):
            out.append(tok)
    return out


def test_every_signature_id_named_in_the_docs_exists():
    missing = []
    for doc in DOCS:
        text = doc.read_text()
        if "<!-- generated: failure matrix -->" in text:
            # the rows quote real logs verbatim (timestamps, pids, paths); test_failure_matrix.py
            # holds them to the captured runs, so only the hand-written part is checked here
            head, rest = text.split("<!-- generated: failure matrix -->", 1)
            text = head + rest.split("<!-- end generated -->", 1)[1]
        for span in _spans(text):
            for tok in re.findall(r"\b[a-z0-9]+(?:-[a-z0-9]+){2,}\b", span):
                if tok.startswith(PREFIXES) and tok not in CATALOG_IDS:
                    missing.append((doc.name, tok))
    assert not missing, missing


def test_identifiers_in_code_spans_exist_in_the_sources(corpus):
    unknown = _unknown_names(corpus)
    assert not unknown, unknown


def _own_names() -> set[str]:
    """Names this bundle defines: the script's flags, the label keys, its files, deepspeed's scripts."""
    from importlib import metadata
    names = set()
    spec = importlib.util.spec_from_file_location("tl_docs", SKILL / "scripts" / "triage_log.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names |= {o for a in mod.build_parser()._actions for o in a.option_strings}
    # the report's JSON keys, the catalog's keys and the grammar's class ids (issue 20)
    names |= {"class", "file", "file_line", "more", "wordings", "versions", "text"}
    names |= {c.id for c in sys.modules["triage.grammar"].CLASSES}
    labels = yaml.safe_load((REPO / "tests" / "failure_triage" / "real_logs" / "labels.yaml").read_text())
    names |= {k for lab in labels for k in lab}
    facts = json.loads((REPO / "tests" / "dalle_siblings" / "facts_58c1e1a.json").read_text())
    names |= {Path(s).stem for s in facts["scripts"]}
    names |= {Path(str(f)).name for f in metadata.distribution("deepspeed").files if "/bin/" in f"/{f}"}
    # the verdicts and report keys fr_dump.py writes
    names |= set(re.findall(r'"([a-z][a-z_]+)"', (SKILL / "scripts" / "fr_dump.py").read_text()))
    return names


def _unknown_names(corpus):
    unknown = []
    own = _own_names()
    for doc in DOCS:
        text = doc.read_text()
        if "<!-- generated: failure matrix -->" in text:
            # the rows quote real logs verbatim (timestamps, pids, paths); test_failure_matrix.py
            # holds them to the captured runs, so only the hand-written part is checked here
            head, rest = text.split("<!-- generated: failure matrix -->", 1)
            text = head + rest.split("<!-- end generated -->", 1)[1]
        for span in _spans(text):
            if span.startswith(("python3 ", "python ", "sub-skills/", "../")) or span in NOT_NAMES:
                continue
            if "/" in span and " " not in span and not span.startswith("-"):
                # a path of this bundle (or a package-relative path such as deepspeed/checkpoint/);
                # a template with <placeholders> names no one file, a test id is checked as its file
                if "<" in span:
                    continue
                span = span.split("::")[0]
                pkg = span.split("/")[0]
                if (REPO / span).exists() or importlib.util.find_spec(pkg) is not None \
                        or (span.startswith("src/transformers/")
                            and (TRANSFORMERS_ROOT / span[len("src/transformers/"):]).exists()):
                    continue
                unknown.append((doc.name, span, "path"))
                continue
            if span.endswith(".py") and " " not in span and Path(span).stem in own | {"triage_log"}:
                continue
            for name in _names(span):
                parts = [name] if name.startswith("--") else [p for p in name.split(".") if p]
                for part in parts:
                    if part in corpus or part in OTHER_SOURCE_NAMES or part in TRANSFORMERS_NAMES or part in NOT_NAMES \
                            or part in own \
                            or part in FLIGHT_RECORDER_NAMES:
                        continue
                    if part.endswith((".py", ".json", ".yaml", ".md")):
                        continue
                    unknown.append((doc.name, span, part))
    return unknown


def test_transformers_names_are_in_the_installed_package():
    """Each Transformers name the references use occurs where TRANSFORMERS_NAMES says, in the
    installed transformers (read as text: no import)."""
    missing = [(name, rel, needle) for name, (rel, needle) in TRANSFORMERS_NAMES.items()
               if needle not in (TRANSFORMERS_ROOT / rel).read_text(encoding="utf-8")]
    assert not missing, missing


def test_flight_recorder_names_of_the_cpu_build_are_in_its_library():
    """The C++ names flight-recorder.md states for the CPU build occur in torch 2.13.0's
    libtorch_cpu.so (the NCCL ones do not: they are cited from source)."""
    import mmap
    lib = Path(importlib.util.find_spec("torch").origin).parent / "lib" / "libtorch_cpu.so"
    if not lib.exists():   # other platforms name it differently: look through torch/lib
        lib = max((p for p in lib.parent.iterdir() if "torch_cpu" in p.name), key=lambda p: p.stat().st_size)
    with open(lib, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for name, (kind, _) in FLIGHT_RECORDER_NAMES.items():
            if kind == "cpu" and name != "_dump_fr_trace":
                assert mm.find(name.encode()) != -1, name
            if kind == "nccl":
                assert mm.find(name.encode()) == -1, name
    import torch._C._distributed_c10d as c10d
    assert callable(c10d._dump_fr_trace) and callable(c10d._dump_fr_trace_json)


def test_signature_rows_say_the_same_as_the_catalog_role():
    """Rows in the misleading-warnings table are warning entries; cascade lines are cascade entries."""
    text = (SKILL / "references" / "reading-logs.md").read_text()
    entries = {e["id"]: e for p in (SKILL / "catalog").glob("*.yaml") for e in yaml.safe_load(p.read_text())}
    warn = text.split("## Misleading warnings", 1)[1].split("\n## ", 1)[0]
    for sig in re.findall(r"`([a-z]+-[a-z0-9-]+)`", warn):
        assert entries[sig]["role"] == "warning", sig
    assert entries["accelerate-launch-child-failed"]["role"] == "cascade"


# --------------------------------------------------------------------------- behaviour claims

def test_reading_logs_states_the_script_bounds(triage):
    text = (SKILL / "references" / "reading-logs.md").read_text()
    assert triage.MAX_BYTES == 64 * 1024 * 1024 and "64 MiB read per input" in text
    assert f"{triage.MAX_LINE} characters per line" in text
    assert f"{triage.MAX_FINDINGS} findings" in text
    assert f"patterns see the first {triage.MATCH_CHARS}" in text
    assert f"{triage.MAX_SECONDS} s of\n   analysis" in text


def test_accelerate_launch_debug_sets_debug_mode_and_tee_log_dir_exist():
    from accelerate.commands.launch import launch_command_parser
    from accelerate.utils.launch import prepare_simple_launcher_cmd_env
    args = launch_command_parser().parse_args(["--cpu", "--num_processes", "1", "--num_machines", "1", "--debug", "--tee", "3",
                                                "--log_dir", "/tmp/x", "--mixed_precision", "no",
                                                "--dynamo_backend", "no", "train.py"])
    _, env = prepare_simple_launcher_cmd_env(args)
    assert env["ACCELERATE_DEBUG_MODE"] == "true"
    assert args.tee == "3" and args.log_dir == "/tmp/x"


def test_debug_mode_makes_collectives_check_shapes():
    from accelerate.utils import operations
    src = inspect.getsource(operations.verify_operation)
    assert "PartialState().debug" in src and "DistributedOperationException" in src
    import accelerate.state as st
    assert "ACCELERATE_DEBUG_MODE" in inspect.getsource(st.PartialState.__init__)


def test_deepspeed_launcher_environment_propagation():
    from deepspeed.launcher import runner
    assert runner.EXPORT_ENVS == ["MLFLOW", "PYTHON", "MV2", "UCX"]
    assert runner.DEEPSPEED_ENVIRONMENT_PATHS[1] == "." and len(runner.DEEPSPEED_ENVIRONMENT_PATHS) == 2
    assert 'os.getenv("DS_ENV_FILE", ".deepspeed_env")' in inspect.getsource(runner)
    cuda_acc = Path(importlib.util.find_spec("deepspeed").origin).parent / "accelerator" / "cuda_accelerator.py"
    assert re.search(r"def export_envs\(self\):\s+return \['NCCL'\]", cuda_acc.read_text())
    assert "--enable_each_rank_log" in inspect.getsource(runner.parse_args)


def test_accelerate_multinode_launchers_list():
    from accelerate.utils.constants import DEEPSPEED_MULTINODE_LAUNCHERS
    assert DEEPSPEED_MULTINODE_LAUNCHERS == ["pdsh", "standard", "openmpi", "mvapich", "mpich", "nossh", "slurm"]


def test_timeout_settings_exist():
    import datetime

    import deepspeed
    from accelerate.utils import DistributedDataParallelKwargs, InitProcessGroupKwargs
    assert InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=5)).timeout.total_seconds() == 5
    assert "timeout" in inspect.signature(deepspeed.init_distributed).parameters
    assert DistributedDataParallelKwargs(find_unused_parameters=True).find_unused_parameters is True


def test_bf16_emulation_default():
    import torch
    sig = inspect.signature(torch.cuda.is_bf16_supported)
    assert sig.parameters["including_emulation"].default is True
    src = inspect.getsource(torch.cuda.is_bf16_supported)
    assert ".major >= 8" in src and "_check_bf16_tensor_supported" in src
    assert torch.cuda.is_bf16_supported() is False  # CPU build: no CUDA


def test_deepspeed_loss_scaler_messages_and_universal_checkpoint():
    root = Path(importlib.util.find_spec("deepspeed").origin).parent
    scaler = (root / "runtime" / "fp16" / "loss_scaler.py").read_text()
    assert "OVERFLOW! Rank {dist.get_rank()} Skipping step." in scaler
    assert "Current loss scale already at minimum - cannot decrease scale anymore. Exiting run." in scaler
    assert (root / "checkpoint" / "ds_to_universal.py").is_file()
    from deepspeed.runtime import constants
    assert constants.CHECKPOINT == "checkpoint" and constants.LOAD_UNIVERSAL_CHECKPOINT == "load_universal"


def test_fsdp1_summon_full_params_takes_writeback():
    from torch.distributed.fsdp import FullyShardedDataParallel
    assert "writeback" in inspect.signature(FullyShardedDataParallel.summon_full_params).parameters


def test_every_reference_is_linked_from_skill_md():
    skill = (SKILL / "SKILL.md").read_text()
    for ref in (SKILL / "references").glob("*.md"):
        assert f"(references/{ref.name})" in skill, ref.name
