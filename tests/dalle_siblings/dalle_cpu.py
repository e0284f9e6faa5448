"""Run DALLE-pytorch 1.6.6's own model code on CPU with a tiny model, in a child process.

The wheel is installed without its dependencies (references/versions.md); `axial-positional-embedding`
and `rotary-embedding-torch` are installed for real (requirements-test.txt), and the imports that
only the pretrained VAEs and the package banner need (taming, omegaconf, PIL, requests,
pkg_resources) are replaced by empty stand-ins before `import dalle_pytorch`, so DALLE, DiscreteVAE
and CLIP run unmodified. `run(code)` executes `code` after that preamble in a fresh interpreter and
returns what it printed as JSON on its last stdout line.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PREAMBLE = '''
import json, sys, types
for _name in ("PIL", "requests", "omegaconf", "taming", "taming.models", "taming.models.vqgan", "pkg_resources"):
    sys.modules[_name] = types.ModuleType(_name)
sys.modules["omegaconf"].OmegaConf = object
sys.modules["taming.models.vqgan"].VQModel = sys.modules["taming.models.vqgan"].GumbelVQ = object
sys.modules["pkg_resources"].get_distribution = lambda name: types.SimpleNamespace(version="0")
import torch
torch.set_num_threads(1)
from dalle_pytorch import DALLE, CLIP, DiscreteVAE


def tiny_dalle(**kw):
    torch.manual_seed(0)
    vae = DiscreteVAE(image_size=8, num_layers=1, num_tokens=16, codebook_dim=8, hidden_dim=8)
    args = dict(dim=32, vae=vae, num_text_tokens=20, text_seq_len=4, depth=1, heads=2, dim_head=16)
    args.update(kw)
    return DALLE(**args)
'''


def run(code: str, timeout: int = 300) -> dict:
    src = PREAMBLE + "\n" + textwrap.dedent(code)
    proc = subprocess.run([sys.executable, "-c", src], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])
