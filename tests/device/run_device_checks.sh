#!/usr/bin/env bash
# The device session's one command (see tests/device/README.md): probes, planner memory benchmark,
# the availability checker's CUDA branch. Writes everything under $1 (the device tool's $OUT).
out=${1:?usage: run_device_checks.sh OUTDIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$out/nvidia_smi.csv" 2>&1
timeout 300 python3 tests/device/gpu_probes.py all --out "$out" 2>&1 | tee "$out/gpu_probes.txt"
timeout 200 python3 benchmarks/bench_planner_gpu_memory.py --out "$out" 2>&1 | tee "$out/planner_gpu_memory.txt"
timeout 120 python3 sub-skills/distributed-and-backends/scripts/check_backend_availability.py --probe --include-cuda --json > "$out/availability.json" 2> "$out/availability.stderr"
echo "availability rc=$?" | tee -a "$out/planner_gpu_memory.txt"
