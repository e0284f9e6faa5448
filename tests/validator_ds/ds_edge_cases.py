"""Hand-written edge cases and seeded corpus mutations for the differential test
(validator error <=> the real consumer rejects). Every case here was found or confirmed by
running tests/oracle/deepspeed_oracle.py."""
from __future__ import annotations

import copy
import json
import random

A = {"type": "AdamW", "params": {"lr": 1e-3}}


def _m(**kw):
    d = {"train_batch_size": 8, "optimizer": copy.deepcopy(A)}
    d.update(kw)
    return d


# (id, config, consumer)
EDGE = [
    ("dev-upper", _m(zero_optimization={"stage": 3, "offload_param": {"device": "CPU"}}), "deepspeed"),
    ("wandb-entity", _m(wandb={"enabled": False, "entity": "x"}), "deepspeed"),
    ("tb-path-int", _m(tensorboard={"enabled": False, "output_path": 5}), "deepspeed"),
    ("buffer-size-on-optimizer-offload", _m(zero_optimization={"stage": 2, "offload_optimizer": {
        "device": "none", "buffer_size": 1e8}}), "deepspeed"),
    ("bfloat16-legacy", _m(bfloat16={"enabled": True}), "deepspeed"),
    ("gc-negative", _m(gradient_clipping=-1.0), "deepspeed"),
    ("gc-string", _m(gradient_clipping="1.0"), "deepspeed"),
    ("steps-per-print-string", _m(steps_per_print="10"), "deepspeed"),
    ("steps-per-print-string-accelerate", _m(steps_per_print="10", zero_optimization={"stage": 0}), "accelerate"),
    ("micro-float", {"train_micro_batch_size_per_gpu": 2.0, "optimizer": A}, "deepspeed"),
    ("zero-null", _m(zero_optimization=None), "deepspeed"),
    ("zero-list", _m(zero_optimization=[1]), "deepspeed"),
    ("stage-string", _m(zero_optimization={"stage": "3"}), "deepspeed"),
    ("stage-2.5", _m(zero_optimization={"stage": 2.5}), "deepspeed"),
    ("fp16-list", _m(fp16=[True]), "deepspeed"),
    ("optimizer-string", _m(optimizer="adam"), "deepspeed"),
    ("optimizer-null", _m(optimizer=None), "deepspeed"),
    ("optimizer-params-list", _m(optimizer={"type": "AdamW", "params": [1]}), "deepspeed"),
    ("scheduler-params-null", _m(scheduler={"type": "WarmupLR", "params": None}), "deepspeed"),
    ("scheduler-without-params", _m(scheduler={"type": "WarmupLR"}), "deepspeed"),
    ("offload-as-string", _m(zero_optimization={"stage": 1, "offload_optimizer": "cpu"}), "deepspeed"),
    ("comm-dtype-upper", _m(communication_data_type="BF16"), "deepspeed"),
    ("comm-dtype-auto", _m(communication_data_type="auto"), "deepspeed"),
    ("allreduce-avg", _m(gradient_allreduce_op="avg"), "deepspeed"),
    ("tag-validation-fail", _m(checkpoint={"tag_validation": "fail"}), "deepspeed"),
    ("tag-validation-strict", _m(checkpoint={"tag_validation": "strict"}), "deepspeed"),
    ("keep-fp32-string", _m(data_types={"keep_in_fp32_modules": "lm_head"}), "deepspeed"),
    ("autocast-bfloat8", _m(torch_autocast={"enabled": True, "dtype": "bfloat8"}), "deepspeed"),
    ("min-loss-scale-2.0", _m(fp16={"enabled": False, "min_loss_scale": 2.0}), "deepspeed"),
    ("loss-scale-window-true", _m(fp16={"enabled": False, "loss_scale_window": True}), "deepspeed"),
    ("initial-scale-power-16.5", _m(fp16={"enabled": False, "initial_scale_power": 16.5}), "deepspeed"),
    ("ratio-2", _m(zero_optimization={"stage": 3, "offload_optimizer": {"device": "none", "ratio": 2}}), "deepspeed"),
    ("sub-group-negative", _m(zero_optimization={"stage": 3, "sub_group_size": -1}), "deepspeed"),
    ("leaf-module-typo", _m(zero_optimization={"stage": 3, "leaf_module": {"classez": ["x"]}}), "deepspeed"),
    ("zenflow-topk-2", _m(zero_optimization={"stage": 2, "zenflow": {"topk_ratio": 2}}), "deepspeed"),
    ("onecycle-missing-max", _m(scheduler={"type": "OneCycle", "params": {"cycle_min_lr": 0.1}}), "deepspeed"),
    ("warmup-steps-0", _m(scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": 0}}), "deepspeed"),
    ("warmup-steps-true", _m(scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": True}}), "deepspeed"),
    ("warmup-steps-1e3-hjson", _m(scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": 1e3}}),
     "deepspeed"),
    ("warmup-steps-1e3-json", _m(zero_optimization={"stage": 0},
                                  scheduler={"type": "WarmupLR", "params": {"warmup_num_steps": 1e3}}), "accelerate"),
    ("optimizer-type-int", _m(optimizer={"type": 5}), "deepspeed"),
    ("lion-eps", _m(optimizer={"type": "Lion", "params": {"lr": 1e-3, "eps": 1e-8}}), "deepspeed"),
    ("adagrad-zero2", _m(optimizer={"type": "Adagrad", "params": {"lr": 1e-3}}, zero_optimization={"stage": 2}),
     "deepspeed"),
    ("sgd-zero0", _m(optimizer={"type": "SGD", "params": {"lr": 1e-3, "momentum": 0.9}}), "deepspeed"),
    ("hybrid-max-out-0", _m(hybrid_engine={"enabled": False, "max_out_tokens": 0}), "deepspeed"),
    ("compile-pass-z2", _m(compile={"passes": ["z2"]}), "deepspeed"),
    ("pipeline-stages-auto", _m(pipeline={"stages": "auto"}), "deepspeed"),
    ("prescale-zero1", _m(prescale_gradients=True, zero_optimization={"stage": 1}), "deepspeed"),
    ("predivide-zero3", _m(gradient_predivide_factor=2.0, zero_optimization={"stage": 3}), "deepspeed"),
    ("timers-extra", _m(timers={"throughput": {"enabled": True, "foo": 1}}), "deepspeed"),
    ("timers-string", _m(timers="none"), "deepspeed"),
    ("timers-int", _m(timers=1), "deepspeed"),
    ("gas-string", {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": "4", "optimizer": A},
     "deepspeed"),
    ("micro-negative", {"train_micro_batch_size_per_gpu": -2, "optimizer": A}, "deepspeed"),
    ("micro-null", {"train_micro_batch_size_per_gpu": None, "optimizer": A}, "deepspeed"),
    ("batch-true", _m(train_batch_size=True), "deepspeed"),
    ("fp16-master-no-zero", _m(fp16={"enabled": False, "fp16_master_weights_and_grads": True}), "deepspeed"),
    ("grad-accum-dtype-zero0", _m(bf16={"enabled": True}, data_types={"grad_accum_dtype": "fp32"}), "deepspeed"),
    ("curriculum-no-metrics", _m(data_efficiency={"enabled": True, "data_sampling": {
        "enabled": True, "curriculum_learning": {"enabled": True}}}), "deepspeed"),
    ("unmanaged-overlap-zero1", _m(managed_gradient_accumulation=False,
                                   zero_optimization={"stage": 1, "overlap_comm": True}), "deepspeed"),
    ("torch-scheduler-bf16", _m(bf16={"enabled": True}, scheduler={"type": "StepLR", "params": {"step_size": 2}}),
     "deepspeed"),
    ("torch-scheduler-plain", _m(scheduler={"type": "StepLR", "params": {"step_size": 2}}), "deepspeed"),
    ("wall-clock-null", _m(wall_clock_breakdown=None), "deepspeed"),
    ("wall-clock-string", _m(wall_clock_breakdown="yes"), "deepspeed"),
    ("log-level-x", _m(log_level="x"), "deepspeed"),
    ("log-level-INFO", _m(log_level="INFO"), "deepspeed"),
    ("unknown-auto-in-bf16", _m(bf16={"enabled": True, "auto_cast": "auto"}), "deepspeed"),
    ("aio-null", _m(aio=None), "deepspeed"),
    ("aio-true", _m(aio=True), "deepspeed"),
    ("checkpoint-string", _m(checkpoint="true"), "deepspeed"),
    ("activation-checkpointing-list", _m(activation_checkpointing=[]), "deepspeed"),
    ("betas-float", _m(optimizer={"type": "AdamW", "params": {"lr": 1e-3, "betas": 0.5}}), "deepspeed"),
    ("betas-null", _m(optimizer={"type": "AdamW", "params": {"lr": 1e-3, "betas": None}}), "deepspeed"),
    ("lr-list", _m(optimizer={"type": "AdamW", "params": {"lr": []}}), "deepspeed"),
    ("weight-decay-true", _m(optimizer={"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": True}}),
     "deepspeed"),
    ("bias-correction-auto", _m(optimizer={"type": "Adam", "params": {"lr": 1e-3, "bias_correction": "auto"}}),
     "deepspeed"),
    ("optimizer-extra-key-auto", _m(optimizer={"type": "AdamW", "params": {"lr": 1e-3}, "x": "auto"}), "deepspeed"),
    ("accelerate-tbs-auto-no-micro", {"train_batch_size": "auto", "zero_optimization": {"stage": 2}}, "accelerate"),
    ("accelerate-tbs-below-micro", {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 8,
                                    "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}},
     "accelerate"),
    ("accelerate-micro-fraction", {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 1.5,
                                   "zero_optimization": {"stage": 2}}, "accelerate"),
    ("accelerate-micro-zero", {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 0,
                               "zero_optimization": {"stage": 2}}, "accelerate"),
    ("accelerate-zero-true", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": True}, "accelerate"),
    ("accelerate-prefetch-unaliased-auto", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {
        "stage": 3, "prefetch_bucket_size": "auto"}}, "accelerate"),
    ("accelerate-betas-auto", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2},
                               "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}}},
     "accelerate"),
    ("accelerate-auto-stage-offload-param", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {
        "stage": "auto", "offload_param": {"device": "cpu"}}}, "accelerate"),
    ("accelerate-auto-stage-partial-offload", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {
        "stage": "auto", "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}, "accelerate"),
    ("deepspeed-auto-stage-partial-offload", {"train_micro_batch_size_per_gpu": 2, "zero_optimization": {
        "stage": "auto", "offload_optimizer": {"device": "cpu", "ratio": 0.5}}}, "deepspeed"),
    ("transformers-betas-auto", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2},
                                 "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}}},
     "transformers"),
    ("transformers-fp16-string", {"train_micro_batch_size_per_gpu": "auto", "zero_optimization": {"stage": 2},
                                  "fp16": {"enabled": "true"}}, "transformers"),
]

HJSON_EDGE = [
    ("hjson-comment-deepspeed", '{"train_batch_size": 8, // c\n "zero_optimization": {"stage": 1},}', "deepspeed"),
    ("hjson-comment-accelerate", '{"train_micro_batch_size_per_gpu": 8, # c\n "zero_optimization": {"stage": 1}}',
     "accelerate"),
    ("hjson-unquoted-transformers", '{train_micro_batch_size_per_gpu: "auto", "zero_optimization": {"stage": 1}}',
     "transformers"),
    ("duplicate-key-deepspeed", '{"train_batch_size": 8, "train_batch_size": 16}', "deepspeed"),
]


def edge_jobs():
    jobs = [{"id": f"edge|{i}", "text": json.dumps(c), "consumer": cons, "world_size": 1} for i, c, cons in EDGE]
    jobs += [{"id": f"edge|{i}", "text": t, "consumer": cons, "world_size": 1} for i, t, cons in HJSON_EDGE]
    return jobs


_VALS = [None, True, False, 0, 1, 2, 3, 4, -1, 0.5, 1.5, 1e9, "auto", "true", "false", "cpu", "nvme", "none",
         "sum", "fp32", "bf16", "x", [], {}, 8, 16]


def mutation_jobs(docs, keys, n=150, seed=20261130):
    """Seeded random mutations of corpus configs (replace / delete / insert a key)."""
    rng = random.Random(seed)

    def paths(d, pre=()):
        for k, v in d.items():
            yield pre + (k,)
            if isinstance(v, dict):
                yield from paths(v, pre + (k,))

    jobs = []
    for i in range(n):
        d = copy.deepcopy(rng.choice(docs))
        for _ in range(rng.randint(1, 3)):
            ps = list(paths(d))
            if not ps:
                break
            p = rng.choice(ps)
            parent = d
            for k in p[:-1]:
                parent = parent[k]
            r = rng.random()
            if r < 0.5:
                parent[p[-1]] = rng.choice(_VALS)
            elif r < 0.7:
                del parent[p[-1]]
            else:
                (parent if rng.random() < 0.5 else d)[rng.choice(keys)] = rng.choice(_VALS)
        cons = ("deepspeed", "accelerate", "transformers")[i % 3]
        jobs.append({"id": f"mut|{i}", "text": json.dumps(d), "consumer": cons, "world_size": 1})
    return jobs
