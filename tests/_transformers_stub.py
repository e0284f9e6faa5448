"""Control over which transformers the probe scripts that run Accelerate's DeepSpeed path see.

accelerate 1.15.0 imports `transformers.integrations` whenever a DeepSpeedPlugin is selected
(DeepSpeedPlugin.set_deepspeed_weakref) and reads its version through importlib.metadata.
transformers 5.25.0 is installed in the pinned environment (requirements-test.txt), so:

- `hide()` makes the installed package invisible, module and distribution alike (the sys.path
  finder is swapped for one that skips `transformers`), so a probe can show what Accelerate does
  where transformers is absent. Call it before anything imports transformers.
- `install(root, version)` ends the hiding and puts a two-name stand-in first on sys.path: its
  `integrations` re-exports accelerate's own HfDeepSpeedConfig and a no-op
  `unset_hf_deepspeed_config`, and its dist-info reports `version` (accelerate's version gates read
  it), so the rest of the path runs for real against a chosen transformers version.

Probe scripts run as `python tests/<folder>/_probe.py`, so they put tests/ on sys.path first:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _transformers_stub import hide, install
"""
from __future__ import annotations

import importlib.machinery
import sys
from pathlib import Path

_PathFinder = importlib.machinery.PathFinder


def _hidden(name) -> bool:
    return (name or "").split(".")[0].replace("_", "-").lower() == "transformers"


class _PathFinderWithoutTransformers:
    """sys.path's finder, blind to the transformers module and distribution."""

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        return None if _hidden(fullname) else _PathFinder.find_spec(fullname, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        return (d for d in _PathFinder.find_distributions(*args, **kwargs) if not _hidden(d.metadata["Name"]))

    @classmethod
    def invalidate_caches(cls):
        _PathFinder.invalidate_caches()


def hide() -> None:
    """Make the installed transformers invisible to import and importlib.metadata."""
    if any(_hidden(m) for m in sys.modules):
        raise RuntimeError("transformers is already imported: hide() must run first")
    sys.meta_path[:] = [_PathFinderWithoutTransformers if f is _PathFinder else f for f in sys.meta_path]


def hidden() -> bool:
    return _PathFinderWithoutTransformers in sys.meta_path


def unhide() -> None:
    sys.meta_path[:] = [_PathFinder if f is _PathFinderWithoutTransformers else f for f in sys.meta_path]


def install(root: Path, version: str) -> None:
    """End hide(), write the stand-in under `root` and put it first on sys.path."""
    unhide()
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
    importlib.invalidate_caches()
