"""Generator for sub-skills/checkpointing-and-tracking/references/state-dict-keys.md: which state-dict key
form loads (strict=True) into which object, and which key names accelerate's export calls write
(accelerate 1.15.0 MULTI_CPU, torch 2.13.0, 2 gloo ranks; FSDP1/FSDP2 built with torch directly on CPU).

_sd_keys_probe.py runs on both ranks; the raw results (both ranks) are committed in sd_keys_capture.json and
render() turns rank 0's into the page's blocks, compared word for word by test_sd_keys_matrix.py.

usage: python tests/accel_siblings/_sd_keys_matrix.py capture|render|write|--check   (~15 s)
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
import _ports  # noqa: E402  (tests/ is on sys.path)
import _generated_blocks as gb  # noqa: E402

CAPTURE = HERE / "sd_keys_capture.json"
PROBE = HERE / "_sd_keys_probe.py"
PAGE = ROOT / "sub-skills" / "checkpointing-and-tracking" / "references" / "state-dict-keys.md"
FORMS = {
    "plain": "`model.state_dict()` of the plain model",
    "module": "the prepared DDP wrapper's `state_dict()`",
    "orig_mod": "`torch.compile(model).state_dict()`",
    "module_orig_mod": "DDP wrapper of a model compiled before `prepare`",
    "fsdp1": "FSDP1 wrapper's `state_dict()` (`FULL_STATE_DICT`, its default)",
    "fsdp2": "FSDP2 (`fully_shard`) model's `state_dict()`",
    "fsdp2_full": "FSDP2 via `get_model_state_dict(m, options=StateDictOptions(full_state_dict=True))`",
}
TARGETS = {
    "raw": "plain model before `prepare`",
    "prepared": "prepared DDP wrapper",
    "unwrap": "`accelerator.unwrap_model(model)`",
    "compiled": "`torch.compile(model)`",
    "fsdp1": "FSDP1 wrapper",
    "fsdp2": "FSDP2 model",
    "fsdp2_set_full": "FSDP2 via `set_model_state_dict(full_state_dict=True)`",
}
EXPORTS = {"unwrap_state_dict": "`unwrap_model(model).state_dict()`", "get_state_dict": "`accelerator.get_state_dict(model)`",
           "save_model": "`accelerator.save_model(model, dir)` (`model.safetensors`)",
           "save_state": "`accelerator.save_state(dir)` (`model.safetensors`)"}


def _port() -> int:
    """A free port, chosen and reserved by tests/_ports.py (outside the ephemeral range)."""
    return _ports.free_port()


def collect() -> dict:
    port = _port()
    with tempfile.TemporaryDirectory() as w:
        envs = [gb.child_env(Path(w), RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE="2",
                             LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                             PYTHONWARNINGS="ignore", ACCELERATE_DISABLE_RICH="1") for r in range(2)]
        return gb.run_ranks([sys.executable, str(PROBE)], envs, Path(w), 240, "crash", 800)


def _cell(text: str) -> str:
    if text == "loads":
        return "**loads**"
    if "missing `" in text:
        return "key mismatch"
    if "unexpected `" in text:
        return "unexpected keys"
    if "mixed torch.Tensor and DTensor" in text:
        return "Tensor/DTensor mix"
    return text.replace("|", "/")


def render(data: dict) -> dict:
    r = data["rank0"]
    head = "| Saved from ↓ (first key, value type) / loaded into → | " + " | ".join(TARGETS.values()) + " |"
    rows = [head, "| " + " | ".join(["---"] * (len(TARGETS) + 1)) + " |"]
    for f, label in FORMS.items():
        fm = r["forms"][f]
        cells = [_cell(r["loads"][f"{f}->{t}"]) for t in TARGETS]
        rows.append(f"| {label} (`{fm['first_key']}`, {fm['value_type']}) | " + " | ".join(cells) + " |")
    msgs = sorted({v for v in r["loads"].values() if v != "loads"}, key=lambda v: (len(v), v))
    kinds = {}
    for v in msgs:   # one example message per cell kind
        kinds.setdefault(_cell(v), v)
    same = "rank 1 gave the same results" if data.get("rank1") == r else "rank 1 differed (see the capture)"
    note = ("\nRun: " + r["distributed_type"] + f", {r['num_processes']} gloo ranks, {same}; "
            f"`prepare` returned `{r['prepared_class']}` (compiled first: `{r['prepared_c_class']}`). "
            "Cell kinds, one message each: " + "; ".join(f"{k}: {v}" for k, v in sorted(kinds.items())) + ".\n")
    loads = "\n".join(rows) + "\n" + note
    ex = ["| Call on the prepared model | model not compiled | compiled by you before `prepare` |",
          "| --- | --- | --- |"]
    for k, label in EXPORTS.items():
        a, b = r["exports"]["prepared"][k], r["exports"]["prepared_c"][k]
        ex.append(f"| {label} | `{', '.join(a)}` | `{', '.join(b)}` |")
    return {"sd keys load": loads, "sd keys exports": "\n".join(ex) + "\n"}


if __name__ == "__main__":
    gb.cli(sys.argv[1] if len(sys.argv) > 1 else "", page=PAGE, capture=CAPTURE, collect=collect, render=render,
           usage=__doc__)
