"""The CI guard in conftest.py must turn a skip into a failure."""
import subprocess
import sys
import textwrap


def test_skip_fails_under_ci(tmp_path, repo_root):
    (tmp_path / "conftest.py").write_text((repo_root / "tests" / "conftest.py").read_text())
    (tmp_path / "test_x.py").write_text(textwrap.dedent("""
        import pytest
        def test_skips():
            pytest.skip("package missing")
    """))
    env_ci = {"CI": "true", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, env=env_ci, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "1 failed" in r.stdout
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                       capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 skipped" in r.stdout
