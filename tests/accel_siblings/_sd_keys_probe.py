"""Child probe of _sd_keys_matrix.py, one rank of a 2-rank gloo run (accelerate 1.15.0 MULTI_CPU, torch 2.13.0).

Builds every state-dict key form a user meets (plain, DDP `module.`, compiled `_orig_mod.`, DDP around a
compiled model, FSDP1 and FSDP2 from torch directly) and loads each, strict=True, into every object a user
loads into (a plain model before prepare, the prepared DDP wrapper, accelerator.unwrap_model(prepared), a
compiled model, an FSDP1 and an FSDP2 model). Then records the key names accelerator.get_state_dict,
save_model and save_state write for a prepared model (plain and compiled before prepare).
Writes rank<r>.json in the working directory, then os._exit(0).
"""
from __future__ import annotations

import json
import os
import re
import sys

RANK = int(os.environ.get("RANK", "0"))


def _emit(obj):
    with open(f"rank{RANK}.json", "w", encoding="utf-8") as f:
        json.dump(obj, f)
        f.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _err(e: Exception) -> str:
    msg = str(e)
    miss = re.search(r'Missing key\(s\) in state_dict: "([^"]+)"', msg)
    unexp = re.search(r'Unexpected key\(s\) in state_dict: "([^"]+)"', msg)
    if miss or unexp:
        parts = ([f"missing `{miss.group(1)}`"] if miss else []) + ([f"unexpected `{unexp.group(1)}`"] if unexp
                                                                     else [])
        return f"`{type(e).__name__}`: " + ", ".join(parts)
    mixed = re.search(r'parameter named "([^"]+)".*?an exception occurred : \(\'([^,]+?),', msg)
    if mixed:
        return f"`{type(e).__name__}` copying `{mixed.group(1)}`: {mixed.group(2)}"
    lines = [x.strip() for x in msg.strip().splitlines() if x.strip()]
    if lines and lines[0].startswith("Error(s) in loading state_dict") and len(lines) > 1:
        lines = lines[1:]   # the reason, not the header
    first = lines[0] if lines else ""
    return f"`{type(e).__name__}`: {first[:140]}"


def main():
    import torch
    from torch import nn
    from accelerate import Accelerator
    from safetensors.torch import load_file

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)
            self.b = nn.Linear(4, 2)

        def forward(self, x):
            return self.b(self.a(x))

    acc = Accelerator(cpu=True)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP1
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, set_model_state_dict
    mesh = init_device_mesh("cpu", (acc.num_processes,))

    def fsdp2():
        m = Net()
        fully_shard(m.a, mesh=mesh)
        fully_shard(m, mesh=mesh)
        return m

    torch.manual_seed(0)
    prepared = acc.prepare(Net())
    prepared_c = acc.prepare(torch.compile(Net(), backend="eager"))
    fsdp1_model = FSDP1(Net(), device_id=torch.device("cpu"))
    res = {"distributed_type": str(acc.distributed_type), "num_processes": acc.num_processes,
           "prepared_class": type(prepared).__name__, "prepared_c_class": type(prepared_c).__name__}

    def sd(m):
        return {k: v for k, v in m.state_dict().items()}

    forms = {
        "plain": sd(Net()),
        "module": sd(prepared),
        "orig_mod": sd(torch.compile(Net(), backend="eager")),
        "module_orig_mod": sd(prepared_c),
        "fsdp1": sd(fsdp1_model),
        "fsdp2": sd(fsdp2()),
        "fsdp2_full": get_model_state_dict(fsdp2(), options=StateDictOptions(full_state_dict=True)),
    }
    res["forms"] = {k: {"first_key": next(iter(v)), "value_type": type(next(iter(v.values()))).__name__}
                    for k, v in forms.items()}
    targets = {
        "raw": lambda: Net(),
        "prepared": lambda: prepared,
        "unwrap": lambda: acc.unwrap_model(prepared),
        "compiled": lambda: torch.compile(Net(), backend="eager"),
        "fsdp1": lambda: fsdp1_model,
        "fsdp2": fsdp2,
    }

    class _SetFull:   # torch.distributed.checkpoint.state_dict's loader for a full (plain) dict
        def load_state_dict(self, state, strict=True):
            set_model_state_dict(fsdp2(), state, options=StateDictOptions(full_state_dict=True, strict=strict))

    targets["fsdp2_set_full"] = _SetFull
    res["loads"] = {}
    for f, state in forms.items():
        for t, make in targets.items():
            try:
                make().load_state_dict(state, strict=True)
                out = "loads"
            except Exception as e:
                out = _err(e)
            res["loads"][f"{f}->{t}"] = out
    # what the export calls write, for a prepared model and a model compiled by the user before prepare
    res["exports"] = {}
    d = os.path.join(os.getcwd(), "exports")   # shared by the ranks (the generator's work folder)
    if True:
        for name, m in (("prepared", prepared), ("prepared_c", prepared_c)):
            gsd = acc.get_state_dict(m)
            acc.save_model(m, os.path.join(d, name + "-sm"))
            acc.wait_for_everyone()
            sm = sorted(load_file(os.path.join(d, name + "-sm", "model.safetensors")))
            res["exports"][name] = {"get_state_dict": sorted(gsd), "save_model": sm,
                                    "unwrap_state_dict": sorted(acc.unwrap_model(m).state_dict())}
        for name, make in (("prepared", lambda: Net()), ("prepared_c", lambda: torch.compile(Net(), backend="eager"))):
            a = Accelerator(cpu=True)   # its own model list, so model.safetensors is this model's
            m = a.prepare(make())
            path = os.path.join(d, name + "-ss")
            a.save_state(path)
            a.wait_for_everyone()
            res["exports"][name]["save_state"] = sorted(load_file(os.path.join(path, "model.safetensors")))
    _emit(res)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:
        import traceback
        _emit({"fatal": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()[-1500:]})
