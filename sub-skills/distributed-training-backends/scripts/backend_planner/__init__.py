"""The memory planner behind plan_backend.py: rank DDP, DeepSpeed ZeRO-1/2/3 (with CPU/NVMe offload),
FSDP1 strategies, FSDP2 and HSDP by per-GPU memory for a model and machine.

Modules, each importing only those above it:
  common      InputError, GIB, the mirrored library versions, bundle_version()
  shapes      Arch: a decoder's parameter inventory, from a config.json or a parameter count
  memory      optimizer-state bytes, activations, DeepSpeed's estimators, one candidate's bytes
  strategies  the candidate list and their ranking: plan()
  emit        accelerate.yaml (+ ds_config.json) for a candidate
  report      the text table
  cli         argument parsing, sizes and counts, main()

Standard library only (the YAML it writes is produced by hand and read back by PyYAML in the tests).
Never imports torch, accelerate or deepspeed; never downloads.
The arithmetic is explained in ../../references/memory-planning.md.
"""
