"""The signature catalog: schema, unique ids, patterns match their examples, sources are real.

`source.file` entries are proven against the installed pinned package: the template must occur
verbatim in that file under the package found by importlib (never imported). `source.cite`
entries (NCCL, CUDA, the OS, packages that are not installed) name where the text comes from.
"""
from __future__ import annotations

import importlib.util
import functools
import re
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CATALOG = REPO / "sub-skills" / "failure-triage" / "catalog"

LIBRARIES = {"accelerate", "deepspeed", "torch", "transformers", "dalle-pytorch", "nccl", "cuda", "os",
             "python", "pip", "gcc", "nvcc", "ninja", "triton", "peft", "trl", "bitsandbytes", "slurm",
             "horovod", "apex", "glibc", "linux", "docker", "huggingface-hub", "safetensors", "wandb",
             "tokenizers", "datasets", "numpy", "setuptools", "pydantic", "flash-attn", "mpi", "kubernetes"}
PINNED = {"accelerate": "1.15.0", "deepspeed": "0.19.8", "torch": "2.13.0", "dalle-pytorch": "1.6.6"}
# top-level import name -> distribution name, for locating source.file
PACKAGE_OF = {"accelerate": "accelerate", "deepspeed": "deepspeed", "torch": "torch",
              "dalle_pytorch": "dalle-pytorch"}
KEYS = {"id", "library", "versions", "role", "pattern", "example", "source", "cause", "fix", "reference",
        "specializes", "wordings"}
ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)+$")


def _entries():
    out = []
    for path in sorted(CATALOG.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or []
        assert isinstance(data, list), f"{path.name}: top level must be a list"
        for n, e in enumerate(data):
            out.append((f"{path.name}[{n}]", e))
    return out


ENTRIES = _entries()


def test_catalog_files_exist_and_load(catalog):
    assert list(CATALOG.glob("*.yaml")), "no catalog files"
    assert len(catalog.entries) == len(ENTRIES)


@pytest.mark.parametrize("where,e", ENTRIES, ids=[w for w, _ in ENTRIES])
def test_schema(where, e):
    assert isinstance(e, dict), where
    missing = KEYS - {"reference", "specializes", "wordings"} - set(e)
    assert not missing, f"{where}: missing {missing}"
    assert set(e) <= KEYS, f"{where}: unknown keys {set(e) - KEYS}"
    assert ID.match(e["id"]), f"{where}: id not kebab-case: {e['id']}"
    lib = e["library"]
    assert lib in LIBRARIES, f"{where}: library {lib!r} not known to the test"
    assert e["id"].startswith(lib.replace("dalle-pytorch", "dalle") + "-") or \
        e["id"].split("-")[0] == lib.split("-")[0], f"{where}: id not prefixed by its library"
    assert e["role"] in ("root", "cascade", "warning"), where
    for k in ("versions", "pattern", "example", "cause", "fix"):
        assert isinstance(e[k], str) and e[k].strip(), f"{where}: {k} must be a non-empty string"
    if lib in PINNED and isinstance(e["source"], dict) and "file" in e["source"]:
        assert PINNED[lib] in e["versions"] or _in_range(PINNED[lib], e["versions"]), \
            f"{where}: versions {e['versions']!r} must include the pinned {PINNED[lib]}"


def _in_range(version: str, spec: str) -> bool:
    """'>=0.20,<=1.15.0'-style ranges; a range naming the pinned version is also accepted above."""
    def key(v):
        return tuple(int(x) for x in re.findall(r"\d+", v)[:3])
    ok = False
    for part in spec.split(","):
        m = re.match(r"\s*(>=|<=|>|<|==)\s*([\d.]+)\s*$", part)
        if not m:
            return False
        op, v = m.groups()
        a, b = key(version), key(v)
        ok = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b}[op]
        if not ok:
            return False
    return ok


def test_ids_unique():
    ids = [e["id"] for _, e in ENTRIES]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicate ids: {dup}"


@pytest.mark.parametrize("where,e", ENTRIES, ids=[w for w, _ in ENTRIES])
def test_pattern_matches_example_as_cleaned(where, e, triage):
    text, _, _ = triage.clean(e["example"])
    assert re.search(e["pattern"], text.strip()), f"{where}: pattern does not match its example"


@pytest.mark.parametrize("where,e", ENTRIES, ids=[w for w, _ in ENTRIES])
def test_example_is_classified_as_this_entry(where, e, catalog, triage):
    """The example line is attributed to this entry: no other entry, of any role or file, shadows it."""
    text, _, _ = triage.clean(e["example"])
    got = catalog.match(text.strip())
    assert got is not None and got.id == e["id"], f"{where}: example is matched by {got.id if got else None}"


def _package_root(top: str) -> Path:
    spec = importlib.util.find_spec(top)
    assert spec is not None and spec.origin, f"{top} is not installed"
    return Path(spec.origin).parent


@functools.lru_cache(maxsize=4)
def _library_bytes(path: Path) -> bytes:
    """A compiled library read once per session (libtorch_cpu.so is several hundred MB)."""
    return path.read_bytes()


@pytest.mark.parametrize("where,e", ENTRIES, ids=[w for w, _ in ENTRIES])
def test_source_template_is_verbatim_in_the_pinned_package(where, e):
    src = e["source"]
    assert isinstance(src, dict), where
    if "cite" in src:
        assert set(src) == {"cite"} and isinstance(src["cite"], str) and len(src["cite"]) >= 8, where
        return
    assert set(src) == {"file", "function", "template"}, f"{where}: source needs file, function, template"
    top, _, rest = src["file"].partition("/")
    assert top in PACKAGE_OF, f"{where}: {top} is not an installed pinned package; use cite"
    path = _package_root(top) / rest
    assert path.is_file(), f"{where}: {src['file']} not in the installed {top}"
    if path.suffix != ".py":
        # a message raised in C++: the template is searched in the compiled library's bytes
        assert src["template"].encode() in _library_bytes(path), f"{where}: template not in {src['file']}"
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    assert src["template"] in text, f"{where}: template not found verbatim in {src['file']}"
    func = src["function"].split(".")[-1]
    if func == "<module>":  # raised or defined at module level
        return
    assert re.search(rf"\bdef {re.escape(func)}\b|\bclass {re.escape(func)}\b", text), \
        f"{where}: function {src['function']} not defined in {src['file']}"


@pytest.mark.parametrize("where,e", [x for x in ENTRIES if x[1].get("reference")],
                         ids=[w for w, x in ENTRIES if x.get("reference")])
def test_reference_exists(where, e):
    ref, _, anchor = e["reference"].partition("#")
    path = REPO / ref
    assert ref.startswith("sub-skills/failure-triage/references/") and path.is_file(), where
    if anchor:
        slugs = {_slug(h) for h in re.findall(r"^#+\s+(.+)$", path.read_text(encoding="utf-8"), re.M)}
        assert anchor in slugs, f"{where}: no heading for #{anchor} in {ref}"


def _slug(heading: str) -> str:
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


@pytest.mark.parametrize("where,e", ENTRIES, ids=[w for w, _ in ENTRIES])
def test_pattern_stays_fast_on_adversarial_lines(where, e, triage):
    """No catastrophic backtracking: the longest line a pattern sees, built from its own example."""
    import time
    rx = re.compile(e["pattern"])
    ex = e["example"]
    head = ex.split(" ", 1)[0] + " "
    probes = [(ex * 60)[: triage.MATCH_CHARS], (ex[:-1] * 60)[: triage.MATCH_CHARS],
              (head * 600)[: triage.MATCH_CHARS], ("a" * triage.MATCH_CHARS)]
    t0 = time.perf_counter()
    for p in probes:
        rx.search(p)
    assert time.perf_counter() - t0 < 0.5, f"{where}: pattern is slow on repeated input"


WORDED = [(w, e, x) for w, e in ENTRIES for x in e.get("wordings") or []]


@pytest.mark.parametrize("where,e,wording", WORDED, ids=[f"{w}:{x['versions'][:30]}" for w, _, x in WORDED])
def test_every_listed_wording_is_matched_by_its_entry(where, e, wording, catalog, triage):
    """Issue 20 item 3: an entry matches what stays the same across versions; each wording it lists
    (with the versions that print it) is attributed to it, as a line and inside a log."""
    assert set(wording) == {"text", "versions"} and wording["versions"]
    text = triage.clean(wording["text"])[0].strip()
    got = catalog.match(text)
    assert got is not None and got.id == e["id"], (where, wording, got and got.id)
    res = triage.triage_text("step 1\n" + wording["text"] + "\n")
    if e["role"] == "root":
        assert res["root_cause"] and res["root_cause"]["signature"] == e["id"], (where, wording, res["root_cause"])
    else:  # warnings and cascades are reported as findings, never as the root cause
        assert e["id"] in {f["signature"] for f in res["findings"]}, (where, wording, res)


def test_version_independent_cores_list_their_wordings(catalog):
    """Entries whose wording changed across releases list each wording (checked at named tags)."""
    for eid in ("nccl-watchdog-timeout", "torch-fsdp-flat-param-requires-grad-reported",
                "deepspeed-op-cuda-version-mismatch", "deepspeed-batch-size-missing",
                "deepspeed-fp16-overflow-skip", "deepspeed-save-16bit-not-gathered",
                "deepspeed-op-cuda-home-missing", "deepspeed-op-not-compatible",
                "deepspeed-op-torch-version-mismatch", "deepspeed-launcher-killing-subprocess",
                "deepspeed-launcher-bad-hostfile", "accelerate-launch-conflicting-modes",
                "accelerate-deepspeed-dataloader-batch-size", "accelerate-quantized-model-multi-device",
                "torch-fsdp-flat-param-dtype-reported", "torch-pg-initialized-twice"):
        assert len(catalog.by_id[eid].wordings) >= 2, eid
    assert len(catalog.by_id["torch-fsdp-flat-param-requires-grad-reported"].wordings) == 3  # 1.12, 1.13-2.0, >=2.1
    assert sum(1 for e in catalog.entries if e.wordings) >= 25
