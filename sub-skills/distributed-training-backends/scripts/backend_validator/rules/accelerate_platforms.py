"""Accelerate config rules: Amazon SageMaker and Megatron-LM blocks (accelerate 1.15.0).
"""
from __future__ import annotations

from ..core import rule
from . import accelerate_schema as S
from ._acc import CFG, LAUNCH, eff, fmt, report_unknown

# Imported only for a document that mentions compute_environment AMAZON_SAGEMAKER, distributed_type MEGATRON_LM or megatron_lm_config
# (rules/__init__.py): every rule here reports nothing on any other document.
NEEDS = ("sagemaker", "megatron")


@rule(id="acc-sagemaker-distributed-type-no", severity="error", family="accelerate",
      summary="SageMaker config with distributed_type 'NO' cannot load (num_processes is injected)",
      source=f"{CFG}::BaseConfig.process_config")
def sagemaker_no(ctx):
    """For ``distributed_type: 'NO'`` the loader adds ``num_processes: 1``, which is not a
    SageMakerConfig field, so the unknown-key check then refuses the file.

    Fails:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: 'NO'
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    Passes:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    """
    d = ctx.doc.data
    if d.get("compute_environment") == "AMAZON_SAGEMAKER" and d.get("distributed_type") == "NO" \
            and "num_processes" not in d:
        ctx.report(("distributed_type",), "SageMaker config with distributed_type 'NO': accelerate injects "
                   "num_processes, which SageMakerConfig does not have, and refuses the file",
                   "use DATA_PARALLEL (or run locally with compute_environment: LOCAL_MACHINE)")
    return ()


@rule(id="acc-sagemaker-launch-broken", severity="error", family="accelerate",
      summary="accelerate 1.15.0 launch fails on every SageMaker config (no parallelism_config attribute)",
      source=LAUNCH)
def sagemaker_launch_broken(ctx):
    """When no paradigm flag is passed, ``_validate_launch_command`` reads
    ``defaults.parallelism_config``, which ``SageMakerConfig`` does not have: ``accelerate launch``
    stops with AttributeError for any AMAZON_SAGEMAKER config in 1.15.0.

    Fails:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    Passes:
    ```yaml
    compute_environment: LOCAL_MACHINE
    distributed_type: MULTI_GPU
    num_processes: 8
    ```
    """
    d = ctx.doc.data
    if d.get("compute_environment") == "AMAZON_SAGEMAKER":
        ctx.report(("compute_environment",), "accelerate 1.15.0's launch reads parallelism_config, which "
                   "SageMakerConfig lacks: `accelerate launch` fails with AttributeError for SageMaker configs",
                   "pass a paradigm flag such as --multi_gpu on the command line, or launch the SageMaker job "
                   "with the sagemaker SDK directly")
    return ()


@rule(id="acc-sagemaker-missing-required", severity="error", family="accelerate",
      summary="SageMaker config without ec2_instance_type or iam_role_name",
      source=f"{CFG}::SageMakerConfig")
def sagemaker_missing(ctx):
    """``ec2_instance_type`` and ``iam_role_name`` have no default in SageMakerConfig.

    Fails:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    ```
    Passes:
    ```yaml
    compute_environment: AMAZON_SAGEMAKER
    distributed_type: DATA_PARALLEL
    ec2_instance_type: ml.p3.2xlarge
    iam_role_name: my_role
    ```
    """
    d = ctx.doc.data
    if d.get("compute_environment") == "AMAZON_SAGEMAKER":
        for k in S.SAGEMAKER_REQUIRED:
            if k not in d:
                ctx.report((), f"SageMaker config without {k}: SageMakerConfig cannot be built",
                           f"add {k}")
    return ()


@rule(id="acc-megatron-unknown-key", severity="warning", family="accelerate",
      summary="unknown key in megatron_lm_config (keys need the megatron_lm_ prefix)", source=LAUNCH)
def megatron_unknown(ctx):
    """``megatron_lm_config`` keys are copied verbatim and must carry the ``megatron_lm_`` prefix;
    others are silently ignored.

    Fails:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      tp_degree: 2
    ```
    Passes:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      megatron_lm_tp_degree: 2
    ```
    """
    b = ctx.doc.data.get("megatron_lm_config")
    if isinstance(b, dict):
        report_unknown(ctx, "megatron_lm_config", [k for k in b if k not in S.MEGATRON_KEYS], S.MEGATRON_KEYS,
                       "ignored by accelerate launch", strip=("megatron_lm_",))
    return ()


@rule(id="acc-megatron-value-invalid", severity="error", family="accelerate",
      summary="megatron_lm_config value the plugin cannot parse (int / float / truth word)",
      source="accelerate/utils/dataclasses.py::MegatronLMPlugin.__post_init__")
def megatron_value(ctx):
    """MegatronLMPlugin reads every launcher-exported value back with ``int()``, ``float()`` or
    ``str_to_bool``.

    Fails:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      megatron_lm_tp_degree: two
    ```
    Passes:
    ```yaml
    distributed_type: MEGATRON_LM
    num_processes: 8
    megatron_lm_config:
      megatron_lm_tp_degree: 2
    ```
    """
    e = eff(ctx)
    if not e.is_megatron:
        return ()
    # prepare_multi_gpu_env exports these four even when null (as the text 'None'); the rest only when set
    always = ("megatron_lm_tp_degree", "megatron_lm_pp_degree", "megatron_lm_gradient_clipping",
              "megatron_lm_use_custom_fsdp")
    for n in always:
        if e.has(n) and e.get(n) is None:
            ctx.report(e.path(n), f"{n} is null: the launcher exports it as the text 'None', which "
                       "MegatronLMPlugin cannot read", "give a value or delete the key (the default applies)")
    for k in S.MEGATRON_INT_KEYS:
        n = "megatron_lm_" + k
        if e.has(n) and e.get(n) is not None and S.as_int(e.get(n)) is None:
            ctx.report(e.path(n), f"{n} is {fmt(e.get(n))}; MegatronLMPlugin reads it with int()", "use an integer")
    for k in S.MEGATRON_FLOAT_KEYS:
        n = "megatron_lm_" + k
        if e.has(n) and e.get(n) is not None:
            try:
                float(str(e.get(n)))
            except ValueError:
                ctx.report(e.path(n), f"{n} is {fmt(e.get(n))}; MegatronLMPlugin reads it with float()",
                           "use a number")
    for k in S.MEGATRON_BOOL_KEYS:
        n = "megatron_lm_" + k
        if e.has(n) and e.get(n) is not None and not S.is_truth_word(e.get(n)):
            ctx.report(e.path(n), f"{n} is {fmt(e.get(n))}; MegatronLMPlugin parses it with str_to_bool",
                       "use true or false")
    return ()
