"""The sub-skill examples run as real 2-process gloo jobs; assert results, not exit codes."""
from __future__ import annotations

import json

import numpy as np
from safetensors.numpy import load_file


# --- launch topology (configuration-and-cli/references/cpu-multiprocess.md) ---------------

def test_use_cpu_env_with_multi_gpu_gives_two_gloo_ranks(topology_runs):
    procs = topology_runs["use_cpu_env+multi_gpu"]
    assert len(procs) == 2
    assert sorted(p["process_index"] for p in procs) == [0, 1]
    for p in procs:
        assert p["num_processes"] == 2
        assert p["distributed_type"] == "DistributedType.MULTI_CPU"
        assert p["backend"] == "gloo"
        assert p["env"]["WORLD_SIZE"] == "2"


def test_cpu_flag_with_two_processes_starts_only_one(topology_runs):
    procs = topology_runs["cpu_flag"]
    assert len(procs) == 1
    (p,) = procs
    assert p["num_processes"] == 1 and p["distributed_type"] == "DistributedType.NO"
    assert p["env"]["ACCELERATE_USE_CPU"] == "True"  # exported by the simple launcher


def test_multi_gpu_without_use_cpu_on_cpu_host_starts_independent_copies(topology_runs):
    procs = topology_runs["multi_gpu_without_env"]
    assert len(procs) == 2  # torchrun started two processes ...
    for p in procs:  # ... but each is a separate single-process run
        assert p["num_processes"] == 1 and p["distributed_type"] == "DistributedType.NO"
        assert p["env"]["WORLD_SIZE"] == "2"


def test_partial_state_first_ignores_use_cpu(topology_runs):
    procs = topology_runs["use_cpu_env+partial_state_first"]
    assert len(procs) == 2
    for p in procs:
        assert p["num_processes"] == 1 and p["distributed_type"] == "DistributedType.NO"


# --- training-loop-integration/examples/loop_checks.py ---------------------------------

def test_loop_runs_on_two_multi_cpu_ranks(loop_run):
    r0, r1 = loop_run["ranks"]
    assert (r0["rank"], r1["rank"]) == (0, 1)
    for r in (r0, r1):
        assert r["num_processes"] == 2 and r["distributed_type"] == "DistributedType.MULTI_CPU"
        assert r["wrapped_type"] == "DistributedDataParallel"
        assert r["prepared_types"] == ["AcceleratedOptimizer", "DataLoaderShard", "AcceleratedScheduler"]
        assert r["unwrapped_type"] == "Linear"


def test_gather_for_metrics_returns_exact_dataset_length(loop_run):
    for r in loop_run["ranks"]:
        assert r["gathered_for_metrics"] == [float(i) for i in range(13)]
        assert r["gathered_plain_count"] == 16  # plain gather keeps the even_batches padding


def test_accumulation_matches_one_large_batch_step(loop_run):
    for r in loop_run["ranks"]:
        assert r["train_batches_per_rank"] == 2
        assert r["sync_flags"] == [False, True]  # one optimizer step after K=2 micro-batches
        assert r["scheduler_last_epoch"] == 2  # one real step x num_processes
        assert r["accum_max_abs_diff"] < 1e-12
        assert abs(r["clip_grad_norm"] - r["reference_grad_norm"]) < 1e-9


def test_seed_split_main_first_and_print(loop_run):
    r0, r1 = loop_run["ranks"]
    assert r0["seed_same"] == r1["seed_same"]
    assert r0["seed_device_specific"] != r1["seed_device_specific"]
    assert r0["seed_device_specific"] == r0["seed_same"]  # rank 0 adds 0 to the seed
    assert r0["split_share"] == [0, 1, 2] and r1["split_share"] == [3, 4]
    assert r0["marker_seen_inside_block"] and r1["marker_seen_inside_block"]
    assert loop_run["stdout"].count("LOOP_CHECKS_PRINTED_ONCE") == 1


# --- checkpointing-and-tracking/examples/resume_checks.py -------------------------------

def test_load_state_in_fresh_launch_restores_everything(resume_run):
    for saved, resumed in zip(resume_run["save"], resume_run["resume"]):
        assert saved["num_processes"] == resumed["num_processes"] == 2
        assert saved["at_checkpoint"]["counter"] == 5
        assert resumed["at_checkpoint"] == saved["at_checkpoint"]  # weights, optimizer, RNGs, custom


def test_mid_epoch_resume_finishes_bitwise_identical(resume_run):
    for saved, resumed in zip(resume_run["save"], resume_run["resume"]):
        assert saved["final"]["counter"] == 2 * saved["batches_per_epoch"]
        assert resumed["final"] == saved["final"]


def test_checkpoint_files_and_total_limit(resume_run):
    saved0 = resume_run["save"][0]
    assert saved0["checkpoint_files"] == [
        "custom_checkpoint_0.pkl", "model.safetensors", "optimizer.bin",
        "random_states_0.pkl", "random_states_1.pkl", "scheduler.bin",
    ]
    # three saves with total_limit=2: checkpoint_0 was deleted
    assert resume_run["resume"][0]["checkpoints_on_disk"] == ["checkpoint_1", "checkpoint_2"]
    # the resumed run continued the numbering (iteration set by hand) and pruned checkpoint_1
    assert resume_run["resume"][0]["checkpoints_after_final_save"] == ["checkpoint_2", "checkpoint_3"]
    for phase in ("save", "resume"):
        assert (resume_run["dir"] / f"export_{phase}" / "model.safetensors").is_file()


def test_json_tracker_wrote_metrics(resume_run):
    path = resume_run["dir"] / "logs" / "resume_demo" / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    configs = [r["values"]["phase"] for r in records if r["event"] == "config"]
    assert configs == ["save", "resume"]  # main process only, once per launch
    steps = [r["step"] for r in records if r["event"] == "log"]
    assert steps == list(range(1, 13)) + list(range(6, 13))
    assert all(isinstance(r["values"]["loss"], float) for r in records if r["event"] == "log")
    assert sum(r["event"] == "finish" for r in records) == 2


def test_global_rng_loader_restores_state_but_diverges_after_resume(resume_run_global_rng):
    for saved, resumed in zip(resume_run_global_rng["save"], resume_run_global_rng["resume"]):
        assert resumed["at_checkpoint"] == saved["at_checkpoint"]
        assert resumed["final"]["torch_rng"] != saved["final"]["torch_rng"]
        assert resumed["final"]["weights"] != saved["final"]["weights"]


def test_documented_yaml_gives_two_gloo_ranks(topology_runs):
    procs = topology_runs["use_cpu_env+doc_yaml"]
    assert sorted(p["process_index"] for p in procs) == [0, 1]
    assert all(p["distributed_type"] == "DistributedType.MULTI_CPU" and p["num_processes"] == 2
               and p["backend"] == "gloo" for p in procs)


def test_multi_cpu_config_without_mpirun_starts_one_process(topology_runs):
    procs = topology_runs["multi_cpu_config"]
    assert len(procs) == 1 and procs[0]["num_processes"] == 1


def test_use_fsdp_on_cpu_falls_back_to_plain_data_parallel(topology_runs):
    procs = topology_runs["use_cpu_env+use_fsdp"]
    assert len(procs) == 2
    assert all(p["distributed_type"] == "DistributedType.MULTI_CPU" and p["num_processes"] == 2 for p in procs)


def test_merge_weights_on_a_two_rank_dcp_folder(merge_run):
    assert merge_run["dcp_files"] == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    folder = merge_run["runs"]["folder"]
    assert folder.returncode == 0, folder.stderr[-2000:]
    merged = load_file(str(merge_run["dir"] / "merged_folder" / "model.safetensors"))
    reference = load_file(str(merge_run["dir"] / "reference" / "model.safetensors"))
    assert sorted(merged) == sorted(reference) == ["0.bias", "0.weight", "1.bias", "1.weight"]
    for key in reference:
        assert np.array_equal(merged[key], reference[key])
    root = merge_run["runs"]["root"]  # the checkpoint root instead of pytorch_model_fsdp_0
    assert root.returncode != 0 and "metadata" in root.stderr
    # No path gets the hint naming pytorch_model_fsdp_0: merge_fsdp_weights builds it only when the
    # path is missing, and then its sub-folder cannot exist either (checkpointing.md says so).
    missing = merge_run["runs"]["missing"]
    assert missing.returncode != 0 and "couldn't find a valid metadata file" in missing.stderr
    for run in (root, missing):
        assert "pytorch_model_fsdp_0" not in run.stderr.replace(str(merge_run["dir"]), "<dir>")
