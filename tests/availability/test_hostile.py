"""Hostile environments: the checker must give a correct answer or a one-line diagnostic with a
documented exit code -- never a traceback, never a hang.  Every environment is built on a
temporary path and run with site-packages off (-S), so only the hostile entries are seen."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE.parents[1] / "sub-skills" / "distributed-and-backends" / "scripts"
SCRIPT = SCRIPTS / "check_backend_availability.py"


def _w(path: Path, data="") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(textwrap.dedent(data))


def _run(*args, env=None, flags=("-S",), timeout=60, pre=()):
    full = dict(os.environ)
    full.pop("PYTHONPATH", None)
    full.update(env or {})
    return subprocess.run([*pre, sys.executable, *flags, str(SCRIPT), *args], capture_output=True,
                          env=full, timeout=timeout)


def _clean(proc, rc):
    """The exit code is the documented one and stderr holds at most one line, no traceback."""
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == rc, (proc.returncode, err)
    assert "Traceback" not in err and len(err.splitlines()) <= 1, err
    return err


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("hostile")
    s = root / "site"
    # torch: empty METADATA (version from the folder name); version.py nested too deep for ast
    _w(s / "torch-2.0.dist-info" / "METADATA", "")
    _w(s / "torch" / "__init__.py", "")  # no __version__: the CUDA child must answer, not crash
    _w(s / "torch" / "version.py", "__version__ = " + "(" * 100000 + ")" * 100000 + "\ncuda = None\n")
    # accelerate: METADATA without Name and Version, folder name without version, no module
    _w(s / "accelerate.dist-info" / "METADATA", "Metadata-Version: 2.1\nSummary: x\n")
    # deepspeed: non-UTF-8 METADATA and RECORD, build info with mixed-type op names
    _w(s / "deepspeed-0.1.dist-info" / "METADATA", b"Name: deepspeed\nVersion: 0.\xff1\n")
    _w(s / "deepspeed-0.1.dist-info" / "RECORD", b"\xff\xfe\n../x\n,,,\n")
    _w(s / "deepspeed" / "__init__.py", "")
    _w(s / "deepspeed" / "git_version_info_installed.py",
       "installed_ops = {1: True, 'a': True, 'b': False}\nversion = 5\naccelerator_name = ['x']\n")
    # transformers: METADATA is /dev/zero (endless); triton: METADATA is a FIFO (blocks on open)
    (s / "transformers.dist-info").mkdir()
    os.symlink("/dev/zero", s / "transformers.dist-info" / "METADATA")
    (s / "triton.dist-info").mkdir()
    os.mkfifo(s / "triton.dist-info" / "METADATA")
    # wandb: METADATA is a directory; the module lives in a zip on sys.path
    (s / "wandb.dist-info" / "METADATA").mkdir(parents=True)
    # horovod: egg-info as a file, not a folder
    _w(s / "horovod-0.28.egg-info", "Metadata-Version: 1.0\nName: horovod\nVersion: 0.28\n")
    # bitsandbytes: top_level.txt with control bytes, '/', '..'
    _w(s / "bitsandbytes-1.0.dist-info" / "METADATA", "Name: bitsandbytes\nVersion: 1.0\n")
    _w(s / "bitsandbytes-1.0.dist-info" / "top_level.txt", b"\x00\x01\n/\n..\n")
    # torchao: a 5000-digit version (int() refuses > 4300 digits), with its module
    _w(s / "torchao-1.dist-info" / "METADATA", "Name: torchao\nVersion: 1." + "1" * 5000 + "\n")
    _w(s / "torchao" / "__init__.py", "")
    # odd normalisation of distribution names
    _w(s / "Megatron_Core-0.9.dist-info" / "METADATA", "Name: Megatron_Core\nVersion: 0.9\n")
    _w(s / "megatron" / "core" / "__init__.py", "")
    _w(s / "Dalle_PyTorch-1.6.6.dist-info" / "METADATA", "Name: DALLE.pytorch\nVersion: 1.6.6\n")
    # a .pth file is never executed by the checker (it would exit 9)
    _w(s / "evil.pth", "import os; os._exit(9)\n")
    # an undecodable file name and a dist-info that is a symlink loop
    os.mkdir(os.path.join(os.fsencode(s), b"bad\xffname-1.0.dist-info"))
    os.symlink(s / "loop-1.0.dist-info", s / "loop-1.0.dist-info")
    # sys.path entries: a file, a broken symlink, a symlink loop, a zip, a corrupt zip, a missing dir
    _w(root / "afile", "hi\n")
    os.symlink(root / "nowhere", root / "broken")
    os.symlink(root / "loop", root / "loop")
    with zipfile.ZipFile(root / "mods.zip", "w") as zf:
        zf.writestr("wandb.py", "x = 1\n")
    _w(root / "corrupt.zip", b"PK\x03\x04garbage")
    entries = [s, root / "afile", root / "broken", root / "loop", root / "mods.zip",
               root / "corrupt.zip", root / "missing"]
    env = {"PYTHONPATH": os.pathsep.join(map(str, entries))}
    proc = _run("--include-cuda", "--timeout", "20", "--json", env=env)
    return {"root": root, "env": env, "proc": proc}


def test_hostile_static_answers(hostile):
    proc = hostile["proc"]
    _clean(proc, 0)  # not 9 (.pth not run), not 3 (the CUDA child answered), not 4
    j = json.loads(proc.stdout)
    p = j["packages"]
    assert (p["torch"]["state"], p["torch"]["version"]) == ("installed", "2.0")
    # version.py too deep for ast: the one-line assignments are still read (cuda = None)
    assert p["torch"]["facts"]["flavour"] == "cpu" and p["torch"]["facts"]["__version__"] is None
    assert p["accelerate"]["state"] == "metadata_only" and not p["accelerate"]["version"]
    assert p["deepspeed"]["state"] == "installed" and p["deepspeed"]["version"] == "0.\ufffd1"
    assert p["deepspeed"]["facts"]["prebuilt_ops"] == ["1", "a"]
    assert p["transformers"]["state"] == "metadata_only" and not p["transformers"]["version"]
    assert p["triton"]["state"] == "metadata_only"
    assert p["wandb"]["state"] == "installed"
    assert p["wandb"]["module_path"].endswith(os.path.join("mods.zip", "wandb.py"))
    assert (p["horovod"]["state"], p["horovod"]["version"]) == ("metadata_only", "0.28")
    assert (p["bitsandbytes"]["state"], p["bitsandbytes"]["version"]) == ("metadata_only", "1.0")
    assert p["torchao"]["state"] == "installed" and len(p["torchao"]["version"]) == 5002
    assert (p["megatron-core"]["state"], p["megatron-core"]["dist"]) == ("installed", "Megatron_Core")
    assert (p["dalle-pytorch"]["state"], p["dalle-pytorch"]["version"]) == ("metadata_only", "1.6.6")
    cuda = j["cuda"]
    assert cuda["status"] == "error" and cuda["exception"] == "AttributeError", cuda
    assert j["verdicts"]["accelerate-fp8-torchao"]["verdict"] == "no"
    assert j["checker"]["total_seconds"] < 20


def test_hostile_text_output_in_ascii_and_c_locale(hostile):
    for extra, flags in (({"PYTHONIOENCODING": "ascii"}, ("-S",)),
                         ({"LC_ALL": "C", "LANG": "C", "PYTHONIOENCODING": ""}, ("-S", "-X", "utf8=0"))):
        proc = _run(env=dict(hostile["env"], **extra), flags=flags)
        _clean(proc, 0)
        out = proc.stdout.decode("ascii")  # every byte is ASCII: undecodable text was escaped
        assert "deepspeed            installed      0.\\ufffd1" in out


def test_versionless_folder_and_odd_build_values(tmp_path):
    s = tmp_path
    _w(s / "torch-x.dist-info" / "METADATA", "Name: torch\nVersion: 2." + "9" * 5000 + "\n")
    _w(s / "torch" / "__init__.py", "")
    _w(s / "torch" / "version.py", "__version__ = 5\ncuda = '12.8'\nhip = None\n")
    _w(s / "accelerate-1.0.dist-info" / "METADATA", "Name: accelerate\nVersion: 1.0\n")
    _w(s / "accelerate" / "__init__.py", "")
    _w(s / "accelerate" / "utils" / "constants.py", 'FSDP2_PYTORCH_VERSION = "' + "9" * 5000 + '"\n')
    proc = _run("--require", "accelerate-fsdp2", "--json", env={"PYTHONPATH": str(s)})
    _clean(proc, 1)
    j = json.loads(proc.stdout)
    # the folder name "torch-x" has no version: METADATA's Name decides the key
    assert j["packages"]["torch"]["state"] == "installed"
    assert j["packages"]["torch"]["facts"]["flavour"] == "cuda"
    v = j["verdicts"]["accelerate-fsdp2"]
    assert v["verdict"] == "no" and "FSDP2 needs torch >= 999" in v["reason"]


@pytest.mark.parametrize("text,flavour", [
    ("#" * (2 * 1024 * 1024) + "\ncuda = '12.1'\n", "cuda"),          # over the ast limit: read by lines
    ("x = [1,\n" * 200000 + "\nhip = '6.2'\ncuda = None\n", "rocm"),  # big and a syntax error
    ("cuda = None\nhip = None\n" + "x = 1 +\n" * 400000, "cpu"),    # 3.2 MB, syntax error after
    ("\x00garbage\n", "unknown"),                                     # NUL byte, nothing readable
])
def test_huge_or_malformed_version_py(tmp_path, text, flavour):
    _w(tmp_path / "torch" / "__init__.py", "")
    _w(tmp_path / "torch" / "version.py", text)
    proc = _run("--json", env={"PYTHONPATH": str(tmp_path)})
    _clean(proc, 0)
    j = json.loads(proc.stdout)
    assert j["packages"]["torch"]["facts"]["flavour"] == flavour
    assert j["checker"]["total_seconds"] < 10


def test_many_dist_infos_stay_bounded(tmp_path):
    for i in range(5000):
        d = tmp_path / (f"pkg{i}-1.0.dist-info" if i % 2 else f"pkg{i}.dist-info")
        d.mkdir()
        (d / "METADATA").write_text(f"Name: pkg{i}\nVersion: 1.0\n")
    proc = _run("--json", env={"PYTHONPATH": str(tmp_path)})
    _clean(proc, 0)
    j = json.loads(proc.stdout)
    # linear: ~25 us per dist-info measured; 10 s only catches a hang or a quadratic blow-up
    assert j["checker"]["total_seconds"] < 10
    assert j["duplicate_installs"] == []


def test_non_str_sys_path_entries(tmp_path):
    _w(tmp_path / "torch" / "__init__.py", "")
    code = ("import sys, runpy, pathlib; sys.path += [%r, pathlib.Path('/'), None, 5]; "
            "sys.argv = [%r, '--json']; runpy.run_path(sys.argv[0], run_name='__main__')"
            % (os.fsencode(tmp_path), str(SCRIPT)))
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, timeout=60)
    _clean(proc, 0)
    j = json.loads(proc.stdout)
    assert j["packages"]["torch"]["state"] == "module_only"
    assert str(tmp_path) in j["python"]["path_scanned"]


@pytest.mark.parametrize("args,rc,words", [
    (["--require", ""], 2, "empty --require name"),
    (["--require", ","], 2, "empty --require name"),
    (["--require", "nosuch"], 2, "unknown --require name(s): nosuch"),
    (["--probe", "--only", ""], 2, "empty --only name"),
    (["--only", "torch"], 2, "--only needs --probe"),
    (["--timeout", "0"], 2, "--timeout must be > 0"),
    (["--timeout", "-1"], 2, "--timeout must be > 0"),
    (["--timeout", "nan"], 2, "--timeout must be > 0"),
    (["--timeout", "inf"], 2, "--timeout must be > 0"),
    (["--timeout", "abc"], 2, "invalid float value"),
    (["--jobs", "0"], 2, "--jobs must be >= 1"),
    (["--jobs", "-3"], 2, "--jobs must be >= 1"),
    (["--format", "xml"], 2, "invalid choice"),
])
def test_odd_arguments(args, rc, words, tmp_path):
    err = _clean(_run(*args, env={"PYTHONPATH": str(tmp_path)}), rc)
    assert words in err and err.startswith("check_backend_availability: error: ")


def test_require_names_normalised_and_deduplicated(tmp_path):
    _w(tmp_path / "torch-2.13.0.dist-info" / "METADATA", "Name: torch\nVersion: 2.13.0\n")
    _w(tmp_path / "torch" / "__init__.py", "")
    proc = _run("--require", "Torch,DALLE_PyTorch", "--require", "torch", "--json",
                env={"PYTHONPATH": str(tmp_path)})
    _clean(proc, 1)  # dalle-pytorch is not installed here
    req = json.loads(proc.stdout)["requirements"]
    assert [(r["name"], r["met"]) for r in req] == [("torch", True), ("dalle-pytorch", False)]


def test_closed_or_broken_stdout_and_closed_stderr(tmp_path):
    env = {"PYTHONPATH": str(tmp_path)}
    # stdout closed (>&-): the exit code still answers --require; one line on stderr
    err = _clean(_run("--require", "torch", env=env, pre=("sh", "-c", 'exec "$@" >&-', "sh")), 1)
    assert "stdout is closed" in err
    # stderr closed and a usage error: still exit 2
    _clean(_run("--require", "nosuch", env=env, pre=("sh", "-c", 'exec "$@" 2>&-', "sh")), 2)
    # the reader went away before the report was written (what `| head -c1` does to a long report)
    full = dict(os.environ, **env)
    full.pop("PYTHONIOENCODING", None)
    p = subprocess.Popen([sys.executable, "-S", str(SCRIPT), "--json"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=full)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and "Traceback" not in err and len(err.splitlines()) <= 1, err


def test_scan_survives_directory_failing_mid_iteration(monkeypatch, tmp_path):
    """A directory without permission cannot be simulated as root; fail scandir itself."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        import availability.scan as scan
    finally:
        sys.path.remove(str(SCRIPTS))
    _w(tmp_path / "a" / "torch" / "__init__.py", "")
    real = os.scandir

    class Failing:
        def __init__(self, it):
            self.it, self.n = it, 0

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.it.close()

        def __iter__(self):
            return self

        def __next__(self):
            self.n += 1
            if self.n > 1:
                raise PermissionError(13, "Permission denied")
            return next(self.it)

    def fake(path="."):
        if str(path).endswith("denied"):
            raise PermissionError(13, "Permission denied", str(path))
        return Failing(real(path))

    monkeypatch.setattr(scan.os, "scandir", fake)
    env = scan.Environment([str(tmp_path / "denied"), str(tmp_path / "a")])
    assert env.has_module("torch")
    assert scan._read(str(tmp_path)) is None  # a directory is not read as a file


def test_symlinked_alias_of_one_directory_is_not_a_duplicate_install(tmp_path):
    real = tmp_path / "real"
    _w(real / "torch-2.0.dist-info" / "METADATA", "Name: torch\nVersion: 2.0\n")
    _w(real / "torch" / "__init__.py", "")
    os.symlink(real, tmp_path / "alias")
    proc = _run("--json", env={"PYTHONPATH": os.pathsep.join([str(real), str(tmp_path / "alias")])})
    _clean(proc, 0)
    j = json.loads(proc.stdout)
    assert j["duplicate_installs"] == [] and j["packages"]["torch"]["state"] == "installed"
    assert str(tmp_path / "alias") not in j["python"]["path_scanned"]


def test_probe_in_hostile_environment(hostile):
    proc = _run("--probe", "--only", "triton,deepspeed,wandb", "--timeout", "20", "--json", env=hostile["env"])
    _clean(proc, 0)
    probes = json.loads(proc.stdout)["probes"]
    assert probes["triton"]["status"] == "not_installed"  # its METADATA is a FIFO; no module
    assert probes["deepspeed"]["status"] == "ok"
    assert probes["wandb"]["status"] == "ok"  # imported from the zip on sys.path


def test_build_values_json_cannot_hold(tmp_path):
    """literal_eval accepts tuple keys, sets, bytes and 1e999: the JSON stays strict (no
    Infinity/NaN, str keys) and a non-string cuda/hip makes the flavour unknown, not 'cuda'."""
    _w(tmp_path / "torch" / "__init__.py", "")
    _w(tmp_path / "torch" / "version.py", "__version__ = 1e999\ncuda = -1e999\nhip = None\n")
    _w(tmp_path / "deepspeed" / "__init__.py", "")
    _w(tmp_path / "deepspeed" / "git_version_info_installed.py",
       "installed_ops = {(1, 2): True, 'x': 1e999}\nversion = {1, 2}\naccelerator_name = b'\\xff'\n")
    proc = _run("--json", env={"PYTHONPATH": str(tmp_path)})
    _clean(proc, 0)

    def no_constants(name):
        raise AssertionError("non-standard JSON constant " + name)

    j = json.loads(proc.stdout, parse_constant=no_constants)
    t = j["packages"]["torch"]["facts"]
    assert (t["flavour"], t["__version__"], t["cuda"]) == ("unknown", "inf", "-inf")
    bi = j["packages"]["deepspeed"]["facts"]["build_info"]
    assert bi == {"version": [1, 2], "installed_ops": {"(1, 2)": True, "x": "inf"}, "accelerator_name": "b'\\xff'"}
    _clean(_run(env={"PYTHONPATH": str(tmp_path)}), 0)  # and the text table


def _ignore_sigint():
    import signal
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("sig,rc,inherit_ignored", [("SIGTERM", 143, False), ("SIGINT", 130, False),
                                                     ("SIGINT", 130, True)])
def test_signal_kills_hanging_probe_children(tmp_path, sig, rc, inherit_ignored):
    """inherit_ignored: started by a parent that ignores SIGINT (nohup, `cmd &` in a script) -- Python
    then installs no KeyboardInterrupt handler of its own, so the checker must install it itself."""
    import signal
    import time
    _w(tmp_path / "torchao-1.0.dist-info" / "METADATA", "Name: torchao\nVersion: 1.0\n")
    mark = tmp_path / "pid"
    _w(tmp_path / "torchao" / "__init__.py",
       f"import os, time\nopen({str(mark)!r}, 'w').write(str(os.getpid()))\ntime.sleep(300)\n")
    full = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = subprocess.Popen([sys.executable, "-S", str(SCRIPT), "--probe", "--only", "torchao", "--timeout", "120"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full,
                         preexec_fn=_ignore_sigint if inherit_ignored else None)
    deadline = time.monotonic() + 30
    while not (mark.exists() and mark.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child = int(mark.read_text())
    p.send_signal(getattr(signal, sig))
    out, err = p.communicate(timeout=30)
    assert p.returncode == rc, err
    assert "Traceback" not in err.decode() and len(err.decode().splitlines()) == 1, err
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):  # the hanging child did not outlive the checker
        os.kill(child, 0)


FAKE_GPU_TORCH = '''
import contextlib, types
__version__ = "2.13.0"
version = types.SimpleNamespace(cuda="12.8", hip=None)
class _T:
    def __mul__(self, o): return self
    def sum(self): return self
    def item(self): return 8.0
def ones(*a, **k): return _T()
def _props(i):
    if i == 0:
        raise RuntimeError("CUDA error: device-side assert\\nmore")
    if i == 1:
        return types.SimpleNamespace(name="Weird", major="x", minor=None, total_memory=1, multi_processor_count=1)
    return types.SimpleNamespace(name="H200", major=9, minor=0, total_memory=2**30, multi_processor_count=132)
cuda = types.SimpleNamespace(is_available=lambda: True, device_count=lambda: 3, get_device_properties=_props,
                             device=lambda i: contextlib.nullcontext(), is_bf16_supported=lambda **k: True,
                             synchronize=lambda: None, nccl=types.SimpleNamespace(version=lambda: (2, 27, 3)))
'''


def test_cuda_child_devices_with_unreadable_properties(tmp_path):
    """A torch whose device properties raise or are not numbers (exit 4 before: KeyError 'capability')."""
    for name, version, mod in (("torch", "2.13.0", "torch"), ("accelerate", "1.15.0", "accelerate"),
                               ("transformer-engine", "2.5.0", "transformer_engine")):
        _w(tmp_path / f"{mod}-{version}.dist-info" / "METADATA", f"Name: {name}\nVersion: {version}\n")
        _w(tmp_path / mod / "__init__.py", FAKE_GPU_TORCH if mod == "torch" else "")
    _w(tmp_path / "transformer_engine" / "pytorch" / "__init__.py", "")
    env = {"PYTHONPATH": str(tmp_path)}
    proc = _run("--include-cuda", "--require", "bf16,gpu", "--json", env=env)
    _clean(proc, 1)  # bf16 unmet: two of three devices cannot say
    j = json.loads(proc.stdout)
    devs = j["cuda"]["devices"]
    assert devs[0]["error"] == "RuntimeError: CUDA error: device-side assert"
    assert devs[1]["name"] == "Weird" and "error" in devs[1]
    assert devs[2]["capability"] == [9, 0] and devs[2]["fp8"] is True
    assert [(r["name"], r["met"]) for r in j["requirements"]] == [("bf16", False), ("gpu", True)]
    v = j["verdicts"]["accelerate-fp8-te"]
    assert v["verdict"] == "unknown" and "GPU 0: RuntimeError" in v["reason"], v
    out = _run("--include-cuda", env=env)
    _clean(out, 0)
    assert b"GPU 2: H200  cc 9.0" in out.stdout


def test_unreadable_files_and_directories():
    """chmod 000 on a sys.path entry, a METADATA, a dist-info folder and the build files.  Root reads
    through any mode, so as root the checker runs as 'nobody' (setpriv, util-linux)."""
    import shutil
    import stat
    import tempfile
    root = Path(tempfile.mkdtemp(prefix="avail-perm-"))
    try:
        root.chmod(0o755)
        s = root / "site"
        _w(s / "torch" / "__init__.py", "")
        _w(s / "torch" / "version.py", "cuda = None\nhip = None\n")
        _w(s / "torch-2.0.dist-info" / "METADATA", "Name: torch\nVersion: 2.0\n")
        _w(s / "accelerate-1.0.dist-info" / "METADATA", "Name: accelerate\nVersion: 1.0\n")
        _w(s / "accelerate" / "__init__.py", "")
        _w(s / "deepspeed" / "__init__.py", "")
        _w(s / "deepspeed" / "git_version_info_installed.py", "installed_ops = {'x': True}\n")
        _w(s / "deepspeed-0.19.8.dist-info" / "METADATA", "Name: deepspeed\n")
        (root / "denied").mkdir()
        for p in (root / "denied", s / "torch-2.0.dist-info" / "METADATA", s / "torch" / "version.py",
                  s / "deepspeed" / "git_version_info_installed.py", s / "accelerate-1.0.dist-info"):
            p.chmod(0)
        pre = ()
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            assert setpriv, "running as root needs setpriv (util-linux) to drop privileges for this test"
            pre = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
            for d in root.rglob("*"):
                if d.is_dir() and d.stat().st_mode & 0o777:
                    d.chmod(0o755)
                elif d.is_file() and d.stat().st_mode & 0o777:
                    d.chmod(0o644)
        proc = _run("--json", env={"PYTHONPATH": os.pathsep.join([str(root / "denied"), str(s)])}, pre=pre)
        _clean(proc, 0)
        p = json.loads(proc.stdout)["packages"]
        assert (p["torch"]["state"], p["torch"]["version"], p["torch"]["facts"]["flavour"]) == \
            ("installed", "2.0", "unknown")
        assert (p["accelerate"]["state"], p["accelerate"]["version"]) == ("installed", "1.0")
        assert (p["deepspeed"]["state"], p["deepspeed"]["version"]) == ("installed", "0.19.8")
        assert p["deepspeed"]["facts"]["build_info"] is None
    finally:
        for d in [root, *root.rglob("*")]:
            try:
                d.chmod(stat.S_IRWXU)
            except OSError:
                pass
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("args,wanted", [
    (["--require", "deepsped"], "deepsped (did you mean deepspeed?)"),
    (["--require", "acelerate-fsdp2,bf16"], "acelerate-fsdp2 (did you mean accelerate-fsdp2?)"),
    (["--probe", "--only", "torhc"], "torhc (did you mean torch?)"),
    (["--require", "zzzz"], "unknown --require name(s): zzzz (see --help)"),
])
def test_unknown_names_suggest_the_closest(args, wanted, tmp_path):
    proc = _run(*args, env={"PYTHONPATH": str(tmp_path)})
    err = _clean(proc, 2)
    assert wanted in err, err


def test_nothing_installed_says_to_use_the_training_interpreter(tmp_path):
    text = _run(env={"PYTHONPATH": str(tmp_path)})
    out = text.stdout.decode()
    assert text.returncode == 0 and "advice: none of the" in out and "training environment's interpreter" in out
    doc = json.loads(_run("--json", env={"PYTHONPATH": str(tmp_path)}).stdout)
    assert len(doc["advice"]) == 1 and sys.executable in doc["advice"][0]
    # one tracked package present: no advice
    _w(tmp_path / "deepspeed-0.19.8.dist-info" / "METADATA", "Name: deepspeed\nVersion: 0.19.8\n")
    _w(tmp_path / "deepspeed" / "__init__.py", "")
    doc = json.loads(_run("--json", env={"PYTHONPATH": str(tmp_path)}).stdout)
    assert doc["advice"] == []


def test_long_reasons_wrap_in_text_mode(tmp_path):
    """Verdict reasons run to several hundred characters; text mode wraps them at 100 columns with
    continuation lines under the reason column, and the JSON keeps each reason whole."""
    from importlib import import_module
    sys.path.insert(0, str(SCRIPTS))
    try:
        render = import_module("availability.render")
    finally:
        sys.path.remove(str(SCRIPTS))
    reason = "word " * 60 + "end"
    block = render._row("  %-27s %-8s " % ("accelerate-fsdp2", "no"), reason)
    lines = block.splitlines()
    assert len(lines) >= 3 and all(len(ln) <= render.WIDTH for ln in lines), lines
    assert all(ln.startswith(" " * 39) and ln[39] != " " for ln in lines[1:])
    assert " ".join(ln.strip() for ln in lines).endswith(" ".join(reason.split()))
    out = _run(env={"PYTHONPATH": str(tmp_path)}).stdout.decode()
    verdicts = out.split("VERDICTS", 1)[1].split("\nexit code", 1)[0]
    assert max(len(ln) for ln in verdicts.splitlines()) <= render.WIDTH
