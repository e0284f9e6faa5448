"""Behaviour claims of sub-skills/torch-distributed, each shown by a real 2- or 3-process gloo run.

Jobs live in _jobs.py (torch.multiprocessing) and _torchrun_worker.py (real torchrun /
torch.distributed.launch subprocesses). Designed hangs run on groups with 2-8 s timeouts, so a
hang is a recorded error; every subprocess also has a timeout (conftest.JOB_TIMEOUT_S).
Each test is one behaviour stated in a reference; the reference names it in its provenance.
"""
from __future__ import annotations

import re
import subprocess
import sys

from pathlib import Path

_TESTS = str(Path(__file__).resolve().parents[1])  # tests/, for _ports
if _TESTS not in sys.path:
    sys.path.append(_TESTS)
import _ports  # noqa: E402


def err(res: dict) -> str:
    assert "error" in res, f"expected an error, got {res}"
    return res["error"]["msg"]


def ok(job, r, name):
    assert "job_traceback" not in job, job.get("job_traceback")
    return job[name]


# ----------------------------------------------------------------------------- launch

def test_b01_torchrun_sets_rank_env_and_static_master(restart_static):
    run = restart_static
    for r in (0, 1):
        env = run.files[f"restart.attempt0.rank{r}.json"]["env"]
        assert env["RANK"] == env["LOCAL_RANK"] == str(r)
        assert env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "2"
        assert env["GROUP_RANK"] == "0" and env["ROLE_NAME"] == "default"
        assert env["MASTER_ADDR"] == "127.0.0.1" and env["TORCHELASTIC_MAX_RESTARTS"] == "1"
        assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
        assert env["TORCHELASTIC_ERROR_FILE"].endswith(f"attempt_0/{r}/error.json")
        assert run.files[f"restart.attempt0.rank{r}.json"]["all_reduce"] == 2.0     # env:// init worked


def test_b02_torchrun_sets_omp_num_threads_1_unless_set(restart_static, launch_fail):
    env0 = restart_static.files["restart.attempt0.rank0.json"]["env"]
    assert env0["OMP_NUM_THREADS"] == "1"
    assert "Setting OMP_NUM_THREADS environment variable for each process to be 1" in restart_static.log
    assert launch_fail.files["fail.attempt0.rank0.json"]["env"]["OMP_NUM_THREADS"] == "3"


def test_b03_single_node_without_master_port_uses_a_free_port_not_29500(restart_prefixed):
    envs = [restart_prefixed.files[f"restart_prefixed.attempt0.rank{r}.json"]["env"] for r in (0, 1)]
    assert envs[0]["MASTER_PORT"] == envs[1]["MASTER_PORT"] != "29500"
    assert envs[0]["MASTER_ADDR"] == envs[1]["MASTER_ADDR"] != ""
    assert envs[0]["TORCHELASTIC_RUN_ID"] != "none"          # c10d rendezvous got a generated id


def test_b04_max_restarts_restarts_the_whole_group_and_bumps_restart_count(restart_prefixed):
    run = restart_prefixed
    assert run.rc == 0, run.log[-3000:]
    a0 = [run.files[f"restart_prefixed.attempt0.rank{r}.json"] for r in (0, 1)]
    a1 = [run.files[f"restart_prefixed.attempt1.rank{r}.json"] for r in (0, 1)]
    assert all(x["env"]["TORCHELASTIC_RESTART_COUNT"] == "1" for x in a1)
    # rank 0 did not fail, yet it was started again as a new process
    assert a0[0]["pid"] != a1[0]["pid"] and a0[1]["pid"] != a1[1]["pid"]


def test_b05_gloo_env_init_after_a_restart_is_racy_without_a_per_attempt_store_prefix(restart_static,
                                                                                     restart_prefixed):
    """Plain env:// over gloo after a restart: attempt 1 starts, and either connects or fails to connect
    to peers' addresses left from attempt 0 (timing). The per-attempt PrefixStore variant must succeed."""
    run = restart_static
    started = [run.files.get(f"restart.started1.rank{r}.json") for r in (0, 1)]
    assert all(started), "both workers must be started again"
    if run.rc == 0:
        assert all(f"restart.attempt1.rank{r}.json" in run.files for r in (0, 1))
    else:                                   # refused connection, or stuck until the worker's watchdog
        hung = any(f.startswith("restart.hung1") for f in run.files)
        assert hung or "Gloo connectFullMesh failed" in run.log, run.log[-3000:]
    assert restart_prefixed.rc == 0


def test_b06_failure_summary_names_rank_and_exitcode_and_pet_env_sets_defaults(launch_fail):
    run = launch_fail
    assert run.rc != 0
    assert len([f for f in run.files if f.startswith("fail.attempt0")]) == 2     # PET_NPROC_PER_NODE=2 took effect
    root = run.log.split("Root Cause (first observed failure):", 1)[1]
    assert re.search(r"rank\s*:\s*1 \(local_rank: 1\)", root) and re.search(r"exitcode\s*:\s*7", root)
    assert "ChildFailedError" in run.log


def test_b07_legacy_launch_passes_local_rank_argument_and_warns(launch_legacy):
    run = launch_legacy
    assert run.rc == 0, run.log[-2000:]
    for r in (0, 1):
        rec = run.files[f"legacy.attempt0.rank{r}.json"]
        assert rec["argv"][0] == f"--local-rank={r}"
        assert rec["env"]["LOCAL_RANK"] == str(r)
    assert "FutureWarning" in run.log and "torch.distributed.launch is deprecated" in run.log


# ----------------------------------------------------------------------------- process groups

def test_b08_backend_strings_and_default_op(trio):
    for r in range(3):
        j = trio.rank(r, "trio")
        assert j["backend"] == "gloo" and j["backend_config"] == "cpu:gloo,cuda:gloo"
        assert j["rank_world"] == [r, 3]
        assert j["all_reduce_default_op"] == 3.0          # SUM of 0+1+2
        assert j["all_reduce_avg"] == 1.0                 # ReduceOp.AVG works on gloo
        assert j["async_before_wait_type"] == "Work" and j["async_after_wait"] == 3.0


def test_b08b_gloo_connects_every_pair_of_ranks_on_ephemeral_ports(trio):
    """containers-and-networking.md 'Other ports': the rendezvous here is a FileStore (no TCP), yet every
    pair of ranks has its own TCP connection to a kernel-chosen listening port of one of the two."""
    socks = [trio.rank(r, "trio")["tcp_sockets"] for r in range(3)]
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low, high = map(int, f.read().split())
    for s in socks:
        assert s["listen"] and all(low <= p <= high for p in s["listen"]), (s, low, high)
    for r in range(3):
        for q in range(r + 1, 3):
            assert (any(c[2] in socks[q]["listen"] for c in socks[r]["established"])
                    or any(c[2] in socks[r]["listen"] for c in socks[q]["established"])), (r, q, socks)


def test_b09_object_collectives(trio):
    j = [trio.rank(r, "trio") for r in range(3)]
    for r in range(3):
        assert j[r]["all_gather_object"] == [{"rank": i, "pad": "x" * i} for i in range(3)]
        assert j[r]["broadcast_object_list"] == [{"lr": 0.1, "from": 0}]
        assert j[r]["scatter_object_list"] == f"to{r}"
    assert j[0]["gather_object"] == [["r", 0], ["r", 1], ["r", 2]]
    assert j[1]["gather_object"] is None and j[2]["gather_object"] is None
    assert j[1]["recv"] == 42.0


def test_b10_new_group_non_member_gets_sentinel(trio):
    j = [trio.rank(r, "trio") for r in range(3)]
    assert [x["subgroup_non_member"] for x in j] == [False, False, True]
    assert [x["subgroup_rank"] for x in j] == [0, 1, -1]
    assert j[0]["subgroup_sum"] == j[1]["subgroup_sum"] == 2.0


def test_b10b_new_group_members_only_with_local_synchronization(trio):
    """s3-td-02: ranks 0 and 1 create a group that rank 2 never enters (use_local_synchronization=True)
    and all-reduce in it; a second group over the same ranks is created too (its hashed name differs);
    the all-rank groups created afterwards (monitored_barrier below) still work."""
    j = [trio.rank(r, "trio") for r in range(3)]
    assert j[0]["local_sync_sum"] == j[1]["local_sync_sum"] == 3.0 and "local_sync_sum" not in j[2]
    for r in (0, 1):
        assert j[r]["local_sync_same_ranks_again"]["ok"] == "ProcessGroup", j[r]["local_sync_same_ranks_again"]


def test_b11_monitored_barrier_names_missing_ranks(trio):
    j = trio.rank(0, "trio")
    assert "Ranks 1, 2 failed to pass monitoredBarrier in 2000 ms" in err(j["monitored_barrier_all"])
    assert "Rank 1 failed to pass monitoredBarrier in 2000 ms" in err(j["monitored_barrier_first"])


def test_b12_mismatched_shapes_on_gloo_are_not_detected(trio):
    j = [trio.rank(r, "trio")["mismatched_shapes"] for r in range(3)]
    timed_out = [x for x in j if "error" in x]
    assert timed_out and all("Timed out waiting 3000ms" in x["error"]["msg"] for x in timed_out)
    assert all("mismatch" not in x["error"]["msg"].lower() for x in timed_out)
    # the rank with the smallest tensor may even return without any error
    assert len(timed_out) >= 2


def test_b13_skipped_collective_waits_for_the_init_process_group_timeout(trio):
    res = [trio.rank(r, "trio")["skipped_collective"] for r in (0, 1)]
    # Both waiting ranks run the 15 s timer; the first to fire closes its gloo pairs, so on a loaded
    # machine the other can report the closed connection instead of its own timeout - after the same wait.
    assert any("Timed out waiting 15000ms" in err(x) for x in res), res
    for x in res:
        assert re.search(r"Timed out waiting 15000ms|Connection closed by peer", err(x)) and 14 <= x["s"] < 90, x


def test_b14_new_group_skipped_by_one_rank_breaks_the_next_group(trio):
    j = [trio.rank(r, "trio") for r in range(3)]
    assert j[0]["new_group_missing_rank"]["ok"] == "ProcessGroup"      # no error where the rank skipped
    for r in (0, 1):
        assert re.search(r"timed out|timeout", err(j[r]["next_new_group_after_skip"]), re.I)
    # the rank that skipped is out of step: still blocked, or failed on its own
    assert j[2]["rank2_still_blocked_after_6s"] is True or "error" in j[2]["next_new_group_after_skip"]


def test_b15_detail_debug_detects_op_and_shape_mismatch(detail):
    j = [detail.rank(r, "detail") for r in (0, 1)]
    for x in j:
        assert x["debug_level"] == "DebugLevel.DETAIL"
        assert "Detected mismatch between collectives on ranks" in err(x["op_mismatch"])
        assert "Op type: ALLREDUCEvs BROADCAST" in err(j[0]["op_mismatch"])
        assert "Tensor shapes: 2vs 3" in err(j[0]["shape_mismatch"])
        assert x["op_mismatch"]["s"] < 3                 # fails fast instead of waiting for the timeout


def test_b16_ddp_construction_crashes_under_detail_on_this_cpu_build(detail):
    assert detail.rc != 0 and "SIGSEGV" in detail.log
    assert "_ddp_init_helper" in detail.log                 # faulthandler stack: inside the DDP constructor
    assert all("ddp_constructed_under_detail" not in detail.rank(r, "detail") for r in (0, 1))


# ----------------------------------------------------------------------------- DDP

def test_b17_ddp_broadcasts_rank0_params_and_averages_grads(pair):
    j = [pair.rank(r, "pair") for r in (0, 1)]
    assert j[0]["init_weight"] == j[1]["init_weight"]          # seeded differently per rank before wrapping
    assert j[0]["local_grad"] == [2.0] * 3 and j[1]["local_grad"] == [4.0] * 3
    assert j[0]["ddp_grad"] == j[1]["ddp_grad"] == [3.0] * 3   # mean, not sum
    assert j[0]["state_dict_keys"] == ["module.bias", "module.weight"]
    assert j[0]["module_state_dict_keys"] == ["bias", "weight"]


def test_b18_no_sync_accumulates_locally_then_averages(pair):
    j = [pair.rank(r, "pair") for r in (0, 1)]
    assert j[0]["no_sync_grad_inside"] == [1.0] * 3 and j[1]["no_sync_grad_inside"] == [2.0] * 3
    # rank0: 1 + 10, rank1: 2 + 20 -> mean 16.5
    assert j[0]["no_sync_grad_after_sync"] == j[1]["no_sync_grad_after_sync"] == [16.5] * 3


def test_b19_unused_parameter_errors_on_second_iteration(pair):
    for r in (0, 1):
        steps = pair.rank(r, "pair")["unused_default"]["steps"]
        assert "ok" in steps[0] and len(steps) == 2
        msg = err(steps[1])
        assert "Expected to have finished reduction in the prior iteration" in msg
        assert "find_unused_parameters=True" in msg
        # TORCH_DISTRIBUTED_DEBUG=INFO (set for this job) names the parameters
        assert f"Parameters which did not receive grad for rank {r}: unused.bias, unused.weight" in msg


def test_b20_find_unused_parameters_or_static_graph_fix_it(pair):
    for r in (0, 1):
        for key in ("unused_find_unused", "unused_static_graph"):
            res = pair.rank(r, "pair")[key]
            assert len(res["steps"]) == 3 and all("ok" in s for s in res["steps"])
            assert res["unused_grad_is_none"] is True


def test_b21_forward_sync_buffers_broadcasts_rank0_buffers_each_forward(pair):
    j = [pair.rank(r, "pair")["bn_default"] for r in (0, 1)]
    assert j[0]["after_init"] == j[1]["after_init"] == [1.0, 1.0]            # init sync from rank 0
    assert j[0]["after_train_fwd"] != j[1]["after_train_fwd"]                # each rank updates locally
    assert j[1]["after_second_fwd"] == j[0]["after_train_fwd"]              # next forward: rank 0's copy
    assert j[0]["warnings"] == []


def test_b22_forward_sync_buffers_false_keeps_local_buffers_but_syncs_at_init(pair):
    j = [pair.rank(r, "pair")["bn_forward_sync_false"] for r in (0, 1)]
    assert j[0]["after_init"] == j[1]["after_init"] == [1.0, 1.0]
    assert j[1]["after_second_fwd"] == j[1]["after_train_fwd"] != j[0]["after_second_fwd"]


def test_b23_broadcast_buffers_false_is_deprecated_and_skips_init_sync(pair):
    j = [pair.rank(r, "pair")["bn_broadcast_buffers_false"] for r in (0, 1)]
    assert j[0]["after_init"] == [1.0, 1.0] and j[1]["after_init"] == [2.0, 2.0]
    assert j[1]["after_second_fwd"] != j[0]["after_second_fwd"]
    assert any(w.startswith("FutureWarning: `broadcast_buffers` is deprecated") for w in j[0]["warnings"])


def test_b24_ddp_construction_rules(pair):
    j = pair.rank(0, "pair")
    assert "device_ids and output_device arguments only work with" in err(j["device_ids_on_cpu"])
    assert err(j["device_ids_on_cpu"]) and j["device_ids_on_cpu"]["error"]["type"] == "ValueError"
    assert "is not needed when a module doesn't have any parameter that requires a gradient" in err(
        j["no_trainable_params"])


def test_b25_comm_hook_replaces_the_averaging(pair):
    for r in (0, 1):
        j = pair.rank(r, "pair")
        assert j["sum_hook_grad"] == [3.0] * 3            # 1 + 2: the hook's sum is used as is
        assert j["allreduce_hook_grad"] == [1.5] * 3      # default_hooks.allreduce_hook divides by world size


def test_b26_activation_checkpointing_with_ddp(pair):
    j = pair.rank(0, "pair")
    assert all("ok" in s for s in j["ckpt_nonreentrant_twice"]) and len(j["ckpt_nonreentrant_twice"]) == 2
    assert all("ok" in s for s in j["ckpt_nonreentrant_find_unused"])
    assert all("ok" in s for s in j["ckpt_reentrant_twice_static"])
    assert "Expected to mark a variable ready only once" in err(j["ckpt_reentrant_find_unused"][0])
    assert any("use_reentrant parameter should be passed explicitly" in w for w in j["ckpt_default_warning"])


def test_b27_syncbatchnorm_conversion_and_cpu_limit(pair):
    j = pair.rank(0, "pair")
    assert j["syncbn_types"] == ["Linear", "SyncBatchNorm"]
    assert "SyncBatchNorm expected input tensor to be on GPU or XPU or privateuseone" in err(j["syncbn_train_cpu"])
    assert j["syncbn_eval_cpu"]["ok"] == 2                 # eval mode uses running stats, no collective


def test_b28_uneven_inputs_hang_without_join_and_finish_with_join(pair):
    j = [pair.rank(r, "pair") for r in (0, 1)]
    assert j[0]["uneven_with_join"]["ok"] == [[1.0, 1.0], [1.0, 1.0], [0.5, 0.5]]   # joined rank adds zeros
    assert j[1]["uneven_with_join"]["ok"] == [[1.0, 1.0], [1.0, 1.0]]
    assert "Timed out waiting 3000ms" in err(j[0]["uneven_without_join"])


def test_b29_eval_on_one_rank_through_the_wrapper_hangs_module_does_not(pair):
    j = pair.rank(0, "pair")
    assert re.search(r"timed out|timeout", err(j["eval_rank0_wrapper"]), re.I)
    assert j["eval_rank0_module"]["ok"] == 1


# ----------------------------------------------------------------------------- data loading

def test_b30_distributed_sampler_defaults_and_set_epoch(pair):
    j = [pair.rank(r, "pair") for r in (0, 1)]
    assert j[0]["sampler_defaults"] == {"num_replicas": 2, "rank": 0, "shuffle": True, "seed": 0,
                                        "drop_last": False, "len": 5}
    for x in j:
        assert x["epoch0_a"] == x["epoch0_b"]            # no set_epoch: same order every epoch
        assert x["epoch1"] != x["epoch0_a"]              # set_epoch(1) reshuffles
    assert sorted(j[0]["epoch0_a"] + j[1]["epoch0_a"]) == list(range(10))     # disjoint, complete


def test_b31_different_seeds_per_rank_overlap(pair):
    j = [pair.rank(r, "pair") for r in (0, 1)]
    combined = j[0]["epoch0_a"] + j[1]["seed_rank"]      # rank 0 seed 0, rank 1 seed 1
    assert len(set(combined)) < 10


def test_b32_uneven_dataset_padding_and_drop_last(pair):
    j = [pair.rank(r, "pair") for r in (0, 1)]
    assert j[0]["uneven_pad"] == [0, 2, 4] and j[1]["uneven_pad"] == [1, 3, 0]   # index 0 repeated
    assert j[0]["uneven_drop_last"] == [0, 2] and j[1]["uneven_drop_last"] == [1, 3]
    assert j[0]["loader_batches"] == [[0, 2], [4]] and j[1]["loader_batches"] == [[1, 3], [0]]


# ----------------------------------------------------------------------------- checkpoints, FSDP2, DCP

def test_b33_rank0_save_barrier_load_with_map_location(pair):
    for r in (0, 1):
        j = pair.rank(r, "pair")
        assert j["rank0_load_equal"] is True and j["map_location_loc"] == ["cpu"]


def test_b34_torch_load_defaults_to_weights_only(pair):
    msg = err(pair.rank(1, "pair")["weights_only_default"])
    assert "Weights only load failed" in msg and "add_safe_globals" in msg


def test_b35_fully_shard_on_cpu_gloo_with_mixed_precision(pair):
    for r in (0, 1):
        j = pair.rank(r, "pair")
        assert j["fsdp_param"] == {"type": "DTensor", "placements": ["S(0)"], "local_shape": [4, 6],
                                   "global_shape": [8, 6], "dtype": "torch.float32"}
        assert j["fsdp_type"] == "FSDPTiny"
        assert j["fsdp_output_dtype"] == "torch.bfloat16"     # param_dtype=bfloat16 computes in bf16
        assert j["fsdp_grad"] == {"type": "DTensor", "dtype": "torch.float32"}
        assert j["dcp_files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]


def test_b36_full_state_dict_with_cpu_offload_lands_on_rank0_only(pair):
    assert pair.rank(0, "pair")["full_state_dict_keys"] == ["l1.bias", "l1.weight", "l2.bias", "l2.weight"]
    assert pair.rank(0, "pair")["full_changed_by_step"] is True
    assert pair.rank(1, "pair")["full_state_dict_keys"] == []


def test_b37_dcp_saved_at_2_ranks_loads_at_3(trio):
    assert trio.rc == 0, trio.log[-3000:]
    j = [trio.rank(r, "trio") for r in range(3)]
    assert [x["local_rows_l1"] for x in j] == [3, 3, 2]       # 8 rows over 3 ranks
    assert j[0]["reshard_equal"] is True
    assert all(x["optim_step_loaded"] == [1.0] for x in j)
    assert j[0]["dcp_to_torch_save_keys"] == ["model", "optim"] and j[0]["dcp_to_torch_save_equal"] is True
    # rank 0 alone, group up: dcp.load(..., no_dist=True) into plain zeros of full size gives the full values
    assert j[0]["plain_no_dist_group_up"] is True and j[0]["plain_no_dist_equal"] is True


# ----------------------------------------------------------------------------- env:// and networking (1 process)

def _init_one(clean_env, **env):
    code = ("import torch.distributed as dist\n"
            "try:\n dist.init_process_group('gloo', rank=0, world_size=1); print('OK', dist.get_world_size())\n"
            "except Exception as e:\n print('ERR', type(e).__name__, e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=clean_env(**env), stdin=subprocess.DEVNULL)
    return r.stdout.strip()


def _port() -> str:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return str(_ports.free_port())


def test_b38_env_init_needs_master_addr(clean_env):
    out = _init_one(clean_env)
    assert out.startswith("ERR ValueError") and "environment variable MASTER_ADDR expected, but not set" in out


def test_b39_gloo_socket_ifname_selects_the_interface(clean_env):
    assert _init_one(clean_env, MASTER_ADDR="127.0.0.1", MASTER_PORT=_port(), GLOO_SOCKET_IFNAME="lo") == "OK 1"
    out = _init_one(clean_env, MASTER_ADDR="127.0.0.1", MASTER_PORT=_port(), GLOO_SOCKET_IFNAME="nosuchif0")
    assert out.startswith("ERR RuntimeError") and "Unable to find address for: nosuchif0" in out


def test_b40_dataloader_rejects_shuffle_together_with_a_sampler(clean_env):
    code = ("import torch.utils.data as d\n"
            "from torch.utils.data.distributed import DistributedSampler\n"
            "s = DistributedSampler(list(range(4)), num_replicas=2, rank=0)\n"
            "try:\n d.DataLoader(list(range(4)), sampler=s, shuffle=True); print('OK')\n"
            "except ValueError as e:\n print('ERR', e)\n"
            "print('LIST', list(d.DataLoader(list(range(4)), sampler=s, batch_size=4))[0].tolist())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=clean_env(), stdin=subprocess.DEVNULL).stdout
    assert "ERR sampler option is mutually exclusive with shuffle" in out
    assert "LIST [" in out                     # explicit num_replicas/rank work without a process group


def test_b41_torch_cpp_log_level_info_prints_c10d_lines(clean_env):
    code = "import torch.distributed as dist\ndist.init_process_group('gloo', rank=0, world_size=1)\nprint('done')\n"
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=_port()), stdin=subprocess.DEVNULL)
    loud = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=clean_env(MASTER_ADDR="127.0.0.1", MASTER_PORT=_port(), TORCH_CPP_LOG_LEVEL="INFO"),
                          stdin=subprocess.DEVNULL)
    assert "done" in quiet.stdout and "done" in loud.stdout
    assert "[c10d]" not in quiet.stderr
    assert re.search(r"\[I\d{4} .*\[c10d\]", loud.stderr)


def test_b43_requires_grad_changed_after_wrapping(pair):
    """ddp.md "Freezing or unfreezing after wrapping": DDP keeps the parameter set of construction time."""
    unfrozen = [pair.rank(r, "pair")["ddp_late_unfreeze"]["ok"] for r in (0, 1)]
    # a parameter unfrozen after wrapping gets a local gradient that is never averaged (inputs differ per rank)
    assert unfrozen[0]["late"] != unfrozen[1]["late"]
    assert unfrozen[0]["synced"] == unfrozen[1]["synced"]
    for r in (0, 1):
        res = pair.rank(r, "pair")["ddp_late_freeze"]["ok"]
        # a parameter frozen after wrapping behaves as an unused one: the second iteration raises
        assert "ok" in res["steps"][0] and len(res["steps"]) == 2
        assert "Expected to have finished reduction in the prior iteration" in err(res["steps"][1])


def test_b39_fsdp2_params_used_on_some_ranks_need_set_reduce_scatter_unused_params(detail):
    """s11-fd-c03: one fully_shard group, l2 used on rank 0 only. Without the flag each rank reduce-scatters
    only the gradients it has (40 vs 20 floats): DETAIL names the shape mismatch on both ranks. With
    set_reduce_scatter_unused_params(True) rank 1 adds zeros and both ranks finish with the same l2 gradient."""
    j = [detail.rank(r, "detail") for r in (0, 1)]
    for x in j:
        bad = err(x["fsdp2_unused_flag_False"])
        assert "Detected mismatch between collectives on ranks" in bad and "OpType=_REDUCE_SCATTER_BASE" in bad
        assert "TensorShape=[40]" in bad and "TensorShape=[20]" in bad
    good = [x["fsdp2_unused_flag_True"] for x in j]
    assert all("ok" in g and g["ok"] for g in good) and good[0]["ok"] == good[1]["ok"]


# ----------------------------------------------------------------------------- set 12 (s12-fd-k04, s12-ck-e09, s12-td-g01/i03)

def test_b44_barrier_pairs_by_order_and_detail_does_not_flag_it(detail):
    j = [detail.rank(r, "detail") for r in (0, 1)]
    # rank 1's "wait for main" barrier was released by rank 0's inner barrier: before the file existed
    assert j[1]["barrier_main_only"]["file_existed"] is False
    assert j[1]["barrier_main_only"]["passed_s"] < j[0]["barrier_main_only"]["passed_s"]
    assert j[0]["barrier_main_only"]["file_existed"] is True   # DETAIL raised nothing for barrier vs barrier
    # the shifted count surfaces at the next collective of another kind, on both ranks, without the timeout
    for x in j:
        assert "Detected mismatch between collectives on ranks" in err(x["barrier_shifted_next"])
        assert x["barrier_shifted_next"]["s"] < 3


def test_b45_syncbatchnorm_with_a_group_cpu_training_raises_eval_is_plain_bn(detail):
    for r in (0, 1):
        s = detail.rank(r, "detail")["syncbn"]
        assert s["type"] == "SyncBatchNorm"
        assert s["weight_is_same_object"] and s["bias_is_same_object"] and s["running_mean_is_same_object"]
        assert s["process_group_default"] == "None" and s["process_group_stored"] is True
        assert err(s["train_cpu"]) == "SyncBatchNorm expected input tensor to be on GPU or XPU or privateuseone"
        assert s["eval_cpu_equals_plain_bn"] is True


def test_b46_syncbatchnorm_without_a_process_group_is_plain_batchnorm(tmp_path):
    import torch
    import torch.distributed as dist
    assert not dist.is_initialized()
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(3)
    sbn = torch.nn.SyncBatchNorm.convert_sync_batchnorm(torch.nn.Sequential(torch.nn.BatchNorm2d(3)))[0]
    x = torch.randn(4, 3, 2, 2)
    assert torch.allclose(sbn(x), bn(x))                      # training mode, CPU input: no error, no sync
    assert torch.allclose(sbn.running_mean, bn.running_mean)
    # with a group initialised the device is checked before the world size: world size 1 + CPU still raises
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        try:
            sbn(x)
            raised = None
        except ValueError as e:
            raised = str(e)
        assert raised == "SyncBatchNorm expected input tensor to be on GPU or XPU or privateuseone"
        assert torch.allclose(sbn.eval()(x), bn.eval()(x))   # eval mode: running statistics, no check
    finally:
        dist.destroy_process_group()


def test_b47_ddp_does_not_sync_optimizer_state_on_resume(pair):
    for r in (0, 1):
        j = pair.rank(r, "pair")
        only0, every = ok(j, r, "resume_optimizer_rank0_only"), ok(j, r, "resume_optimizer_every_rank")
        assert only0["equal_after_wrap"] and every["equal_after_wrap"]   # model loaded on rank 0 only: DDP broadcast
        assert only0["equal_after_one_step"] is False                     # Adam state on rank 0 only: replicas differ
        assert every["equal_after_one_step"] is True
        late = ok(j, r, "resume_model_after_wrap_rank0_only")
        assert late["equal_after_wrap"] is False and late["equal_after_one_step"] is False
    assert pair.rank(1, "pair")["resume_optimizer_rank0_only"]["opt_state_len"] == 0
