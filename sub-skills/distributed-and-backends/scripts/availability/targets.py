"""What the checker reports on, and the facts it relies on (with their sources).

Facts that can be read from an installed package are read at run time by
:mod:`availability.scan` (the values below are only fallbacks, used when the
file that holds the fact cannot be parsed).  Facts about repository-only files
(DALLE-pytorch's ``train_dalle.py``) are recorded here with file, line and
commit, because the wheel does not ship those files.
"""

# name -> (distribution names, import name used for presence, module imported by --probe)
# The first distribution name is the canonical one; the others are alternatives
# that provide the same import name (flavours, CUDA-suffixed wheels).
TARGETS = {
    "torch": (("torch",), "torch", "torch"),
    "accelerate": (("accelerate",), "accelerate", "accelerate"),
    "deepspeed": (("deepspeed",), "deepspeed", "deepspeed"),
    "horovod": (("horovod",), "horovod", "horovod.torch"),
    # NVIDIA apex and the unrelated PyPI project share the distribution and
    # import name "apex"; scan.apex_flavour() tells them apart by layout.
    "apex": (("apex",), "apex", "apex"),
    "dalle-pytorch": (("dalle-pytorch",), "dalle_pytorch", "dalle_pytorch"),
    "transformers": (("transformers",), "transformers", "transformers"),
    "bitsandbytes": (("bitsandbytes",), "bitsandbytes", "bitsandbytes"),
    "torchao": (("torchao",), "torchao", "torchao"),
    "transformer-engine": (
        ("transformer-engine", "transformer-engine-cu12", "transformer-engine-cu13",
         "transformer-engine-torch", "intel-transformer-engine"),
        "transformer_engine", "transformer_engine.pytorch"),
    "ms-amp": (("ms-amp",), "msamp", "msamp"),
    "torch-xla": (("torch-xla",), "torch_xla", "torch_xla"),
    "habana": (("habana-torch-plugin",), "habana_frameworks", "habana_frameworks.torch"),
    "megatron-core": (("megatron-core",), "megatron", "megatron.core"),
    "triton": (("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu",
                "triton-xpu"), "triton", "triton"),
    "youtokentome": (("youtokentome",), "youtokentome", "youtokentome"),
    "wandb": (("wandb",), "wandb", "wandb"),
    "setuptools": (("setuptools",), "setuptools", "setuptools"),
}

# Import names that are namespace packages by design (shared by several
# distributions without conflict).
NAMESPACE_OK = {"megatron", "habana_frameworks", "nvidia"}

# Workflow ids, in report order, with the question each verdict answers.
WORKFLOWS = {
    "dalle-deepspeed": "DALLE-pytorch train_dalle.py with --distributed_backend deepspeed",
    "dalle-horovod": "DALLE-pytorch train_dalle.py with --distributed_backend horovod",
    "dalle-dummy": "DALLE-pytorch train_dalle.py without a distributed backend (DummyBackend)",
    "deepspeed-sparse-attention": "DALLE-pytorch --attn_types with 'sparse' (DeepSpeed sparse attention)",
    "apex-amp": "DALLE-pytorch --amp (NVIDIA Apex AMP O1 through DeepSpeed's 'amp' config block)",
    "accelerate-deepspeed": "Accelerate with DeepSpeed on GPUs",
    "accelerate-fsdp": "Accelerate with FSDP (version 1) on GPUs",
    "accelerate-fsdp2": "Accelerate with FSDP2 (fsdp_version: 2) on GPUs",
    "accelerate-megatron-lm": "Accelerate with Megatron-LM on GPUs",
    "accelerate-fp8-te": "Accelerate mixed_precision fp8 with Transformer Engine",
    "accelerate-fp8-msamp": "Accelerate mixed_precision fp8 with MS-AMP",
    "accelerate-fp8-torchao": "Accelerate mixed_precision fp8 with torchao",
    "accelerate-tpu": "Accelerate on TPU (torch_xla)",
}

# Capability names accepted by --require; all need the CUDA child (--include-cuda).
CAPABILITIES = {
    "gpu": "at least one CUDA/ROCm device visible to torch",
    "bf16": "every visible NVIDIA device has native bf16 (compute capability >= 8.0)",
    "fp8": "every visible NVIDIA device has FP8 tensor cores (compute capability >= 8.9)",
    "nccl": "torch reports NCCL available and a NCCL version",
}

# Fallbacks for facts read from installed sources (scan.accelerate_facts);
# verified against accelerate 1.15.0 by tests/availability.
ACCELERATE_FALLBACK = {
    "FSDP_PYTORCH_VERSION": "2.1.0.a0+32f93b1",   # accelerate/utils/constants.py
    "FSDP2_PYTORCH_VERSION": "2.6.0",             # accelerate/utils/constants.py
    "torchao_min": "0.6.1",                       # accelerate/utils/imports.py is_torchao_available
    "megatron_core_min": "0.8.0",                 # accelerate/utils/imports.py is_megatron_lm_available
}

# Native bf16 / FP8 thresholds (compute capability), as used by accelerate's
# check_cuda_fp8_capability (accelerate/utils/environment.py: >= (8, 9)).
BF16_MIN_CC = (8, 0)
FP8_MIN_CC = (8, 9)

# Repository-only facts about DALLE-pytorch (the scripts are not in the wheel).
DALLE_COMMIT = "58c1e1a"
DALLE_FACTS = {
    "amp_block_always": (
        "train_dalle.py builds its DeepSpeed config with an 'amp' block on every run "
        "(train_dalle.py lines 488-491 at 58c1e1a: 'amp': {'enabled': args.amp, 'opt_level': 'O1'})"),
    "cuda_calls": (
        "train_dalle.py moves the model and each batch to CUDA with .cuda() "
        "(lines 432 and 607 at 58c1e1a), so every backend needs a GPU"),
    "sparse_needs_deepspeed": (
        "attn_types 'sparse' uses deepspeed.ops.sparse_attention "
        "(dalle_pytorch/attention.py SparseAttention)"),
    "openai_vae_torch": (
        "the default OpenAIDiscreteVAE asserts torch < 1.11 (dalle_pytorch/vae.py); "
        "use --taming or --vae_path on newer torch"),
}

# Hints for a module that `import dalle_pytorch` needs but cannot find.
PIP_HINT = {
    "PIL": "pillow",
    "yaml": "PyYAML",
    "taming": "taming-transformers-rom1504",
    "pkg_resources": "'setuptools<82' (pkg_resources was removed in setuptools 82.0.0)",
    "axial_positional_embedding": "axial-positional-embedding",
    "rotary_embedding_torch": "rotary-embedding-torch",
    "omegaconf": "omegaconf",
    "requests": "requests",
    "einops": "einops",
    "numpy": "numpy",
    "tqdm": "tqdm",
    "packaging": "packaging",
    "torch": "torch",
}
