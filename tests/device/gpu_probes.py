#!/usr/bin/env python3
"""GPU-only behaviour probes: run once on a CUDA machine, their record is kept under tests/device/records/.

    python3 tests/device/gpu_probes.py all --out DIR      # every probe, one child process each
    python3 tests/device/gpu_probes.py one NAME            # a single probe (prints one RESULT line)
    python3 tests/device/gpu_probes.py list                # the probe names

Not a pytest file and never run by CI (CI has no GPU): tests/device/test_device_record.py checks the
committed record against the claims it backs. Each probe runs the code path a reference states for
CUDA only (NCCL watchdog, the backend a CUDA host gets from `backend=None`, Accelerate's fp16 scaler,
DCP async save without a CPU backend, ...) in a fresh child with a time limit, and records what
happened: return code, the values it read, the exception it caught. It asserts nothing itself.
Exit codes: 0 probes ran (whatever they observed), 2 bad arguments or no CUDA device.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.abspath(__file__)
PORT0 = 29700


def _env(port, **extra):
    env = dict(os.environ)
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", WORLD_SIZE="1", LOCAL_RANK="0",
               LOCAL_WORLD_SIZE="1", PYTHONUNBUFFERED="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _result(obj):
    print("RESULT " + json.dumps(obj, default=str), flush=True)


def _err(e):
    return f"{type(e).__module__}.{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"


# --------------------------------------------------------------------------------------- probes
# Each probe body runs inside the child. It prints one RESULT line; os._exit keeps NCCL teardown
# (which can block on a timed-out communicator) out of the measurement.

def _backend_probe(backend):
    """init_process_group(backend) on a CUDA host, then an all_reduce on a CPU and on a CUDA tensor."""
    import torch
    import torch.distributed as dist
    dist.init_process_group(backend=backend)
    out = {"get_backend": dist.get_backend()}
    for dev in ("cpu", "cuda"):
        try:
            t = torch.ones(2, device=dev)
            dist.all_reduce(t)
            if dev == "cuda":
                torch.cuda.synchronize()
            out[f"all_reduce_{dev}"] = "ok" if t[0].item() == 1 else f"value {t.tolist()}"
        except Exception as e:  # noqa: BLE001 - the probe records whatever is raised
            out[f"all_reduce_{dev}"] = _err(e)
    _result(out)
    os._exit(0)


def p_backend_none():
    """backend=None on a CUDA host: which device types get a backend."""
    _backend_probe(None)


def p_backend_both():
    """The same with "cpu:gloo,cuda:nccl"."""
    _backend_probe("cpu:gloo,cuda:nccl")


def p_default_timeouts():
    """The timeout a group gets when none is passed (NCCL default group; a gloo side group)."""
    import torch
    import torch.distributed as dist
    dist.init_process_group(backend="nccl")
    pg = dist.distributed_c10d._get_default_group()
    out = {}
    try:
        out["nccl_timeout_s"] = pg._get_backend(torch.device("cuda")).options._timeout.total_seconds()
    except Exception as e:  # noqa: BLE001
        out["nccl_timeout_s"] = _err(e)
    g = dist.new_group(backend="gloo")
    try:
        out["gloo_timeout_s"] = g._get_backend(torch.device("cpu")).options._timeout.total_seconds()
    except Exception as e:  # noqa: BLE001
        out["gloo_timeout_s"] = _err(e)
    try:
        from torch.distributed.constants import default_pg_nccl_timeout, default_pg_timeout
        out["constants_s"] = [default_pg_nccl_timeout.total_seconds(), default_pg_timeout.total_seconds()]
    except Exception as e:  # noqa: BLE001
        out["constants_s"] = _err(e)
    _result(out)
    os._exit(0)


def _stalled_allreduce(timeout_s=4, spin_cycles=int(4e10)):
    """Start an NCCL all_reduce that cannot finish before the group timeout: a GPU spin kernel
    (spin_cycles, ~20 s at ~2 GHz by default) runs first on the current stream, and NCCL's stream waits
    for it. Prints MARK_ENQUEUED with the time the collective was enqueued."""
    import datetime
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(0)
    dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=timeout_s), device_id=torch.device("cuda:0"))
    x = torch.ones(4, device="cuda")
    dist.all_reduce(x)  # warm: communicator up before the stall
    torch.cuda.synchronize()
    torch.cuda._sleep(spin_cycles)
    t0 = time.time()
    print(f"MARK_ENQUEUED {t0:.3f}", flush=True)
    work = dist.all_reduce(x, async_op=True)
    return work, t0


def p_nccl_timeout_default():
    """No variable set: does the watchdog end the process when the collective passes the timeout?"""
    work, t0 = _stalled_allreduce()
    time.sleep(45)
    _result({"survived_s": round(time.time() - t0, 1)})
    os._exit(0)


def p_nccl_timeout_mode0():
    """TORCH_NCCL_ASYNC_ERROR_HANDLING=0 (set by the parent): the process should live on."""
    work, t0 = _stalled_allreduce()
    time.sleep(12)
    _result({"survived_s": round(time.time() - t0, 1), "completed": bool(work.is_completed())})
    os._exit(0)


def p_nccl_blocking_wait():
    """TORCH_NCCL_BLOCKING_WAIT=1 (set by the parent): wait() raises on the calling thread."""
    work, t0 = _stalled_allreduce()
    try:
        work.wait()
        out = {"wait": "returned"}
    except Exception as e:  # noqa: BLE001
        out = {"wait": _err(e)}
    out["after_s"] = round(time.time() - t0, 1)
    _result(out)
    os._exit(0)


def p_nccl_wait_timeout_arg():
    """No variable set, group timeout 600 s: work.wait(timeout=2 s) on a stalled collective."""
    import datetime
    work, t0 = _stalled_allreduce(timeout_s=600)
    try:
        r = work.wait(timeout=datetime.timedelta(seconds=2))
        out = {"wait": f"returned {r!r}"}
    except Exception as e:  # noqa: BLE001
        out = {"wait": _err(e)}
    out["after_s"] = round(time.time() - t0, 1)
    _result(out)
    os._exit(0)


def _eager(device_id):
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(0)
    kw = {"device_id": torch.device("cuda:0")} if device_id else {}
    dist.init_process_group("nccl", **kw)
    print("MARK_AFTER_INIT", flush=True)
    x = torch.ones(2, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    print("MARK_AFTER_COLLECTIVE", flush=True)
    _result({"done": True})
    os._exit(0)


def p_nccl_eager_with_device_id():
    """NCCL_DEBUG=INFO: is the communicator built inside init_process_group when device_id is given?"""
    _eager(True)


def p_nccl_eager_without_device_id():
    _eager(False)


def p_accel_fp16_scaler():
    """Accelerate fp16 on CUDA, one process: the scaler's type and clip_grad_norm_ unscaling first."""
    import torch
    from accelerate import Accelerator
    acc = Accelerator(mixed_precision="fp16")
    model = torch.nn.Linear(8, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt = acc.prepare(model, opt)
    out = {"scaler": f"{type(acc.scaler).__module__}.{type(acc.scaler).__name__}",
           "distributed_type": str(acc.distributed_type)}
    loss = model(torch.randn(4, 8, device=acc.device)).float().pow(2).mean()
    acc.backward(loss)
    inner = opt.optimizer
    states = acc.scaler._per_optimizer_states
    out["stage_before_clip"] = str(states[id(inner)]["stage"])
    acc.clip_grad_norm_(model.parameters(), 1.0)
    out["stage_after_clip"] = str(states[id(inner)]["stage"])
    _result(out)
    os._exit(0)


def p_accel_torchrun_state():
    """Inside torchrun (1 process, LOCAL_RANK set): Accelerate's distributed type and backend."""
    from accelerate import PartialState
    s = PartialState()
    _result({"distributed_type": str(s.distributed_type), "backend": s.backend,
             "num_processes": s.num_processes, "device": str(s.device)})
    os._exit(0)


def p_accel_dtensor_ddp():
    """Inside torchrun (1 process): Accelerator.prepare on a model holding a DTensor parameter."""
    import torch
    from accelerate import Accelerator
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, distribute_tensor
    acc = Accelerator()
    mesh = init_device_mesh("cuda", (1,))
    m = torch.nn.Linear(4, 4).cuda()
    m.weight = torch.nn.Parameter(distribute_tensor(m.weight.detach(), mesh, [Replicate()]))
    out = {"distributed_type": str(acc.distributed_type)}
    try:
        acc.prepare(m)
        out["prepare"] = "ok"
    except Exception as e:  # noqa: BLE001
        out["prepare"] = _err(e)
    _result(out)
    os._exit(0)


def p_ddp_output_device():
    import torch
    import torch.distributed as dist
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    ddp = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(4, 4).cuda(), device_ids=[0])
    out = {"output_device": ddp.output_device}
    bn = torch.nn.SyncBatchNorm(4)
    for dev in ("cuda", "cpu"):
        try:
            bn.to(dev).train()
            bn(torch.randn(3, 4, device=dev))
            out[f"syncbn_{dev}"] = "ok"
        except Exception as e:  # noqa: BLE001
            out[f"syncbn_{dev}"] = _err(e)
    _result(out)
    os._exit(0)


def _dcp(backend):
    import tempfile
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    torch.cuda.set_device(0)
    dist.init_process_group(backend)
    sd = {"w": torch.ones(8, device="cuda")}
    try:
        fut = dcp.async_save(sd, checkpoint_id=tempfile.mkdtemp())
        fut.result()
        out = {"async_save": "ok"}
    except Exception as e:  # noqa: BLE001
        out = {"async_save": _err(e)}
    _result(out)
    os._exit(0)


def p_dcp_async_nccl_only():
    _dcp("nccl")


def p_dcp_async_with_gloo():
    _dcp("cpu:gloo,cuda:nccl")


def p_fsdp2_generate():
    """FSDP2 on one GPU: generate on the sharded root with and without register_fsdp_forward_method."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.cuda.set_device(0)
    dist.init_process_group("nccl")
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2)
    torch.manual_seed(0)
    ref = LlamaForCausalLM(cfg).cuda()
    m = LlamaForCausalLM(cfg).cuda()
    m.load_state_dict(ref.state_dict())
    for layer in m.model.layers:
        fully_shard(layer)
    fully_shard(m)
    ids = torch.tensor([[1, 2, 3]], device="cuda")
    want = ref.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0).tolist()
    out = {}
    try:
        got = m.generate(ids, max_new_tokens=4, do_sample=False, pad_token_id=0).tolist()
        out["root_generate"] = "same as unsharded" if got == want else f"differs {got} vs {want}"
    except Exception as e:  # noqa: BLE001
        out["root_generate"] = _err(e)
    _result(out)
    os._exit(0)


def _watch(spin_cycles=int(1.6e10), live_s=200):
    """A collective stalled ~8 s behind a spin kernel, group timeout 4 s; then the main thread sleeps
    live_s. The parent records whether and when the process dies (rc < 0: killed by a signal)."""
    work, t0 = _stalled_allreduce(spin_cycles=spin_cycles)
    time.sleep(live_s)
    _result({"survived_s": round(time.time() - t0, 1), "completed": bool(work.is_completed())})
    os._exit(0)


def p_nccl_watch_default():
    _watch()


def p_nccl_watch_dump_off():
    _watch()


def p_nccl_watch_mode1():
    _watch()


def p_nccl_watch_dump_wait_5s():
    """TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC=5000: does the ~60 s lag before the teardown shrink?"""
    _watch(live_s=100)


def p_nccl_watch_no_monitoring():
    """TORCH_NCCL_ENABLE_MONITORING=0: the heartbeat monitor off."""
    _watch(live_s=100)


def p_nccl_watch_heartbeat_20s():
    """TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=20."""
    _watch(live_s=100)


def _tf32_state(torch):
    """Measure first (a 2048^2 fp32 matmul against float64), then read each flag on its own: after the
    new fp32_precision API was used, reading the legacy allow_tf32 raises in torch >= 2.9."""
    a = torch.randn(2048, 2048, device="cuda")
    b = torch.randn(2048, 2048, device="cuda")
    ref = (a.double() @ b.double())
    err = ((a @ b).double() - ref).abs().max().item() / ref.abs().max().item()
    out = {"fp32_matmul_rel_err": err, "tf32_in_effect": err > 1e-4}
    m = torch.backends.cuda.matmul
    for key, read in (("backends_fp32_precision", lambda: torch.backends.fp32_precision),
                      ("matmul_fp32_precision", lambda: m.fp32_precision),
                      ("allow_tf32", lambda: bool(m.allow_tf32))):
        try:
            out[key] = read()
        except Exception as e:  # noqa: BLE001
            out[key] = _err(e)
    return out


def _tf32(args_kw):
    import tempfile
    import torch
    out = {"capability": list(torch.cuda.get_device_capability()), "fresh": _tf32_state(torch)}
    if args_kw is not None:
        from transformers import TrainingArguments
        TrainingArguments(output_dir=tempfile.mkdtemp(), report_to=[], **args_kw)
        out["after_training_arguments"] = _tf32_state(torch)
    _result(out)
    os._exit(0)


def p_tf32_baseline():
    _tf32(None)


def p_tf32_torch_compile():
    _tf32({"torch_compile": True})


def p_tf32_torch_compile_tf32_false():
    _tf32({"torch_compile": True, "tf32": False})


def p_tf32_bf16_no_compile():
    _tf32({"bf16": True})


PROBES = {name[2:]: fn for name, fn in sorted(globals().items()) if name.startswith("p_")}
# name -> (extra env, run under torchrun?)
PLAN = {
    "backend_none": ({}, False),
    "backend_both": ({}, False),
    "default_timeouts": ({"TORCH_CPP_LOG_LEVEL": "INFO"}, False),
    "nccl_timeout_default": ({}, False),
    "nccl_timeout_mode0": ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}, False),
    "nccl_blocking_wait": ({"TORCH_NCCL_BLOCKING_WAIT": "1"}, False),
    "nccl_wait_timeout_arg": ({}, False),
    "nccl_eager_with_device_id": ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}, False),
    "nccl_eager_without_device_id": ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}, False),
    "accel_fp16_scaler": ({}, False),
    "accel_torchrun_state": ({}, True),
    "accel_dtensor_ddp": ({}, True),
    "ddp_output_device": ({}, False),
    "dcp_async_nccl_only": ({}, False),
    "dcp_async_with_gloo": ({}, False),
    "fsdp2_generate": ({}, False),
    "nccl_watch_default": ({}, False),
    "nccl_watch_dump_off": ({"TORCH_NCCL_DUMP_ON_TIMEOUT": "0"}, False),
    "nccl_watch_mode1": ({"TORCH_NCCL_ASYNC_ERROR_HANDLING": "1"}, False),
    "nccl_watch_dump_wait_5s": ({"TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC": "5000"}, False),
    "nccl_watch_no_monitoring": ({"TORCH_NCCL_ENABLE_MONITORING": "0"}, False),
    "nccl_watch_heartbeat_20s": ({"TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC": "20"}, False),
    "tf32_baseline": ({}, False),
    "tf32_torch_compile": ({}, False),
    "tf32_torch_compile_tf32_false": ({}, False),
    "tf32_bf16_no_compile": ({}, False),
}
ENV_CLEAR = ("TORCH_NCCL_WAIT_TIMEOUT_DUMP_MILSEC", "TORCH_NCCL_ENABLE_MONITORING", "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC", "TORCH_NCCL_DUMP_ON_TIMEOUT", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "TORCH_NCCL_BLOCKING_WAIT", "NCCL_BLOCKING_WAIT",
             "NCCL_ASYNC_ERROR_HANDLING", "NCCL_DEBUG", "TORCH_CPP_LOG_LEVEL")


def run_one_child(name, port, timeout=None):
    timeout = timeout or (240 if name.startswith("nccl_watch") else 120)
    extra, torchrun = PLAN[name]
    env = _env(port, **extra)
    for k in ENV_CLEAR:
        if k not in extra:
            env.pop(k, None)
    if torchrun:
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(k, None)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1",
               "--master_port", str(port), HERE, "one", name]
    else:
        cmd = [sys.executable, HERE, "one", name]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rc, so, se = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, so, se = "timeout", (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or ""), \
            (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
    rec = {"probe": name, "env": extra, "torchrun": torchrun, "rc": rc, "wall_s": round(time.time() - t0, 1)}
    res = [ln[7:] for ln in so.splitlines() if ln.startswith("RESULT ")]
    rec["result"] = json.loads(res[-1]) if res else None
    both = so + "\n" + se
    if name.startswith("nccl_eager"):
        lines = so.splitlines()
        idx = {k: next((i for i, ln in enumerate(lines) if k in ln), None)
               for k in ("Init COMPLETE", "MARK_AFTER_INIT", "MARK_AFTER_COLLECTIVE")}
        rec["line_index"] = idx
    keys = ("Watchdog caught collective operation timeout", "ProcessGroupNCCL initialization options",
            "terminate called", "Aborted", "SIGABRT", "Signal 6", "timed out", "DistBackendError",
            "TORCH_NCCL_ASYNC_ERROR_HANDLING", "Some NCCL operations have failed or timed out")
    rec["stderr_has"] = {k: (k in both) for k in keys}
    if name.startswith("nccl_watch"):
        enq = [ln for ln in so.splitlines() if ln.startswith("MARK_ENQUEUED ")]
        rec["enqueued_at"] = float(enq[0].split()[1]) if enq else None
        rec["ended_at"] = round(t0 + (time.time() - t0), 3)
        rec["timeline"] = [ln[:260] for ln in se.splitlines() if ("[E" in ln or "[W" in ln) and "Stack" not in ln][:40]
    rec["stderr_tail"] = [ln[:400] for ln in se.splitlines()[-25:]]
    rec["signal"] = -rc if isinstance(rc, int) and rc < 0 else None
    return rec


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n")[1])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="the probe names")
    one = sub.add_parser("one", help="run one probe in this process (prints one RESULT line)")
    one.add_argument("name", choices=sorted(PLAN))
    every = sub.add_parser("all", help="every probe (or --only), one child process each")
    every.add_argument("--out", default=".", help="folder for gpu_probes.json")
    every.add_argument("--only", default="", help="comma-separated probe names")
    args = ap.parse_args(argv)
    if args.cmd == "list":
        print("\n".join(PLAN))
        return 0
    if args.cmd == "one":
        PROBES[args.name]()
        return 0
    only = [n for n in args.only.split(",") if n] or list(PLAN)
    unknown = sorted(set(only) - set(PLAN))
    if unknown:
        print(f"gpu_probes.py: unknown probe(s) {', '.join(unknown)}; see `gpu_probes.py list`", file=sys.stderr)
        return 2
    import torch
    if not torch.cuda.is_available():
        print("gpu_probes.py: no CUDA device here", file=sys.stderr)
        return 2
    import importlib.metadata as md
    versions = {}
    for pkg in ("torch", "accelerate", "transformers", "deepspeed"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    header = {"device": torch.cuda.get_device_name(0), "capability": list(torch.cuda.get_device_capability()),
              "cuda": torch.version.cuda, "nccl": ".".join(map(str, torch.cuda.nccl.version())),
              "python": sys.version.split()[0], "versions": versions,
              "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    names = [n for n in PLAN if n in only]
    # the stalled-collective probes spin the GPU; run them alongside the rest, each on its own port
    with ThreadPoolExecutor(max_workers=6) as ex:
        recs = list(ex.map(lambda a: run_one_child(a[1], PORT0 + 7 * a[0]), enumerate(names)))
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_probes.json"), "w") as f:
        json.dump({"header": header, "probes": recs}, f, indent=1, default=str)
    for r in recs:
        print(f"{r['probe']:30s} rc={r['rc']!s:8s} {json.dumps(r['result'])[:220]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
