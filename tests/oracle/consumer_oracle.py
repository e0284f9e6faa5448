"""Consumer oracle: the DeepSpeed config each consumer really builds, stage by stage (one process).

Reads a JSON list of jobs on stdin, prints a JSON list of results on stdout:

    job    = {"id", "consumer": "accelerate" | "transformers" | "deepspeed",
              "yaml": Accelerate config text or null, "json": DeepSpeed JSON text or null,
              "mixed_precision": "no" | "fp16" | "bf16" (transformers: TrainingArguments fp16/bf16),
              "trainer_args": {TRAINER_ARGS name: value} overrides (transformers)}
    result = {"id", "verdict": "accept" | "reject", "stage", "message",
              "post_init": dict, "state": dict, "filled": dict, "reads": dict, "client_optimizer": dict}

Stages (accelerate 1.15.0, deepspeed 0.19.8; the transformers stage is modelled, see below):

* accelerate - the YAML (and the JSON its deepspeed_config_file names, written beside it in the
  launch directory) goes through tests/oracle/accelerate_oracle.py::run_one (load, launch argument
  merge, prepare_deepspeed_cmd_env, and the Accelerator.__init__ checks it replays); in the environment
  it produces: ``DeepSpeedPlugin()``
  (``post_init``), ``set_mixed_precision(ACCELERATE_MIXED_PRECISION)`` as AcceleratorState does
  (``state``), then the ``Accelerator._prepare_deepspeed`` fill replayed with the kwargs it computes
  for a dataloader of batch 4, one process, a model whose ``config.hidden_size`` is 8, and
  ``DummyOptim(lr=1e-3)`` + ``DummyScheduler(warmup 10, total 100)`` when the JSON has an optimizer /
  scheduler block, else a torch AdamW (which makes accelerate write zero_allow_untested_optimizer)
  (``filled``).
* transformers - modelled from transformers/integrations/deepspeed.py at commit
  3a80c166389f65756701d6afe22bc6ec954603da (facts in tests/validator_ds/transformers_facts.json; the
  installed 5.25.0 fills the same keys except amp.enabled / amp.opt_level, which it no longer fills:
  tests/field_coverage/test_transformers_trainer_cpu.py::test_validator_trainer_facts_against_the_installed_fill_lists):
  ``HfTrainerDeepSpeedConfig(json).trainer_config_process(args)`` on accelerate's real
  HfDeepSpeedConfig base, ``DeepSpeedPlugin(hf_ds_config=...)`` (TrainingArguments.__post_init__),
  ``set_mixed_precision`` (AcceleratorState), ``trainer_config_finalize`` (hidden size 8, 100 steps,
  no warmup), ``deepspeed_optim_sched`` (no optimizer block: zero_allow_untested_optimizer), then
  the same _prepare_deepspeed fill. TrainingArguments: batch 4, grad_acc 1, world 1,
  max_grad_norm 1.0, learning_rate 5e-5, betas (0.9, 0.999), eps 1e-8, weight_decay 0.
* deepspeed - the JSON text as a path to ``DeepSpeedConfig``.

``reads`` are what ``DeepSpeedConfig`` (and its ZeRO model) keeps from the final dict;
``client_optimizer`` is what happens to a torch optimizer handed over by the script:
accelerate's ``_prepare_deepspeed`` swaps it for DeepSpeedCPUAdam only when
``zero_optimization.offload_optimizer.device`` (the new-style key) is not "none" (that expression is
replayed here), and ``DeepSpeedEngine._configure_optimizer`` refuses a client optimizer while
``zero_use_cpu_optimizer()`` and ``zero_force_ds_cpu_optimizer`` hold.
"""
from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

HIDDEN = 8
MICRO = 4
TRAINER_ARGS = {"per_device_train_batch_size": MICRO, "gradient_accumulation_steps": 1, "world_size": 1,
                "max_grad_norm": 1.0, "learning_rate": 5e-5, "adam_beta1": 0.9, "adam_beta2": 0.999,
                "adam_epsilon": 1e-8, "weight_decay": 0.0, "fp16_opt_level": "O1", "num_training_steps": 100,
                "warmup_steps": 0}


def _j(v):
    """JSON-safe copy (inf -> "inf", enums -> value)."""
    if isinstance(v, dict):
        return {str(k): _j(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_j(x) for x in v]
    if isinstance(v, float) and (math.isinf(v) or v != v):
        return repr(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if hasattr(v, "value"):
        return _j(v.value)
    if isinstance(v, os.PathLike):
        return os.fspath(v)
    return repr(v)


def _fill_kwargs(plugin, world=1):
    """The kwargs Accelerator._prepare_deepspeed computes (see module docstring)."""
    from accelerate.utils import DummyOptim  # noqa: F401 - the real classes decide the branch below
    cfg = plugin.deepspeed_config
    mb = MICRO if plugin.is_auto("train_micro_batch_size_per_gpu") else plugin.get_value(
        "train_micro_batch_size_per_gpu")
    plugin.fill_match("gradient_accumulation_steps", must_match=False, gradient_accumulation_steps=1)
    kw = {"gradient_clipping": 1.0, "zero_optimization.stage3_gather_16bit_weights_on_model_save": False}
    if mb is not None:
        kw["train_micro_batch_size_per_gpu"] = mb
        kw["train_batch_size"] = mb * plugin.get_value("gradient_accumulation_steps") * world // 1
    has_opt = "optimizer" in cfg
    if not has_opt:
        cfg["zero_allow_untested_optimizer"] = True  # a torch optimizer (not DummyOptim) was passed
    kw.update({"zero_optimization.reduce_bucket_size": HIDDEN * HIDDEN,
               "zero_optimization.stage3_prefetch_bucket_size": int(0.9 * HIDDEN * HIDDEN),
               "zero_optimization.stage3_param_persistence_threshold": 10 * HIDDEN})
    if has_opt:
        kw.update({"optimizer.params.lr": 1e-3, "optimizer.params.weight_decay": 0.0})
        if "scheduler" in cfg:
            kw.update({"scheduler.params.warmup_min_lr": 0, "scheduler.params.warmup_max_lr": 1e-3,
                       "scheduler.params.warmup_num_steps": 10, "scheduler.params.total_num_steps": 100})
    return kw, has_opt


def _client_optimizer(cfg, has_opt, dscfg):
    if has_opt:
        return {"passed": False}
    out = {"passed": True}
    try:
        # accelerate/accelerator.py::_prepare_deepspeed, the torch-optimizer branch (replayed)
        out["swapped_to_cpu_adam"] = bool(cfg["zero_optimization"].get("offload_optimizer", {}).get(
            "device", "none") != "none" and cfg.get("zero_force_ds_cpu_optimizer", True))
    except Exception as e:  # noqa: BLE001
        out["swap_error"] = f"{type(e).__name__}: {e}"[:200]
        return out
    zc = dscfg.zero_config
    use_cpu = zc.offload_optimizer is not None and str(_j(zc.offload_optimizer.device)) in ("cpu", "nvme")
    out["engine_refuses"] = bool(use_cpu and dscfg.zero_force_ds_cpu_optimizer and not out["swapped_to_cpu_adam"])
    return out


def _reads(dscfg):
    zc = dscfg.zero_config
    return _j({
        "stage": int(dscfg.zero_optimization_stage),
        "offload_optimizer": None if zc.offload_optimizer is None else zc.offload_optimizer.device,
        "offload_param": None if zc.offload_param is None else zc.offload_param.device,
        "offload_param_nvme_path": None if zc.offload_param is None else zc.offload_param.nvme_path,
        "offload_optimizer_nvme_path": None if zc.offload_optimizer is None else zc.offload_optimizer.nvme_path,
        "gather_16bit_weights_on_model_save": zc.gather_16bit_weights_on_model_save,
        "fp16": bool(dscfg.float16_config.enabled), "bf16": bool(dscfg.bfloat16_config.enabled),
        "gradient_clipping": dscfg.gradient_clipping,
        "gradient_accumulation_steps": dscfg.gradient_accumulation_steps,
        "train_micro_batch_size_per_gpu": dscfg.train_micro_batch_size_per_gpu,
        "train_batch_size": dscfg.train_batch_size,
        "zero_allow_untested_optimizer": dscfg.zero_allow_untested_optimizer,
        "zero_force_ds_cpu_optimizer": dscfg.zero_force_ds_cpu_optimizer,
        "prefetch_bucket_size": zc.prefetch_bucket_size,
        "param_persistence_threshold": zc.param_persistence_threshold,
        "reduce_bucket_size": zc.reduce_bucket_size,
    })


class _TrainerArgs:
    def __init__(self, mp, overrides=None):
        for k, v in dict(TRAINER_ARGS, **(overrides or {})).items():
            setattr(self, k, v)
        self.fp16 = mp == "fp16"
        self.bf16 = mp == "bf16"
        self.fp16_full_eval = self.bf16_full_eval = False
        self.fp16_backend = "auto"
        self.save_on_each_node = False

    def get_warmup_steps(self, n):
        return self.warmup_steps


def _trainer_config(text, mp, overrides=None):
    """HfTrainerDeepSpeedConfig at transformers 3a80c16, on accelerate's HfDeepSpeedConfig."""
    from accelerate.utils.deepspeed import HfDeepSpeedConfig

    class HfTrainerDeepSpeedConfig(HfDeepSpeedConfig):
        def __init__(self, cfg):
            super().__init__(cfg)
            self.mismatches = []

        def fill_match(self, ds_key_long, hf_val, hf_key=None, must_match=True):
            config, ds_key = self.find_config_node(ds_key_long)
            if config is None:
                return
            if config.get(ds_key) == "auto":
                config[ds_key] = hf_val
                return
            if not must_match:
                return
            ds_val = config.get(ds_key)
            if ds_val is not None and ds_val != hf_val:
                self.mismatches.append(f"- ds {ds_key_long}={ds_val} vs hf {hf_key}={hf_val}")

        def fill_only(self, k, v):
            self.fill_match(k, v, must_match=False)

        def is_auto(self, k):
            v = self.get_value(k)
            return False if v is None else v == "auto"

        def trainer_config_process(self, a):
            tbs = a.world_size * a.per_device_train_batch_size * a.gradient_accumulation_steps
            self.fill_match("train_micro_batch_size_per_gpu", a.per_device_train_batch_size, "per_device")
            self.fill_match("gradient_accumulation_steps", a.gradient_accumulation_steps, "gas")
            self.fill_match("train_batch_size", tbs, "train_batch_size (calculated)")
            self.fill_match("gradient_clipping", a.max_grad_norm, "max_grad_norm")
            self.fill_match("optimizer.params.lr", a.learning_rate, "learning_rate")
            self.fill_match("optimizer.params.betas", [a.adam_beta1, a.adam_beta2], "betas")
            self.fill_match("optimizer.params.eps", a.adam_epsilon, "adam_epsilon")
            self.fill_match("optimizer.params.weight_decay", a.weight_decay, "weight_decay")
            self.fill_only("scheduler.params.warmup_min_lr", 0)
            self.fill_match("scheduler.params.warmup_max_lr", a.learning_rate, "learning_rate")
            fp16_backend = "amp" if (a.fp16 or a.fp16_full_eval) else None
            self.fill_match("fp16.enabled", (a.fp16 or a.fp16_full_eval) and fp16_backend == "amp", "fp16")
            self.fill_match("amp.enabled", fp16_backend == "apex", "apex")
            self.fill_match("amp.opt_level", a.fp16_opt_level, "fp16_opt_level")
            self.fill_match("bf16.enabled", a.bf16 or a.bf16_full_eval, "bf16")

        def trainer_config_finalize(self, a, num_training_steps):
            keys = ["zero_optimization.reduce_bucket_size", "zero_optimization.stage3_prefetch_bucket_size",
                    "zero_optimization.stage3_param_persistence_threshold"]
            if any(self.is_auto(k) for k in keys):
                self.fill_only("zero_optimization.reduce_bucket_size", HIDDEN * HIDDEN)
                if self.is_zero3():
                    self.fill_only("zero_optimization.stage3_prefetch_bucket_size", int(0.9 * HIDDEN * HIDDEN))
                    self.fill_only("zero_optimization.stage3_param_persistence_threshold", 10 * HIDDEN)
            self.fill_match("scheduler.params.total_num_steps", num_training_steps, "num_training_steps")
            self.fill_match("scheduler.params.warmup_num_steps", a.get_warmup_steps(num_training_steps), "warmup")
            if self.mismatches:
                raise ValueError("Please correct the following DeepSpeed config values that mismatch "
                                 "TrainingArguments values:\n" + "\n".join(self.mismatches))

    return HfTrainerDeepSpeedConfig(json.loads(text)), _TrainerArgs(mp, overrides)


@contextlib.contextmanager
def _env(new):
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(new)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


def _clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("ACCELERATE_", "DEEPSPEED_"))}


def run_job(job, acc_oracle):
    d = tempfile.mkdtemp(prefix="consumer_")
    try:
        return _run_job(job, acc_oracle, d)
    finally:
        shutil.rmtree(d, ignore_errors=True)  # one per job: left behind they piled up in /tmp


def _run_job(job, acc_oracle, d):
    from accelerate.utils import DeepSpeedPlugin
    from accelerate.utils.environment import parse_choice_from_env
    from deepspeed.runtime.config import DeepSpeedConfig

    res = {"id": job["id"], "verdict": "accept", "stage": "", "message": ""}
    if job.get("json") is not None:
        with open(os.path.join(d, "ds_config.json"), "w", encoding="utf-8") as f:
            f.write(job["json"])
    stage = "launch"
    try:
        cons = job["consumer"]
        if cons == "deepspeed":
            stage = "config"
            res["reads"] = _reads(DeepSpeedConfig(os.path.join(d, "ds_config.json")))
            return res
        if cons == "accelerate":
            ypath = os.path.join(d, "config.yaml")
            with open(ypath, "w", encoding="utf-8") as f:
                f.write(job["yaml"])
            launched = acc_oracle.run_one({"id": job["id"], "path": ypath, "cwd": d})
            if launched["verdict"] != "accept" and launched["stage"] in ("load", "launch", "env", "accelerator"):
                res.update(verdict="reject", stage=launched["stage"], message=launched["message"])
                return res
            env = dict(_clean_env(), **launched["env"])
            old = os.getcwd()
            os.chdir(d)
            try:
                with _env(env):
                    stage = "plugin"
                    plugin = DeepSpeedPlugin()
                    res["post_init"] = _j(copy.deepcopy(plugin.deepspeed_config))
                    stage = "mixed_precision"
                    plugin.set_mixed_precision(parse_choice_from_env("ACCELERATE_MIXED_PRECISION", "no"))
                    res["state"] = _j(copy.deepcopy(plugin.deepspeed_config))
            finally:
                os.chdir(old)
        else:
            stage = "trainer_config_process"
            hf, args = _trainer_config(job["json"], job.get("mixed_precision", "no"), job.get("trainer_args"))
            hf.trainer_config_process(args)
            with _env(dict(_clean_env(), ACCELERATE_USE_DEEPSPEED="true")):
                stage = "plugin"
                plugin = DeepSpeedPlugin(hf_ds_config=hf)
                res["post_init"] = _j(copy.deepcopy(plugin.deepspeed_config))
                stage = "mixed_precision"
                plugin.set_mixed_precision(job.get("mixed_precision", "no"))
                res["state"] = _j(copy.deepcopy(plugin.deepspeed_config))
                stage = "trainer_config_finalize"
                hf.trainer_config_finalize(args, args.num_training_steps)
                if "optimizer" not in hf.config:
                    hf.config["zero_allow_untested_optimizer"] = True  # deepspeed_optim_sched
        stage = "prepare_deepspeed"
        kw, has_opt = _fill_kwargs(plugin)
        plugin.deepspeed_config_process(must_match=False, **kw)
        cfg = plugin.deepspeed_config
        res["filled"] = _j(copy.deepcopy(cfg))
        stage = "config"
        dcfg = dict(cfg)
        dcfg["steps_per_print"] = 10 ** 9
        dscfg = DeepSpeedConfig(dcfg)
        res["reads"] = _reads(dscfg)
        res["client_optimizer"] = _client_optimizer(cfg, has_opt, dscfg)
    except BaseException as e:  # noqa: BLE001 - whatever the libraries raise is the answer
        res.update(verdict="reject", stage=stage, message=f"{type(e).__name__}: {e}".replace("\n", " ")[:400])
    return res


def main() -> int:
    jobs = json.load(sys.stdin)
    real_stdout = sys.stdout
    out = []
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        import logging
        import warnings
        warnings.filterwarnings("ignore")
        import accelerate_oracle as acc_oracle
        acc_oracle._install_patches([])
        import deepspeed  # noqa: F401
        for name in ("DeepSpeed", "deepspeed", "accelerate"):
            logging.getLogger(name).setLevel(logging.CRITICAL)
        for job in jobs:
            out.append(run_job(job, acc_oracle))
    json.dump(out, real_stdout)
    real_stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
