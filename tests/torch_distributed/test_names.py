"""Every name, argument, default and environment variable that sub-skills/torch-distributed states,
checked against the installed torch 2.13.0: signatures (inspect), Python source text in
site-packages, and the strings compiled into the wheel's shared libraries.

How a backticked span in the Markdown is checked:
- `torch.a.b` dotted paths are imported / resolved attribute by attribute;
- `NAME(...)` call forms are parsed with ast; the callable must be known (CALLABLES) and every keyword
  with a literal value must equal the installed signature's default (these are our signature lines);
- UPPER_CASE names are environment variables: each must occur in torch's Python sources or in the
  bytes of torch/lib/*.so, or be one of NCCL's own variables listed (with a "not runnable here" marker)
  in debugging-and-env.md;
- `--flags` must be torchrun / torch.distributed.launch flags, or an external CLI flag listed in EXTERNAL;
- bare identifiers must be a parameter of a known callable or an attribute of a known namespace.
Defaults stated in tables are compared with the installed defaults by table-specific tests below.
"""
from __future__ import annotations

import ast
import datetime
import importlib
import inspect
import re
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.distributed.tensor
import torch.distributed.tensor.parallel
import torch.multiprocessing as tmp
import torch.utils.checkpoint as tuc
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.join import Join
from torch.distributed.checkpoint import format_utils, state_dict as dsd
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.fsdp import CPUOffloadPolicy, FSDPModule, MixedPrecisionPolicy, OffloadPolicy, fully_shard
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP1  # noqa: E402
from torch.distributed.run import get_args_parser
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

REPO = Path(__file__).resolve().parents[2]
SKILL = REPO / "sub-skills" / "torch-distributed"
# torchtitan-recipes.md names torchtitan's own options, files and flags (torchtitan is not installed); its torch
# facts are run in tests/field_coverage/test_groups_barrier_titan.py and its torch call forms checked below.
TITAN = SKILL / "references" / "torchtitan-recipes.md"
DOCS = sorted([SKILL / "SKILL.md", *sorted(p for p in (SKILL / "references").glob("*.md") if p != TITAN)])
TORCH = Path(torch.__file__).parent
DIST_PY = TORCH / "distributed"

CALLABLES = {
    "init_process_group": dist.init_process_group, "new_group": dist.new_group,
    "destroy_process_group": dist.destroy_process_group, "monitored_barrier": dist.monitored_barrier,
    "barrier": dist.barrier, "all_gather_object": dist.all_gather_object,
    "all_to_all_single": dist.all_to_all_single,
    "broadcast_object_list": dist.broadcast_object_list, "gather_object": dist.gather_object,
    "scatter_object_list": dist.scatter_object_list, "send": dist.send, "recv": dist.recv,
    "all_reduce": dist.all_reduce, "get_rank": dist.get_rank, "get_world_size": dist.get_world_size,
    "get_backend": dist.get_backend, "get_backend_config": dist.get_backend_config,
    "is_initialized": dist.is_initialized, "get_debug_level": dist.get_debug_level,
    "read_metadata": importlib.import_module("torch.distributed.checkpoint").FileSystemReader.read_metadata,
    "DefaultSavePlanner": importlib.import_module("torch.distributed.checkpoint").DefaultSavePlanner,
    "is_gloo_available": dist.is_gloo_available, "is_nccl_available": dist.is_nccl_available,
    "is_mpi_available": dist.is_mpi_available, "is_ucc_available": dist.is_ucc_available,
    "is_xccl_available": dist.is_xccl_available,
    "TCPStore": dist.TCPStore, "PrefixStore": dist.PrefixStore, "FileStore": dist.FileStore,
    "DistributedDataParallel": DDP.__init__, "DDP": DDP.__init__,
    "register_comm_hook": DDP.register_comm_hook, "no_sync": DDP.no_sync, "join": DDP.join,
    "DistributedSampler": DistributedSampler.__init__, "set_epoch": DistributedSampler.set_epoch,
    "DataLoader": DataLoader.__init__, "Join": Join.__init__,
    "fully_shard": fully_shard, "MixedPrecisionPolicy": MixedPrecisionPolicy, "OffloadPolicy": OffloadPolicy,
    "CPUOffloadPolicy": CPUOffloadPolicy, "StateDictOptions": dsd.StateDictOptions,
    "get_model_state_dict": dsd.get_model_state_dict, "get_state_dict": dsd.get_state_dict,
    "set_model_state_dict": dsd.set_model_state_dict, "set_state_dict": dsd.set_state_dict,
    "save": dcp.save, "load": dcp.load, "async_save": dcp.async_save,
    "dcp_to_torch_save": format_utils.dcp_to_torch_save, "torch_save_to_dcp": format_utils.torch_save_to_dcp,
    "torch.load": torch.load, "torch.save": torch.save, "checkpoint": tuc.checkpoint,
    "add_safe_globals": torch.serialization.add_safe_globals,
    "get_sharing_strategy": tmp.get_sharing_strategy, "record": record,
    "convert_sync_batchnorm": torch.nn.SyncBatchNorm.convert_sync_batchnorm,
    "unshard": FSDPModule.unshard, "reshard": FSDPModule.reshard,
    "set_requires_gradient_sync": FSDPModule.set_requires_gradient_sync,
    "set_reshard_after_forward": FSDPModule.set_reshard_after_forward,
    "allreduce_hook": default_hooks.allreduce_hook, "fp16_compress_hook": default_hooks.fp16_compress_hook,
    "bf16_compress_hook": default_hooks.bf16_compress_hook, "get_args_parser": get_args_parser,
    "timedelta": datetime.timedelta, "Shard": torch.distributed.tensor.Shard,
    "Replicate": torch.distributed.tensor.Replicate, "Partial": torch.distributed.tensor.Partial,
    "distribute_tensor": torch.distributed.tensor.distribute_tensor,
    "DTensor.from_local": torch.distributed.tensor.DTensor.from_local,
    # tensor-parallel styles (dtensor.md; effective defaults are checked by tests/torch_distributed/test_tp_layouts.py)
    "ColwiseParallel": torch.distributed.tensor.parallel.ColwiseParallel,
    "RowwiseParallel": torch.distributed.tensor.parallel.RowwiseParallel,
    "SequenceParallel": torch.distributed.tensor.parallel.SequenceParallel,
    "PrepareModuleInput": torch.distributed.tensor.parallel.PrepareModuleInput,
    "full_tensor": torch.distributed.tensor.DTensor.full_tensor,
    "redistribute": torch.distributed.tensor.DTensor.redistribute,
    "init_device_mesh": importlib.import_module("torch.distributed.device_mesh").init_device_mesh,
    "to_local": torch.distributed.tensor.DTensor.to_local, "state_dict": torch.nn.Module.state_dict,
    "backward": torch.Tensor.backward, "wait": dist.Work.wait, "work.wait": dist.Work.wait,
    "set_debug_level_from_env": dist.set_debug_level_from_env,
    "run": importlib.import_module("torch.distributed.run").run,
    "config_from_args": importlib.import_module("torch.distributed.run").config_from_args,
    "all_gather": dist.all_gather, "FSDP.state_dict_type": FSDP1.state_dict_type,
    "FSDP.optim_state_dict": FSDP1.optim_state_dict,
    "FullStateDictConfig": importlib.import_module("torch.distributed.fsdp").FullStateDictConfig,
    "set_gradient_divide_factor": FSDPModule.set_gradient_divide_factor,
    # fsdp2-module-methods.md: the unused-parameters fix, called on the root after fully_shard
    "set_reduce_scatter_unused_params": FSDPModule.set_reduce_scatter_unused_params,
    "model.set_reduce_scatter_unused_params": FSDPModule.set_reduce_scatter_unused_params, "optimizer.step": None,
    "wait_for_everyone": importlib.import_module("accelerate").Accelerator.wait_for_everyone,
    "named_parameters": torch.nn.Module.named_parameters, "to_empty": torch.nn.Module.to_empty,
    "HuggingFaceStorageWriter": dcp.HuggingFaceStorageWriter.__init__,
    "HuggingFaceStorageReader": dcp.HuggingFaceStorageReader.__init__,
    # process-groups.md "Groups a library creates" and launch-torchrun.md "Which node becomes rank 0"
    "new_subgroups": dist.new_subgroups, "new_subgroups_by_enumeration": dist.new_subgroups_by_enumeration,
    "get_group": importlib.import_module("torch.distributed.device_mesh").DeviceMesh.get_group,
    "_get_default_timeout": importlib.import_module("torch.distributed.distributed_c10d")._get_default_timeout,
    "InitProcessGroupKwargs": importlib.import_module("accelerate.utils").InitProcessGroupKwargs,
    "socket.getfqdn": importlib.import_module("socket").getfqdn,
    "socket.gethostname": importlib.import_module("socket").gethostname, "sorted": sorted,
    "accelerator.prepare": importlib.import_module("accelerate").Accelerator.prepare, "model": None, "model.module": None, "model.module.state_dict": None,
    "model.state_dict": None, "model.parameters": None, "py-spy": None,
    # checkpoints.md / ddp.md (set 12): resume order and SyncBatchNorm modes
    "model.eval": torch.nn.Module.eval, "optimizer.load_state_dict": torch.optim.Optimizer.load_state_dict,
    # transformers' method named by ddp.md / launch-torchrun.md (its default is cited in the claims ledger)
    "gradient_checkpointing_enable": None, "enable_input_require_grads": None,  # transformers PreTrainedModel methods
    # torchrun-worker-matrix.md's restart section: the port picker RendezvousStoreInfo.build calls
    "get_free_port": importlib.import_module("torch.distributed.elastic.utils.distributed").get_free_port,
    # gloo-collectives-matrix.md: how its PREMUL_SUM cells built the op, and the int-to-float fix
    "dist._make_nccl_premul_sum": dist._make_nccl_premul_sum, "t.float": None,
    # process-groups.md "Rooted collectives": their parameters (gather_list, scatter_list, group_dst, ...)
    "reduce": dist.reduce, "gather": dist.gather, "scatter": dist.scatter, "t.clone": None,
    # fsdp2-and-dcp.md (meta init): the per-module initializer the first-forward error message names
    "reset_parameters": torch.nn.Linear.reset_parameters,
}
# Namespaces whose attribute names may appear as bare identifiers.
import torch.distributed.distributed_c10d as c10d_mod  # noqa: E402
import torch.nn.parallel.distributed as ddp_mod  # noqa: E402
from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent  # noqa: E402

from torch.distributed.algorithms._checkpoint import checkpoint_wrapper as cw_mod  # noqa: E402
from torch.distributed.fsdp._fully_shard import _fsdp_state  # noqa: E402

NAMESPACES = [torch.nn, c10d_mod, ddp_mod, LocalElasticAgent, dist, dist.Backend, dist.GroupMember, DDP, DistributedSampler, FSDPModule, dcp, dsd, format_utils,
              default_hooks, torch.nn.SyncBatchNorm, torch.serialization, tmp, dist.constants, tuc, torch.nn.utils,
              cw_mod, _fsdp_state.FSDPState, dist.ProcessGroup,
              importlib.import_module("torch.distributed.device_mesh").DeviceMesh,
              importlib.import_module("torch.distributed.fsdp").ShardingStrategy]
# FSDP1 constructor arguments (the FSDP1 -> FSDP2 table), dcp.load's planner, torchtitan and Accelerate names that the
# torch references mention once (each is cited in that reference's Provenance)
OTHER_API = set(inspect.signature(FSDP1.__init__).parameters) | set(
    inspect.signature(dcp.DefaultLoadPlanner.__init__).parameters) | {
    "FullyShardedDataParallel", "_HYBRID_SHARD_ZERO2", "ProcessGroupNCCL", "_checkpoint_wrapped_module",
    "_clip_grad_norm_with_ep", "fsdp2_prepare_model", "enable_weight_tying", "limit_all_gathers",
    "backward_prefetch", "forward_prefetch", "ignored_modules", "ignored_states", "param_init_fn",
    "sync_module_states", "use_orig_params", "auto_wrap_policy", "Exception", "BaseException",
    # fsdp2-module-methods.md: FSDPParamGroup.__init__ attributes (instance state, checked by
    # test_fsdp_module_methods.py::test_starting_values_are_the_sources) and the custom-comm classes
    "reduce_grads", "all_reduce_grads", "reshard_after_backward", "reduce_scatter_unused_params",
    "unshard_in_backward", "reduce_scatter_max_input_buffers", "AllGather", "ReduceScatter",
    # DynamicRendezvousHandler's shared-store cache and server factory (torchrun-worker-matrix.md, restart section)
    *(n for n in ("_bootstrap_store_info", "_create_tcp_store_server", "_shared_tcp_store_server")
      if n in inspect.getsource(importlib.import_module("torch.distributed.elastic.rendezvous.dynamic_rendezvous"))),
    # gloo-collectives-matrix.md's NCCL section cites ProcessGroupNCCL.cpp (C++, not in the CPU wheel) and its exception class
    "getNcclReduceOp", "ncclAvg", "ncclMax", "TypeError",
    # fsdp2-and-dcp.md (root resharding, CPU offload): the per-parameter class and the FSDPState flag it cites
    # (test_fsdp2_root_reshard_offload.py reads both in the installed source), and the run's example module
    "FSDPParam", "_auto_reshard_after_forward", "embed"}
# ReduceOp members (gloo-collectives-matrix.md's rows)
NAMESPACES += [dist.ReduceOp.RedOpType]
# the modules whose private functions launch-torchrun.md and process-groups.md cite as provenance
NAMESPACES += [importlib.import_module(m) for m in (
    "torch.distributed.fsdp._init_utils", "torch.distributed.elastic.rendezvous.dynamic_rendezvous",
    "torch.distributed.elastic.rendezvous.c10d_rendezvous_backend", "torch.distributed.elastic.rendezvous.utils",
    "torch.distributed.launcher.api")]
# launch-torchrun.md's store-sharing paragraph: init_rpc, rank 0's store factory, the agent-store switch
NAMESPACES += [importlib.import_module("torch.distributed.rpc"), importlib.import_module("torch.distributed.rendezvous"),
               importlib.import_module("torch.distributed.elastic.rendezvous.api").RendezvousHandler]
NAMESPACES += [torch.distributed.fsdp.ShardingStrategy,
               importlib.import_module("torch.distributed.device_mesh").DeviceMesh,
               importlib.import_module("torch.distributed.elastic.rendezvous.dynamic_rendezvous")._DistributedRendezvousOpExecutor,
               importlib.import_module("torch.distributed.checkpoint.state_dict_saver"),
               importlib.import_module("torch.distributed.checkpoint.utils")]
# Words in code spans that are values, files or objects of the examples, not API names.
VALUES = {"UserWarning", "None", "True", "False", "inf", "static", "c10d", "gloo", "nccl", "mpi", "ucc", "xccl", "fake", "undefined",
          "cpu", "cuda", "xpu", "gpu", "auto", "spawn", "fork", "forkserver", "default", "none", "lo", "eth0",
          "eth", "file_descriptor", "file_system", "SUM", "INFO", "DETAIL", "OFF", "WARNING", "ERROR", "FATAL",
          "WARN", "TRACE", "model", "optim", "env", "tcp", "torchrun", "deepspeed", "srun", "sampler", "step",
          "shuffle", "module.", "Work", "GradBucket", "DTensor", "ValueError", "RuntimeError", "NotImplementedError", "FutureWarning",
          "UnpicklingError", "ChildFailedError", "SIGKILL", "FSDPModule", "BatchNorm*d", "Shard(dim=0)",
          "DeviceMesh", "to_local", "TCP", "emptyDir", "medium", "ip", "HCCL", "torch_npu", "l1", "weight",
          "HOST0", "JOB", "PET_", "libtorch_cuda", "localhost", "pair", "trio", "detail", "AttributeError", "r", "local_rank",
          "g", "dp", "tp", "lm_head", "outputs", "exp_avg", "meta", "epoch",
          "GPU36DC", "GPU3B62", "HOST", "PORT", "EADDRINUSE", "python"}
# fsdp2-and-dcp.md's FSDP1 HYBRID_SHARD section: the tuple's placeholder names, and its Provenance
# (this bundle's job section and test)
VALUES |= {"shard_pg", "replicate_pg", "section_fsdp1_hybrid", "test_fsdp1_hybrid_shard_groups_and_sync_order"}
# keys of other layers named next to torch's: --rdzv-conf keys (read by c10d_rendezvous_backend) and Accelerate's
# parallelism_config (it only passes its mesh through to torch)
RDZV_CONF_KEYS = {"read_timeout", "is_host"}
# --rdzv-conf keys of the c10d dynamic handler (its create_handler table), checked in dynamic_rendezvous.py
DYNAMIC_RDZV_KEYS = {"join_timeout", "last_call_timeout", "close_timeout", "heartbeat_timeout", "keep_alive_interval",
                     "keep_alive_max_attempt"}
# Single-word environment variables (ENV_RE needs an underscore).
ENV_SINGLE = {"LOGLEVEL", "RANK"}
# Words of torchrun's failure summary, checked in the elastic error formatter's source.
SUMMARY_WORDS = {"error_file", "exitcode"}
# Flags of other command-line tools named in containers-and-networking.md / launch-torchrun.md.
EXTERNAL = {"--shm-size": "docker run", "--ipc": "docker run", "--network": "docker run",
            "--ntasks-per-node": "srun (SLURM)", "--pid": "py-spy dump"}
# --- schedulers-slurm-kubernetes.md: SLURM and Kubeflow names, checked against the job-spec checker's model
# (backend_validator/jobspec/slurm.py and k8s.py, whose SLURM environment tests/jobspec runs through real bash and
# whose operator environment it compares with kubeflow/training-operator's envvar.go table) ---
JOBSPEC = REPO / "sub-skills" / "distributed-training-backends" / "scripts" / "backend_validator" / "jobspec"
SLURM_FLAGS = {"--nodes", "--export", "--gpus-per-node", "--gpus-per-task", "--gres", "--ntasks-per-node", "--cpus-per-task"}
EXTERNAL.update({f: "srun/sbatch (SLURM)" for f in SLURM_FLAGS})
EXTERNAL.update({"--changes": "scripts/lookup.py", "--lib": "scripts/lookup.py", "--since": "scripts/lookup.py"})
EXTERNAL.update({"--job-spec": "validate_backend_config.py", "--launch-command": "validate_backend_config.py",
                 "--launcher": "deepspeed (runner.py)",
                 "--pytorch-init-container-max-tries": "kubeflow/training-operator manager flag (v1.7.0+, PR #1756)"})
# enroot's PyTorch hook and pyxis (schedulers-slurm-kubernetes.md, "Containers: pyxis and enroot"): read by those
# projects' shell and C code, cited from the fetched NVIDIA/enroot (8ea147d) and NVIDIA/pyxis (1075199) snapshots
CONTAINER_ENV = {"ENROOT_ENVIRON": "enroot runtime.sh", "PYTORCH_VERSION": "enroot hooks/extra/50-slurm-pytorch.sh",
                 "PYXIS_CONTAINER_ENV": "pyxis (v0.21.0+)", "SLURM_STEP_TASKS_PER_NODE": "enroot hook before v3.4.0"}
CONTAINER_NAMES = {"ENV", "export", "enroot_create_start_config", "pytorch_setup", "spank_import_container_env",
                   "ip_local_port_range"}
DCP_JOB_NAMES = {"dl_rank0", "dl_rank1", "local_step"}
# PyTorch Lightning (not installed), named in schedulers-slurm-kubernetes.md "Wrapper launchers under SLURM";
# read in the fetched Lightning-AI/pytorch-lightning at tags 1.5.0 and 2.6.5 (upstream citations in
# tests/audit/claims/torch-distributed.yaml, slurm-lightning-*)
LIGHTNING_NAMES = {"Trainer": "pytorch_lightning Trainer (num_nodes, devices)", "num_nodes": "Lightning Trainer argument",
                   "SLURMEnvironment": "lightning/fabric/plugins/environments/slurm.py",
                   "NODE_RANK": "LightningEnvironment.node_rank (1.5.0)"}
EXTERNAL.update({"--container-env": "srun with pyxis", "--container-image": "srun with pyxis"})
# containers-and-networking.md, "IB/RoCE: which HCA" and "Workers started by Ray" (set-23 s23-K7-04/05): Ray's job
# options and runtime_env keys (ray 2.60.0 wheel, not installed; upstream citation td-cn-ray-runtime-env-env-vars),
# vLLM's GroupCoordinator.cpu_group (not installed), nccl-tests' binary, ibstat, HCA names from NCCL's guide
EXTERNAL.update({"--runtime-env": "ray job submit", "--runtime-env-json": "ray job submit", "--address": "ray start / ray job submit"})
RAY_AND_FABRIC_NAMES = {"ray", "init", "runtime_env", "env_vars", "GroupCoordinator", "cpu_group", "all_reduce_perf",
                        "ibstat", "mlx5_1", "mlx5_10", "mlx5_19", "os", "environ"}
SCHEDULER_NAMES = {"PYTHONUNBUFFERED", "elasticPolicy", "numNodes", "numProcPerNode", "nprocPerNode", "nProcPerNode",
                   "replicas", "setPodEnv"}


def _scheduler_name(name: str) -> bool:
    """A SLURM variable the checker's model sets, a Kubeflow field it reads, or a commit id."""
    if re.fullmatch(r"[0-9a-f]{40}", name):
        return True
    src = (JOBSPEC / "slurm.py").read_text() + (JOBSPEC / "k8s.py").read_text()
    if name.startswith("SLURM") or name in SCHEDULER_NAMES:
        return f'"{name}"' in src or f".get(\"{name}\")" in src or name in src
    if name == "num_processes":  # Accelerate's config field, named where accelerate's rule is explained
        from accelerate.commands.config.config_args import ClusterConfig
        return "num_processes" in ClusterConfig.__dataclass_fields__
    return False
# --- end schedulers ---
# accelerate launch, named where launch-torchrun.md and schedulers-slurm-kubernetes.md explain what it hands torchrun:
# its flags come from accelerate's own parser, its functions from the two modules that build torchrun's arguments
ACCELERATE_LAUNCH_FLAGS = {o for a in importlib.import_module("accelerate.commands.launch").launch_command_parser()._actions
                           for o in a.option_strings}
NAMESPACES += [importlib.import_module("accelerate.commands.launch"), importlib.import_module("accelerate.utils.launch")]
# launch-torchrun.md's --nproc-per-node table (set-5 s5-td-06): what each string value counts
NAMESPACES += [importlib.import_module("torch.distributed.run"), importlib.import_module("torch._utils"),
               importlib.import_module("os"), torch.accelerator]
_os = importlib.import_module("os")
CALLABLES.update({"os.sched_getaffinity": getattr(_os, "sched_getaffinity", None), "os.cpu_count": _os.cpu_count})
OTHER_API |= {f for f in importlib.import_module("accelerate.commands.config.config_args").ClusterConfig.__dataclass_fields__
              if f in ("num_machines", "machine_rank", "main_process_ip", "main_process_port")}
# transformers PreTrainedModel names ddp.md cites for reentrant checkpointing over frozen inputs (5.25.0 source)
OTHER_API |= {"activation_checkpointing_enable", "main_input_name", "input_ids", "inputs_embeds", "pixel_values"}
# init-method-matrix.md / debugging-and-env.md (set 9): names checked in the installed sources
_c10d_src = inspect.getsource(importlib.import_module("torch.distributed.distributed_c10d"))
_backend_hpp = (Path(torch.__file__).parent / "include/torch/csrc/distributed/c10d/Backend.hpp").read_text()
OTHER_API |= {n for n, src in (("eager_connect_single_device", _c10d_src), ("kBackendDefaultTimeout", _backend_hpp),
              ("group_rank", inspect.getsource(importlib.import_module("torch.distributed.elastic.agent.server.api"))))
              if n in src}
OTHER_API |= {"ConnectionError"}   # Python's builtin, raised by accelerate's port check (multinode-rank-matrix.md)
# set-22 fixes: ddp.md "torch.compile with DDP", multinode-rank-matrix.md (role_info multi_get), fsdp1-to-fsdp2.md
# (DCP optimizer FQNs of a FlatParameter): names checked in the installed sources
OTHER_API |= {n for n, ok in (
    ("optimize_ddp", hasattr(importlib.import_module("torch._dynamo.config"), "optimize_ddp")),
    ("DDPOptimizer", hasattr(importlib.import_module("torch._dynamo.backends.distributed"), "DDPOptimizer")),
    ("multi_get", hasattr(torch.distributed.Store, "multi_get")),
    ("_flat_param", importlib.import_module("torch.distributed.fsdp.fully_sharded_data_parallel").FLAT_PARAM == "_flat_param"),
    ("_fqns", "self._fqns" in inspect.getsource(importlib.import_module("torch.distributed.fsdp._flat_param")))) if ok}
_acc = importlib.import_module("accelerate")      # multinode-rank-matrix.md rows 21-22 call these
CALLABLES.update({"Accelerator": _acc.Accelerator, "Accelerator.save_state": _acc.Accelerator.save_state,
                  "ProjectConfiguration": importlib.import_module("accelerate.utils").ProjectConfiguration})
OTHER_API |= {n for n in ("save_state",) if hasattr(_acc.Accelerator, n)}
# dtensor.md's DeviceMesh slicing section (set-7 s7-td-01): the mesh methods its table calls, and the example's
# mesh / dim names (m, u are the generator's meshes; cp, dp_cp, dp_ep its dim names)
_DM = importlib.import_module("torch.distributed.device_mesh").DeviceMesh
CALLABLES.update({"DeviceMesh._concatenate": _DM._concatenate, "get_all_groups": _DM.get_all_groups,
                  "get_local_rank": _DM.get_local_rank, "size": _DM.size})
VALUES |= {"m", "u", "cp", "dp_cp", "dp_ep", "KeyError"}
# fsdp1-to-fsdp2.md's tied-weights section (set-12 s12-ck-b03): FSDP1 under its usual alias, Accelerate's re-tie
# wrapper, and transformers' PreTrainedModel.tie_weights (read as text: importing transformers here is slow)
CALLABLES.update({"FSDP": FSDP1, "ensure_weights_retied": importlib.import_module("accelerate.utils").ensure_weights_retied})
_tf_modeling = Path(importlib.util.find_spec("transformers").origin).parent / "modeling_utils.py"
assert "    def tie_weights(" in _tf_modeling.read_text(encoding="utf-8")
CALLABLES["tie_weights"] = None                  # name checked only (above)
OTHER_API |= {"prepare_model"} if hasattr(_acc.Accelerator, "prepare_model") else set()
# ddp.md's ignore list and PEFT case (set-13 s13-A3b-07): the attribute DDP's constructor reads, its setter; PEFT is
# not installed, its ModulesToSaveWrapper names (modules_to_save, original_module, the head `score`) come from
# huggingface/peft#899 and are names only
_ddp_src = inspect.getsource(importlib.import_module("torch.nn.parallel.distributed"))
assert "module._ddp_params_and_buffers_to_ignore" in _ddp_src
OTHER_API |= {"_ddp_params_and_buffers_to_ignore", "modules_to_save", "original_module", "score"}
CALLABLES["_set_params_and_buffers_to_ignore_for_model"] = (
    importlib.import_module("torch.nn.parallel").DistributedDataParallel._set_params_and_buffers_to_ignore_for_model)
CALLABLES["hasattr"] = hasattr               # process-groups.md's `hasattr(dist, "nn")` probe
# data-loading.md "DataLoader workers under DDP", ddp.md (reassigned buffers), launch-torchrun.md (who closes the rendezvous)
CALLABLES.update({"get_worker_info": importlib.import_module("torch.utils.data").get_worker_info,
                  "named_buffers": importlib.import_module("torch.nn").Module.named_buffers, "range": None,
                  "rdzv_handler.shutdown": importlib.import_module(
                      "torch.distributed.elastic.rendezvous.dynamic_rendezvous").DynamicRendezvousHandler.shutdown})
# ddp.md's DataParallel/Apex paragraph (fx13b audit): torch's parallel_apply; Apex's check_models and
# cast_model_type come from the fetched NVIDIA/apex snapshot at cb65b8ed^ (apex is not installed): names only
CALLABLES["parallel_apply"] = importlib.import_module("torch.nn.parallel.parallel_apply").parallel_apply
# process-groups.md's differentiable all-gather section (set-16 s16-D3-07, fx16b): the functional collectives and
# torch.distributed.nn.functional's private autograd classes and helpers it cites; Tensor.contiguous
_funcol = importlib.import_module("torch.distributed._functional_collectives")
NAMESPACES += [_funcol, importlib.import_module("torch.distributed.nn.functional")]
CALLABLES.update({"wait_tensor": _funcol.wait_tensor, "all_gather_single": _funcol.all_gather_single,
                  "contiguous": torch.Tensor.contiguous})
OTHER_API |= {"check_models", "cast_model_type"}
# pipelining.md (set-18 s18-H3-05/07): the pipelining package, its stage and schedule classes and their arguments
_pp = importlib.import_module("torch.distributed.pipelining")
NAMESPACES += [_pp, _pp.Pipe, _pp.PipelineStage, _pp.Schedule1F1B, importlib.import_module("torch.distributed.pipelining.stage"),
               importlib.import_module("torch.distributed.pipelining.schedules"),
               importlib.import_module("torch.distributed.pipelining.schedules").PipelineScheduleSingle]
CALLABLES.update({"pipeline": _pp.pipeline, "PipelineStage": _pp.PipelineStage.__init__, "step": _pp.ScheduleGPipe.step,
                  "build_stage": _pp.Pipe.build_stage, "tensor_split": torch.tensor_split,
                  "ScheduleGPipe": _pp.ScheduleGPipe.__init__, "Schedule1F1B": _pp.Schedule1F1B.__init__})
# set-21 W1: checkpoints.md (ZeroRedundancyOptimizer), process-groups.md (isend/irecv), fsdp2-and-dcp.md (optimizer
# state through DCP: the optimizer-state helpers and the LR schedulers its table names)
_zero = importlib.import_module("torch.distributed.optim").ZeroRedundancyOptimizer
CALLABLES.update({"consolidate_state_dict": _zero.consolidate_state_dict,
                  "ZeroRedundancyOptimizer.load_state_dict": _zero.load_state_dict,
                  "isend": dist.isend, "irecv": dist.irecv,
                  "set_optimizer_state_dict": dsd.set_optimizer_state_dict,
                  "get_optimizer_state_dict": dsd.get_optimizer_state_dict,
                  "StepLR": torch.optim.lr_scheduler.StepLR.__init__, "LinearLR": torch.optim.lr_scheduler.LinearLR.__init__,
                  "load_state_dict": torch.optim.lr_scheduler.LRScheduler.load_state_dict,
                  "requires_grad_": torch.Tensor.requires_grad_})
NAMESPACES += [importlib.import_module("torch.distributed.optim")]
OTHER_API |= {"params", "param_groups", "lr", "betas", "initial_lr", "exp_avg", "exp_avg_sq"}   # optimizer group/state keys
# multinode-rank-matrix.md's deepspeed rows: the runner's own flags and the variables its per-node launch exports
_ds_runner = importlib.import_module("deepspeed.launcher.runner")
for _flag in ("--hostfile", "--no_ssh", "--node_rank", "--master_addr", "--master_port"):
    assert f'"{_flag}"' in Path(_ds_runner.__file__).read_text(), _flag
    EXTERNAL[_flag] = "deepspeed (runner.py)"
_DS_LAUNCH_ENV = {n for n in ("CROSS_RANK", "CROSS_SIZE")
                  if f'{n} = "{n}"' in (Path(_ds_runner.__file__).parents[1] / "constants.py").read_text()}
# process-groups.md links DeepSpeed's default-timeout variable (read in deepspeed/constants.py)
_DS_LAUNCH_ENV |= {n for n in ("DEEPSPEED_TIMEOUT",)
                   if f'os.getenv("{n}"' in (Path(_ds_runner.__file__).parents[1] / "constants.py").read_text()}
# launch-torchrun.md names the DeepSpeed config block 0.19 removed (a key of its removed-keys table)
OTHER_API |= {k for k in ("elasticity",) if k in importlib.import_module("deepspeed.runtime.config")._REMOVED_TOP_LEVEL_CONFIG_KEYS}
NCCL_OWN = {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE",
            "NCCL_SHM_DISABLE"}
# NCCL's own variables, functions and level names cited from NCCL's source (NVIDIA/nccl 5067397c) in the NCCL
# section of containers-and-networking.md; the citations are in tests/audit/claims/torch-distributed.yaml
# (td-cn-nccl-*), read by tests/audit/verify_upstream.py (NCCL is not installed: no CPU path).
NCCL_SOURCE_NAMES = {
    "NCCL_CONF_FILE", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE", "NCCL_IB_ROCE_VERSION_NUM", "NCCL_MIN_NRINGS",
    "NCCL_PARAM", "NCCL_SOCKET_MIN_TASKSIZE", "LOC", "NAME", "NVL", "OK", "PHB", "PIX", "PXB", "SYS",
    "envIbAddrFamily", "envIbAddrRange", "initEnvFunc", "ncclFindInterfaces", "ncclGetUserP2pLevel",
    "ncclIbGetGidIndex", "ncclNetSocketConnect", "ncclNetSocketGetNsockNthread", "ncclNetSocketListen",
    "ncclTopoCheckP2p", "setenv", "show_gids", "simpleP2P", "validGid", "shmCanConnect", "ncclTransports"}
# ProcessGroupNCCL (C++, not in the CPU build): names fsdp1-to-fsdp2.md cites from the header the pinned wheel
# ships (torch/include/torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp; ledger td-nccl-avoid-record-streams-*).
PG_NCCL_HEADER = TORCH / "include" / "torch" / "csrc" / "distributed" / "c10d" / "ProcessGroupNCCL.hpp"
PG_NCCL_HEADER_NAMES = {"TORCH_NCCL_AVOID_RECORD_STREAMS", "TensorShelf", "stashed_for_allocator_safety_", "broadcastUniqueNCCLID", "devNCCLCommMap_", "initNCCLComm"}


def _nccl_section() -> str:
    page = (SKILL / "references" / "containers-and-networking.md").read_text()
    return page.split("## NCCL transport variables", 1)[1].split("\n## ", 1)[0]


def _strip_fences(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def spans(path: Path) -> list[str]:
    return re.findall(r"`([^`\n]+)`", _strip_fences(path.read_text(encoding="utf-8")))


ALL_SPANS = sorted({s for p in DOCS for s in spans(p)})


@pytest.fixture(scope="module")
def torch_text() -> str:
    """Python sources of torch.distributed, torch.nn.parallel, torch.utils.data and torch/serialization.py."""
    dirs = (DIST_PY, TORCH / "nn" / "parallel", TORCH / "utils" / "data", TORCH / "testing" / "_internal")
    parts = [p.read_text(errors="replace") for d in dirs for p in d.rglob("*.py")]
    parts.append((TORCH / "serialization.py").read_text())
    return "\n".join(parts)


@pytest.fixture(scope="module")
def so_bytes() -> bytes:
    return b"\n".join(p.read_bytes() for p in (TORCH / "lib").glob("*.so*"))


def resolve(dotted: str):
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(dotted)


def known_identifiers() -> set[str]:
    names = set(CALLABLES)
    for fn in CALLABLES.values():
        if fn is None:
            continue
        try:
            names |= set(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            pass
    for ns in NAMESPACES:
        names |= set(dir(ns))
    for action in get_args_parser()._actions:
        names.add(action.dest)
    return names | OTHER_API | RAY_AND_FABRIC_NAMES



# set-23 fix round (process-groups.md p2p and object devices, launch-torchrun.md exit barrier, dtensor.md norm,
# fsdp1-to-fsdp2.md buffers, data-loading.md weighted sampling): each name resolved in the installed torch
_elastic_api = importlib.import_module("torch.distributed.elastic.agent.server.api")
_local_agent = importlib.import_module("torch.distributed.elastic.agent.server.local_elastic_agent")
CALLABLES.update({
    "Linear": torch.nn.Linear.__init__, "F.linear": torch.nn.functional.linear,
    "LocalElasticAgent": _local_agent.LocalElasticAgent.__init__,
    "_exit_barrier": _elastic_api.SimpleElasticAgent._exit_barrier,
    "MixedPrecision": importlib.import_module("torch.distributed.fsdp").MixedPrecision,
    "WeightedRandomSampler": torch.utils.data.WeightedRandomSampler.__init__,
    "_NormPartial": importlib.import_module("torch.distributed.tensor._ops._math_ops")._NormPartial,
    "_unpickler": dist.distributed_c10d._unpickler,
    "batch_isend_irecv": dist.batch_isend_irecv, "P2POp": dist.P2POp,
    "dist.reduce_scatter_tensor": dist.reduce_scatter_tensor, "reduce_scatter": dist.reduce_scatter,
    "from_local": torch.distributed.tensor.DTensor.from_local,
    "set_force_sum_reduction_for_comms": FSDPModule.set_force_sum_reduction_for_comms,
    "num_nodes_waiting": importlib.import_module("torch.distributed.elastic.rendezvous").RendezvousHandler.num_nodes_waiting,
    "recv_object_list": dist.recv_object_list, "is_floating_point": torch.Tensor.is_floating_point,
    "cpu": torch.Tensor.cpu, "to": torch.nn.Module.to,
})
OTHER_API |= {n for n, ok in (
    ("SimpleElasticAgent", hasattr(_elastic_api, "SimpleElasticAgent")), ("Tensor", hasattr(torch, "Tensor")),
    ("_extra_pointwise_ops", hasattr(importlib.import_module("torch.distributed.tensor._ops._pointwise_ops"),
                                     "_extra_pointwise_ops")),
    ("_get_gradient_divide_factors", hasattr(importlib.import_module(
        "torch.distributed.fsdp._fully_shard._fsdp_collectives"), "_get_gradient_divide_factors")),
    ("float32", hasattr(torch, "float32")), ("sqrt", hasattr(torch, "sqrt")),
    ("set_device", hasattr(torch.cuda, "set_device")),
    ("libtorch_cpu", (TORCH / "lib" / "libtorch_cpu.so").exists() or (TORCH / "lib").is_dir())) if ok}
OTHER_API |= {"inv_freq", "x"}   # the user-side names in fsdp1-to-fsdp2.md's rotary-buffer example

ENV_RE = re.compile(r"^([A-Z][A-Z0-9]*(?:_[A-Z0-9<>]+)+)(?:=\S*)?$")
CALL_RE = re.compile(r"^([A-Za-z_][\w.]*)\((.*)\)$")


def test_docs_exist_and_state_the_version():
    assert len(DOCS) == 20 and TITAN.is_file()  # 9 + pipelining.md + fsdp1-to-fsdp2.md + torchrun-multinode-slurm.md + group-timeouts.md (split for reading cost) + fsdp2-module-methods.md + schedulers-slurm-kubernetes.md + dtensor.md + torchrun-worker-matrix.md + multinode-rank-matrix.md + gloo-collectives-matrix.md + init-method-matrix.md (+ torchtitan)
    for p in [*DOCS, TITAN]:
        assert "torch 2.13.0" in p.read_text(), f"{p.name} must say which torch it was verified against"
    assert torch.__version__.startswith("2.13.0")


def test_dotted_torch_names_resolve():
    bad = []
    for s in ALL_SPANS:
        for tok in s.split():
            tok = tok.strip("(),;")
            m = re.match(r"^(torch(?:\.\w+)+)", tok)
            if m:
                try:
                    resolve(m.group(1))
                except (ImportError, AttributeError) as e:
                    bad.append(f"{m.group(1)}: {e}")
    assert not bad, bad


def test_call_forms_name_known_callables_with_installed_defaults():
    bad = []
    for s in ALL_SPANS:
        m = CALL_RE.match(s)
        if not m or " " in m.group(1) or s.startswith("inspect."):
            continue
        name = m.group(1) if m.group(1) in CALLABLES else m.group(1).split(".")[-1]
        if m.group(1).startswith("torch.") and m.group(1) not in CALLABLES:
            fn = resolve(m.group(1))
        elif name in CALLABLES:
            fn = CALLABLES[name]
        elif name in LIGHTNING_NAMES:    # Lightning's Trainer, not installed: no signature to check
            continue
        else:
            bad.append(f"unknown callable in `{s}`")
            continue
        if fn is None:
            continue
        try:
            call = ast.parse(s.replace("*, ", "").replace(", *,", ",").replace("**pickle_load_args", "x=0"),
                             mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(call, ast.Call):
            continue
        try:
            params = inspect.signature(fn).parameters
        except ValueError:                      # pybind11 constructors (TCPStore ...): name checked only
            continue
        for kw in call.keywords:
            if kw.arg is None or kw.arg == "x":
                continue
            if kw.arg not in params:
                if isinstance(call.func, ast.Name) and len(call.args) + len(call.keywords) > 2 and \
                        any(k.arg in params for k in call.keywords if k is not kw):
                    bad.append(f"`{s}`: {kw.arg} is not a parameter of {fn.__qualname__}")
                continue
            try:
                stated = ast.literal_eval(kw.value)
            except ValueError:
                stated = ast.unparse(kw.value)
            if not all(isinstance(k.value, ast.Constant) and k.value.value is not Ellipsis or
                       isinstance(k.value, ast.Call) for k in call.keywords if k.arg):
                break                          # an example call with placeholders, not a signature line
            actual = params[kw.arg].default
            if params[kw.arg].default is inspect.Parameter.empty:
                continue
            # a signature line: the literal must be the default (a call with other values is an example)
            if s.startswith(("torch.", "init_process_group(", "new_group(", "fully_shard(", "MixedPrecision",
                             "DistributedSampler(", "Join(", "torch.load(")) and len(call.keywords) >= 3:
                if isinstance(actual, (bool, int, float, str, type(None))):
                    if stated != actual:
                        bad.append(f"`{s}`: {kw.arg}={stated!r}, installed default {actual!r}")
                elif stated != repr(actual).split("(")[0] + "()" and not repr(actual).startswith(str(stated)[:-1]):
                    bad.append(f"`{s}`: {kw.arg}={stated!r}, installed default {actual!r}")
    assert not bad, "\n".join(bad)


def test_environment_variables_exist_in_torch_or_are_nccl_own(torch_text, so_bytes):
    nccl_section = (SKILL / "references" / "debugging-and-env.md").read_text().split(
        "## NCCL's own variables (not runnable here)", 1)[1].split("\n## ", 1)[0]
    bad = []
    for s in ALL_SPANS:
        m = ENV_RE.match(s.split()[0]) if s else None
        if not m or m.group(1) in VALUES:
            continue
        name = m.group(1)
        if name.startswith("PET_") or s.startswith("PET_<"):
            assert "PET_{dest.upper()}" in (DIST_PY / "argparse_util.py").read_text()
            continue
        if _scheduler_name(name):
            continue
        if name in _DS_LAUNCH_ENV:       # exported by deepspeed/launcher/launch.py, not torch
            continue
        if name in LIGHTNING_NAMES:
            assert name in (SKILL / "references" / "schedulers-slurm-kubernetes.md").read_text(), name
            continue
        if name in CONTAINER_ENV:
            assert name in (SKILL / "references" / "schedulers-slurm-kubernetes.md").read_text(), name
            continue
        if name in NCCL_SOURCE_NAMES:
            assert f"`{name}" in _nccl_section(), f"{name}: cited from NCCL's source in the NCCL transport section"
            continue
        if name in PG_NCCL_HEADER_NAMES:
            assert f'"{name}"' in PG_NCCL_HEADER.read_text(), name
            continue
        if name in NCCL_OWN:
            assert f"`{name}`" in nccl_section, f"{name}: NCCL's own variable must be in the NCCL section"
            continue
        if name not in torch_text and name.encode() not in so_bytes:
            bad.append(name)
    assert not bad, f"environment variables not found in torch 2.13.0: {bad}"


def test_flags_are_torchrun_or_launch_flags_or_listed_external():
    run_flags = {o for a in get_args_parser()._actions for o in a.option_strings}
    launch = (DIST_PY / "launch.py").read_text()
    bad = []
    for s in ALL_SPANS:
        for tok in s.split():
            flag = tok.split("=")[0].strip(",")
            if not flag.startswith("--") or flag in ("--", "--help"):
                continue
            if flag in run_flags or f'"{flag}"' in launch or flag in EXTERNAL or flag in ACCELERATE_LAUNCH_FLAGS:
                continue
            if flag == "--local-rank" and '"--local-rank"' in launch:
                continue
            bad.append(flag)
    assert not bad, bad


def test_bare_identifiers_are_known_api_names():
    known = known_identifiers()
    bad = []
    for s in ALL_SPANS:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", s) or s in VALUES or ENV_RE.match(s):
            continue
        if s in ENV_SINGLE:
            assert f'"{s}"' in (DIST_PY / "elastic" / "utils" / "logging.py").read_text() + \
                (DIST_PY / "elastic" / "agent" / "server" / "local_elastic_agent.py").read_text(), s
            continue
        if s in SUMMARY_WORDS:
            assert s in (DIST_PY / "elastic" / "multiprocessing" / "errors" / "__init__.py").read_text(), s
            continue
        if _scheduler_name(s):
            continue
        if s in DYNAMIC_RDZV_KEYS:
            src = (DIST_PY / "elastic" / "rendezvous" / "dynamic_rendezvous.py").read_text()
            assert f"| {s}" in src or f'"{s}"' in src or f'_get_timeout(params, "{s[:-len("_timeout")]}")' in src, s
            continue
        if s in ("bias", "running_mean", "running_var", "num_batches_tracked", "training"):  # ddp.md SyncBatchNorm
            assert hasattr(torch.nn.SyncBatchNorm(2), s), s
            continue
        if s in ("hpu", "sum_dy", "sum_dy_xmu"):  # SyncBatchNorm's device list and backward reductions
            src = (Path(torch.__file__).parent / "nn" / "modules")
            assert s in (src / "batchnorm.py").read_text() + (src / "_functions.py").read_text(), s
            continue
        if s in PG_NCCL_HEADER_NAMES:
            assert s in PG_NCCL_HEADER.read_text(), s
            continue
        if s == "record_stream":  # the Tensor method ProcessGroupNCCL used to call (fsdp1-to-fsdp2.md)
            assert hasattr(torch.Tensor, "record_stream")
            continue
        if s == "dcp":  # the usual alias of torch.distributed.checkpoint in the examples
            continue
        if s in ("_StridedShard", "split_factor", "parallelize_module"):  # fsdp2-and-dcp.md, FSDP2 over TP
            import torch.distributed.tensor.parallel as tp_mod
            from torch.distributed.tensor.placement_types import _StridedShard
            assert hasattr(tp_mod, "parallelize_module") and "split_factor" in _StridedShard.__init__.__code__.co_varnames + tuple(
                getattr(_StridedShard, "__dataclass_fields__", {})), s
            continue
        if s == "requires_grad":  # the tensor attribute ddp.md's freezing section is about
            assert hasattr(torch.nn.Parameter(torch.zeros(1)), "requires_grad")
            continue
        if s == "no_fsdp_return":  # the local flag fsdp2-and-dcp.md cites for FSDP1's rank0_only return
            assert "no_fsdp_return = rank0_only" in (DIST_PY / "fsdp" / "_state_dict_utils.py").read_text()
            continue
        if s == "fsdp_version":  # Accelerate's FSDP plugin field (FSDP1 is its default)
            from accelerate.utils import FullyShardedDataParallelPlugin
            assert "fsdp_version" in FullyShardedDataParallelPlugin.__dataclass_fields__
            continue
        if s in RDZV_CONF_KEYS:
            assert f'"{s}"' in (DIST_PY / "elastic" / "rendezvous" / "c10d_rendezvous_backend.py").read_text(), s
            continue
        if s == "parallelism_config":
            import accelerate
            assert "parallelism_config" in inspect.signature(accelerate.Accelerator.__init__).parameters
            continue
        if s == "gather_for_metrics":
            import accelerate
            assert hasattr(accelerate.Accelerator, s)
            continue
        if s in NCCL_SOURCE_NAMES:       # NCCL functions and values, cited from its source (not installed)
            assert f"`{s}" in _nccl_section(), s
            continue
        if s in CONTAINER_NAMES:         # enroot/pyxis/kernel names, cited from their fetched sources
            assert s in (SKILL / "references" / "schedulers-slurm-kubernetes.md").read_text(), s
            continue
        if s in LIGHTNING_NAMES:         # Lightning (not installed), cited from its fetched source
            assert f"`{s}" in (SKILL / "references" / "schedulers-slurm-kubernetes.md").read_text(), s
            continue
        if s in DCP_JOB_NAMES:           # state keys and torch locals named in the rank-local DCP section
            job = (REPO / "tests" / "torch_distributed" / "_dcp_rank_local_job.py").read_text()
            assert (s.startswith("dl_rank") and 'f"dl_rank{rank}"' in job) or \
                s in (DIST_PY / "checkpoint" / "state_dict_loader.py").read_text(), s
            continue
        if s in ("IterableDataset", "_base_seed", "base_seed", "_worker_loop"):   # data-loading.md, DataLoader workers
            data = Path(torch.__file__).parent / "utils" / "data"
            assert hasattr(torch.utils.data, s) or s in (data / "dataloader.py").read_text() + \
                (data / "_utils" / "worker.py").read_text(), s
            continue
        if s == "_close":                # launch-torchrun.md: DynamicRendezvousHandler.shutdown -> _close
            assert "def _close(" in (DIST_PY / "elastic" / "rendezvous" / "dynamic_rendezvous.py").read_text()
            continue
        if s == "require_backward_grad_sync":   # ddp.md no_sync: the wrapper's flag
            assert "self.require_backward_grad_sync = False" in (Path(torch.__file__).parent / "nn" / "parallel" /
                                                                 "distributed.py").read_text()
            continue
        if s == "port_in_use":           # the case id of the held-port test the schedulers page links
            assert '"port_in_use"' in (REPO / "tests" / "failure_triage" / "test_repro_torch.py").read_text()
            continue
        if re.fullmatch(r"[0-9a-f]{7,12}", s) and re.search(r"\d", s) and re.search(r"[a-f]", s):
            continue                     # a short upstream commit id (enroot, pyxis, accelerate histories)
        if isinstance(getattr(__import__("builtins"), s, None), type):
            continue                     # a builtin exception or type, e.g. FileNotFoundError
        if s not in known:
            bad.append(s)
    assert not bad, f"identifiers that are no parameter or attribute of the documented APIs: {bad}"


# ------------------------------------------------------------------ table defaults against the installed objects

def table_rows(doc: str, heading: str) -> dict[str, str]:
    text = (SKILL / "references" / doc).read_text()
    sec = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in sec.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0].startswith("`"):
            rows[cells[0]] = cells[1]
    return rows


def first_code(cell: str) -> str:
    m = re.search(r"`([^`]+)`", cell)
    return m.group(1) if m else cell


@pytest.mark.parametrize("doc,heading,fn", [
    ("ddp.md", "Constructor arguments", DDP.__init__),
    ("data-loading.md", "DistributedSampler", DistributedSampler.__init__),
    ("fsdp2-and-dcp.md", "fully_shard", fully_shard),
    ("fsdp2-and-dcp.md", "MixedPrecisionPolicy and offload", MixedPrecisionPolicy),
    ("fsdp2-and-dcp.md", "State dicts", dsd.StateDictOptions),
    ("process-groups.md", "init_process_group", dist.init_process_group),
])
def test_argument_tables_state_installed_defaults(doc, heading, fn):
    params = inspect.signature(fn).parameters
    rows = table_rows(doc, heading)
    assert rows
    checked = 0
    for key, cell in rows.items():
        names = re.findall(r"`([a-z_]+)`", key)
        for name in names:
            assert name in params, f"{doc} {heading}: {name} is not a parameter of {fn.__qualname__}"
            default = params[name].default
            stated = first_code(cell)
            if isinstance(default, (bool, int, float, str, type(None))):
                assert stated == repr(default) or stated == str(default), (name, stated, default)
            else:
                assert stated.split("(")[0] == type(default).__name__, (name, stated, default)
            checked += 1
    assert checked >= 4


def test_torchrun_flag_table_matches_the_parser():
    parser = {o: a for a in get_args_parser()._actions for o in a.option_strings}
    rows = table_rows("launch-torchrun.md", "Flags and defaults")
    special = {"--master-port": None, "--shutdown-timeout": None}
    checked = 0
    for key, cell in rows.items():
        for flag in re.findall(r"`(--[a-z-]+)`", key):
            act = parser[flag]
            if flag in special:
                assert act.default is None and cell.startswith("unset")
            elif act.default is False:
                assert cell in ("off",) or cell.startswith("none"), (flag, cell)
            elif act.default is None:
                assert cell.startswith(("none", "unset")), (flag, cell)
            elif act.default in ("", []):
                assert cell.startswith("empty"), (flag, cell)
            else:
                assert first_code(cell) == str(act.default), (flag, cell, act.default)
            checked += 1
    assert checked >= 20
    assert parser["--start-method"].choices == ["spawn", "fork", "forkserver"]
    assert parser["--master-addr"].default == "127.0.0.1"
    run_src = (DIST_PY / "run.py").read_text()
    assert "args.master_port = 29500" in run_src and 'args.rdzv_endpoint = "localhost:0"' in run_src
    assert "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" in run_src and "defaults to 30 seconds" in run_src


def test_worker_environment_table_matches_the_agent():
    src = (DIST_PY / "elastic" / "agent" / "server" / "local_elastic_agent.py").read_text()
    for var in ("RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "MASTER_ADDR",
                "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID"):
        assert f'"{var}":' in src
    assert re.search(r'"TORCH_NCCL_ASYNC_ERROR_HANDLING": os\.getenv\(\s*"TORCH_NCCL_ASYNC_ERROR_HANDLING", str\(1\)', src)
    assert 'worker_env["LOCAL_RANK"] = str(local_rank)' in src
    run_src = (DIST_PY / "run.py").read_text()
    assert '"OMP_NUM_THREADS" not in os.environ and nproc_per_node > 1' in run_src


def test_source_level_defaults():
    c10d = (DIST_PY / "distributed_c10d.py").read_text()
    assert 'init_method = "env://"' in c10d and "Cannot specify both init_method and store." in c10d
    assert "timeout = _get_default_timeout(backend)" in c10d                  # new_group(timeout=None)
    assert callable(dist.Backend.register_backend)
    run_src = (DIST_PY / "run.py").read_text()
    assert "node_rank is only used for static rdzv_backend" in run_src
    assert "g.manual_seed(self.seed + self.epoch)" in (TORCH / "utils" / "data" / "distributed.py").read_text()
    assert 'os.getenv("TORCH_DIST_INIT_BARRIER", "0")' in c10d
    ddp_src = (TORCH / "nn" / "parallel" / "distributed.py").read_text()
    assert "_verify_param_shape_across_processes(self.process_group, parameters)" in ddp_src
    assert "can only be registered once and should be registered" in ddp_src
    assert 'os.environ.get("PYTORCH_DDP_USE_SIDE_STREAM", "1") == "1"' in ddp_src
    from torch.nn.parallel.distributed import _DEFAULT_BUCKET_CAP_MB
    assert _DEFAULT_BUCKET_CAP_MB == 25
    assert "set_debug_level_from_env()" in (DIST_PY / "__init__.py").read_text()
    assert 'os.environ.get("LOGLEVEL"' in (DIST_PY / "elastic" / "utils" / "logging.py").read_text()
    assert dist.constants.default_pg_timeout == datetime.timedelta(minutes=30)
    assert dist.constants.default_pg_nccl_timeout is None                   # CPU wheel
    assert dist.Backend.backend_list == ["undefined", "gloo", "nccl", "xccl", "ucc", "mpi", "fake"]
    dmap = dist.Backend.default_device_backend_map
    assert dmap["cpu"] == "gloo" and dmap["cuda"] == "nccl" and dmap["xpu"] == "xccl"
    cap = dist.Backend.backend_capability
    assert cap["gloo"] == ["cpu", "cuda"] and cap["nccl"] == ["cuda"] and cap["xccl"] == ["xpu"]
    assert cap["ucc"] == cap["mpi"] == ["cpu", "cuda"]
    assert dist.is_gloo_available() and not dist.is_nccl_available() and not dist.is_mpi_available()
    assert not dist.is_ucc_available() and not dist.is_xccl_available()
    assert "hccl" not in dist.Backend.backend_list
    assert tmp.get_sharing_strategy() == "file_descriptor"
    assert tmp.get_all_sharing_strategies() == {"file_descriptor", "file_system"}
    ser = (TORCH / "serialization.py").read_text()
    assert "return pickle_module is None and not is_fbcode" in ser
    assert inspect.signature(torch.load).parameters["weights_only"].default is None
    ck = inspect.getsource(tuc.checkpoint)
    assert "if use_reentrant is None:" in ck and "use_reentrant = True" in ck
    assert inspect.signature(CPUOffloadPolicy).parameters["pin_memory"].default is True
    assert "If ``None``, it is set to ``True`` for non-root modules and ``False``" in fully_shard.__doc__
    assert '"sampler option is mutually exclusive with shuffle"' in (TORCH / "utils" / "data" /
                                                                      "dataloader.py").read_text()


def test_cpp_strings_quoted_by_the_references(so_bytes):
    assert b"Valid values are `INFO`, `WARNING`, `ERROR`, and `FATAL`" in so_bytes
    assert b"TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL" in so_bytes
    assert b"Detected mismatch between collectives on ranks" in so_bytes
    assert b"makeDeviceForHostname" in so_bytes and b"GLOO_DEVICE_TRANSPORT" in so_bytes
    for name in (b"TORCH_SHOW_CPP_STACKTRACES", b"TORCH_NCCL_BLOCKING_WAIT", b"TORCH_NCCL_ASYNC_ERROR_HANDLING",
                 b"TORCH_NCCL_TRACE_BUFFER_SIZE", b"TORCH_FR_BUFFER_SIZE"):
        assert name in so_bytes, name


def test_fsdp_module_methods_and_ddp_hooks_exist():
    for m in ("unshard", "reshard", "set_requires_gradient_sync", "set_reshard_after_forward"):
        assert callable(getattr(FSDPModule, m))
    assert {"allreduce_hook", "fp16_compress_hook", "bf16_compress_hook"} <= set(dir(default_hooks))
    assert inspect.signature(Join.__init__).parameters["throw_on_early_termination"].default is False


def test_wrapper_launchers_export_the_same_variables():
    """SKILL.md: accelerate launch (multi-GPU) runs torch.distributed.run; the deepspeed launcher sets the
    same RANK / LOCAL_RANK / WORLD_SIZE / MASTER_ADDR variables itself."""
    import accelerate.commands.launch as al
    import deepspeed.launcher.launch as dl
    asrc = inspect.getsource(al)
    assert "import torch.distributed.run as distrib_run" in asrc and "distrib_run.run(args)" in asrc
    dsrc = inspect.getsource(dl)
    for var in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        assert f'current_env["{var}"]' in dsrc, var


def test_torchtitan_reference_torch_calls_resolve():
    """torchtitan-recipes.md: its torch names resolve in the installed torch (torchtitan's own are cited)."""
    bad = []
    for s in spans(TITAN):
        for tok in s.split():
            m = re.match(r"^(torch(?:\.\w+)+)", tok.strip("(),;"))
            if m:
                try:
                    resolve(m.group(1))
                except (ImportError, AttributeError) as e:
                    bad.append(f"{m.group(1)}: {e}")
    text = TITAN.read_text()
    for name in ("ColwiseParallel", "RowwiseParallel", "SequenceParallel", "parallelize_module"):
        assert name in text and hasattr(importlib.import_module("torch.distributed.tensor.parallel"), name), name
    for name in ("HuggingFaceStorageWriter", "HuggingFaceStorageReader"):
        assert name in text and hasattr(dcp, name), name
    assert "torch_to_dcp" in text and "torch_to_dcp" in (DIST_PY / "checkpoint" / "format_utils.py").read_text()
    assert not bad, bad
