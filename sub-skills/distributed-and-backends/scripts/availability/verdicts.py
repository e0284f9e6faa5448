"""Per-workflow verdicts: yes / no / unknown, each with one reason.

Rules:
* ``no`` needs a definite blocker (package missing or broken, a version
  outside the supported range, a feature removed from the installed release,
  a CPU build of torch for GPU work, a probe that failed).
* ``yes`` needs every software prerequisite met *and* a GPU seen by the CUDA
  child (``--include-cuda``) with the capability the workflow needs.
  Nothing is called compatible without a GPU seen.
* ``unknown`` otherwise (software fine, hardware not checked; or a fact that
  only the framework itself can decide).
"""

import re

from .targets import BF16_MIN_CC, DALLE_FACTS, FP8_MIN_CC, PIP_HINT, WORKFLOWS


def version_key(text):
    """Sortable key for a PEP 440-ish version ('2.6.0a0+git' < '2.6.0' < '2.6.0.post1')."""
    if not text:
        return ((0,), -9, 0)
    # a build file may hold a non-string (``__version__ = 5``); str() keeps the comparison total
    text = str(text).split("+", 1)[0].lower()
    m = re.match(r"^v?(\d+(?:\.\d+)*)(.*)$", text)
    if not m:
        return ((0,), -9, 0)
    # int() refuses more than 4300 digits (sys.set_int_max_str_digits); a component that long is
    # garbage, so it is clamped: 18 digits still order every real version correctly
    release = tuple(int(x[:18]) for x in m.group(1).split("."))
    while len(release) > 1 and release[-1] == 0:
        release = release[:-1]
    rest = m.group(2).lstrip(".-_")
    phase, num = 0, 0
    pm = re.match(r"^(dev|a|alpha|b|beta|c|rc|pre|preview|post|r|rev)?\.?(\d*)", rest)
    if pm and pm.group(1):
        tag = pm.group(1)
        phase = {"dev": -4, "a": -3, "alpha": -3, "b": -2, "beta": -2, "c": -1, "rc": -1,
                 "pre": -1, "preview": -1, "post": 1, "r": 1, "rev": 1}[tag]
        num = int(pm.group(2)[:18] or 0)
    return (release, phase, num)


def vge(have, want):
    return version_key(have) >= version_key(want)


def _v(rec):
    return rec.get("version") or "unknown version"


def judge(checks, yes_reason):
    """Run every check; all 'no' reasons win, else the 'unknown' ones, else yes."""
    results = [c() for c in checks]
    nos = [r[1] for r in results if r and r[0] == "no"]
    if nos:
        return "no", "; ".join(dict.fromkeys(nos))
    unknowns = [r[1] for r in results if r and r[0] == "unknown"]
    if unknowns:
        return "unknown", "; ".join(dict.fromkeys(unknowns))
    return "yes", yes_reason


class Verdicts:
    def __init__(self, packages, probes=None, cuda=None, conflicts=(), nccl=None):
        self.p = packages
        self.probes = probes or {}
        self.cuda = cuda
        self.conflict_mods = {c["target"]: c for c in conflicts}
        self.nccl = nccl or {}

    # -- building blocks: each returns None when fine, else (verdict, reason)
    def need(self, name, why=None):
        rec = self.p[name]
        label = name if name != "dalle-pytorch" else "dalle-pytorch"
        if rec["state"] == "not_installed":
            return ("no", "%s is not installed%s" % (label, (" (" + why + ")") if why else ""))
        if rec["state"] == "metadata_only":
            return ("no", "%s %s has metadata but no importable %r module (broken or partial install)"
                    % (rec["dist"], _v(rec), rec["import_name"]))
        if name in self.conflict_mods:
            return ("no", self.conflict_mods[name]["message"])
        probe = self.probes.get(name)
        if probe and probe.get("status") not in ("ok", "skipped"):
            return ("no", "--probe: import %s -> %s" % (probe.get("module"), probe_summary(probe)))
        return None

    def gpu_gate(self, what="GPU training"):
        torch = self.p["torch"]
        blocked = self.need("torch")
        if blocked:
            return blocked
        flavour = torch["facts"].get("flavour")
        if flavour == "cpu":
            return ("no", "CPU build of torch %s (torch/version.py: cuda=None, hip=None): no %s"
                    % (_v(torch), what))
        if flavour == "xpu":
            return ("no", "XPU build of torch %s: this check covers CUDA/ROCm GPUs only" % _v(torch))
        if self.cuda is None:
            return ("unknown", "software prerequisites met; no GPU checked (run with --include-cuda)")
        if self.cuda.get("status") != "ok":
            return ("no" if self.cuda.get("status") == "no_cuda" else "unknown",
                    "--include-cuda: %s" % cuda_summary(self.cuda))
        return None

    def cc_gate(self, minimum, feature):
        devs = (self.cuda or {}).get("devices") or []
        if not devs:
            return ("unknown", "no device information")
        broken = [d for d in devs if "error" in d]
        if broken:
            return ("unknown", "; ".join("GPU %d: %s" % (d["index"], d["error"]) for d in broken))
        if any(d.get("hip") for d in devs):
            return ("unknown", "ROCm device(s): %s is decided by the GPU architecture (%s), not by compute capability"
                    % (feature, ", ".join(str(d.get("arch") or d["name"]) for d in devs)))
        low = [d for d in devs if tuple(d["capability"]) < minimum]
        if low:
            return ("no", "%s needs compute capability >= %d.%d; %s" % (
                feature, minimum[0], minimum[1],
                ", ".join("GPU %d %s is %d.%d" % (d["index"], d["name"], d["capability"][0], d["capability"][1])
                          for d in low)))
        return None

    # -- DALLE-pytorch
    def dalle_import(self):
        blocked = self.need("dalle-pytorch")
        if blocked:
            return blocked
        rec = self.p["dalle-pytorch"]
        missing = rec["facts"].get("import_missing") or {}
        if missing:
            parts = []
            for m in missing:
                if m == "pkg_resources":
                    st = self.p["setuptools"]
                    parts.append("pkg_resources (dalle_pytorch/__init__.py imports it; setuptools %s installed, "
                                 "pkg_resources was removed in setuptools 82.0.0: install 'setuptools<82')"
                                 % (st.get("version") or "not"))
                else:
                    parts.append("%s (pip: %s)" % (m, PIP_HINT.get(m, m)))
            return ("no", "import dalle_pytorch would fail: missing " + ", ".join(parts))
        return None

    def ds_rejects_amp(self, what):
        ds = self.p["deepspeed"]
        if ds["state"] == "installed" and "amp" in (ds["facts"].get("removed_config_keys") or []):
            return ("no", "deepspeed %s rejects the 'amp' config key (deepspeed/runtime/config.py "
                          "_REMOVED_TOP_LEVEL_CONFIG_KEYS raises DeepSpeedConfigError: NVIDIA Apex AMP "
                          "integration removed) and %s" % (_v(ds), what))
        return None

    def dalle_gpu(self):
        return self.gpu_gate("GPU training; " + DALLE_FACTS["cuda_calls"])

    def dalle_deepspeed(self):
        return judge([self.dalle_import, lambda: self.need("deepspeed"),
                      lambda: self.ds_rejects_amp(DALLE_FACTS["amp_block_always"]), self.dalle_gpu],
                     "dalle_pytorch importable, deepspeed %s accepts the 'amp' block, GPU seen" % _v(self.p["deepspeed"]))

    def horovod_torch(self):
        hvd = self.p["horovod"]
        if hvd["state"] == "installed" and not hvd["facts"].get("torch_extension"):
            return ("no", "horovod %s was built without PyTorch support (no horovod/torch/mpi_lib*.so); "
                          "rebuild with HOROVOD_WITH_PYTORCH=1" % _v(hvd))
        return None

    def dalle_horovod(self):
        return judge([self.dalle_import,
                      lambda: self.need("horovod", "DALLE's HorovodBackend imports horovod.torch"),
                      self.horovod_torch, self.dalle_gpu],
                     "dalle_pytorch importable, horovod %s with its torch extension, GPU seen" % _v(self.p["horovod"]))

    def dalle_dummy(self):
        return judge([self.dalle_import, self.dalle_gpu], "dalle_pytorch importable, GPU seen")

    def sparse_shipped(self):
        ds = self.p["deepspeed"]
        if ds["state"] == "installed" and not ds["facts"].get("sparse_attention_shipped"):
            removed = "sparse_attention" in (ds["facts"].get("removed_config_keys") or [])
            return ("no", "deepspeed %s no longer ships sparse attention (no deepspeed/ops/sparse_attention%s)"
                    % (_v(ds), "; its 'sparse_attention' config block is rejected" if removed else ""))
        return None

    def sparse_attention(self):
        ds = self.p["deepspeed"]
        return judge([lambda: self.need("deepspeed", "sparse attention is a DeepSpeed op"), self.sparse_shipped,
                      lambda: self.need("triton", "DeepSpeed sparse attention kernels are written in Triton"),
                      self.gpu_gate,
                      lambda: ("unknown", "deepspeed %s ships sparse_attn; whether it builds is decided by its op "
                                          "builder (older releases accepted only torch >=1.5,<2.0 and triton 1.0.0): "
                                          "run ds_report" % _v(ds))],
                     "")

    def apex_nvidia(self):
        apex = self.p["apex"]
        if apex["state"] in ("installed", "module_only"):
            if apex["facts"].get("flavour") != "nvidia":
                return ("no", "the installed 'apex' is the unrelated PyPI project, not NVIDIA apex (%s)"
                        % "; ".join(apex["facts"].get("evidence") or []))
            if "apex/amp/" not in (apex["facts"].get("evidence") or []):
                return ("no", "the installed NVIDIA apex has no apex/amp package")
        return None

    def apex_amp(self):
        return judge([lambda: self.need("deepspeed", "DALLE applies --amp only through DeepSpeed's 'amp' config block"),
                      lambda: self.ds_rejects_amp("DALLE applies --amp only through that block"),
                      lambda: self.need("apex", "NVIDIA apex built from source with --cpp_ext --cuda_ext; "
                                                "'pip install apex' installs an unrelated project"),
                      self.apex_nvidia, self.gpu_gate],
                     "deepspeed accepts 'amp', NVIDIA apex with apex.amp, GPU seen")

    # -- Accelerate
    def acc_deepspeed(self):
        return judge([lambda: self.need("accelerate"), lambda: self.need("deepspeed"),
                      lambda: self.gpu_gate("GPU training (DeepSpeed would fall back to its CPU accelerator)")],
                     "accelerate %s and deepspeed %s installed, GPU seen" % (_v(self.p["accelerate"]), _v(self.p["deepspeed"])))

    def torch_floor(self, key, label):
        acc, torch = self.p["accelerate"], self.p["torch"]
        floor = acc["facts"].get(key) if acc["state"] == "installed" else None
        torch_v = torch["version"] or torch["facts"].get("__version__")
        if torch_v and floor and not vge(torch_v, floor):
            return ("no", "%s needs torch >= %s (accelerate %s, %s); torch is %s"
                    % (label, floor, _v(acc), acc["facts"].get("sources", {}).get(key, "built-in fact"), torch_v))
        return None

    def _fsdp(self, key, label):
        floor = self.p["accelerate"]["facts"].get(key)
        return judge([lambda: self.need("accelerate"), lambda: self.need("torch"),
                      lambda: self.torch_floor(key, label), self.gpu_gate],
                     "torch %s >= %s for %s, GPU seen" % (self.p["torch"]["version"], floor, label))

    def acc_fsdp(self):
        return self._fsdp("FSDP_PYTORCH_VERSION", "FSDP")

    def acc_fsdp2(self):
        return self._fsdp("FSDP2_PYTORCH_VERSION", "FSDP2")

    def megatron_ok(self):
        mc = self.p["megatron-core"]
        floor = self.p["accelerate"]["facts"].get("megatron_core_min") or "0.8.0"
        if not mc["dist"]:
            return ("no", "megatron-core >= %s is not installed (accelerate's is_megatron_lm_available reads its "
                          "distribution version)" % floor)
        b = self.need("megatron-core")
        if b:
            return b
        if not vge(mc["version"], floor):
            return ("no", "megatron-core %s is older than %s (accelerate's floor)" % (mc["version"], floor))
        if not mc["facts"].get("megatron/training"):
            return ("no", "megatron/training is missing: accelerate also imports megatron.training (Megatron-LM), "
                          "which the megatron-core wheel does not provide")
        return None

    def acc_megatron(self):
        return judge([lambda: self.need("accelerate"), self.megatron_ok, self.gpu_gate],
                     "megatron-core %s with megatron.training, GPU seen" % _v(self.p["megatron-core"]))

    def torchao_floor(self):
        floor = self.p["accelerate"]["facts"].get("torchao_min")
        v = self.p["torchao"]["version"]
        if self.p["torchao"]["state"] == "installed" and floor and v and not vge(v, floor):
            return ("no", "torchao %s is older than %s (accelerate's is_torchao_available floor)" % (v, floor))
        return None

    def _fp8(self, name, label, extra=None):
        checks = [lambda: self.need("accelerate"), lambda: self.need(name, "accelerate's %s FP8 backend" % label)]
        if extra:
            checks.append(extra)
        checks += [lambda: self.gpu_gate("FP8 training"), lambda: self.cc_gate(FP8_MIN_CC, "FP8")]
        return judge(checks, "%s %s installed, every GPU has compute capability >= 8.9" % (label, _v(self.p[name])))

    def te_dist(self):
        te = self.p["transformer-engine"]
        if te["state"] in ("installed", "module_only") and "transformer-engine" not in (te.get("dists_found") or []):
            return ("no", "accelerate's is_transformer_engine_available looks up the 'transformer-engine' "
                          "distribution, which is not installed (found: %s)"
                    % (", ".join(te.get("dists_found") or []) or "module only"))
        return None

    def acc_fp8_te(self):
        return self._fp8("transformer-engine", "Transformer Engine", self.te_dist)

    def acc_fp8_msamp(self):
        return self._fp8("ms-amp", "MS-AMP")

    def acc_fp8_torchao(self):
        return self._fp8("torchao", "torchao", self.torchao_floor)

    def acc_tpu(self):
        return judge([lambda: self.need("accelerate"),
                      lambda: self.need("torch-xla", "Accelerate's TPU support runs through torch_xla"),
                      lambda: ("unknown", "torch_xla %s installed; only torch_xla's runtime can confirm a TPU "
                                          "(not started by this checker)" % _v(self.p["torch-xla"]))],
                     "")

    def all(self):
        table = {
            "dalle-deepspeed": self.dalle_deepspeed,
            "dalle-horovod": self.dalle_horovod,
            "dalle-dummy": self.dalle_dummy,
            "deepspeed-sparse-attention": self.sparse_attention,
            "apex-amp": self.apex_amp,
            "accelerate-deepspeed": self.acc_deepspeed,
            "accelerate-fsdp": self.acc_fsdp,
            "accelerate-fsdp2": self.acc_fsdp2,
            "accelerate-megatron-lm": self.acc_megatron,
            "accelerate-fp8-te": self.acc_fp8_te,
            "accelerate-fp8-msamp": self.acc_fp8_msamp,
            "accelerate-fp8-torchao": self.acc_fp8_torchao,
            "accelerate-tpu": self.acc_tpu,
        }
        out = {}
        for wid in WORKFLOWS:
            verdict, reason = table[wid]()
            out[wid] = {"verdict": verdict, "reason": reason, "question": WORKFLOWS[wid]}
        return out

    # -- capabilities for --require
    def capability(self, name):
        c = self.cuda
        if c is None:
            return False, "needs --include-cuda"
        if c.get("status") != "ok":
            return False, cuda_summary(c)
        devs = c.get("devices") or []
        if name == "gpu":
            return bool(devs), "%d device(s)" % len(devs)
        if name == "bf16":
            ok = bool(devs) and all(d.get("bf16_native") for d in devs)
            return ok, ", ".join("%s bf16_native=%s" % (d["name"], d.get("bf16_native")) for d in devs)
        if name == "fp8":
            ok = bool(devs) and all(d.get("fp8") for d in devs)
            return ok, ", ".join("%s fp8=%s" % (d["name"], d.get("fp8")) for d in devs)
        if name == "nccl":
            ok = bool(c.get("nccl_available")) and bool(c.get("nccl_version"))
            return ok, "nccl_available=%s version=%s" % (c.get("nccl_available"), c.get("nccl_version"))
        return False, "unknown capability"


def probe_summary(p):
    st = p.get("status")
    if st == "ok":
        return "ok (%.2f s)" % p.get("seconds", 0)
    if st in ("import_error", "error", "not_installed"):
        if p.get("exception"):
            return "%s: %s: %s" % (st, p.get("exception"), p.get("message"))
        return "%s: %s" % (st, p.get("message"))
    if st == "killed":
        return "killed by %s" % p.get("signal")
    if st == "timed_out":
        return "timed out after %s s (process group killed)" % p.get("timeout")
    if st == "exited":
        return "exited with code %s before reporting" % p.get("returncode")
    return st or "?"


def clean_cuda(c):
    """The CUDA child's record with every device in the shape the verdicts and the table read.

    The child runs whatever torch is installed; a device whose properties could not be read or
    are not numbers (a broken or fake build) keeps only index, name and an "error" line."""
    if not isinstance(c, dict):
        return {"status": "exited", "message": "no usable record from the CUDA child"}
    devs = c.get("devices")
    if devs is None:
        return c
    out = []
    for pos, d in enumerate(devs if isinstance(devs, list) else []):
        d = d if isinstance(d, dict) else {"error": "device record %r" % (d,)}
        idx = d.get("index")
        clean = {"index": idx if isinstance(idx, int) and not isinstance(idx, bool) else pos,
                 "name": str(d.get("name") or "unknown device")}
        cap = d.get("capability")
        ok_cap = (isinstance(cap, list) and len(cap) == 2
                  and all(isinstance(x, int) and not isinstance(x, bool) for x in cap))
        if "error" in d or not ok_cap:
            clean["error"] = str(d.get("error") or "compute capability unreadable: %r" % (cap,))
        else:
            clean.update(d, index=clean["index"], name=clean["name"])
        out.append(clean)
    return dict(c, devices=out)


def cuda_summary(c):
    st = c.get("status")
    if st == "ok":
        return "%d device(s)" % len(c.get("devices") or [])
    if st == "no_cuda":
        return "no CUDA: " + (c.get("reason") or "")
    return probe_summary(c)


BF16_MIN = BF16_MIN_CC
