"""What every planner module shares: the input error, units, the mirrored library versions and
the bundle version."""
from __future__ import annotations

import os

# The pinned library versions whose behaviour the plans mirror (references/versions.md); the bundle
# version itself comes from the root VERSION file, read by backend_validator/version.py.
MIRRORS = "deepspeed 0.19.8 (ZeRO estimators), torch 2.13.0 (FSDP2, autograd-saved activations), " \
          "accelerate 1.15.0 (emitted configs)"
GIB = 1024 ** 3


class InputError(Exception):
    """Bad input: reported as one line on stderr, exit 2."""


def ceil_div(a, b):
    return -(-int(a) // int(b))


def bundle_version() -> str:
    """The bundle's VERSION file, through the validator's version module beside this package (one
    lookup for the sub-skill); 'unknown' when the script was copied out of the bundle."""
    import importlib.util
    scripts = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(scripts, "backend_validator", "version.py")
    try:
        spec = importlib.util.spec_from_file_location("_pdt_bundle_version", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.bundle_version()
    except (OSError, ImportError, AttributeError):
        return "unknown"

