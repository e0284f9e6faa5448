"""accelerate 1.15.0's side of the rows in
sub-skills/training-loop-integration/references/accelerate-behaviour-changes.md.

The older releases are not installed: their behaviour and first fixed tags come from the fetched
huggingface/accelerate history (cited in the page and in the claims ledger). Here each 1.15.0 code
path runs on CPU in a fresh interpreter (a private HOME, so no user config file is read):
- an empty prepared dataloader (PR #3659, 1.9.0) yields nothing and leaves no dataloader state;
- the simple launcher sets KMP_AFFINITY/KMP_BLOCKTIME only for a --cpu launch (PR #3912, 1.13.0,
  and the 1.15.0 str_to_bool test).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

EMPTY_LOADER = textwrap.dedent("""
    import json
    from torch.utils.data import DataLoader
    from accelerate import Accelerator
    acc = Accelerator(cpu=True)
    out = {"plain": list(DataLoader([], batch_size=2))}
    dl = acc.prepare(DataLoader([], batch_size=2))
    out["type"] = type(dl).__name__
    out["prepared"] = [repr(b) for b in dl]
    out["in_dataloader_after"] = acc.gradient_state.in_dataloader
    out["second_pass"] = [repr(b) for b in dl]
    full = acc.prepare(DataLoader(list(range(4)), batch_size=2))
    out["nonempty_after"] = [[b.tolist(), acc.gradient_state.end_of_dataloader] for b in full]
    print("RESULT " + json.dumps(out))
""")

KMP = textwrap.dedent("""
    import json
    from accelerate.commands.launch import launch_command_parser
    from accelerate.utils.launch import prepare_simple_launcher_cmd_env
    out = {}
    for name, extra in (("gpu_or_default", []), ("cpu", ["--cpu"])):
        a = launch_command_parser().parse_args(extra + ["--num_processes", "1", "--num_machines", "1",
                                                        "--mixed_precision", "no", "--dynamo_backend", "no",
                                                        "train.py"])
        a.use_cpu = False  # what _validate_launch_command leaves when the config file has no use_cpu
        _, env = prepare_simple_launcher_cmd_env(a)
        out[name] = {k: env.get(k) for k in ("ACCELERATE_USE_CPU", "KMP_AFFINITY", "KMP_BLOCKTIME")}
    print("RESULT " + json.dumps(out))
""")


def _run(code: str, tmp_path) -> dict:
    env = dict(os.environ, HOME=str(tmp_path), HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1",
               PYTHONDONTWRITEBYTECODE="1", CUDA_VISIBLE_DEVICES="")
    for k in [k for k in env if k.startswith("ACCELERATE_") or k.startswith("KMP_")]:
        del env[k]
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
    assert p.returncode == 0 and line, p.stderr[-3000:]
    return json.loads(line[-1][len("RESULT "):])


def test_empty_prepared_dataloader_yields_nothing(tmp_path):
    """1.15.0 (PR #3659): the one-ahead fetch hits StopIteration, calls end() and returns: no None
    batch, no UnboundLocalError, the same as a plain DataLoader; the state is reset, so a later
    non-empty loader still flags its last batch."""
    r = _run(EMPTY_LOADER, tmp_path)
    assert r["type"] == "DataLoaderShard"
    assert r["plain"] == [] and r["prepared"] == [] and r["second_pass"] == []
    assert r["in_dataloader_after"] is False
    assert r["nonempty_after"] == [[[0, 1], False], [[2, 3], True]]


def test_kmp_affinity_only_for_cpu_launches(tmp_path):
    """1.15.0: the simple launcher (one process, or --cpu) exports KMP_AFFINITY and KMP_BLOCKTIME
    for --cpu only; ACCELERATE_USE_CPU is the string 'False' otherwise (truthy, which before
    PR #3912 set them for every launch)."""
    r = _run(KMP, tmp_path)
    assert r["gpu_or_default"] == {"ACCELERATE_USE_CPU": "False", "KMP_AFFINITY": None, "KMP_BLOCKTIME": None}
    assert r["cpu"] == {"ACCELERATE_USE_CPU": "True", "KMP_AFFINITY": "granularity=fine,compact,1,0",
                        "KMP_BLOCKTIME": "1"}


def test_empty_shard_conditions():
    """A rank's shard is empty: n=1 with even_batches=False; n=3 with drop_last=True (batch 2, 2 ranks:
    fewer than batch_size x num_processes samples), for either even_batches; the defaults pad n=1 so
    both ranks get a batch (accelerate 1.15.0 BatchSamplerShard, the sampler prepare builds)."""
    from torch.utils.data import BatchSampler, SequentialSampler
    from accelerate.data_loader import BatchSamplerShard

    def shards(n, drop_last, even):
        bs = BatchSampler(SequentialSampler(range(n)), 2, drop_last)
        return [list(BatchSamplerShard(bs, num_processes=2, process_index=i, even_batches=even)) for i in (0, 1)]

    assert shards(1, False, False) == [[[0]], []]
    assert shards(3, True, True) == [[], []] and shards(3, True, False) == [[], []]
    assert shards(1, False, True) == [[[0, 0]], [[0, 0]]]
    assert shards(0, False, True) == [[], []] and shards(0, False, False) == [[], []]


def test_torch_wheel_bundles_gnu_libgomp():
    """The torch wheel's OpenMP runtime is GNU libgomp (torch/lib/libgomp*.so*), which reads OMP_* and
    GOMP_* but no KMP_* variable: the library's own strings name the variables it reads."""
    import glob
    import torch

    libs = glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*.so*"))
    assert libs, "no bundled libgomp: re-check the page's claim for this torch build"
    assert "OpenMP" in torch.__config__.parallel_info()
    data = open(libs[0], "rb").read()
    assert b"OMP_NUM_THREADS" in data and b"GOMP_CPU_AFFINITY" in data
    assert b"KMP_AFFINITY" not in data and b"KMP_BLOCKTIME" not in data
