"""Claims of sub-skills/failure-triage/references/build-failures.md about where JIT extension builds
go and the lock file (torch 2.13.0 cpp_extension, run in-process; nothing is compiled)."""
from __future__ import annotations

import sys

from torch.utils import cpp_extension
from torch.utils.file_baton import FileBaton


def test_default_build_root_carries_python_and_accelerator(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    d = cpp_extension._get_build_directory("fused_adam", False)
    tail = d.split("torch_extensions")[-1]
    assert tail.startswith(f"/py{sys.version_info.major}{sys.version_info.minor}")
    assert tail.endswith("/fused_adam")


def test_torch_extensions_dir_is_used_as_is(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    assert cpp_extension._get_build_directory("fused_adam", False) == str(tmp_path / "ext" / "fused_adam")


def test_a_leftover_lock_file_blocks_the_next_build(tmp_path):
    lock = tmp_path / "lock"
    lock.write_text("")  # left behind by a killed build
    baton = FileBaton(str(lock))
    assert baton.try_acquire() is False  # the loader then waits while the file exists
    lock.unlink()
    assert baton.try_acquire() is True
    baton.release()
