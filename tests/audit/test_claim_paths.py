"""Claims of the ledger that were unbacked and have a cheap CPU path, each shown by a run here.

- torch.load restores a tensor onto the device its location tag names unless map_location remaps
  it (torch-distributed/references/checkpoints.md). No GPU here: the checkpoint is written with a
  `cuda:0` tag (torch.serialization.location_tag patched for the save only), so loading it without
  map_location tries CUDA, which this host either lacks (the error names the CUDA device) or has.
- only DeepSpeed's plugin carries NVMe offload fields and only the DeepSpeed preparation handles
  DummyOptim/DummyScheduler (distributed-training-backends/references/deepspeed-fsdp.md);
- the tokenizers fork warning (failure-triage/references/reading-logs.md): a child forked after the
  Rust thread pool ran finishes its own batch (no hang); a release whose binary still has the
  message prints it unless TOKENIZERS_PARALLELISM is set, the installed 0.23.3 prints nothing.

One process each, no launcher; a few seconds in all.
"""
from __future__ import annotations

import ast
import re
import dataclasses
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402


def _saved_with_tag(tag: str) -> bytes:
    import torch
    import torch.serialization as ser

    buf = io.BytesIO()
    real = ser.location_tag
    ser.location_tag = lambda storage: tag
    try:
        torch.save({"w": torch.arange(4.0)}, buf)
    finally:
        ser.location_tag = real
    return buf.getvalue()


def test_torch_load_without_map_location_restores_onto_the_saved_cuda_device():
    import torch

    blob = _saved_with_tag("cuda:0")
    seen = []

    def record(storage, location):
        seen.append(location)
        return storage

    # the tag travels with the checkpoint: a callable map_location receives it per storage
    torch.load(io.BytesIO(blob), map_location=record, weights_only=True)
    assert seen == ["cuda:0"]
    # map_location="cpu" (or a {"cuda:0": ...} remap) lands it where asked, whatever the tag
    assert torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)["w"].device.type == "cpu"
    remapped = torch.load(io.BytesIO(blob), map_location={"cuda:0": "cpu"}, weights_only=True)
    assert remapped["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    # no map_location: restored onto the tagged device itself
    if torch.cuda.is_available():
        got = torch.load(io.BytesIO(blob), weights_only=True)["w"]
        assert got.device == torch.device("cuda", 0)
    else:
        with pytest.raises(RuntimeError, match="Attempting to deserialize object on a CUDA device"):
            torch.load(io.BytesIO(blob), weights_only=True)
    # a CPU tag under the same call loads to CPU (the default only follows the tag)
    assert torch.load(io.BytesIO(_saved_with_tag("cpu")), weights_only=True)["w"].device.type == "cpu"


def test_only_the_deepspeed_plugin_has_nvme_offload_and_dummy_optim_handling():
    import accelerate.accelerator as acc_mod
    from accelerate.utils import dataclasses as plugins

    def nvme_fields(cls):
        return {f.name for f in dataclasses.fields(cls) if "nvme" in f.name}

    assert nvme_fields(plugins.DeepSpeedPlugin) == {"offload_optimizer_nvme_path", "offload_param_nvme_path"}
    others = [c for c in vars(plugins).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
              and c is not plugins.DeepSpeedPlugin]
    assert plugins.FullyShardedDataParallelPlugin in others and len(others) > 10
    assert [c.__name__ for c in others if nvme_fields(c)] == []
    # every DummyOptim / DummyScheduler use in Accelerator sits in its DeepSpeed preparation
    tree = ast.parse(Path(acc_mod.__file__).read_text(encoding="utf-8"))
    owners = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and node.id in {"DummyOptim", "DummyScheduler"}:
                    owners.add(fn.name)
    assert owners == {"_prepare_deepspeed"}, owners


FORK_CHILD = textwrap.dedent("""
    import os, sys
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace
    tok = Tokenizer(WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    tok.encode_batch(["a b"] * 64)                  # the batch call runs on the Rust thread pool
    pid = os.fork()
    if pid == 0:
        ids = tok.encode_batch(["b a"] * 8)[0].ids  # the forked child (a DataLoader worker) uses it
        sys.stdout.write("child ids %s\\n" % ids); sys.stdout.flush()
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    print("child exit", os.waitstatus_to_exitcode(status))
""")


@pytest.mark.parametrize("parallelism", [None, "false"])
def test_tokenizers_fork_warning_is_printed_and_the_child_finishes(parallelism, tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "TOKENIZERS_PARALLELISM"}
    if parallelism is not None:
        env["TOKENIZERS_PARALLELISM"] = parallelism
    env["RAYON_NUM_THREADS"] = "2"                  # a real pool even on a 1-core host
    proc = subprocess.run([sys.executable, "-c", FORK_CHILD], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "child ids [2, 1]" in proc.stdout and "child exit 0" in proc.stdout, proc.stdout
    # the message is a println! of the Rust fork callback (stdout); tokenizers 0.23.3 no longer has it
    # at all: the callback only turns parallelism off. Which release this is decides what to expect.
    import tokenizers

    message = b"The current process just got forked, after parallelism has already been used"
    binary = next(Path(tokenizers.__file__).parent.glob("tokenizers*.so")).read_bytes()
    warned = message.decode() in proc.stdout + proc.stderr
    if message in binary:
        assert warned is (parallelism is None), (proc.stdout, proc.stderr)
    else:
        assert not warned and tokenizers.__version__ >= "0.23", tokenizers.__version__


OOM_CHILD = textwrap.dedent("""
    import sys, torch, torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + sys.argv[1], rank=0, world_size=1)
    # the CUDA allocator's text cannot be produced without a GPU: the exception type is real, the message is
    # a copy of its shape; what is shown is the prefix torch adds to an uncaught exception after init
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB")
""")


def test_uncaught_oom_after_init_process_group_is_prefixed_with_the_rank(tmp_path):
    proc = subprocess.run([sys.executable, "-c", OOM_CHILD, str(tmp_path / "store")], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines[0] == "[rank0]: Traceback (most recent call last):", proc.stderr
    assert ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
            "capacity of 79.25 GiB") in lines, proc.stderr
    assert all(ln.startswith("[rank0]:") for ln in lines), proc.stderr


@pytest.fixture
def transformers_log():
    """What transformers' loggers write during the test, whatever stream their handler was bound to at
    import (another test's capture, under xdist); the library root logger does not propagate to root."""
    import io
    import logging

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    lib = logging.getLogger("transformers")
    old_level = lib.level
    lib.addHandler(handler)
    lib.setLevel(logging.WARNING)
    try:
        yield buf
    finally:
        lib.removeHandler(handler)
        lib.setLevel(old_level)


def test_missing_keys_of_a_load_are_newly_initialized_head_or_backbone(tmp_path, transformers_log):
    """transformers 5.25.0: keys missing from the checkpoint are listed as MISSING rows of the load report
    and get fresh values; a new task head is the expected case, a backbone key means random weights."""
    import torch
    from safetensors.torch import load_file, save_file
    from transformers import BertConfig, BertForSequenceClassification, BertModel

    cfg = BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16)
    torch.manual_seed(0)
    base = BertModel(cfg)
    with torch.no_grad():
        for p in base.parameters():
            p.fill_(0.5)                           # a value no initializer produces
    base.save_pretrained(tmp_path / "full")
    head, info = BertForSequenceClassification.from_pretrained(tmp_path / "full", output_loading_info=True)
    assert info["missing_keys"] == {"classifier.weight", "classifier.bias"} and not info["unexpected_keys"]
    assert torch.all(head.bert.encoder.layer[0].output.dense.weight == 0.5)
    assert not torch.all(head.classifier.weight == 0.5)
    report = transformers_log.getvalue()
    assert re.search(r"classifier\.weight\s*\|\s*MISSING", report) and "newly initialized" in report, report
    # a backbone weight absent from the checkpoint: listed the same way, and random
    (tmp_path / "cut").mkdir()
    for f in (tmp_path / "full").iterdir():
        (tmp_path / "cut" / f.name).write_bytes(f.read_bytes())
    weights = load_file(tmp_path / "full" / "model.safetensors")
    key = next(k for k in weights if k.endswith("layer.0.output.dense.weight"))
    del weights[key]
    save_file(weights, tmp_path / "cut" / "model.safetensors", metadata={"format": "pt"})
    cut, info = BertModel.from_pretrained(tmp_path / "cut", output_loading_info=True)
    assert info["missing_keys"] == {key}
    assert not torch.all(cut.encoder.layer[0].output.dense.weight == 0.5)
    assert torch.all(cut.encoder.layer[0].output.dense.bias == 0.5)
    assert re.search(re.escape(key) + r"\s*\|\s*MISSING", transformers_log.getvalue()[len(report):])


def test_zero3_refuses_a_device_map_and_low_cpu_mem_usage_is_dropped(tmp_path):
    """transformers 5.25.0: with a ZeRO-3 HfDeepSpeedConfig alive, from_pretrained(device_map=...) raises;
    low_cpu_mem_usage is popped from the kwargs unused (the <4.47 message about it is gone)."""
    import torch
    from transformers import BertConfig, BertModel
    from transformers.integrations import HfDeepSpeedConfig, is_deepspeed_zero3_enabled

    cfg = BertConfig(vocab_size=32, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=16, max_position_embeddings=16)
    BertModel(cfg).save_pretrained(tmp_path)
    loaded = BertModel.from_pretrained(tmp_path, low_cpu_mem_usage=True)     # accepted, no effect
    assert isinstance(loaded, BertModel)
    ds = HfDeepSpeedConfig({"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1})
    try:
        assert is_deepspeed_zero3_enabled()
        with pytest.raises(ValueError, match="DeepSpeed Zero-3 is not compatible with passing a `device_map`."):
            BertModel.from_pretrained(tmp_path, device_map="cpu", low_cpu_mem_usage=True)
    finally:
        del ds                                   # the module keeps only a weak reference
    assert not is_deepspeed_zero3_enabled()
    assert torch.is_tensor(loaded.embeddings.word_embeddings.weight)


def test_a_node_whose_master_address_is_its_own_loopback_waits_for_the_store_timeout():
    """multi-node.md / containers-and-networking.md: on a node other than rank 0, `localhost` is that node
    itself, where no store listens. Here: a client of a free loopback port keeps retrying until its timeout
    instead of failing at once (what such a node does; two hosts are not run)."""
    import datetime
    import time

    import torch.distributed as dist

    port = _ports.free_port()                    # free and reserved: nothing listens there
    t0 = time.monotonic()
    with pytest.raises(Exception) as info:       # noqa: PT011 - the type differs across torch releases
        dist.TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=1))
    waited = time.monotonic() - t0
    assert waited >= 0.9, waited
    assert "timed out after 1000ms while trying to connect to (127.0.0.1, " in str(info.value), str(info.value)
