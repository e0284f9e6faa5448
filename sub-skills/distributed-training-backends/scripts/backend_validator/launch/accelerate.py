"""What `accelerate launch` makes of its flags plus its config file (accelerate 1.15.0).

Mirrors ``accelerate/commands/launch.py::_validate_launch_command`` (flag checks before the file
is read, which file is read, how file values fill the argparse namespace), ``launch_command``'s
launcher choice, and the values ``accelerate/utils/launch.py::prepare_simple_launcher_cmd_env`` /
``prepare_multi_gpu_env`` / ``prepare_deepspeed_cmd_env`` hand on (nproc_per_node, nnodes,
node_rank, master address and port, rendezvous endpoint). Each value keeps its origin: a flag
(the word in the command), the file (key path), the environment or a default.

Precedence, as the code has it:
  * a top-level file key fills its flag only when the flag was not given (argparse default None);
    flags whose default is not None (--rdzv_backend, --same_network, ...) never take the file's value;
  * a nested file key (fsdp_config, deepspeed_config, ...) is copied unless its flag was given;
  * distributed_type is read only when no paradigm flag (--multi_gpu, --tpu, --use_deepspeed,
    --use_fsdp, --use_megatron_lm, --tpu_cluster) was given;
  * the default config file (HF_HOME / XDG_CACHE_HOME / ~/.cache) is skipped under --cpu.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from .argv import Given, Parsed, Word

PARADIGM_FLAGS = ("multi_gpu", "tpu", "tpu_use_cluster", "use_deepspeed", "use_fsdp", "use_megatron_lm")
EXCLUSIVE_FLAGS = ("multi_gpu", "cpu", "tpu", "use_deepspeed", "use_fsdp")
MULTI_DEVICE_TYPES = ("MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_SDAA", "MULTI_MUSA", "MULTI_XPU",
                      "MULTI_HPU", "MULTI_NEURON")
# commands/config/config_args.py::ClusterConfig defaults (what an absent key becomes)
CLUSTER_DEFAULTS = {"num_processes": -1, "machine_rank": 0, "num_machines": 1, "gpu_ids": None,
                    "main_process_ip": None, "main_process_port": None, "rdzv_backend": "static",
                    "same_network": False, "main_training_function": "main", "enable_cpu_affinity": False,
                    "downcast_bf16": False, "tpu_name": None, "tpu_zone": None, "tpu_use_cluster": False,
                    "tpu_use_sudo": False, "command_file": None, "commands": None, "tpu_vm": None,
                    "tpu_env": None, "use_cpu": False, "debug": False}
BLOCKS = ("fsdp_config", "fp8_config", "dynamo_config", "deepspeed_config", "megatron_lm_config",
          "mpirun_config", "parallelism_config")
HANDLED_APART = ("compute_environment", "mixed_precision", "distributed_type")


def block_of_dest(dest: str) -> Optional[str]:
    """The config block a nested launch flag's file key lives in."""
    if dest.startswith("fsdp_"):
        return "fsdp_config"
    if dest.startswith("fp8_"):
        return "fp8_config"
    if dest.startswith("dynamo_"):
        return "dynamo_config"
    if dest.startswith("megatron_lm_"):
        return "megatron_lm_config"
    if dest.startswith("parallelism_config_"):
        return "parallelism_config"
    if dest == "mpirun_hostfile":
        return "mpirun_config"
    from ..rules.accelerate_schema import DEEPSPEED_KEYS  # imported when an accelerate command is checked
    if dest in DEEPSPEED_KEYS:
        return "deepspeed_config"
    return None


def dest_of_nested(block: str, key: Any) -> Any:
    """The argparse name a nested file key is copied to: the schema tables' one definition."""
    from ..rules.accelerate_schema import prefixed
    return prefixed(block, key)


@dataclass
class Origin:
    kind: str  # flag | file | default | env | derived | machine
    detail: str = ""
    word: Optional[Word] = None
    path: Tuple[Any, ...] = ()

    def describe(self, config_name: str = "") -> str:
        if self.kind == "flag" and self.word is not None:
            return f"flag {self.detail} (command {self.word.line}:{self.word.col})"
        if self.kind == "file":
            return f"file {config_name} {'.'.join(map(str, self.path))}" + (f" ({self.detail})" if self.detail else "")
        return f"{self.kind}" + (f": {self.detail}" if self.detail else "")


@dataclass
class LaunchIssue:
    """A problem the launch itself has (not a file key): accelerate or the launcher stops on it
    (error) or does something else than written (warning)."""
    rule: str
    message: str
    hint: str = ""
    word: Optional[Word] = None
    path: Tuple[Any, ...] = ()  # file key path, when the file is the place to fix


@dataclass
class AccelerateLaunch:
    parsed: Parsed
    config_path: Optional[str] = None  # file read (absolute or as given)
    config_name: str = ""  # as shown in findings
    config_from: str = ""  # "flag" | "default location" | ""
    config_word: Optional[Word] = None
    data: Optional[Dict[str, Any]] = None  # the file's data (None: no file read)
    args: Dict[str, Any] = field(default_factory=dict)
    origin: Dict[str, Origin] = field(default_factory=dict)
    launcher: str = "simple"
    stopped: Optional[str] = None  # where accelerate stops: "pre-merge" | "merge" | "env"
    issues: List[LaunchIssue] = field(default_factory=list)
    merged: Optional[Dict[str, Any]] = None  # Accelerate config equivalent of file + flags
    merged_origin: Dict[Tuple[Any, ...], Origin] = field(default_factory=dict)
    paradigm_from: str = "file"  # "flags" when a paradigm flag decided the launcher
    machine_dependent: List[str] = field(default_factory=list)

    def given(self, dest: str) -> Optional[Given]:
        return self.parsed.last(dest)


def default_config_file(env: Dict[str, str]) -> str:
    """commands/config/config_args.py: HF_HOME, else XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface."""
    home = env.get("HF_HOME")
    if home is None:
        home = os.path.join(env.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    if home.startswith("~"):
        user_home = env.get("HOME") or os.path.expanduser("~")
        home = user_home + home[1:]
    return os.path.join(home, "accelerate", "default_config.yaml")


def _int(v: Any) -> Optional[int]:
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return v
    return None


def merge(parsed: Parsed, data: Optional[Dict[str, Any]], *, config_path: Optional[str], config_name: str,
          config_from: str, loadable: bool = True) -> AccelerateLaunch:
    """Run the merge. data is the parsed file (None when no file is read); loadable False when the
    file exists but cannot be loaded (accelerate stops at load_config_from_file)."""
    L = AccelerateLaunch(parsed=parsed, config_path=config_path, config_name=config_name,
                         config_from=config_from, data=data)
    L.config_word = parsed.last("config_file").word if parsed.last("config_file") else None
    a = dict(parsed.values)
    org: Dict[str, Origin] = {}
    for dest in a:
        g = parsed.last(dest)
        org[dest] = Origin("flag", g.option, g.word) if g else Origin("default", "launch parser default")
    L.args, L.origin = a, org

    def flagword(dest: str) -> Optional[Word]:
        g = parsed.last(dest)
        return g.word if g else None

    # ---- checks before the file is read
    given_excl = [d for d in EXCLUSIVE_FLAGS if a.get(d)]
    if len(given_excl) > 1:
        L.issues.append(LaunchIssue(
            "launch-exclusive-flags", "accelerate refuses more than one of --cpu, --multi_gpu, --tpu, "
            f"--use_deepspeed, --use_fsdp (given: {', '.join('--' + d for d in given_excl)})",
            "keep one of them", flagword(given_excl[1])))
        L.stopped = "pre-merge"
        return L
    if a.get("multi_gpu") and a.get("num_processes") is not None and a["num_processes"] < 2:
        L.issues.append(LaunchIssue(
            "launch-multi-gpu-one-process", f"--multi_gpu with --num_processes {a['num_processes']}: accelerate "
            "needs at least 2 processes (checked before the config file is read)",
            "pass --num_processes 2 or more, or drop --multi_gpu", flagword("num_processes")))
        L.stopped = "pre-merge"
        return L
    # `args.fsdp_version == 1` compares the flag's text with an int, so only a missing --use_fsdp trips it
    if a.get("use_parallelism_config") and (not a.get("use_fsdp") or a.get("fsdp_version") == 1):
        L.issues.append(LaunchIssue(
            "launch-parallelism-flag-without-fsdp", "--use_parallelism_config without --use_fsdp on the command "
            "line: accelerate checks this before reading the config file, so distributed_type: FSDP in the "
            "file does not help", "add --use_fsdp --fsdp_version 2, or drop --use_parallelism_config and put "
            "a parallelism_config block in the file", flagword("use_parallelism_config")))
        L.stopped = "pre-merge"
        return L

    if data is None or not loadable:
        if not loadable:
            L.stopped = "merge"
            return L
        _no_file(L, a, org)
    else:
        if not _with_file(L, a, org, data):
            return L
    _choose_launcher(L, a)
    _env_builders(L, a, org)
    L.merged, L.merged_origin = _merged_config(L)
    return L


def _no_file(L: AccelerateLaunch, a: Dict[str, Any], org: Dict[str, Origin]) -> None:
    if a.get("num_processes") is None:
        a["num_processes"] = None
        org["num_processes"] = Origin("machine", "number of GPUs torch sees on the launching machine")
        L.machine_dependent.append("num_processes")
        L.machine_dependent.append("multi_gpu")  # more than one GPU found -> --multi_gpu switched on
    if a.get("num_machines") is None:
        a["num_machines"] = 1
        org["num_machines"] = Origin("default", "1 (no config file)")
    if a.get("mixed_precision") is None:
        a["mixed_precision"] = "no"
        org["mixed_precision"] = Origin("default", "'no' (no config file)")
    if a.get("debug") is None:
        a["debug"] = False
    a.setdefault("use_cpu", a.get("cpu"))
    if a.get("dynamo_backend") is None:
        a["dynamo_backend"] = "no"
        org["dynamo_backend"] = Origin("default", "'no'")


def _with_file(L: AccelerateLaunch, a: Dict[str, Any], org: Dict[str, Origin], data: Dict[str, Any]) -> bool:
    parsed = L.parsed
    d = dict(data)
    # BaseConfig.process_config: legacy keys
    if "fp16" in d and "mixed_precision" not in d:
        d["mixed_precision"] = "fp16" if d.get("fp16") else "no"
    if "dynamo_backend" in d:
        d["dynamo_config"] = {} if d["dynamo_backend"] == "NO" else {"dynamo_backend": d["dynamo_backend"]}
    cfg = dict(CLUSTER_DEFAULTS)
    cfg.update({k: v for k, v in d.items() if k not in ("fp16", "dynamo_backend")})
    for b in BLOCKS:
        if cfg.get(b) is None:
            cfg[b] = {}
    dt = cfg.get("distributed_type")
    ce = cfg.get("compute_environment", "LOCAL_MACHINE")

    def forg(key: str, *path: Any) -> Origin:
        p = (key,) + path
        top = p[0]
        if top in data or (top == "mixed_precision" and "fp16" in data) or (
                top == "dynamo_config" and "dynamo_backend" in data):
            return Origin("file", "", path=p)
        return Origin("default", f"ClusterConfig default {cfg.get(key)!r}")

    if not any(a.get(f) for f in PARADIGM_FLAGS):
        a["use_deepspeed"] = dt == "DEEPSPEED"
        a["multi_gpu"] = dt in MULTI_DEVICE_TYPES
        a["tpu"] = dt == "XLA"
        a["use_fsdp"] = dt == "FSDP"
        a["use_megatron_lm"] = dt == "MEGATRON_LM"
        a["tpu_use_cluster"] = cfg.get("tpu_use_cluster") if a["tpu"] else False
        a["use_parallelism_config"] = cfg.get("parallelism_config") != {}
        for k in PARADIGM_FLAGS + ("use_parallelism_config",):
            org[k] = Origin("file", "distributed_type", path=("distributed_type",)) if "distributed_type" in data \
                else Origin("default", "no distributed_type")
        L.paradigm_from = "file"
    else:
        L.paradigm_from = "flags"
    if a.get("gpu_ids") is None:
        if cfg.get("gpu_ids") is not None:
            a["gpu_ids"] = cfg["gpu_ids"]
            org["gpu_ids"] = forg("gpu_ids")
        else:
            a["gpu_ids"] = "all"
            org["gpu_ids"] = Origin("default", "'all'")
    if a.get("multi_gpu") and a.get("num_machines") is None:
        a["num_machines"] = cfg.get("num_machines")
        org["num_machines"] = forg("num_machines")
    gi = a.get("gpu_ids")
    if not isinstance(gi, str):
        L.stopped = "merge"  # gpu_ids.split fails (acc-gpu-ids-not-string reports it)
        return False
    nm = a.get("num_machines")
    try:
        few = len(gi.split(",")) < 2 and gi != "all" and a.get("multi_gpu") and nm <= 1
    except TypeError:
        L.stopped = "merge"
        return False
    if few:
        g = L.parsed.last("gpu_ids")
        L.issues.append(LaunchIssue(
            "launch-gpu-ids-too-few", f"multi-GPU launch with gpu_ids {gi!r}: accelerate needs at least two ids "
            "(or 'all') on one machine", "list two or more GPU ids, or use --gpu_ids all",
            g.word if g else None, () if g else ("gpu_ids",)))
        L.stopped = "merge"
        return False
    if ce == "LOCAL_MACHINE":
        for name, attr in cfg.items():
            if isinstance(attr, dict):
                for key, value in attr.items():
                    dest = dest_of_nested(name, key)
                    if dest not in parsed.nondefault:
                        a[dest] = value
                        org[dest] = Origin("file", "", path=(name, key))
            elif name not in HANDLED_APART and a.get(name) is None:
                a[name] = attr
                org[name] = forg(name)
    if not a.get("debug"):
        a["debug"] = cfg.get("debug")
        org["debug"] = forg("debug")
    if not a.get("mixed_precision"):
        mp = cfg.get("mixed_precision")
        a["mixed_precision"] = "no" if mp is None else mp
        org["mixed_precision"] = forg("mixed_precision") if mp is not None else Origin("default", "'no'")
    if a.get("dynamo_backend") is None:
        a["dynamo_backend"] = "no"
        org["dynamo_backend"] = Origin("default", "'no'")
    if a.get("num_processes") == -1:
        L.issues.append(LaunchIssue(
            "launch-num-processes-missing", "the config file sets no num_processes and the command gives no "
            "--num_processes: accelerate stops ('You need to manually pass in `--num_processes`')",
            "add num_processes to the file or --num_processes to the command", None, ()))
        L.stopped = "merge"
        return False
    return True


def _choose_launcher(L: AccelerateLaunch, a: Dict[str, Any]) -> None:
    cpu = a.get("cpu")
    ce = (L.data or {}).get("compute_environment", "LOCAL_MACHINE") if L.data is not None else "LOCAL_MACHINE"
    if a.get("use_deepspeed") and not cpu:
        L.launcher = "deepspeed"
    elif (a.get("use_fsdp") or a.get("use_megatron_lm") or a.get("multi_gpu")) and not cpu:
        L.launcher = "torchrun"
    elif a.get("tpu") and not cpu:
        L.launcher = "tpu"
    elif L.data is not None and ce == "AMAZON_SAGEMAKER":
        L.launcher = "sagemaker"
    else:
        L.launcher = "simple"


def _env_builders(L: AccelerateLaunch, a: Dict[str, Any], org: Dict[str, Origin]) -> None:
    """Values and stops of the env builder launch_command calls (process start not included)."""
    if L.launcher == "tpu" and a.get("no_python"):
        _stop_env(L, "launch-tpu-no-python", "--no_python cannot be used with the TPU launcher (it imports the "
                  "script as a module)", "drop --no_python", "no_python")
        return
    if L.launcher in ("tpu", "sagemaker"):
        return
    nproc, nm = a.get("num_processes"), a.get("num_machines")
    ip, port = a.get("main_process_ip"), a.get("main_process_port")
    if L.launcher == "simple":
        if a.get("no_python") and a.get("module"):
            _stop_env(L, "launch-module-and-no-python", "--module and --no_python cannot be used together",
                      "keep one of them", "module")
            return
        if isinstance(nm, int) and nm > 1:
            if ip is None or port is None:
                missing = "main_process_ip" if ip is None else "main_process_port"
                _stop_env(L, "launch-multinode-endpoint-missing",
                          f"{nm} machines but no {missing}: the simple launcher (MULTI_CPU / NO) asserts both",
                          f"pass --{missing} (or set it in the file)", None)
                return
        return
    # torchrun and deepspeed launchers
    if port == 0:
        org["main_process_port"] = Origin("derived", "0 -> a free port picked at launch")
    elif port is None:
        a["main_process_port"] = port = 29500
        org["main_process_port"] = Origin("default", "29500 (env builder)")
    try:
        multi = nm > 1
    except TypeError:
        return
    if multi and a.get("machine_rank") is None:
        # no config file: nothing fills machine_rank, and the port check's int(machine_rank) fails
        g = L.parsed.last("num_machines")
        L.issues.append(LaunchIssue(
            "launch-machine-rank-missing", f"num_machines {nm} without a config file and without --machine_rank: "
            "accelerate fails on int(None) before starting", "pass --machine_rank N (0 on the main node)",
            g.word if g else None))
        L.stopped = "env"
        return
    # the `deepspeed` runner command (pdsh & co.; a missing launcher means pdsh), unless 'standard' (torchrun)
    ds_multi = L.launcher == "deepspeed" and multi and a.get("deepspeed_multinode_launcher") != "standard"
    if L.launcher == "deepspeed" and a.get("deepspeed_multinode_launcher") is None:
        a["deepspeed_multinode_launcher"] = "pdsh"
        org["deepspeed_multinode_launcher"] = Origin("default", "'pdsh'")
    if ds_multi:
        # the `deepspeed` runner command: --num_gpus unless a filter is given, --master_addr if ip
        try:
            if a.get("deepspeed_exclusion_filter") is None and a.get("deepspeed_inclusion_filter") is None:
                a["nproc_per_node"] = str(nproc // nm)
        except TypeError:
            _stop_env(L, "launch-value-type", "num_processes / num_machines are not numbers", "", None)
            return
        a["nnodes"] = str(nm)
        org["nproc_per_node"] = Origin("derived", "num_processes // num_machines (deepspeed --num_gpus)")
        org["nnodes"] = Origin("derived", "hostfile decides the machines (deepspeed runner)")
    elif multi:
        try:
            a["nproc_per_node"] = str(nproc // nm)
            a["nnodes"] = str(nm)
            a["node_rank"] = int(a.get("machine_rank"))
        except (TypeError, ValueError):
            _stop_env(L, "launch-value-type", "num_processes / num_machines / machine_rank are not numbers", "", None)
            return
        org["nproc_per_node"] = Origin("derived", "num_processes // num_machines")
        org["nnodes"] = Origin("derived", "num_machines")
        org["node_rank"] = Origin("derived", "machine_rank")
        if a.get("same_network"):
            a["master_addr"], a["master_port"] = str(ip), str(port)
            org["master_addr"] = Origin("derived", "main_process_ip (--same_network)")
            org["master_port"] = Origin("derived", "main_process_port (--same_network)")
        else:
            a["rdzv_endpoint"] = f"{ip}:{port}"
            org["rdzv_endpoint"] = Origin("derived", "main_process_ip:main_process_port")
    else:
        a["nproc_per_node"] = str(nproc) if nproc is not None else None
        org["nproc_per_node"] = Origin("derived", "num_processes")
        if port is not None:
            a["master_port"] = str(port)
            org["master_port"] = org.get("main_process_port", Origin("default"))
    if a.get("module") and a.get("no_python"):
        _stop_env(L, "launch-module-and-no-python", "--module and --no_python cannot be used together",
                  "keep one of them", "module")
        return
    if L.launcher == "torchrun" and a.get("use_fsdp"):
        cre, sms = a.get("fsdp_cpu_ram_efficient_loading"), a.get("fsdp_sync_module_states")
        # prepare_multi_gpu_env tests the raw values' truthiness ("false" is a true string)
        if cre and not sms:
            g = L.parsed.last("fsdp_sync_module_states") or L.parsed.last("fsdp_cpu_ram_efficient_loading")
            if g is not None:
                L.issues.append(LaunchIssue(
                    "launch-fsdp-ram-loading-without-sync",
                    "fsdp_cpu_ram_efficient_loading is on but fsdp_sync_module_states is off: prepare_multi_gpu_env "
                    "refuses this", "set --fsdp_sync_module_states true", g.word))
                L.stopped = "env"


def _stop_env(L: AccelerateLaunch, rule: str, msg: str, hint: str, dest: Optional[str]) -> None:
    g = L.parsed.last(dest) if dest else None
    L.issues.append(LaunchIssue(rule, msg, hint, g.word if g else None))
    L.stopped = "env"


# ---------------------------------------------------------------------------------------------
# DeepSpeedPlugin.__post_init__ with a deepspeed_config_file: these typed flags reach the plugin
# through the environment and only fill the JSON's 'auto' values (fill_match(..., must_match=False))
JSON_FILLED = {"gradient_accumulation_steps": "gradient_accumulation_steps",
               "gradient_clipping": "gradient_clipping", "zero_stage": "zero_optimization.stage",
               "offload_optimizer_device": "zero_optimization.offload_optimizer.device",
               "offload_param_device": "zero_optimization.offload_param.device",
               "offload_param_nvme_path": "zero_optimization.offload_param.nvme_path",
               "offload_optimizer_nvme_path": "zero_optimization.offload_optimizer.nvme_path",
               "zero3_save_16bit_model": "zero_optimization.stage3_gather_16bit_weights_on_model_save"}
TOP_LEVEL_FLAGS = ("num_processes", "num_machines", "machine_rank", "gpu_ids", "main_process_ip",
                   "main_process_port", "main_training_function", "mixed_precision", "debug")


def _merged_config(L: AccelerateLaunch) -> Tuple[Dict[str, Any], Dict[Tuple[Any, ...], Origin]]:
    """An Accelerate config equal to what this launch runs with: the file, with every flag given on
    the command line written over the file key it overrides (so every file rule sees the flags)."""
    parsed = L.parsed
    base: Dict[str, Any] = copy.deepcopy(L.data) if L.data is not None else {"compute_environment": "LOCAL_MACHINE"}
    origin: Dict[Tuple[Any, ...], Origin] = {}

    def put(path: Tuple[Any, ...], value: Any, g: Given) -> None:
        cur = base
        for p in path[:-1]:
            if not isinstance(cur.get(p), dict):
                cur[p] = {}
            cur = cur[p]
        cur[path[-1]] = value
        origin[path] = Origin("flag", g.option, g.word)

    a = L.args
    if L.paradigm_from == "flags" or L.data is None:
        if a.get("use_deepspeed"):
            dt = "DEEPSPEED"
        elif a.get("use_fsdp"):
            dt = "FSDP"
        elif a.get("use_megatron_lm"):
            dt = "MEGATRON_LM"
        elif a.get("multi_gpu"):
            cur = base.get("distributed_type")
            dt = cur if cur in MULTI_DEVICE_TYPES else "MULTI_GPU"
        elif a.get("tpu"):
            dt = "XLA"
        elif a.get("cpu"):
            n = a.get("num_processes")
            dt = "MULTI_CPU" if isinstance(n, int) and n > 1 else "NO"
        else:
            dt = base.get("distributed_type", "NO") if L.data is not None else "NO"
        flag = next((parsed.last(f) for f in PARADIGM_FLAGS + ("cpu",) if parsed.last(f)), None)
        if flag is not None or L.data is None:
            base["distributed_type"] = dt
            if flag is not None:
                origin[("distributed_type",)] = Origin("flag", flag.option, flag.word)
            else:
                origin[("distributed_type",)] = Origin("default", "no config file")
    if a.get("cpu") and parsed.last("cpu"):
        # --cpu: the simple launcher runs, whatever distributed_type says
        n = a.get("num_processes")
        base["distributed_type"] = "MULTI_CPU" if isinstance(n, int) and n > 1 else "NO"
        origin[("distributed_type",)] = Origin("flag", parsed.last("cpu").option, parsed.last("cpu").word)
    if not a.get("use_parallelism_config") and isinstance(base.get("parallelism_config"), dict):
        # a paradigm flag without --use_parallelism_config: the block is copied but never exported
        del base["parallelism_config"]
    if L.data is None and a.get("num_processes") is not None:
        base["num_processes"] = a["num_processes"]
    ds_file = a.get("deepspeed_config_file") if L.launcher == "deepspeed" else None
    with_json = isinstance(ds_file, str) and ds_file.strip() not in ("", "none")
    for dest in TOP_LEVEL_FLAGS:
        g = parsed.last(dest)
        if g is None:
            continue
        if dest == "mixed_precision" and with_json:
            # a typed --mixed_precision is not "from the config": DeepSpeedPlugin only fills the JSON's
            # 'auto' precision with it (no conflict with deepspeed_config_file)
            base.pop("mixed_precision", None)
            base.pop("fp16", None)
            continue
        put((dest,), g.value, g)
    for dest, gs in parsed.given.items():
        block = block_of_dest(dest)
        if block is None:
            continue
        if with_json and dest in JSON_FILLED:
            continue  # only fills 'auto' values of the JSON (launch-flag-loses-to-deepspeed-json)
        g = gs[-1]
        blk = base.get(block) if isinstance(base.get(block), dict) else None
        key = dest
        if blk is not None:
            # the file may spell the key without its prefix (fsdp_config.sharding_strategy)
            for k in list(blk):
                if dest_of_nested(block, k) == dest and k != dest:
                    del blk[k]
        put((block, key), g.value, g)
    return base, origin
