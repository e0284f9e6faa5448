# Source run in a child interpreter with `python -c` by availability.children.
# It is read as text by the parent and never imported there.  Standard library
# only until the probed import.  Protocol: argv[1] is "import" or "cuda",
# argv[2] a JSON payload; one JSON line goes to the original stdout, while
# anything the imported package prints goes to stderr.
import json, os, sys, time

MODE = sys.argv[1]
PAYLOAD = json.loads(sys.argv[2])
sys.path[:] = PAYLOAD["path"]
_OUT = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)


def _emit(res):
    # os._exit skips interpreter shutdown: flush what the package printed first, or its
    # banner is lost whenever stdout is block-buffered (no PYTHONUNBUFFERED).
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except BaseException:
            pass
    _OUT.write(json.dumps(res, default=str) + "\n")
    _OUT.flush()
    os._exit(0)


def _first_line(exc):
    try:  # an exception's __str__ is package code too, and may raise
        text = str(exc).strip()
    except BaseException:
        return "(str() of the exception raised)"
    return text.splitlines()[0][:300] if text else ""


def _classify(exc, module):
    res = {"exception": type(exc).__name__, "message": _first_line(exc)}
    if isinstance(exc, ModuleNotFoundError):
        missing = getattr(exc, "name", None) or ""
        res["status"] = "not_installed" if missing == module.split(".")[0] else "import_error"
        res["missing_module"] = missing
    elif isinstance(exc, ImportError):
        res["status"] = "import_error"
    else:
        res["status"] = "error"
    return res


def _import_mode():
    import importlib
    module = PAYLOAD["module"]
    t0 = time.perf_counter()
    try:
        mod = importlib.import_module(module)
    except BaseException as exc:  # the point of the child: survive anything
        res = _classify(exc, module)
    else:
        res = {"status": "ok", "version": str(getattr(mod, "__version__", "") or "") or None}
        if module == "torch":
            extra = {}
            try:
                extra["cuda_build"] = mod.version.cuda
                extra["hip_build"] = mod.version.hip
                dist = mod.distributed
                extra["distributed_available"] = bool(dist.is_available())
                if extra["distributed_available"]:
                    for b in ("nccl", "gloo", "mpi", "ucc", "xccl"):
                        fn = getattr(dist, "is_%s_available" % b, None)
                        if fn is not None:
                            extra["%s_available" % b] = bool(fn())
            except BaseException as exc:
                extra["extra_error"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
            res["torch"] = extra
    res["module"] = module
    res["seconds"] = round(time.perf_counter() - t0, 3)
    _emit(res)


def _cuda_mode():
    t0 = time.perf_counter()
    try:
        import torch
    except BaseException as exc:
        res = _classify(exc, "torch")
        res["stage"] = "import torch"
        res["seconds"] = round(time.perf_counter() - t0, 3)
        _emit(res)
    try:  # a torch that imports but lacks or breaks the attributes used below is an answer, not a crash
        _cuda_query(torch, t0)
    except BaseException as exc:
        _emit({"status": "error", "stage": "CUDA query after import torch", "exception": type(exc).__name__,
               "message": _first_line(exc), "seconds": round(time.perf_counter() - t0, 3)})


def _cuda_query(torch, t0):
    res = {"torch_version": torch.__version__, "cuda_build": torch.version.cuda,
           "hip_build": getattr(torch.version, "hip", None)}
    try:
        available = bool(torch.cuda.is_available())
        count = int(torch.cuda.device_count()) if available else 0
    except BaseException as exc:
        res.update(status="error", stage="torch.cuda.is_available", exception=type(exc).__name__,
                   message=_first_line(exc))
        _emit(res)
    if not available or count == 0:
        res["status"] = "no_cuda"
        if not res["cuda_build"] and not res["hip_build"]:
            res["reason"] = "CPU build of torch %s (torch.version.cuda is None)" % torch.__version__
        else:
            res["reason"] = ("torch %s is a CUDA/ROCm build but torch.cuda.is_available() is False "
                             "(no driver or no visible device; CUDA_VISIBLE_DEVICES=%r)"
                             % (torch.__version__, os.environ.get("CUDA_VISIBLE_DEVICES")))
        res["devices"] = []
        res["seconds"] = round(time.perf_counter() - t0, 3)
        _emit(res)
    devices = []
    for i in range(count):
        d = {"index": i}
        try:
            props = torch.cuda.get_device_properties(i)
            d["name"] = props.name
            d["capability"] = [props.major, props.minor]
            d["total_memory_gib"] = round(props.total_memory / 2**30, 1)
            d["multiprocessors"] = props.multi_processor_count
            if res["hip_build"]:
                d["hip"] = True
                d["arch"] = getattr(props, "gcnArchName", None)
                d["bf16_native"] = None
                d["fp8"] = None
            else:
                cc = (props.major, props.minor)
                d["bf16_native"] = cc >= tuple(PAYLOAD["bf16_min"])
                d["fp8"] = cc >= tuple(PAYLOAD["fp8_min"])
        except BaseException as exc:
            d["error"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
        devices.append(d)
    res["devices"] = devices
    try:
        with torch.cuda.device(0):
            try:
                res["torch_bf16_supported_native"] = bool(torch.cuda.is_bf16_supported(including_emulation=False))
            except TypeError:
                res["torch_bf16_supported_native"] = bool(torch.cuda.is_bf16_supported())
    except BaseException as exc:
        res["torch_bf16_supported_native"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
    try:
        res["nccl_available"] = bool(torch.distributed.is_available() and torch.distributed.is_nccl_available())
    except BaseException as exc:
        res["nccl_available"] = False
        res["nccl_error"] = "%s: %s" % (type(exc).__name__, _first_line(exc))
    try:
        v = torch.cuda.nccl.version()
        res["nccl_version"] = ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)
    except BaseException as exc:
        res["nccl_version"] = None
        res.setdefault("nccl_error", "%s: %s" % (type(exc).__name__, _first_line(exc)))
    t1 = time.perf_counter()
    try:
        x = torch.ones(4, device="cuda:0")
        value = float((x * 2).sum().item())
        torch.cuda.synchronize()
        res["allocation"] = {"ok": value == 8.0, "seconds": round(time.perf_counter() - t1, 3),
                             "detail": "4-element float32 tensor on cuda:0, (x*2).sum() == %s" % value}
    except BaseException as exc:
        res["allocation"] = {"ok": False, "error": "%s: %s" % (type(exc).__name__, _first_line(exc))}
    res["status"] = "ok" if res["allocation"].get("ok") else "error"
    if res["status"] == "error":
        res["exception"] = "allocation"
        res["message"] = res["allocation"].get("error", "unexpected value")
    res["seconds"] = round(time.perf_counter() - t0, 3)
    _emit(res)


if MODE == "import":
    _import_mode()
elif MODE == "cuda":
    _cuda_mode()
_emit({"status": "error", "exception": "ValueError", "message": "unknown mode %r" % MODE})
