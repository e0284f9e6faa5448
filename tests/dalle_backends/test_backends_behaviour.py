"""Every backend name, flag, alias and behaviour the references state, checked against the installed
dalle-pytorch 1.6.6 wheel (loaded without its package __init__), with deepspeed installed and hidden."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest


def _flags(actions):
    return {tuple(a["flags"]): a for a in actions}


# --------------------------------------------------------------------------- module layout

def test_wheel_layout_matches_reference(oracle_ds, docs):
    doc = docs["references/distributed-backends.md"]
    assert oracle_ds["wheel_dir_name"] == "dalle_pytorch"
    assert oracle_ds["functions"] == ["require_set_backend", "set_backend_from_args", "using_backend",
                                      "wrap_arg_parser"]
    for fn in oracle_ds["functions"] + oracle_ds["exports"]:
        assert f"`{fn}`" in doc, fn
    base = set(oracle_ds["base_methods"])
    for m in ("has_backend", "check_batch_size", "initialize", "require_init", "get_world_size", "get_rank",
              "get_local_rank", "is_root_worker", "is_local_root_worker", "local_barrier", "distribute",
              "average_all"):
        assert m in base and f"`{m}`" in doc, m
    assert oracle_ds["default_backend"] == "DummyBackend"
    assert oracle_ds["globals_initial"] == {"is_distributed": None, "backend": None}
    # loading distributed_utils alone imports no deepspeed; wrapping the parser does
    assert oracle_ds["deepspeed_imported_by_loading"] is False
    assert oracle_ds["deepspeed_imported_by_wrap"] is True
    assert oracle_ds["hide_deepspeed"] is False


def test_backend_names_and_modules(oracle_ds, docs):
    doc = docs["references/distributed-backends.md"]
    got = {b["class"]: (b["name"], b["module"]) for b in oracle_ds["backends"]}
    assert got == {"DummyBackend": ("Dummy", "NO MODULE"), "DeepSpeedBackend": ("DeepSpeed", "deepspeed"),
                   "HorovodBackend": ("Horovod", "horovod.torch")}
    assert "`DummyBackend`: name `Dummy`, no module" in doc
    assert "`DeepSpeedBackend`: name `DeepSpeed`, module `deepspeed`" in doc
    assert "`HorovodBackend`: name `Horovod`, module `horovod.torch`" in doc
    # the only accepted values: lower-cased backend names
    for value in ("`dummy`", "`deepspeed`", "`horovod`"):
        assert value in doc


# --------------------------------------------------------------------------- parser

def test_parser_with_deepspeed(oracle_ds, docs):
    doc = docs["references/distributed-backends.md"]
    acts = _flags(oracle_ds["parser_actions"])
    assert list(acts) == [("--distributed_backend", "--distr_backend"), ("--deepspeed",), ("--deepspeed_config",),
                          ("--deepscale",), ("--deepscale_config",), ("--local_rank",)]
    assert acts[("--distributed_backend", "--distr_backend")]["dest"] == "distributed_backend"
    assert acts[("--distributed_backend", "--distr_backend")]["default"] is None
    assert acts[("--deepspeed",)]["kind"] == "_StoreTrueAction" and acts[("--deepspeed",)]["default"] is False
    assert acts[("--local_rank",)]["default"] == -1
    assert oracle_ds["deepspeed_add_config_arguments"] == [["--deepspeed"], ["--deepspeed_config"], ["--deepscale"],
                                                           ["--deepscale_config"]]
    assert "one option, dest `distributed_backend`" in doc
    assert "store_true, default False (added by `deepspeed.add_config_arguments`)" in doc
    assert "int, default -1" in doc
    assert oracle_ds["parse"]["--local_rank 3"]["ok"]["local_rank"] == 3


def test_parser_without_deepspeed(oracle_nods, docs):
    doc = docs["references/distributed-backends.md"]
    trouble = docs["references/troubleshooting.md"]
    acts = _flags(oracle_nods["parser_actions"])
    assert list(acts) == [("--distributed_backend", "--distr_backend"), ("--deepspeed",), ("--local_rank",)]
    assert acts[("--deepspeed",)]["kind"] == "_StoreAction" and acts[("--deepspeed",)]["default"] is None
    assert oracle_nods["deepspeed_imported_by_wrap"] is False
    bare = oracle_nods["parse"]["--deepspeed"]
    assert bare["exit"] == 2 and bare["stderr"].endswith("argument --deepspeed: expected one argument")
    assert oracle_nods["parse"]["--deepspeed 1"]["ok"]["deepspeed"] is False
    assert oracle_nods["parse"]["--deepspeed yes"]["ok"]["deepspeed"] is False
    assert "error: argument --deepspeed: expected one argument" in trouble
    assert "`--deepspeed` alone exits with `expected one argument`; default None" in doc
    assert "placeholder that **takes a value** and always yields False" in doc
    # and `--deepspeed 1` therefore selects nothing
    sel = oracle_nods["select"]["--deepspeed 1"]
    assert sel["ok"] == "Dummy" and sel["is_distributed"] is False


# --------------------------------------------------------------------------- set_backend_from_args

def test_set_backend_matrix(oracle_ds, oracle_nods, docs):
    doc = docs["references/distributed-backends.md"]
    s = oracle_ds["select"]
    assert s["(none)"] == {"ok": "Dummy", "is_distributed": False, "printed": "", "distributed_backend_after": None}
    assert s["--deepspeed"]["ok"] == "DeepSpeed" and s["--deepspeed"]["distributed_backend_after"] == "DeepSpeed"
    # --deepspeed overrides another named backend
    assert s["--distr_backend horovod --deepspeed"]["ok"] == "DeepSpeed"
    for case in ("--distributed_backend deepspeed", "--distr_backend DeepSpeed", "--distr_backend DEEPSPEED"):
        assert s[case]["ok"] == "DeepSpeed" and s[case]["is_distributed"] is True
        assert s[case]["printed"] == "Using DeepSpeed for distributed execution"
    assert "prints `Using DeepSpeed for distributed execution`" in doc
    # the dummy quirk
    for case in ("--distr_backend dummy", "--distr_backend Dummy"):
        assert s[case]["ok"] == "Dummy" and s[case]["is_distributed"] is True
    assert "| `--distr_backend dummy` | Dummy | **True** |" in doc
    # unknown values
    for case in ("--distr_backend nccl", "--distr_backend ddp"):
        e = s[case]["error"]
        assert e["type"] == "ValueError" and e["message"] == "unknown backend; please check `distributed_utils.BACKENDS`"
    assert "`ValueError`: `unknown backend; please check` ``distributed_utils.BACKENDS``" in doc
    # missing modules: Horovod here (not installed), DeepSpeed when hidden
    horovod_installed = importlib.util.find_spec("horovod") is not None
    hv = s["--distr_backend horovod"]
    if horovod_installed:
        assert hv.get("ok") == "Horovod" or hv["error"]["type"] != "ModuleNotFoundError"
    else:
        assert hv["error"] == {"type": "ModuleNotFoundError", "module": "builtins",
                               "message": "Horovod backend selected but module not available"}
    n = oracle_nods["select"]
    for case in ("--distr_backend DeepSpeed", "--distr_backend DEEPSPEED"):
        assert n[case]["error"]["message"] == "DeepSpeed backend selected but module not available"
    assert "`Horovod backend selected but module not available` (same text with `DeepSpeed`)" in doc


def test_using_backend_semantics(oracle_ds, docs):
    doc = docs["references/distributed-backends.md"]
    assert oracle_ds["using_backend_deepspeed"] == {"DeepSpeed": True, "deepspeed": False, "DeepSpeedBackend": True,
                                                    "DistributedBackend": True}
    assert oracle_ds["using_backend_dummy"]["dummy"] is False and oracle_ds["using_backend_dummy"]["Dummy"] is True
    unset = oracle_ds["using_backend_unset"]["error"]
    assert unset["type"] == "AssertionError" and unset["message"].startswith("distributed backend is not set")
    assert "a string compared **case-sensitively** with `BACKEND_NAME`" in doc
    assert "`AssertionError: distributed backend is not set`" in docs["references/troubleshooting.md"]


# --------------------------------------------------------------------------- per-backend behaviour

def test_dummy_backend(oracle_ds, docs):
    doc = docs["references/distributed-backends.md"]
    d = oracle_ds["dummy"]
    assert (d["world_size"], d["rank"], d["local_rank"]) == (1, 0, 0)
    assert d["is_root"] and d["is_local_root"] and d["has_backend"]
    assert d["distribute_identity"] == [True, True, True, True]
    assert d["average_identity"] is True and d["barrier"] is None
    assert d["check_batch_size_1"] == {"ok": None}
    assert d["check_batch_size_0"]["error"]["type"] == "AssertionError"
    assert d["check_batch_size_0"]["error"]["message"].startswith("batch size can't be smaller than number of processes")
    assert "| world size / rank / local rank | 1 / 0 / 0 |" in doc
    assert "| `check_batch_size(bs)` | asserts `bs >= 1` | asserts `bs >= world size` | does nothing |" in doc
    assert "`AssertionError: batch size can't be smaller than number of processes`" in docs["references/troubleshooting.md"]


def test_require_init_nameerror(oracle_ds, docs):
    for res in list(oracle_ds["require_init_before_initialize"].values()) + [oracle_ds["dummy_before_init"]]:
        assert res["error"] == {"type": "NameError", "module": "builtins", "message": "name 'BACKEND_NAME' is not defined"}
    assert "`NameError: name 'BACKEND_NAME' is not defined`" in " ".join(docs["references/distributed-backends.md"].split())
    assert "`NameError: name 'BACKEND_NAME' is not defined`" in docs["references/troubleshooting.md"]


def test_horovod_backend_with_fake_module(oracle_ds, docs):
    doc = docs["references/distributed-backends.md"]
    h = oracle_ds["horovod_fake"]
    assert h["select"]["ok"] == "Horovod" and h["select"]["printed"] == "Using Horovod for distributed execution"
    assert (h["world_size"], h["rank"], h["local_rank"]) == (4, 2, 1)
    assert h["model_unwrapped"] is True
    assert h["optimizer"] == ["wrapped", "OPT"] and h["data"] == "DATA" and h["scheduler"] == "SCHED"
    assert h["check_batch_size_0"] == {"ok": None}
    calls = [tuple(c) for c in h["calls"]]
    assert calls[0] == ("init",)
    # DistributedOptimizer gets only the optimizer (no named_parameters); full state_dict broadcast from rank 0
    assert ("DistributedOptimizer", 0, ()) == (calls[1][0], calls[1][1], tuple(calls[1][2]))
    assert calls[2] == ("broadcast_parameters", "dict", 0)
    assert calls[3] == ("broadcast_optimizer_state", "wrapped", 0)
    assert ("allreduce",) in calls and ("join",) in calls
    assert "the **unwrapped** model, `hvd.DistributedOptimizer(optimizer)`" in doc
    assert "broadcasts `model.state_dict()`" in doc
    assert "`hvd.allreduce(t)` (averages)" in doc and "`hvd.join()` (global)" in doc


def test_deepspeed_backend_arg_checks(oracle_ds, oracle_nods, docs):
    doc = docs["references/distributed-backends.md"]
    for o in (oracle_ds, oracle_nods):  # pure backend logic: same with and without deepspeed
        c = o["deepspeed_check_args"]
        assert c["dict_without_flag"]["deepspeed_after"] is True
        assert "setting `args.deepspeed = True`" in c["dict_without_flag"]["printed"]
        assert c["dict_with_optimizer_and_scheduler"]["optimizer"] is None
        assert c["dict_with_optimizer_and_scheduler"]["scheduler"] is None
        assert c["json_and_dict"]["printed"].endswith("Python dictionary takes precedence.")
        assert c["no_config_at_all"]["error"]["type"] == "TypeError"
        assert c["no_config_at_all"]["error"]["message"] == "expected str, bytes or os.PathLike object, not NoneType"
        assert c["missing_json_no_dict"]["error"]["type"] == "FileNotFoundError"
    assert "prints a warning and sets it True" in doc
    assert "an `optimizer` key in the config drops the script's optimizer" in doc
    assert "`TypeError: expected str, bytes or\n  os.PathLike object, not NoneType`" in doc
    assert "`FileNotFoundError` for a missing file" in doc


def test_json_plus_dict_asserts(oracle_ds, docs, gpu_run):
    r = oracle_ds["json_plus_dict"]
    msg = ("Not sure how to proceed, we were given deepspeed configs in the deepspeed arguments and "
           "deepspeed.initialize() function call")
    assert r["result"]["error"] == {"type": "AssertionError", "module": "builtins", "message": msg}
    assert "Python dictionary takes precedence." in r["printed"]
    assert gpu_run["json_and_dict"] == f"AssertionError: {msg}"
    assert f"`AssertionError: {msg}`" in docs["references/troubleshooting.md"]
    flat = " ".join(docs["references/distributed-backends.md"].split())
    assert f"`AssertionError: {msg}`" in flat


# --------------------------------------------------------------------------- deepspeed 0.19.8 facts

AMP_MSG = "NVIDIA Apex AMP integration has been removed. Use DeepSpeed 'fp16', 'bf16', or 'torch_autocast' instead."


def test_train_dalle_dict_rejected_by_installed_deepspeed(oracle_ds, repo_facts, docs):
    assert oracle_ds["deepspeed_version"] == "0.19.8"
    keys = repo_facts["train_dalle.py"]["deepspeed_config"]["keys"]
    assert "amp" in keys and "zero_optimization" not in keys  # the oracle's dict mirrors the recorded keys
    cfg = oracle_ds["ds_config"]
    for case in ("train_dalle_as_built", "train_dalle_as_built_amp", "train_dalle_as_built_fp16"):
        e = cfg[case]["error"]
        assert (e["module"], e["type"]) == ("deepspeed.runtime.config", "DeepSpeedConfigError")
        assert e["message"].startswith(AMP_MSG)
    assert cfg["without_amp"]["ok"] == {"train_batch_size": 4, "micro": 4, "ga": 1, "fp16": False, "bf16": False,
                                        "zero_stage": 0, "clip": 0.5}
    assert cfg["without_amp_fp16"]["ok"]["fp16"] is True
    assert cfg["without_amp_zero2"]["ok"]["zero_stage"] == 2
    assert cfg["without_amp_bf16"]["ok"]["bf16"] is True
    assert "ok" in cfg["without_amp_torch_autocast"]
    assert cfg["train_vae"]["ok"]["train_batch_size"] == 8
    flat = " ".join(docs["references/distributed-backends.md"].split())
    assert f"`deepspeed.runtime.config.DeepSpeedConfigError: {AMP_MSG}`" in flat
    assert "`DeepSpeedConfigError: NVIDIA Apex AMP integration has been removed`" in docs["references/troubleshooting.md"]


def test_batch_equation(oracle_ds, gpu_run, docs):
    e = oracle_ds["ds_config"]["without_amp_bs4_ga3"]["error"]
    assert e["type"] == "AssertionError" and e["message"].startswith(
        "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step"
        " * world_size")
    assert gpu_run["batch_4_ga_3"].startswith("AssertionError: Check batch related parameters.")
    assert "`--batch_size 4 --ga_steps 3` on one process\nfails with `Check batch related parameters`" in \
        docs["references/distributed-backends.md"]


def test_sparse_attention_gone(oracle_ds, oracle_nods, gpu_run, docs):
    msg = "No module named 'deepspeed.ops.sparse_attention'"
    assert oracle_ds["sparse_attention_import"]["error"]["message"] == msg
    assert oracle_ds["sparse_attention_build"]["error"] == {"type": "ModuleNotFoundError", "module": "builtins",
                                                            "message": msg}
    assert oracle_nods["sparse_attention_build"]["error"]["message"] == "No module named 'deepspeed'"
    blk = oracle_ds["ds_config"]["sparse_attention_block"]["error"]
    assert blk["type"] == "DeepSpeedConfigError" and blk["message"].startswith("DeepSpeed Sparse Attention has been removed")
    assert gpu_run["attn_types_sparse"] == f"ModuleNotFoundError: {msg}"
    doc = docs["references/distributed-backends.md"]
    assert f"No module named 'deepspeed.ops.sparse_attention'`" in doc  # the owner entry, What breaks 2
    assert "`No module named 'deepspeed'`" in doc
    assert "`DeepSpeed Sparse Attention has been removed`" in doc
    assert oracle_ds["register_external_parameter"] is True


def test_fp16_refused_on_cpu_accelerator(oracle_ds, docs, cpu_fp16_supported):
    """The engine's sanity check refuses fp16 when the accelerator says it has none; DeepSpeed's CPU
    accelerator says so only on CPUs without oneDNN fp16 kernels (the check is run as such a CPU
    answers; what the oracle's CPU answers must be this CPU's oneDNN probe, forced or not)."""
    assert oracle_ds["fp16_sanity_check"]["error"]["message"] == "Type fp16 is not supported on your device."
    if oracle_ds["accelerator"] == "cpu":
        assert "_is_mkldnn_fp16_supported" in oracle_ds["fp16_check_source"]
        assert oracle_ds["fp16_supported_here"] is cpu_fp16_supported
    assert "`ValueError: Type fp16 is not supported on your device.`" in docs["references/troubleshooting.md"]
    backends = " ".join(docs["references/distributed-backends.md"].split())
    assert "`Type fp16 is not supported on your device`" in backends and "`torch.ops.mkldnn._is_mkldnn_fp16_supported()`" in backends
    assert "oneDNN fp16" in docs["references/troubleshooting.md"]


def test_plain_python_start_needs_launcher(oracle_ds, docs):
    r = oracle_ds["init_without_launcher"]
    if r["mpi4py_installed"]:
        assert "error" not in r or r["error"]["type"] != "ModuleNotFoundError"
    else:
        assert r["error"] == {"type": "ModuleNotFoundError", "module": "builtins", "message": "No module named 'mpi4py'"}
    assert "`No module named 'mpi4py'`" in docs["references/distributed-backends.md"]
    assert "`ModuleNotFoundError: No module named 'mpi4py'`" in docs["references/troubleshooting.md"]


def test_custom_backend_registration(oracle_ds):
    """references/launching.md: a DistributedBackend subclass appended to BACKENDS is selected by name."""
    got = oracle_ds["custom_backend"]
    assert got["torchddp"]["ok"] == "TorchDDP" and got["torchddp"]["is_distributed"] is True
    assert got["torchddp"]["printed"] == "Using TorchDDP for distributed execution"
    assert got["unregistered_method"]["error"]["type"] == "NotImplementedError"
    text = (Path(__file__).resolve().parents[2] / "sub-skills" / "distributed-and-backends" / "references"
            / "launching.md").read_text()
    assert '"Using TorchDDP for distributed execution"' in text


def test_torch_distributed_launch_hyphen_local_rank_is_rejected(oracle_ds):
    got = oracle_ds["parse_local_rank_hyphen"]
    assert got["exit"] == 2 and got["stderr"].endswith("error: unrecognized arguments: --local-rank=0")
    run_py = Path(importlib.util.find_spec("torch").submodule_search_locations[0]) / "distributed" / "run.py"
    src = run_py.read_text()                  # the flag torch.distributed.launch appends (read, not imported)
    assert 'cmd_args.append(f"--local-rank={macros.local_rank}")' in src


def test_launcher_passes_local_rank(docs):
    spec = importlib.util.find_spec("deepspeed")
    launch = spec.submodule_search_locations[0] + "/launcher/launch.py"
    src = open(launch, encoding="utf-8").read()
    assert 'f"--local_rank={local_rank}"' in src and "--no_local_rank" in src
    assert "(the `deepspeed` launcher passes it)" in docs["references/distributed-backends.md"]


# --------------------------------------------------------------------------- other packages

def test_reduce_lr_on_plateau_rejects_verbose(oracle_ds, repo_facts, docs):
    assert oracle_ds["torch_version"].startswith("2.13.")
    e = oracle_ds["reduce_lr_on_plateau_verbose"]["error"]
    assert e == {"type": "TypeError", "module": "builtins",
                 "message": "ReduceLROnPlateau.__init__() got an unexpected keyword argument 'verbose'"}
    assert repo_facts["train_dalle.py"]["reduce_lr_on_plateau_verbose_line"] == [456]
    for name in ("references/distributed-backends.md", "references/troubleshooting.md"):
        assert f"`TypeError: {e['message']}`" in docs[name]


def test_pkg_resources_matches_setuptools(oracle_ds, upstream_facts, docs):
    ver = oracle_ds["setuptools_version"]
    res = oracle_ds["import_dalle_pytorch_init"]
    assert oracle_ds["init_pkg_resources_line"] == [4]
    major = int(ver.split(".")[0]) if ver else None
    if major is not None and major < 82:
        assert res == {"ok": "1.6.6"}, res
    else:
        assert res["error"] == {"type": "ModuleNotFoundError", "module": "builtins",
                                "message": "No module named 'pkg_resources'"}
    assert oracle_ds["import_dalle_pytorch_init_without_pkg_resources"]["error"] == {
        "type": "ModuleNotFoundError", "module": "builtins", "message": "No module named 'pkg_resources'"}
    assert upstream_facts["setuptools"]["81.0.0"]["has_pkg_resources"] is True
    assert upstream_facts["setuptools"]["82.0.0"]["has_pkg_resources"] is False
    doc = docs["references/distributed-backends.md"]
    assert "`ModuleNotFoundError: No module named 'pkg_resources'` from\n  `dalle_pytorch/__init__.py` line 4" in doc
    assert 'pip install "setuptools<82"' in doc


@pytest.mark.parametrize("key", ["no_amp_fp32", "no_amp_fp16", "no_amp_bf16_bf16_images", "no_amp_torch_autocast_bf16",
                                 "no_amp_fp16_zero2_save"])
def test_gpu_run_trained_without_amp(gpu_run, key):
    r = gpu_run[key]
    assert r["engine"] == "DeepSpeedEngine" and len(r["losses"]) == 3
    assert all(0 < x < 10 for x in r["losses"])


def test_gpu_run_record(gpu_run, docs):
    env = gpu_run["env"]
    assert (env["gpu"], env["torch"], env["deepspeed"], env["torchvision"], env["setuptools"]) == (
        "NVIDIA H200", "2.11.0+cu130", "0.19.8", "0.26.0", "81.0.0")
    head = " ".join(docs["references/distributed-backends.md"][:700].split())
    assert "GPU facts with torch 2.11.0+cu130, torchvision 0.26.0, deepspeed 0.19.8, setuptools 81.0.0" in head
    provenance = docs["references/distributed-backends.md"].split("\n## Provenance", 1)[1]
    assert "one NVIDIA H200 with torch 2.11.0+cu130" in provenance  # the machine is named there, not in the text
    assert gpu_run["train_dalle_dict_default_as_built"].startswith(f"DeepSpeedConfigError: {AMP_MSG}")
    assert gpu_run["train_dalle_dict_fp16_as_built"].startswith(f"DeepSpeedConfigError: {AMP_MSG}")
    assert gpu_run["no_amp_fp16"]["optimizer"] == "FP16_UnfusedOptimizer"
    assert "(DeepSpeed wraps the optimizer in `FP16_UnfusedOptimizer`)" in docs["references/distributed-backends.md"]
    assert gpu_run["no_amp_bf16_float_images"] == \
        "RuntimeError: Input type (float) and bias type (c10::BFloat16) should be the same"
    assert "`Input type (float) and bias type (c10::BFloat16) should be the same`" in docs["references/troubleshooting.md"]
    files = gpu_run["no_amp_fp16_zero2_save"]["files"]
    for f in ("dalle-ds-cp/latest", "dalle-ds-cp/zero_to_fp32.py", "dalle-ds-cp/zero_to_torch.py",
              "dalle-ds-cp/global_step3/mp_rank_00_model_states.pt",
              "dalle-ds-cp/global_step3/zero_pp_rank_0_mp_rank_00_optim_states.pt"):
        assert f in files
    doc = docs["references/distributed-backends.md"]
    assert "`latest`, `global_step<N>/mp_rank_00_model_states.pt`; with ZeRO also `zero_pp_rank_<r>_mp_rank_00_optim_states.pt`, `zero_to_fp32.py`, `zero_to_torch.py`" in doc
    mg = gpu_run["make_grid"]
    assert mg["range"] == "TypeError: make_grid() got an unexpected keyword argument 'range'"
    assert isinstance(mg["value_range"], list)
    assert "`TypeError: make_grid() got an unexpected keyword argument 'range'`" in docs["references/troubleshooting.md"]
    assert gpu_run["import_dalle_pytorch"] == "ok 1.6.6"
    assert gpu_run["backend"] == ["DeepSpeed", 1, 0, 0]


def test_quoted_exceptions_were_observed(all_docs_text, oracle_ds, oracle_nods, gpu_run, upstream_facts):
    """Every `ExceptionType: message` quoted in the docs was produced by an oracle or a recorded run."""
    import json

    from pathlib import Path

    real_run = (Path(__file__).parent / "gpu_train_dalle_h200.json").read_text()
    observed = " ".join((json.dumps(oracle_ds), json.dumps(oracle_nods), json.dumps(gpu_run),
                         json.dumps(upstream_facts), json.dumps(json.loads(real_run))))
    observed = observed.replace("\\\"", "\"").replace("\\n", " ")
    flat = " ".join(all_docs_text.split())
    quoted = re.findall(r"`((?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception))): ([^`]+)`", flat)
    assert len(quoted) >= 12
    for etype, message in quoted:
        short = etype.rsplit(".", 1)[-1]
        msg = message.replace("...", "").strip()
        if short == "KeyError":
            continue  # KeyError 'LOCAL_RANK' is cited from source (deepspeed_backend._get_local_rank), see below
        parts = [p.strip() for p in message.split("...") if p.strip()]
        assert short in observed, etype
        for part in parts:
            assert part in observed, f"{etype}: {message!r} was not observed ({part!r})"
        assert msg


def test_keyerror_local_rank_from_source():
    spec = importlib.util.find_spec("dalle_pytorch")
    src = open(spec.submodule_search_locations[0] + "/distributed_backends/deepspeed_backend.py").read()
    assert "return int(os.environ['LOCAL_RANK'])" in src


def test_sparse_forward_breaks_416(oracle_nods, docs):
    msg = "SparseAttention.forward() got an unexpected keyword argument 'cache'"
    assert oracle_nods["sparse_forward_with_stub"]["error"] == {"type": "TypeError", "module": "builtins",
                                                                "message": msg}
    for name in ("references/distributed-backends.md", "references/troubleshooting.md"):
        assert f"`TypeError: {msg}`" in docs[name]


def test_cuda_call_on_cpu_build(oracle_ds, docs, repo_facts):
    if oracle_ds["torch_cuda_build"] is None:
        assert oracle_ds["module_cuda_call"]["error"] == {"type": "AssertionError", "module": "builtins",
                                                          "message": "Torch not compiled with CUDA enabled"}
    else:
        assert oracle_ds["torch_cuda_build"]
    assert repo_facts["train_dalle.py"]["cuda_calls"] == [432, 607]
    assert repo_facts["train_vae.py"]["cuda_calls"] == [148, 232]
    assert repo_facts["generate.py"]["cuda_calls"] == [105, 120]
    assert "`AssertionError: Torch not compiled with CUDA enabled`" in docs["references/troubleshooting.md"]


def test_gpu_run_of_the_real_scripts(docs):
    import json
    from pathlib import Path

    r = json.loads((Path(__file__).parent / "gpu_train_dalle_h200.json").read_text())
    assert r["env"]["gpu"] == "NVIDIA H200"
    assert r["unpatched"]["rc"] == 1 and r["unpatched"]["cmd"].startswith("deepspeed --num_gpus 1 train_dalle.py")
    assert any(AMP_MSG in line for line in r["unpatched"]["error_lines"])
    assert r["patched"]["rc"] == 0 and r["patched"]["loss_lines"]
    assert "--deepspeed --fp16" in r["patched"]["cmd"]
    for f in ("dalle.pt", "dalle-ds-cp/auxiliary.pt", "dalle-ds-cp/latest", "dalle-ds-cp/global_step1/mp_rank_00_model_states.pt"):
        assert f in r["after_patched"], f
    assert r["auxiliary_weights_type"] == "str"
    assert r["auxiliary_keys"] == ["epoch", "hparams", "vae_class_name", "vae_params", "version", "weights"]
    assert r["dalle_pt_keys"] == ["epoch", "hparams", "opt_state", "scheduler_state", "vae_class_name", "vae_params",
                                  "version", "weights"]
    assert r["resume"]["rc"] == 0 and "--dalle_path dalle.pt --deepspeed" in r["resume"]["cmd"]
    assert r["generate_plain"]["rc"] == 0 and "outputs/a_noisy_square/0.png" in r["generated"]
    assert "outputs/a_noisy_square/caption.txt" in r["generated"]
    msg = "TypeError: Expected state_dict to be dict-like, got <class 'str'>."
    assert r["generate_auxiliary"]["rc"] == 1 and msg in r["generate_auxiliary"]["error_lines"]
    assert r["lr_decay"]["rc"] == 1
    assert "TypeError: ReduceLROnPlateau.__init__() got an unexpected keyword argument 'verbose'" in \
        r["lr_decay"]["error_lines"]
    doc = " ".join(docs["references/distributed-backends.md"].split())
    assert f"`{msg}`" in doc
    assert "the same script with lines 488-491 deleted trains, saves, resumes, and `generate.py` reads its `dalle.pt`" in doc
    assert f"`{msg}`" in docs["references/troubleshooting.md"]
    assert r["env"]["torch"].startswith("2.11")  # >= 2.6: torch.load defaults to weights_only=True
    assert "torch ≥ 2.6 loads with `weights_only=True` by default; these files still load that way" in doc
    # the doc's table of what the DeepSpeed checkpoint files hold matches what the run wrote
    assert "`hparams`, `vae_params`, `epoch`, `version`, `vae_class_name`, and `weights` set to a **string**" in doc


def test_named_deepspeed_sources(docs):
    """Source locations the references name in the installed deepspeed exist and say what is claimed."""
    from pathlib import Path

    root = Path(importlib.util.find_spec("deepspeed").submodule_search_locations[0])
    cfg = (root / "runtime" / "config.py").read_text()
    assert "_REMOVED_TOP_LEVEL_CONFIG_KEYS" in cfg and '"amp":' in cfg and '"sparse_attention":' in cfg
    builder = (root / "ops" / "op_builder" / "builder.py").read_text()
    assert "def assert_no_cuda_mismatch" in builder and "cuda_minor_mismatch_ok" in builder
    accel = (root / "accelerator" / "real_accelerator.py").read_text()
    assert "Setting accelerator to CPU" in accel
    assert not (root / "ops" / "sparse_attention").exists()
    text = "\n".join(docs.values())
    assert "`_REMOVED_TOP_LEVEL_CONFIG_KEYS`" in text and "`assert_no_cuda_mismatch`" in text
    assert "`Setting accelerator to CPU`" in text


def test_torch_extension_lock_is_a_file_baton(docs):
    from pathlib import Path

    root = Path(importlib.util.find_spec("torch").submodule_search_locations[0])
    src = (root / "utils" / "cpp_extension.py").read_text()
    assert "FileBaton(os.path.join(build_directory, 'lock'))" in src
    assert "torch's `FileBaton` waits for it forever" in docs["references/troubleshooting.md"]
