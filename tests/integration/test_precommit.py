"""The pre-commit hooks work for a user who adds this repository to .pre-commit-config.yaml.

One real `pre-commit` (pinned in requirements-test.txt) installs the hooks from a temporary git
copy of this repository, tagged like a release, into a temporary PRE_COMMIT_HOME, using the
README's snippet with the repository URL replaced by that copy. Creating the hook environment
needs the package index (PyYAML, setuptools), like any pre-commit user.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from integ_common import EXAMPLES, REPO, VERSION, precommit_snippet

HOOKS = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
BY_ID = {h["id"]: h for h in HOOKS}


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid", GIT_CONFIG_NOSYSTEM="1",
               HOME=str(cwd))
    r = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_hook_definitions():
    assert set(BY_ID) == {"validate-accelerate-config", "validate-deepspeed-config"}
    for h in HOOKS:
        assert h["language"] == "python" and h["entry"].startswith("validate-backend-config --format ")
        assert h["files"] and h["name"] and h["description"]
    assert BY_ID["validate-accelerate-config"]["types"] == ["yaml"]
    assert BY_ID["validate-deepspeed-config"]["types"] == ["json"]
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'validate-backend-config = "backend_validator.__main__:run"' in pyproject
    assert 'version = {file = "VERSION"}' in pyproject


@pytest.mark.parametrize("hook,path,match", [
    ("validate-accelerate-config", "default_config.yaml", True),
    ("validate-accelerate-config", "configs/accelerate_fsdp2.yml", True),
    ("validate-accelerate-config", "recipes/accelerate_configs/deepspeed_zero3.yaml", True),
    ("validate-accelerate-config", "Accelerate-Config.YAML", True),
    ("validate-accelerate-config", ".github/workflows/ci.yaml", False),
    ("validate-accelerate-config", "configs/model.yaml", False),
    ("validate-accelerate-config", "accelerate.json", False),
    ("validate-deepspeed-config", "ds_config.json", True),
    ("validate-deepspeed-config", "examples/deepspeed/ds_z3_config.json", True),
    ("validate-deepspeed-config", "configs/zero3_offload.json", True),
    ("validate-deepspeed-config", "train/deepspeed_configs/default.json", True),
    ("validate-deepspeed-config", "ds-zero3.json", True),
    ("validate-deepspeed-config", "configs/llama_ds.json", True),
    ("validate-deepspeed-config", "package.json", False),
    ("validate-deepspeed-config", "tsconfig.json", False),
    ("validate-deepspeed-config", "adsorption.json", False),
])
def test_default_files_patterns(hook, path, match):
    # pre-commit applies `files` with re.search to the repository-relative path
    assert bool(re.search(BY_ID[hook]["files"], path)) is match


def test_readme_snippet_pins_the_current_version():
    cfg = yaml.safe_load(precommit_snippet())
    (repo,) = cfg["repos"]
    assert repo["rev"] == f"v{VERSION}"
    assert [h["id"] for h in repo["hooks"]] == list(BY_ID)
    args = repo["hooks"][1]["args"]
    assert {"--consumer", "--world-size", "--strict"} <= set(args)


def _hook_repo(tmp: Path) -> Path:
    """A git copy of this repository's files (tracked and new, not ignored), tagged v<VERSION>."""
    dst = tmp / "bundle"
    dst.mkdir()
    files = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, timeout=60).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file() and not src.is_symlink():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    git(dst, "init", "-q")
    git(dst, "add", "-A")
    git(dst, "commit", "-q", "-m", "bundle")
    git(dst, "tag", f"v{VERSION}")
    return dst


def test_precommit_runs_the_hooks_from_a_clone(tmp_path):
    pytest.importorskip("pre_commit", reason="pre-commit is pinned in requirements-test.txt")
    if shutil.which("git") is None:
        pytest.fail("git is needed by pre-commit")
    hook_repo = _hook_repo(tmp_path)
    user = tmp_path / "user"
    (user / "accelerate_configs").mkdir(parents=True)
    shutil.copy(EXAMPLES / "fsdp2.yaml", user / "accelerate_configs" / "good.yaml")
    shutil.copy(EXAMPLES / "bad-fsdp2-local-state-dict.yaml", user / "accelerate_configs" / "bad.yaml")
    shutil.copy(EXAMPLES / "ds-zero3.json", user / "ds_config.json")
    (user / "notes.yaml").write_text("unrelated: [file\n")  # not matched by the hooks' files patterns
    config = precommit_snippet().replace("REPOSITORY-URL", hook_repo.as_uri())
    # the README's args (--consumer transformers --world-size 8 --strict) apply to the DeepSpeed hook
    (user / ".pre-commit-config.yaml").write_text(config)
    git(user, "init", "-q")
    git(user, "add", "-A")
    env = dict(os.environ, PRE_COMMIT_HOME=str(tmp_path / "pc-home"), HOME=str(tmp_path),
               PRE_COMMIT_COLOR="never", GIT_CONFIG_NOSYSTEM="1")

    def run(*files: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--files", *files], cwd=user, env=env,
                              capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)

    # one run over every file (creates the hook environment once): the bad config fails with path:line:col
    r = run("accelerate_configs/good.yaml", "accelerate_configs/bad.yaml", "ds_config.json", "notes.yaml")
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert re.search(r"validate Accelerate launch configs\.+Failed", out), out
    assert "accelerate_configs/bad.yaml:14:3: error acc-fsdp2-local-state-dict" in out, out
    assert "good.yaml:" not in out and "notes.yaml" not in out, out
    assert re.search(r"validate DeepSpeed JSON configs\.+Passed", out), out
    # the good files alone pass (the environment is reused)
    r = run("accelerate_configs/good.yaml", "ds_config.json")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert len(re.findall(r"\.+Passed", out)) == 2, out
    # the installed console script reports the tagged version
    envs = list((tmp_path / "pc-home").glob("repo*/py_env-*/bin/validate-backend-config"))
    assert envs, list((tmp_path / "pc-home").glob("*/*"))
    v = subprocess.run([str(envs[0]), "--version"], capture_output=True, text=True, timeout=60)
    assert v.stdout.startswith(f"validate_backend_config.py {VERSION} "), v.stdout + v.stderr


def test_packaged_modules_parse_with_the_oldest_python_pyproject_allows():
    """requires-python in pyproject.toml is honest about syntax (the grammar of that version)."""
    import ast
    m = re.search(r'^requires-python = ">=3\.(\d+)"$', (REPO / "pyproject.toml").read_text(), re.M)
    assert m, "pyproject.toml states requires-python"
    minor = int(m.group(1))
    pkg = REPO / "sub-skills" / "distributed-training-backends" / "scripts" / "backend_validator"
    files = sorted(pkg.rglob("*.py"))
    assert len(files) > 10
    for f in files:
        ast.parse(f.read_text(encoding="utf-8"), filename=str(f), feature_version=(3, minor))
