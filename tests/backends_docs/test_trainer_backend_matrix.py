"""transformers-trainer-backends.md is what the transformers 5.25.0 Trainer does per backend (session 9):
_trainer_backend_matrix.py ran one tiny GPT-2 Trainer job per backend (one process, DDP, ZeRO-2/3, FSDP1/2 at
2 gloo ranks) and its capture is committed. The page's generated blocks must equal the rendering of the capture
word for word; the one-process case is rerun live (one child, about 6 s); the 2-rank cases are rerun by
`python tests/backends_docs/_trainer_backend_matrix.py --check` (about 90 s, not in the suite)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _trainer_backend_matrix as gen  # noqa: E402


@pytest.fixture(scope="module")
def data():
    return gen.load_capture()


def test_reference_is_the_rendered_capture(data):
    gen.gb.assert_page_is_rendered(gen.REF, gen.render(data))


def test_every_case_ran_on_every_rank(data):
    assert set(data) == set(gen.CASES)
    for case, ranks in data.items():
        assert len(ranks) == gen.CASES[case][0], case
        for r, got in ranks.items():
            assert "error" not in got, (case, r, got.get("error"))
            assert ("resume_error" in got) == (case in gen.RESUME_WITH or case in gen.SAVE_ONLY), (case, r)
            assert ("train_error" in got) == (case in ("ds_env_ga4", "zero2_cpu_plain")), (case, r)


def test_ranks_agree_on_everything_but_the_files_they_write(data):
    same = ("accelerator", "begin", "after_train", "train_calls", "resume_calls", "losses", "resume_losses",
            "train_error")
    for case, ranks in data.items():
        if "rank1" in ranks:
            for key in same:
                if key not in ranks["rank0"] and key not in ranks["rank1"]:
                    continue
                a, b = ranks["rank0"][key], ranks["rank1"][key]
                if key == "accelerator":  # should_save is the one per-rank field
                    a, b = {**a, "should_save": None}, {**b, "should_save": None}
                assert a == b, (case, key)


def test_mechanism_facts(data):
    r = {c: v["rank0"] for c, v in data.items()}
    # the launcher's GA reaches a DeepSpeed plugin built from the environment, and the Trainer refuses it
    assert r["ds_env_ga4"]["accelerator"]["deepspeed"]["gradient_accumulation_steps"] == 4
    assert "- ds gradient_accumulation_steps=4 vs hf gradient_accumulation_steps=2" in r["ds_env_ga4"]["train_error"]
    # fsdp=True: the Trainer's version, state-dict type and wrapping beat the launcher's FSDP_* variables
    f = r["fsdp2_vs_env"]["accelerator"]["fsdp"]
    assert (f["fsdp_version"], f["state_dict_type"], f["auto_wrap_policy"]) == (2, "FULL_STATE_DICT",
                                                                               "transformer_auto_wrap_policy")
    # without fsdp=, Accelerate's own FSDP2 default SHARDED_STATE_DICT applies: save_model writes nothing
    assert r["fsdp_env"]["accelerator"]["fsdp"]["state_dict_type"] == "SHARDED_STATE_DICT"
    assert r["fsdp_env"]["save_model_writes"] == []
    # a CPU-only host without use_cpu: the Trainer sees 1 process and DeepSpeed's batch check fails
    plain = r["zero2_cpu_plain"]
    assert (plain["accelerator"]["num_processes"], plain["accelerator"]["deepspeed"]["train_batch_size"]) == (1, 2)
    assert "Check batch related parameters" in plain["train_error"]
    assert data["zero2_cpu_plain"]["rank1"]["accelerator"]["should_save"] is True  # rank 1 acts as rank 0 too
    assert data["ddp"]["rank1"]["accelerator"]["should_save"] is False
    # resuming with the other state_dict_type: FULL looks for the consolidated file on rank 0, SHARDED for DCP metadata
    assert r["fsdp2_sharded_to_full"]["resume_error"].startswith("FileNotFoundError")
    assert r["fsdp2_sharded_to_full"]["resume_error"].endswith("checkpoint-1/pytorch_model_fsdp.bin'")
    for case, base in (("fsdp2_sharded_to_full", "fsdp2_sharded"), ("fsdp2_full_to_sharded", "fsdp2")):
        assert r[case]["checkpoint_writes"] == r[base]["checkpoint_writes"], case  # the page shows only the base
    for got in data["fsdp2_full_to_sharded"].values():
        assert got["resume_error"].startswith("CheckpointException: AssertionError: metadata is None")
    # weights-only checkpoints cannot be resumed under DeepSpeed or FSDP
    assert r["zero2_save_only"]["resume_error"] == "ValueError: Can't find a valid checkpoint at <run>/out/checkpoint-1"
    assert r["fsdp2_save_only"]["resume_error"].endswith("checkpoint-1/pytorch_model_fsdp.bin'")
    for case, base in gen.SAVE_ONLY.items():
        for key in ("accelerator", "train_calls", "after_train"):
            assert r[case][key] == r[base][key], (case, key)  # the page shows only the base's rows
    for case in ("ds_env_ga4", "zero2_cpu_plain", *gen.RESUME_WITH, *gen.SAVE_ONLY):
        del r[case]
    for case, got in r.items():
        a = got["accelerator"]
        assert (a["accelerator.gradient_accumulation_steps"], a["args.gradient_accumulation_steps"]) == (1, 2), case
        assert a["optimizer_at_init"] == "NoneType", case
        assert got["begin"]["callback_model"] == got["after_train"]["model"], case  # callbacks get trainer.model
        assert dict(got["losses"])[2] == dict(got["resume_losses"])[2], case
    # use_cpu drops FSDP (plain DDP) but keeps DeepSpeed
    assert r["fsdp2_use_cpu"]["accelerator"]["distributed_type"] == "MULTI_CPU"
    assert r["fsdp2_use_cpu"]["after_train"]["model_wrapped"] == "DistributedDataParallel"
    assert r["zero2_use_cpu"]["accelerator"]["distributed_type"] == "DEEPSPEED"
    # FSDP1 delays the optimizer until the model is wrapped; FSDP2 does not
    assert r["fsdp1"]["train_calls"][1].startswith("prepare(GPT2LMHeadModel) -> FullyShardedDataParallel")
    assert r["fsdp2"]["train_calls"][1].startswith("create_optimizer(GPT2LMHeadModel)")
    assert r["fsdp2"]["after_train"]["passed_model_is_trainer_model"] is True
    assert r["fsdp1"]["after_train"]["passed_model_is_trainer_model"] is False
    # ZeRO-3 without the gather flag: the engine checkpoint is written twice into checkpoint-1
    writes = r["zero3"]["checkpoint_writes"]["checkpoint-1"]
    assert writes.count("global_step1/zero_pp_rank_0_mp_rank_00_model_states.pt") == 2
    writes = r["zero3_gather"]["checkpoint_writes"]["checkpoint-1"]
    assert writes.count("global_step1/zero_pp_rank_0_mp_rank_00_model_states.pt") == 1
    # non-writer ranks write only their RNG file and their own shards
    for case, ranks in data.items():
        if "rank1" in ranks and "train_error" not in ranks["rank1"]:
            for f in ranks["rank1"]["checkpoint_writes"]["checkpoint-1"]:
                assert f == "rng_state_1.pth" or "1_" in f.rsplit("/", 1)[-1], (case, f)


def test_live_one_process_case_reproduces_the_capture(data):
    """The cheap case rerun in a child (~6 s): the calls, classes, files and resume of one process."""
    with tempfile.TemporaryDirectory() as d:
        env = gen.gb.child_env(Path(d))
        subprocess.run([sys.executable, str(Path(gen.__file__)), "rank", "single"], cwd=d, env=env, timeout=240,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        live = gen.gb.load_json(Path(d) / "rank0.json")
    kept = data["single"]["rank0"]
    for key in ("accelerator", "begin", "after_train", "train_calls", "resume_calls", "checkpoint_writes",
                "save_model_writes", "listing"):
        assert live.get(key) == kept[key], key
    # float results can differ in the last digits across CPUs: the fact is resumed == uninterrupted
    assert dict(live["losses"])[2] == dict(live["resume_losses"])[2]
    assert abs(dict(live["losses"])[2] - dict(kept["losses"])[2]) < 1e-3
