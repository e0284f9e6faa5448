"""Force what this CPU reports for fp16 to DeepSpeed, for the whole test suite and its children.

DeepSpeed's CPU accelerator (deepspeed/accelerator/cpu_accelerator.py, CPU_Accelerator.is_fp16_supported)
accepts fp16 only where `torch.ops.mkldnn._is_mkldnn_fp16_supported()` is true (oneDNN fp16 kernels:
AVX512-FP16 / AMX-FP16 CPUs); elsewhere deepspeed.initialize raises
`ValueError: Type fp16 is not supported on your device.` (DeepSpeedEngine._do_sanity_check).

PDT_FORCE_CPU_FP16=0 makes that probe answer False, PDT_FORCE_CPU_FP16=1 makes it answer True; unset,
nothing is changed. tests/conftest.py applies it in the pytest process and puts this folder first on
PYTHONPATH, so every Python child the tests start (plain python, torchrun ranks, the deepspeed and
accelerate launchers and their ranks) imports this module at start-up and sees the same answer.
The patch is applied when torch is imported, so an interpreter that never imports torch pays nothing.
Only the Python probe changes: torch's C++ kernels are untouched (fp16 math runs on any x86 CPU, slower
without the oneDNN kernels), which is exactly the code path DeepSpeed takes on either kind of CPU.
"""
from __future__ import annotations

import os
import sys

ENV = "PDT_FORCE_CPU_FP16"


def forced() -> bool | None:
    """The forced fp16 answer: True/False, or None when the switch is off (unset or empty)."""
    value = os.environ.get(ENV, "").strip()
    if value == "":
        return None
    if value not in ("0", "1"):
        raise ValueError(f"{ENV} must be 0 (fp16 absent), 1 (fp16 present) or unset, not {value!r}")
    return value == "1"


class _ForcedProbe:
    """Stands in for the op packet torch.ops.mkldnn._is_mkldnn_fp16_supported: calling it answers the
    forced value; every other attribute (.default, overloads, which torch's own op walks read) is the
    real packet's."""

    def __init__(self, real, value: bool):
        self._real, self._value = real, value

    def __call__(self, *args, **kwargs) -> bool:
        return self._value

    def __getattr__(self, name):
        return getattr(self._real, name)


def patch_torch(torch, value: bool) -> None:
    """Make torch.ops.mkldnn._is_mkldnn_fp16_supported() return `value` (an attribute of the op namespace)."""
    real = torch.ops.mkldnn._is_mkldnn_fp16_supported
    real = getattr(real, "_real", real)
    torch.ops.mkldnn._is_mkldnn_fp16_supported = _ForcedProbe(real, value)


class _PatchTorchOnImport:
    """A meta-path finder that lets the normal finders load torch, then patches it.

    It stays on sys.meta_path until torch is really executed: a bare `importlib.util.find_spec("torch")`
    (tests/conftest.py looks up torch's folder that way) only looks, and the next real import must still
    be patched. It leaves itself out while it asks the other finders (no recursion)."""

    def __init__(self, value: bool):
        self.value = value
        self._asking = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self._asking:
            return None
        import importlib.util
        self._asking = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._asking = False
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module
        value, finder = self.value, self

        def exec_module(module):
            run(module)
            patch_torch(module, value)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
        spec.loader.exec_module = exec_module
        return spec


def install(value: bool) -> None:
    """Apply the forced answer now if torch is loaded, else when it is imported."""
    if "torch" in sys.modules:
        patch_torch(sys.modules["torch"], value)
    elif not any(isinstance(f, _PatchTorchOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchTorchOnImport(value))


try:
    _value = forced()
except ValueError as _e:
    sys.stderr.write(f"sitecustomize: {_e}\n")
    _value = None
if _value is not None:
    install(_value)
