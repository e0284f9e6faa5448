"""A two-name stand-in for transformers, for probe scripts that run Accelerate's DeepSpeed path.

accelerate 1.15.0 imports `transformers.integrations` whenever a DeepSpeedPlugin is selected
(DeepSpeedPlugin.set_deepspeed_weakref), and transformers is not in the pinned environment. The
stand-in's `integrations` re-exports accelerate's own HfDeepSpeedConfig and a no-op
`unset_hf_deepspeed_config`, so the rest of the path runs for real. `version` is what the stand-in's
dist-info reports (importlib.metadata, accelerate's version gates read it).

Probe scripts run as `python tests/<folder>/_probe.py`, so they put tests/ on sys.path first:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _transformers_stub import install
"""
from __future__ import annotations

import sys
from pathlib import Path


def install(root: Path, version: str) -> None:
    """Write the stand-in under `root` and put it first on sys.path."""
    root = Path(root)
    (root / "transformers").mkdir(parents=True, exist_ok=True)
    (root / "transformers" / "__init__.py").write_text("")
    (root / "transformers" / "integrations.py").write_text(
        "from accelerate.utils.deepspeed import HfDeepSpeedConfig\n"
        "def unset_hf_deepspeed_config():\n    pass\n")
    meta = root / f"transformers-{version}.dist-info"
    meta.mkdir(exist_ok=True)
    (meta / "METADATA").write_text(f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n")
    sys.path.insert(0, str(root))
