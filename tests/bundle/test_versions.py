"""references/versions.md agrees with the pins (requirements-test.txt, Makefile) and the installed packages."""
from __future__ import annotations

import importlib.metadata as md
import importlib.util
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VERSIONS = (REPO / "references" / "versions.md").read_text(encoding="utf-8")


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def package_table() -> dict:
    """{canonical name: row dict} from the '## Packages' table."""
    section = VERSIONS.split("## Packages", 1)[1].split("\n## ", 1)[0]
    rows = [ln for ln in section.splitlines() if ln.startswith("|")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    table = {}
    for ln in rows[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        row = dict(zip(header, cells))
        table[canon(row["Package"])] = row
    return table


def pins() -> dict:
    out = {}
    for ln in (REPO / "requirements-test.txt").read_text().splitlines():
        ln = ln.split("#", 1)[0].strip()
        if ln:
            name, _, ver = ln.partition("==")
            assert ver, f"requirements-test.txt line not pinned with ==: {ln}"
            out[canon(name)] = ver
    return out


TABLE = package_table()


def test_table_lists_every_pin_with_the_same_version():
    p = pins()
    assert p, "no pins read"
    for name, ver in p.items():
        assert name in TABLE, f"{name} is pinned in requirements-test.txt but missing from versions.md"
        assert TABLE[name]["Version"] == ver, name
        assert TABLE[name]["Pinned in"] == "requirements-test.txt", name
    for name, row in TABLE.items():
        if row["Pinned in"] == "requirements-test.txt":
            assert name in p, f"versions.md says {name} is pinned in requirements-test.txt, it is not"


def test_dalle_pytorch_pin_is_the_makefile_no_deps_install():
    make = (REPO / "Makefile").read_text()
    row = TABLE["dalle-pytorch"]
    assert row["Pinned in"].startswith("Makefile")
    assert re.search(rf"--no-deps\s+dalle-pytorch=={re.escape(row['Version'])}\b", make)


@pytest.mark.parametrize("name", sorted(TABLE))
def test_installed_version_matches_table(name):
    installed = md.version(name)
    assert installed.split("+", 1)[0] == TABLE[name]["Version"], f"{name}: installed {installed}"


def test_torch_is_the_cpu_build_with_the_recorded_git_version():
    dist = md.distribution("torch")
    assert dist.version == "2.13.0+cpu" and "`2.13.0+cpu`" in TABLE["torch"]["Release tag / commit"]
    text = Path(dist.locate_file("torch/version.py")).read_text()
    git = re.search(r"git_version\s*=\s*'([0-9a-f]{40})'", text).group(1)
    assert f"`{git}`" in TABLE["torch"]["Release tag / commit"]


def test_release_tags_name_the_pinned_versions():
    assert TABLE["accelerate"]["Release tag / commit"] == f"tag `v{TABLE['accelerate']['Version']}`"
    assert TABLE["deepspeed"]["Release tag / commit"] == f"tag `v{TABLE['deepspeed']['Version']}`"
    assert f"tag `{TABLE['dalle-pytorch']['Version']}`" in TABLE["dalle-pytorch"]["Release tag / commit"]


def test_dalle_commit_matches_the_recorded_facts_file():
    facts = json.loads((REPO / "tests" / "dalle_siblings" / "facts_58c1e1a.json").read_text())
    assert facts["repository"] == "lucidrains/DALLE-pytorch"
    assert f"repository HEAD `{facts['commit']}`" in TABLE["dalle-pytorch"]["Release tag / commit"]
    assert re.fullmatch(r"[0-9a-f]{40}", facts["commit"])


def test_dalle_installed_without_dependencies_as_described():
    dist = md.distribution("dalle-pytorch")
    requires = {canon(re.split(r"[ ;<>=!\[(]", r, 1)[0]) for r in dist.requires or []}
    for named in ("torchvision", "transformers", "DALL-E", "taming-transformers-rom1504", "youtokentome",
                  "WebDataset"):
        assert canon(named) in requires, named
        assert f"`{named}`" in VERSIONS
    # `import dalle_pytorch` fails: its __init__ pulls dalle_pytorch.vae, whose imports are not installed
    pkg = Path(dist.locate_file("dalle_pytorch"))
    assert "from dalle_pytorch.vae import" in (pkg / "__init__.py").read_text()
    vae = (pkg / "vae.py").read_text()
    for module in ("taming", "omegaconf", "PIL", "requests"):
        assert re.search(rf"^(import|from) {module}\b", vae, re.M), module
        assert importlib.util.find_spec(module) is None, module
        assert f"`{module}`" in VERSIONS
    # the two small model dependencies are installed, pinned, and named
    for module, dist_name in (("axial_positional_embedding", "axial-positional-embedding"),
                              ("rotary_embedding_torch", "rotary-embedding-torch")):
        assert importlib.util.find_spec(module) is not None
        assert f"`{dist_name}` {md.version(dist_name)}" in VERSIONS
    assert "from pkg_resources import" in (pkg / "__init__.py").read_text()
    assert importlib.util.find_spec("pkg_resources") is None
    assert "`pkg_resources`" in VERSIONS


def test_runtime_requirement_stated():
    req = (REPO / "requirements.txt").read_text()
    assert re.search(r"^PyYAML>=6\.0$", req, re.M)
    assert "`PyYAML>=6.0`" in TABLE["pyyaml"]["Release tag / commit"]


def test_unpinned_transitive_versions_are_the_recorded_ones():
    stated = re.search(r"pydantic (\d+\.\d+\.\d+)", VERSIONS).group(1)
    assert md.version("pydantic") == stated, "DeepSpeed's config checks were verified with this pydantic"
    stated = re.search(r"setuptools (\d+\.\d+\.\d+)", VERSIONS).group(1)
    assert md.version("setuptools") == stated, "the pkg_resources statement depends on this setuptools"
    torch_req = [r for r in md.distribution("torch").requires or [] if r.startswith("setuptools")]
    assert any("setuptools>=77.0.3" in r.replace(" ", "") for r in torch_req), torch_req
    assert "`setuptools>=77.0.3`" in VERSIONS


def test_reverify_command_is_make_test_and_ci_runs_it():
    assert "```bash\nmake test\n```" in VERSIONS
    make = (REPO / "Makefile").read_text()
    assert re.search(r"^test: venv( +## .*)?\n\t\$\(VPY\) -m pytest \$\(PYTEST_PARALLEL\)$", make, re.M)
    assert re.search(r"^PYTEST_PARALLEL \?= -n auto --dist loadscope$", make, re.M)
    assert "-r requirements-test.txt" in make
    ci = (REPO / ".ci" / "run").read_text()
    assert re.search(r"^make test$", ci, re.M) and 'CI="${CI:-true}"' in ci
