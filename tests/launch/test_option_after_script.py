"""A launcher option written after the script is the script's argument, not the launcher's (set-23 miss
s23-K10-04). Real `accelerate launch` (accelerate 1.15.0, CPU, one process, no port) with HF_HOME pointing
at an empty folder (no default config): `--config_file cfg.yaml SCRIPT` exports the file's mixed_precision;
`SCRIPT --config_file cfg.yaml` ignores the file (built-in default `no`) and hands the two words to the
script. Also: `accelerate test --config_file PATH` builds `accelerate-launch --config_file=PATH <test_script>`
(option first), read by replacing the subprocess runner, nothing launched."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PROBE = textwrap.dedent('''
    import json, os, sys
    print("PROBE " + json.dumps({"mp": os.environ.get("ACCELERATE_MIXED_PRECISION"), "argv": sys.argv[1:]}))
''')


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("order")
    (d / "probe.py").write_text(PROBE)
    (d / "cfg.yaml").write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: 'NO'\n"
                                "mixed_precision: bf16\nnum_machines: 1\nnum_processes: 1\nuse_cpu: true\n")
    (d / "hf").mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCELERATE_")}
    env["HF_HOME"] = str(d / "hf")
    launch = [sys.executable, "-m", "accelerate.commands.launch"]
    out = {}
    for name, args in {"before": ["--config_file", "cfg.yaml", "probe.py"],
                       "after": ["probe.py", "--config_file", "cfg.yaml"]}.items():
        p = subprocess.run(launch + args, cwd=d, env=env, capture_output=True, text=True, timeout=120)
        line = [ln for ln in p.stdout.splitlines() if ln.startswith("PROBE ")]
        assert line, p.stdout[-2000:] + p.stderr[-3000:]
        out[name] = json.loads(line[-1][6:])
    return out


def test_option_before_script_is_read_by_the_launcher(runs):
    assert runs["before"] == {"mp": "bf16", "argv": []}


def test_option_after_script_goes_to_the_script_and_the_file_is_ignored(runs):
    assert runs["after"] == {"mp": "no", "argv": ["--config_file", "cfg.yaml"]}


def test_accelerate_test_puts_config_file_before_its_script(monkeypatch):
    import accelerate.commands.test as test_mod

    seen = []

    class R:
        returncode = 1

    monkeypatch.setattr(test_mod, "execute_subprocess_async", lambda cmd, **kw: seen.append(cmd) or R())
    test_mod.test_command(test_mod.test_command_parser().parse_args(["--config_file", "two_gpus.yaml"]))
    cmd = seen[-1]
    assert cmd[:2] == ["accelerate-launch", "--config_file=two_gpus.yaml"]
    assert Path(cmd[2]).name == "test_script.py" and len(cmd) == 3
