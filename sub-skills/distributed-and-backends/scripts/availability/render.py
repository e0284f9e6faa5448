"""Readable text table for the report (the default output)."""

import textwrap

from .verdicts import cuda_summary, probe_summary

WIDTH = 100  # text mode wraps long reasons at this column, continuation lines under the reason


def _row(prefix, text):
    """prefix + text, wrapped at WIDTH with continuation lines aligned under the text."""
    lines = textwrap.wrap(text, max(40, WIDTH - len(prefix)), break_long_words=False, break_on_hyphens=False)
    if not lines:
        return prefix.rstrip()
    return "\n".join([prefix + lines[0]] + [" " * len(prefix) + ln for ln in lines[1:]])


def _detail(name, rec):
    f = rec.get("facts") or {}
    bits = []
    if name == "torch" and f.get("flavour"):
        fl = f["flavour"]
        if fl == "cpu":
            bits.append("CPU build (torch/version.py: cuda=None, hip=None)")
        elif fl == "cuda":
            bits.append("CUDA %s build" % f.get("cuda"))
        elif fl == "rocm":
            bits.append("ROCm/HIP %s build" % f.get("hip"))
        else:
            bits.append("%s build" % fl)
    if name == "deepspeed" and rec["state"] == "installed":
        bi = f.get("build_info") or {}
        bits.append("accelerator=%s prebuilt_ops=%s" % (bi.get("accelerator_name"), ",".join(f.get("prebuilt_ops") or []) or "none"))
        bits.append("sparse_attention %s" % ("shipped" if f.get("sparse_attention_shipped") else "not shipped"))
    if name == "accelerate" and rec["state"] == "installed":
        bits.append("FSDP2 needs torch>=%s" % f.get("FSDP2_PYTORCH_VERSION"))
    if name == "apex" and f.get("flavour"):
        bits.append("flavour=%s" % f["flavour"])
    if name == "dalle-pytorch" and rec["state"] == "installed":
        miss = f.get("import_missing") or {}
        bits.append("import needs missing: %s" % (", ".join(miss) if miss else "none"))
    if name == "horovod" and rec["state"] == "installed":
        bits.append("torch extension: %s" % (", ".join(f.get("torch_extension") or []) or "none"))
    if rec["state"] == "module_only":
        bits.append("module without distribution metadata: %s" % rec.get("module_path"))
    if rec["state"] == "metadata_only":
        bits.append("metadata without module %r: %s" % (rec["import_name"], rec.get("dist_path")))
    bits.extend(rec.get("notes") or [])
    return "; ".join(bits)


def render_text(r):
    out = []
    w = out.append
    c = r["checker"]
    w("check_backend_availability %s  tiers: %s  (%.3f s)" % (c["version"], "+".join(c["tiers"]), c["total_seconds"]))
    py = r["python"]
    w("python %s  %s%s" % (py["version"], py["executable"], "  (venv)" if py["venv"] else ""))
    h = r["host"]
    if h.get("gpu_files_seen"):
        w("host: NVIDIA driver %s, /proc GPUs %d, /dev/nvidiaN %d, /dev/kfd %s" % (
            h.get("nvidia_driver"), h.get("nvidia_gpus_proc"), h.get("dev_nvidia"), h.get("dev_kfd")))
    else:
        w("host: no GPU device files seen (/dev/nvidia*, /dev/kfd, /proc/driver/nvidia)")
    w("")
    w("PACKAGES")
    w("  %-20s %-14s %-18s %s" % ("name", "state", "version", "detail"))
    for name, rec in r["packages"].items():
        w("  %-20s %-14s %-18s %s" % (name, rec["state"], rec.get("version") or "-", _detail(name, rec)))
    w("")
    nw = r["nccl_wheels"]
    w("NCCL wheels: %s" % (", ".join("%s %s" % (x["dist"], x["version"]) for x in nw["wheels"]) or "none"))
    for f in nw["findings"]:
        w("  ! %s" % f)
    w("conflicts: %s" % ("none" if not r["conflicts"] else ""))
    for cf in r["conflicts"]:
        w("  ! %s" % cf["message"])
    for d in r["duplicate_installs"]:
        w("  ! %s installed %d times: %s" % (d["dist"], len(d["installs"]), "; ".join(d["installs"])))
    plugins = r["torch_backend_plugins"]
    w("torch.backends plugins (loaded by `import torch`): %s" % (
        ", ".join("%s=%s (%s)" % (p["name"], p["target"], p["dist"]) for p in plugins) or "none"))
    if "probes" in r:
        w("")
        w("PROBES (each import in its own child process)")
        for name, p in r["probes"].items():
            w("  %-20s %-22s %s" % (name, p.get("module") or "", probe_summary(p)))
            if p.get("status") == "ok" and p.get("torch"):
                t = p["torch"]
                w("  %-20s %-22s distributed: %s" % ("", "", ", ".join(
                    "%s=%s" % (k[:-10], v) for k, v in t.items() if k.endswith("_available") and k != "distributed_available")))
    if "cuda" in r:
        w("")
        cu = r["cuda"] or {}
        w("CUDA (child process): %s" % cuda_summary(cu))
        for d in cu.get("devices") or []:
            if "error" in d:
                w("  GPU %d: %s" % (d["index"], d["error"]))
                continue
            w("  GPU %d: %s  cc %d.%d  %.1f GiB  bf16_native=%s fp8=%s" % (
                d["index"], d["name"], d["capability"][0], d["capability"][1], d.get("total_memory_gib", 0),
                d.get("bf16_native"), d.get("fp8")))
        if cu.get("status") in ("ok", "error") and "allocation" in cu:
            w("  NCCL: available=%s version=%s; allocation: %s" % (
                cu.get("nccl_available"), cu.get("nccl_version"),
                "ok" if cu["allocation"].get("ok") else cu["allocation"].get("error")))
    w("")
    w("VERDICTS (yes = prerequisites met and a suitable GPU seen)")
    for wid, v in r["verdicts"].items():
        w(_row("  %-27s %-8s " % (wid, v["verdict"]), v["reason"]))
    if r["requirements"]:
        w("")
        w("REQUIRED")
        for q in r["requirements"]:
            w(_row("  %-27s %-8s " % (q["name"], "met" if q["met"] else "UNMET"), q["detail"]))
    if r["crashed"]:
        w("")
        for line in r["crashed"]:
            w("crashed/timed out: %s" % line)
    for line in r.get("advice") or []:
        w("")
        w(_row("advice: ", line))
    w("")
    w("exit code %d" % r["exit_code"])
    return "\n".join(out) + "\n"
