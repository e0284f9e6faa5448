"""DeepSpeed / Accelerate / Trainer oracle for the validator tests (one subprocess, many configs).

Reads a JSON list of jobs on stdin, prints a JSON list of results on stdout:

    job    = {"id", "text" (file content), "consumer": deepspeed|accelerate|transformers,
              "world_size": int|null, "effect": python expression over ``cfg`` or null}
    result = {"id", "verdict": accept|reject, "stage", "message", "effect": bool|null,
              "engine": "ran"|"skipped: ..."|"env: ..."}

What runs, per consumer (deepspeed 0.19.8, accelerate 1.15.0, torch CPU build):

* deepspeed - the text is written to a file and given *as a path*, so deepspeed's own
  hjson loader (with its duplicate-key hook) reads it: ``DeepSpeedConfig(path, mpu=...)``
  (a stub mpu reports ``world_size`` as the data-parallel size; deepspeed.comm is initialised
  first, else DeepSpeedConfig ignores the mpu and uses world size 1), then - when no offload
  needs a JIT-built CPU Adam / AIO op - ``deepspeed.initialize`` (for world size N > 1: at world
  size 1 with train_batch_size / N, ZeRO++ hpZ and MiCS shard sizes reset) on a
  tiny ``nn.Linear`` and one forward/backward/step; for ZeRO-3 NVMe offload_param without a path
  ``deepspeed.zero.Init(config_dict_or_path=...)``.
* accelerate - accelerate's ``DeepSpeedPlugin(hf_ds_config=path)`` (strict ``json.load``,
  its ``__post_init__`` fills and checks) in an environment without ACCELERATE_* variables,
  ``set_mixed_precision("no")`` as an Accelerator without --mixed_precision does, then the
  ``Accelerator._prepare_deepspeed`` fill (``deepspeed_config_process(must_match=False,
  **config_kwargs)``) replayed with the kwargs it computes for a dataloader of batch 4, one
  process, a model with ``config.hidden_size`` 8, ``DummyOptim`` and ``DummyScheduler``
  (total 100 steps) - then the filled dict goes to DeepSpeedConfig / initialize as above; without an
  "optimizer" block the script's torch optimizer meets _prepare_deepspeed's DeepSpeedCPUAdam swap
  check (replayed) and, when not swapped under optimizer offload, the real deepspeed.initialize.
* transformers - modelled (transformers 5.25.0 is installed but not imported here: the oracle stays
  torch/accelerate/deepspeed only). Modelled from ``transformers/integrations/deepspeed.py::
  HfTrainerDeepSpeedConfig`` (research notes section 4.3): strict ``json.loads``; the Trainer fills
  micro batch, grad acc, train batch, clipping, optimizer lr/betas/eps/weight_decay and the
  scheduler warmup/total values from TrainingArguments chosen to agree with every explicit
  numeric value (so only type mismatches - a string "8", or a boolean where a number is compared
  (true equals only 1) - are reported), then the accelerate
  path above. Limits: real TrainingArguments values are unknown, so numeric mismatches are not
  modelled.

The test oracle initialises a single-process gloo group (not the validator). Engine failures
that depend on this CPU machine (fp16 unsupported, ops not implemented on CPU, CUDA-only
kernels) do not count as a verdict on the config ("env: ...").
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402

ENV_PATTERNS = ("not supported on your device", "not been implemented on cpu", "cuda", "nccl", "triton",
                "no module named", "async_io", "is not available", "jit", "libaio", "cannot find -l",
                "not implemented for 'cpu'", "cpu backend", "build", "ninja", "please install",
                # MuAdam/MuAdamW/MuSGD: engine.py logs "Install mup" and then uses the unbound name
                "cannot access local variable 'mu")


def _free_port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def _setup():
    for k in list(os.environ):
        if k.startswith("ACCELERATE_") or k.startswith("DEEPSPEED_"):
            del os.environ[k]
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", tempfile.mkdtemp(prefix="ds_ext_"))
    # Muon's Newton-Schulz kernel is wrapped in torch.compile (~90 s to compile on this CPU);
    # eager mode runs the same optimizer code.
    os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1",
                      LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    import logging
    import warnings
    warnings.filterwarnings("ignore")
    import torch
    import torch.distributed as tdist
    tdist.init_process_group("gloo", rank=0, world_size=1)
    import deepspeed
    import deepspeed.comm.torch  # noqa: F401
    dct = sys.modules["deepspeed.comm.torch"]  # the package attribute "torch" is the torch module
    # The shared-memory allreduce op is a CPU speed-up that would be JIT-compiled (~2 min);
    # it plays no part in config validation.
    dct.build_shm_op = lambda: None
    # DeepSpeedConfig reads the rank through deepspeed.comm and falls back to world size 1
    # (ignoring the mpu) while deepspeed.comm is not initialised - that happened only after the
    # first deepspeed.initialize, so batch checks at --world-size N depended on job order.
    deepspeed.init_distributed(dist_backend="gloo")
    for name in ("DeepSpeed", "deepspeed", "accelerate"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    from deepspeed.utils import logger as dslogger
    dslogger.setLevel(logging.CRITICAL)
    return torch, deepspeed


class _Mpu:
    def __init__(self, n):
        self.n = n

    def get_data_parallel_world_size(self):
        return self.n

    def get_data_parallel_rank(self):
        return 0

    def get_data_parallel_group(self):
        import torch.distributed as tdist
        return tdist.group.WORLD

    def get_model_parallel_world_size(self):
        return 1

    def get_model_parallel_rank(self):
        return 0

    def get_model_parallel_group(self):
        import torch.distributed as tdist
        return tdist.group.WORLD


def _msg(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}".strip().replace("\n", " ")
    return s[:400]


def _is_env(msg: str) -> bool:
    m = msg.lower()
    return any(p in m for p in ENV_PATTERNS)


def _uses_offload(d) -> bool:
    z = d.get("zero_optimization") if isinstance(d, dict) else None
    if not isinstance(z, dict):
        return False
    for k in ("offload_optimizer", "offload_param"):
        b = z.get(k)
        if isinstance(b, dict) and str(b.get("device", "none")).lower() in ("cpu", "nvme"):
            return True
    return bool(z.get("cpu_offload") or z.get("cpu_offload_param"))


def _no_jit(data):
    """Copy of the parsed config for deepspeed.initialize. "Adam"/"AdamW" (and Muon's auxiliary
    Adam) would JIT-compile FusedAdam for the CPU accelerator (~40 s); "torch_adam": true selects
    torch's AdamW, which goes through the same config checks (_configure_basic_optimizer) and is
    in ZeRO's tested list."""
    import copy
    d = copy.deepcopy(dict(data))
    o = d.get("optimizer")
    if isinstance(o, dict) and str(o.get("type", "")).lower() in ("adam", "adamw", "muon"):
        p = o.setdefault("params", {})
        if isinstance(p, dict) and not p.get("torch_adam"):
            # keyword arguments FusedAdam.__init__ accepts but torch's AdamW does not
            for k in ("bias_correction", "set_grad_none"):
                p.pop(k, None)
            p["torch_adam"] = True
    return d


def _fp16_off(data):
    """The CPU accelerator has no fp16 (engine: "Type fp16 is not supported on your device");
    the engine checks are re-run with fp16 switched off so later checks are still reached."""
    import copy
    d = copy.deepcopy(dict(data))
    if isinstance(d.get("fp16"), dict):
        d["fp16"]["enabled"] = False
    return d


def _accelerate_fill(path_or_dict, preset=None, world=1):
    """DeepSpeedPlugin + set_mixed_precision('no') + the _prepare_deepspeed fill."""
    from accelerate.utils import DeepSpeedPlugin
    plugin = DeepSpeedPlugin(hf_ds_config=path_or_dict)
    plugin.set_mixed_precision("no")
    gas_acc = 1
    plugin.fill_match("gradient_accumulation_steps", must_match=False, gradient_accumulation_steps=gas_acc)
    mb = plugin.get_value("train_micro_batch_size_per_gpu")
    if plugin.is_auto("train_micro_batch_size_per_gpu"):
        mb = 4
    hidden = 8
    kw = {"gradient_clipping": 1.0, "zero_optimization.stage3_gather_16bit_weights_on_model_save": False}
    if mb is not None:
        kw["train_micro_batch_size_per_gpu"] = mb
        g = plugin.get_value("gradient_accumulation_steps")
        # Accelerator._prepare_deepspeed: micro * grad_acc * num_processes // sp_size
        kw["train_batch_size"] = mb * g * world // 1 if not isinstance(mb, str) and not isinstance(g, str) else mb
    kw.update({"zero_optimization.reduce_bucket_size": hidden * hidden,
               "zero_optimization.stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
               "zero_optimization.stage3_param_persistence_threshold": 10 * hidden})
    if "optimizer" in plugin.deepspeed_config:
        kw.update({"optimizer.params.lr": 1e-3, "optimizer.params.weight_decay": 0.0})
    if "scheduler" in plugin.deepspeed_config:
        kw.update({"scheduler.params.warmup_min_lr": 0, "scheduler.params.warmup_max_lr": 1e-3,
                   "scheduler.params.warmup_num_steps": 10, "scheduler.params.total_num_steps": 100})
    if preset:
        kw.update(preset)
    plugin.deepspeed_config_process(must_match=False, **kw)
    cfg = dict(plugin.deepspeed_config)
    cfg["steps_per_print"] = 10 ** 9  # accelerate sets inf; an int keeps deepspeed's modulo happy
    return cfg


def _transformers_fill(text, world=1):
    """Model of HfTrainerDeepSpeedConfig.trainer_config_process/finalize (see module docstring)."""
    data = json.loads(text)
    matched = ("train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size",
               "gradient_clipping", "optimizer.params.lr", "optimizer.params.eps", "optimizer.params.weight_decay",
               "scheduler.params.warmup_max_lr", "scheduler.params.total_num_steps",
               "scheduler.params.warmup_num_steps", "fp16.enabled", "bf16.enabled")
    mism = []

    def node(d, dotted):
        *parents, leaf = dotted.split(".")
        for p in parents:
            d = d.get(p) if isinstance(d, dict) else None
            if not isinstance(d, dict):
                return None, leaf
        return d, leaf

    for k in matched:
        d, leaf = node(data, k)
        if d is not None and isinstance(d.get(leaf), str) and d.get(leaf) != "auto":
            mism.append(f"- ds {k}={d[leaf]!r} vs hf (a number/bool)")
        elif d is not None and isinstance(d.get(leaf), bool) and not k.endswith(".enabled"):
            # true == 1 in Python: it matches only when the TrainingArguments value is 1; the model
            # takes the realistic argument values (batch 4, clipping 1.0, lr 1e-3), which it is not
            mism.append(f"- ds {k}={d[leaf]!r} vs hf (a number)")
    if mism:
        raise ValueError("Please correct the following DeepSpeed config values that mismatch TrainingArguments "
                         "values: " + " ".join(mism))
    mb = data.get("train_micro_batch_size_per_gpu")
    mb = 4 if mb in (None, "auto") else mb
    gas = data.get("gradient_accumulation_steps")
    gas = 1 if gas in (None, "auto") else gas
    fills = {"train_micro_batch_size_per_gpu": mb, "gradient_accumulation_steps": gas,
             # TrainingArguments.world_size * micro * grad_acc
             "train_batch_size": mb * gas * world if not isinstance(mb, str) and not isinstance(gas, str) else mb,
             "gradient_clipping": 1.0, "optimizer.params.lr": 1e-3, "optimizer.params.betas": [0.9, 0.999],
             "optimizer.params.eps": 1e-8, "optimizer.params.weight_decay": 0.0,
             "scheduler.params.warmup_min_lr": 0, "scheduler.params.warmup_max_lr": 1e-3,
             "scheduler.params.warmup_num_steps": 10, "scheduler.params.total_num_steps": 100,
             "fp16.enabled": False, "bf16.enabled": False, "zero_optimization.reduce_bucket_size": 64}
    for k, v in fills.items():
        d, leaf = node(data, k)
        if d is not None and d.get(leaf) == "auto":
            d[leaf] = v
    return _accelerate_fill(data, world=world)


def run_job(job, torch, deepspeed):
    import time
    t0 = time.perf_counter()
    try:
        return _run_job(job, torch, deepspeed)
    finally:
        pass


def _run_job(job, torch, deepspeed):
    from deepspeed.runtime.config import DeepSpeedConfig
    res = {"id": job.get("id"), "verdict": "accept", "stage": "", "message": "", "effect": None, "engine": ""}
    consumer = job.get("consumer") or "deepspeed"
    W = job.get("world_size") or 1
    tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8")
    tmp.write(job["text"])
    tmp.close()
    cfg_input = tmp.name
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            stage = "load"
            try:
                if consumer == "accelerate":
                    stage = "accelerate"
                    cfg_input = _accelerate_fill(tmp.name, world=W)
                elif consumer == "transformers":
                    stage = "transformers"
                    cfg_input = _transformers_fill(job["text"], world=W)
                stage = "config"
                mpu = _Mpu(W) if W != 1 else None
                cfg = DeepSpeedConfig(cfg_input, mpu=mpu)
            except BaseException as e:  # noqa: BLE001 - we report whatever the library raised
                res.update(verdict="reject", stage=stage, message=_msg(e))
                return res
            if job.get("effect"):
                try:
                    res["effect"] = bool(eval(job["effect"], {"math": math}, {"cfg": cfg}))
                except Exception as e:  # noqa: BLE001
                    res["effect"] = None
                    res["effect_error"] = _msg(e)
            data = cfg._param_dict
            if W != 1:
                # One process cannot run W ranks: the engine runs the same config at world size 1
                # with train_batch_size divided by W (the batch equation was checked above at W), so
                # the engine-time checks (optimizer, ZeRO, precision) still get a verdict.
                import copy
                data = copy.deepcopy(dict(data))
                tbs = data.get("train_batch_size")
                if isinstance(tbs, int) and not isinstance(tbs, bool):
                    data["train_batch_size"] = max(tbs // W, 1)
                for k in ("zero_hpz_partition_size", "mics_shard_size"):
                    zo = data.get("zero_optimization")
                    if isinstance(zo, dict) and k in zo:
                        zo[k] = 1 if k == "zero_hpz_partition_size" else -1
            if consumer in ("accelerate", "transformers") and isinstance(data, dict) and "optimizer" not in data:
                # Without an optimizer block the script (or the Trainer) passes a torch optimizer:
                # Accelerator._prepare_deepspeed's check on it is replayed (it swaps the optimizer for
                # DeepSpeedCPUAdam when offload_optimizer.device is not "none"); when it does not swap,
                # the real deepspeed.initialize gets the torch optimizer and decides.
                stage = "prepare_deepspeed"
                try:
                    swapped = data["zero_optimization"].get("offload_optimizer", {}).get(
                        "device", "none") != "none" and data.get("zero_force_ds_cpu_optimizer", True)
                except Exception as e:  # noqa: BLE001
                    res.update(verdict="reject", stage=stage, message=_msg(e))
                    return res
                oo = cfg.zero_config.offload_optimizer
                if not swapped and oo is not None and str(getattr(oo.device, "value", oo.device)) in ("cpu", "nvme") \
                        and cfg.zero_force_ds_cpu_optimizer:
                    stage = "initialize"
                    try:
                        model = torch.nn.Linear(4, 4)
                        deepspeed.initialize(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=1e-3),
                                             config=_no_jit(data))
                    except BaseException as e:  # noqa: BLE001
                        msg = _msg(e)
                        if not _is_env(msg):
                            res.update(verdict="reject", stage=stage, message=msg)
                            return res
            if _uses_offload(data) and not (cfg.zero_optimization_stage == 3):
                res["engine"] = "skipped: offload needs a JIT-built CPU Adam"
                return res
            op = cfg.zero_config.offload_param
            if cfg.zero_optimization_stage == 3 and op is not None and op.device == "nvme" and op.nvme_path is None:
                # zero.Init checks the NVMe path before it builds the AIO op (_validate_remote_device)
                stage = "zero.Init"
                try:
                    with deepspeed.zero.Init(config_dict_or_path=data if W != 1 else cfg_input
                                             if isinstance(cfg_input, dict) else tmp.name):
                        torch.nn.Linear(4, 4)
                except BaseException as e:  # noqa: BLE001
                    msg = _msg(e)
                    if _is_env(msg):
                        res["engine"] = "env: " + msg
                    else:
                        res.update(verdict="reject", stage=stage, message=msg)
                    return res
            if _uses_offload(data):
                res["engine"] = "skipped: offload needs a JIT-built CPU Adam"
                return res
            res["engine"] = _engine(data, torch, deepspeed, res)
            return res
    finally:
        os.unlink(tmp.name)


def _engine(data, torch, deepspeed, res, retried=False):
    """deepspeed.initialize + one forward/backward/step; returns the engine note and sets a
    reject verdict in res when DeepSpeed refuses the config."""
    stage = "initialize"
    if True:  # keeps the original indentation of this block
            try:
                model = torch.nn.Linear(4, 4)
                # Like the Trainer / a typical script: without an "optimizer" block the code
                # passes its own torch optimizer.
                client_opt = None if "optimizer" in data else torch.optim.AdamW(model.parameters(), lr=1e-3)
                engine_cfg = _no_jit(data)
                eng, opt, _, _ = deepspeed.initialize(model=model, optimizer=client_opt,
                                                      model_parameters=None if client_opt else model.parameters(),
                                                      config=engine_cfg)
                stage = "forward"
                # the stand-in batch is 2 rows whatever the micro batch (a config may say 1e9)
                x = torch.randn(2, 4, dtype=next(eng.module.parameters()).dtype)
                try:
                    loss = eng(x).float().sum()
                except Exception as e:  # noqa: BLE001 - the stand-in model, not the config
                    return "env: forward of the stand-in model: " + _msg(e)
                stage = "step"
                eng.backward(loss)
                eng.step()
                # reach the gradient-accumulation boundary, where the optimizer step, clipping and
                # the scheduler run
                for _ in range(min(int(eng.gradient_accumulation_steps()), 64) - 1):
                    eng.backward(eng(x).float().sum())
                    eng.step()
                return "ran" + (" (fp16 switched off: unsupported on CPU)" if retried else "")
            except BaseException as e:  # noqa: BLE001
                msg = _msg(e)
                if "fp16 is not supported" in msg and not retried:
                    return _engine(_fp16_off(data), torch, deepspeed, res, retried=True)
                if _is_env(msg):
                    return "env: " + msg
                res.update(verdict="reject", stage=stage, message=msg)
                return "failed"


def main() -> int:
    jobs = json.load(sys.stdin)
    real_stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr):
        torch, deepspeed = _setup()
        out = []
        for job in jobs:
            try:
                t0 = time.perf_counter()
                r = run_job(job, torch, deepspeed)
                r["secs"] = round(time.perf_counter() - t0, 2)
                out.append(r)
            except BaseException as e:  # noqa: BLE001
                out.append({"id": job.get("id"), "verdict": "error", "message": _msg(e),
                            "trace": traceback.format_exc()[-800:]})
    json.dump(out, real_stdout)
    real_stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
