"""README.md: the two set-up commands work as written, install name, layout, convention, licenses."""
from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
README = (REPO / "README.md").read_text(encoding="utf-8")
SPEC = json.loads((Path(__file__).parent / "spec_facts.json").read_text())
EXAMPLE_CMD = ("python3 sub-skills/distributed-training-backends/scripts/validate_backend_config.py "
               "sub-skills/distributed-training-backends/examples/fsdp2.yaml")


def fenced(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", README, re.S)


def section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_the_two_setup_commands_are_shown_verbatim():
    blocks = [b.strip() for b in fenced("bash")]
    assert f"pip install -r requirements.txt\n{EXAMPLE_CMD}" in blocks
    assert "make test" in blocks


def test_example_command_runs_as_written():
    argv = shlex.split(EXAMPLE_CMD)
    argv[0] = sys.executable
    r = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=REPO, stdin=subprocess.DEVNULL)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "0 error(s)" in r.stdout + r.stderr, "the helper did not report a clean check"


def test_make_example_and_make_test_are_the_same_commands():
    make = (REPO / "Makefile").read_text()
    example = re.search(r"^example:.*\n((?:\t.*\n)+)", make, re.M).group(1)
    assert " ".join(example.replace("\\\n", " ").split()) == "$(PY) " + EXAMPLE_CMD.split(" ", 1)[1]
    assert re.search(r"^test: venv( +## .*)?$", make, re.M)
    assert "requirements.txt" in (REPO / "requirements.txt").name and \
        re.search(r"^PyYAML", (REPO / "requirements.txt").read_text(), re.M)


def test_install_name_is_the_router_name():
    name = yaml.safe_load((REPO / "SKILL.md").read_text().split("---\n")[1])["name"]
    install = section("Install as a skill")
    assert f"`{name}`" in install
    targets = re.findall(r"(?:git clone \S+|mkdir -p|tar -x -C) (\S+)", install)
    assert len(targets) == 3 and all(t.endswith(f"/{name}") for t in targets), targets


def test_layout_table_names_existing_paths():
    rows = [ln for ln in section("Layout").splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert rows
    for row in rows:
        first = row.strip("|").split("|")[0]
        for path in re.findall(r"`([^`]+)`|\]\(([^)]+)\)", first):
            path = path[0] or path[1]
            if "<" in path:
                path = path.split("<")[0]
            assert (REPO / path).exists(), f"README layout names {path!r}, which does not exist"


def test_sub_skill_front_matter_example_is_the_linted_convention():
    block = next(b for b in fenced("yaml") if "disable-model-invocation" in b)
    fm = yaml.safe_load(block.split("---\n")[1])
    assert set(fm) == {"name", "description", "disable-model-invocation", "metadata", "license"}
    assert fm["disable-model-invocation"] is True and fm["metadata"] == {"disco-role": "operating"}
    assert set(fm) - {"disable-model-invocation"} <= set(SPEC["skills_ref"]["ALLOWED_FIELDS"])
    assert "disable-model-invocation" not in SPEC["skills_ref"]["ALLOWED_FIELDS"]
    assert "disable-model-invocation" not in SPEC["quick_validate"]["ALLOWED_PROPERTIES"]


def test_portability_table_cites_the_recorded_validator_facts():
    text = section("Sub-skill front matter convention")
    for key, const in (("skills_ref", "ALLOWED_FIELDS"), ("quick_validate", "ALLOWED_PROPERTIES")):
        fact = SPEC[key]
        assert f"`{const}` in `{fact['file']}`, {fact['repository']} at `{fact['commit'][:7]}`" in text
    assert SPEC["skills_ref"]["unexpected_field_message"] in text


def test_licenses():
    lic = (REPO / "LICENSE").read_text()
    assert "Apache License" in lic and "Version 2.0" in lic
    assert "Apache-2.0, see [LICENSE](LICENSE)" in README
    listed = re.findall(r"`sub-skills/([a-z0-9-]+)/`", section("License"))
    mit = []
    for skill in sorted((REPO / "sub-skills").glob("*/SKILL.md")):
        fm = yaml.safe_load(skill.read_text().split("---\n")[1])
        if fm.get("license") == "MIT":
            mit.append(skill.parent.name)
    assert set(mit) <= set(listed), "an MIT sub-skill is missing from the README license note"
    for name in listed:
        lic_file = REPO / "sub-skills" / name / "LICENSE"
        assert lic_file.is_file() and lic_file.read_text().startswith("MIT License"), f"{name}/LICENSE"
