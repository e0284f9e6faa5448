#!/usr/bin/env python3
"""Generate references/facts/<package>_api_history.jsonl: what a package's Python API gained, lost or
changed between releases (a maintainer tool; it reads wheels, never imports the package).

Two profiles:
  torch         every .py under torch/distributed/ and torch/nn/parallel/ (pinned 2.13.0)
  transformers  the Trainer's files: training_args.py, trainer*.py, integrations/deepspeed.py and
                integrations/fsdp.py (pinned 5.25.0)
For each wheel given (any platform: the Python sources are the same) and the installed pinned
release, it parses those files with `ast` and records:
  - the public names of each public module (no path part starting with "_", plus, for torch, the
    user-facing private packages torch.distributed._composable and torch.distributed._tensor): top-level
    functions and classes, public methods of public classes, and names an __init__.py re-exports;
  - each public function's and method's parameters and their defaults (source text);
  - each field of a public dataclass (TrainingArguments) and its default;
  - the environment variables named by string literals (torch: TORCH_*, TORCHELASTIC_*, PET_*;
    transformers: ACCELERATE_*, FSDP_*, TRANSFORMERS_*).
Consecutive versions are compared; each difference is one entry:
  {"lib": ..., "version": the first wheel that has the new state, "kind": add|remove|change,
   "area": ..., "names": [qualified name], "text": ..., "evidence": "<lib> A -> B (wheel sources)"}

The output is deterministic. tests/facts/test_release_changes.py re-derives the pinned side from the
installed package in CI: every name, parameter list and field default the history leaves present must
be there, so a wrong parse fails CI even where the wheels are absent; --write also records the
wheels' sha256 in tests/audit/<package>_api_history_sources.json.

Examples:
  python3 tests/facts/api_history.py torch --wheels /tmp/tw            # print counts, write nothing
  python3 tests/facts/api_history.py torch --wheels /tmp/tw --write
  python3 tests/facts/api_history.py transformers --wheels /tmp/tfw --write
  python3 tests/facts/api_history.py torch --snapshot                  # the installed surface as JSON

Exit codes: 0 done; 2 usage error (no wheels, unreadable wheel).
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Profile:
    lib: str
    pinned: str
    roots: tuple            # path prefixes (folders end with "/", files are exact)
    private_ok: tuple       # private folders whose names users import all the same
    env_re: re.Pattern
    areas: tuple            # (module prefix, area), first match wins
    where: str              # how entries name the code they compared

    @property
    def out(self) -> Path:
        return REPO / "references" / "facts" / f"{self.lib}_api_history.jsonl"

    @property
    def sources(self) -> Path:
        return REPO / "tests" / "audit" / f"{self.lib}_api_history_sources.json"

    def wheel_version(self, name: str):
        m = re.match(rf"^{self.lib}-(\d+\.\d+\.\d+)(?:-\d+)?-", name)
        return m.group(1) if m else None


TORCH = Profile(
    "torch", "2.13.0", ("torch/distributed/", "torch/nn/parallel/"),
    ("torch/distributed/_composable/", "torch/distributed/_tensor/"),
    re.compile(r"^(TORCH_[A-Z0-9_]+|TORCHELASTIC_[A-Z0-9_]+|PET_[A-Z0-9_]+)$"),
    (("torch.distributed.fsdp", "fsdp"), ("torch.distributed._composable.fsdp", "fsdp"),
     ("torch.distributed._composable", "composable"), ("torch.distributed.checkpoint", "checkpoint"),
     ("torch.distributed.tensor.parallel", "tensor-parallel"), ("torch.distributed.tensor", "dtensor"),
     ("torch.distributed._tensor", "dtensor"), ("torch.distributed.device_mesh", "device-mesh"),
     ("torch.distributed.elastic", "elastic"), ("torch.distributed.launcher", "elastic"),
     ("torch.distributed.run", "torchrun"), ("torch.distributed.pipelining", "pipelining"),
     ("torch.distributed.rpc", "rpc"), ("torch.distributed.algorithms", "ddp-hooks"),
     ("torch.distributed.optim", "optim"), ("torch.distributed.nn", "dist-nn"),
     ("torch.nn.parallel", "ddp"), ("torch.distributed.distributed_c10d", "c10d"), ("torch", "distributed")),
    "torch's Python distributed code")
TRANSFORMERS = Profile(
    "transformers", "5.25.0",
    ("transformers/training_args.py", "transformers/trainer.py", "transformers/trainer_utils.py",
     "transformers/trainer_pt_utils.py", "transformers/trainer_callback.py",
     "transformers/integrations/deepspeed.py", "transformers/integrations/fsdp.py"),
    (), re.compile(r"^(ACCELERATE_[A-Z0-9_]+|FSDP_[A-Z0-9_]+|TRANSFORMERS_[A-Z0-9_]+)$"),
    (("transformers.training_args", "training-args"), ("transformers.trainer_callback", "callbacks"),
     ("transformers.trainer_utils", "trainer-utils"), ("transformers.trainer_pt_utils", "trainer-utils"),
     ("transformers.trainer", "trainer"), ("transformers.integrations.deepspeed", "deepspeed"),
     ("transformers.integrations.fsdp", "fsdp"), ("transformers", "trainer")),
    "the Trainer's source files")
PROFILES = {p.lib: p for p in (TORCH, TRANSFORMERS)}
# kept for callers of the torch-only version
PINNED = TORCH.pinned
ROOTS = TORCH.roots


def vkey(v: str) -> tuple:
    return tuple(int(p) for p in v.split("."))


def module_of(path: str) -> str:
    p = path[:-3].replace("/", ".")
    return p[: -len(".__init__")] if p.endswith(".__init__") else p


def in_roots(path: str, prof: Profile) -> bool:
    return path.endswith(".py") and any(path == r or (r.endswith("/") and path.startswith(r)) for r in prof.roots)


def public_path(path: str, prof: Profile = TORCH) -> bool:
    if not in_roots(path, prof):
        return False
    if prof.private_ok and path.startswith(prof.private_ok):
        rest = path[len("torch/distributed/"):]
        parts = rest.split("/")[1:]
    else:
        parts = path.split("/")
    if path.startswith("torch/distributed/_tensor/ops/"):
        return False  # sharding-strategy registrations, not an API users import
    return not any(p.startswith("_") and p != "__init__.py" for p in parts)


def area_of(mod: str, prof: Profile = TORCH) -> str:
    for prefix, area in prof.areas:
        if mod == prefix or mod.startswith(prefix + "."):
            return area
    return prof.lib


def params(fn) -> list:
    """[(name, default source or None)] of a FunctionDef, self/cls dropped."""
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [None] * (len(pos) - len(a.defaults)) + [ast.unparse(d) for d in a.defaults]
    out = [(x.arg, d) for x, d in zip(pos, defaults)]
    if a.vararg:
        out.append(("*" + a.vararg.arg, None))
    out += [(x.arg, ast.unparse(d) if d is not None else None) for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append(("**" + a.kwarg.arg, None))
    if out and out[0][0] in ("self", "cls"):
        out = out[1:]
    return out


def field_default(node):
    """Default source of a dataclass field (AnnAssign), None when it has none."""
    v = node.value
    if v is None:
        return None
    if isinstance(v, ast.Call) and ast.unparse(v.func).split(".")[-1] == "field":
        for kw in v.keywords:
            if kw.arg == "default":
                return ast.unparse(kw.value)
            if kw.arg == "default_factory":
                return "factory " + ast.unparse(kw.value)
        return None
    return ast.unparse(v)


def surface(files, prof: Profile = TORCH) -> dict:
    """{"names": {qualname: [[param, default], ...] or None}, "fields": {qualname: default or None},
    "env": {VAR: [module, ...]}, "bound": [...]} from (path, source text) pairs."""
    names, fields, env, bound = {}, {}, {}, set()
    for path, text in files:
        if not in_roots(path, prof):
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError):
            continue
        mod = module_of(path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and prof.env_re.match(node.value):
                env.setdefault(node.value, set()).add(mod)
        if not public_path(path, prof):
            continue
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                names[f"{mod}.{node.name}"] = [list(p) for p in params(node)]
            elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                names[f"{mod}.{node.name}"] = None
                if any("dataclass" in ast.unparse(d) for d in node.decorator_list):
                    for sub in node.body:
                        if isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and \
                                not sub.target.id.startswith("_") and "ClassVar" not in ast.unparse(sub.annotation):
                            fields[f"{mod}.{node.name}.{sub.target.id}"] = field_default(sub)
                for sub in node.body:
                    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                            not sub.name.startswith("_") or sub.name == "__init__"):
                        names[f"{mod}.{node.name}.{sub.name}"] = [list(p) for p in params(sub)]
            elif isinstance(node, ast.ImportFrom) and path.endswith("__init__.py") and (
                    node.level or (node.module or "").startswith(prof.lib)):
                for al in node.names:
                    n = al.asname or al.name
                    if n != "*" and not n.startswith("_"):
                        names.setdefault(f"{mod}.{n}", None)
            # any other top-level binding keeps an old name importable (moved to C++ or another module)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                bound.update(f"{mod}.{(al.asname or al.name).split('.')[0]}" for al in node.names)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    if isinstance(t, ast.Name):
                        bound.add(f"{mod}.{t.id}")
        # sys.modules["a.b"] = ... anywhere in the file keeps the old module path importable
        for node in ast.walk(tree):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and \
                    ast.unparse(node.value) == "sys.modules":
                key = node.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    bound.add(key.value + ".*")
                elif isinstance(key, ast.JoinedStr):  # f"pkg.{submodule}": every name under the constant prefix
                    prefix = ""
                    for v in key.values:
                        if not isinstance(v, ast.Constant):
                            break
                        prefix += str(v.value)
                    if prefix.count(".") >= 2:
                        bound.add(prefix.rstrip(".") + ".*")
    return {"names": names, "fields": fields, "env": {k: sorted(v) for k, v in env.items()},
            "bound": sorted(bound)}


def wheel_files(path: Path, prof: Profile = TORCH):
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            if in_roots(info.filename, prof):
                yield info.filename, z.read(info).decode("utf-8", errors="replace")


def installed_files(prof: Profile = TORCH):
    site = Path(sysconfig.get_paths()["purelib"])
    for root in prof.roots:
        paths = sorted((site / root).rglob("*.py")) if root.endswith("/") else [site / root]
        for f in paths:
            if f.is_file():
                yield f.relative_to(site).as_posix(), f.read_text(encoding="utf-8", errors="replace")


def installed_version(prof: Profile = TORCH) -> str:
    site = Path(sysconfig.get_paths()["purelib"])
    src = site / ("torch/version.py" if prof.lib == "torch" else f"{prof.lib}/__init__.py")
    m = re.search(r"__version__ = ['\"]([^'\"+]+)", src.read_text(encoding="utf-8"))
    return m.group(1) if m else ""


def fmt_params(p) -> str:
    return ", ".join(n if d is None else f"{n}={d}" for n, d in p)


def shown(default) -> str:
    return "no default (required)" if default is None else f"`{default}`"


def diff(old_v, old, new_v, new, prof: Profile = TORCH, removed=None) -> list:
    """Entries for what changed from OLD to NEW. REMOVED (kept by the caller across versions) collects
    names reported gone, so that one importable again later (re-exported from elsewhere) is reported."""
    out = []
    removed = set() if removed is None else removed
    ev = f"{prof.lib} {old_v} -> {new_v} (wheel sources)"

    def entry(kind, name, text, area=None):
        out.append({"lib": prof.lib, "version": new_v, "kind": kind,
                    "area": area or area_of(name.rsplit(".", 1)[0], prof), "names": [name], "text": text,
                    "evidence": ev})

    on, nn = old["names"], new["names"]
    for name in sorted(set(nn) - set(on)):
        if name.rsplit(".", 1)[0] in nn and name.rsplit(".", 1)[0] not in on:
            continue  # a method of a class that is itself new: the class entry says it
        entry("add", name, f"`{name}` exists from {new_v} ({old_v} does not have it).")
    still = set(new.get("bound", ()))
    for name in sorted(set(on) - set(nn)):
        if name.rsplit(".", 1)[0] in on and name.rsplit(".", 1)[0] not in nn:
            continue
        if name in still or any(name.startswith(b[:-1]) for b in still if b.endswith(".*")) \
                or name in new.get("fields", {}):
            continue  # still importable: re-exported, bound there, aliased in sys.modules, or now a field
        entry("remove", name, f"`{name}` is gone in {new_v} ({old_v} had it).")
        removed.add(name)
    for name in sorted(removed):
        if name in still and name not in old.get("bound", ()):
            entry("add", name, f"`{name}` can be imported again from {new_v} (re-exported from elsewhere).")
            removed.discard(name)
    removed.difference_update(nn)
    for name in sorted(set(on) & set(nn)):
        a, b = on[name], nn[name]
        if a is None or b is None or a == b:
            continue
        da, db = dict(map(tuple, a)), dict(map(tuple, b))
        added = [p for p in db if p not in da]
        gone = [p for p in da if p not in db]
        changed = [p for p in db if p in da and da[p] != db[p]]
        bits = []
        if added:
            bits.append("gains " + ", ".join(f"`{p}`" + (f" (default `{db[p]}`)" if db[p] is not None else "")
                                             for p in added))
        if gone:
            bits.append("loses " + ", ".join(f"`{p}`" for p in gone))
        if changed:
            bits.append("changes the default of " + ", ".join(f"`{p}` from {shown(da[p])} to {shown(db[p])}"
                                                                for p in changed))
        if bits:
            kind = "change" if changed and not added and not gone else ("remove" if gone and not added else "add")
            entry(kind, name, f"`{name}` {'; '.join(bits)} in {new_v}.")
            out[-1]["signature"] = f"({fmt_params(b)})"
    of, nf = old.get("fields", {}), new.get("fields", {})
    for name in sorted(set(nf) - set(of)):
        entry("add", name, f"field `{name}` exists from {new_v}, default {shown(nf[name])} ({old_v} does not have it).")
        out[-1]["default"] = nf[name]
    for name in sorted(set(of) - set(nf)):
        if name in nn or name in still or any(name.startswith(b[:-1]) for b in still if b.endswith(".*")):
            continue  # now a method/property, or the module is aliased
        entry("remove", name, f"field `{name}` is gone in {new_v} ({old_v} had it, default {shown(of[name])}).")
    for name in sorted(set(of) & set(nf)):
        if of[name] != nf[name]:
            entry("change", name, f"field `{name}` default changes from {shown(of[name])} to {shown(nf[name])} in {new_v}.")
            out[-1]["default"] = nf[name]
    oe, ne = old["env"], new["env"]
    for var in sorted(set(ne) - set(oe)):
        entry("add", var, f"`{var}` is first named in {prof.where} in {new_v} "
                          f"({', '.join(ne[var][:3])}).", area="env")
    for var in sorted(set(oe) - set(ne)):
        entry("remove", var, f"`{var}` is no longer named in {prof.where} in {new_v} "
                             f"({old_v}: {', '.join(oe[var][:3])}).", area="env")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("package", choices=sorted(PROFILES))
    ap.add_argument("--wheels", help="folder of <package>-*.whl files (any platform)")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--snapshot", action="store_true", help="print the installed package's surface as JSON")
    args = ap.parse_args(argv)
    prof = PROFILES[args.package]
    tag = f"api_history {prof.lib}"
    if args.snapshot:
        json.dump(surface(installed_files(prof), prof), sys.stdout, indent=1, sort_keys=True)
        return 0
    if not args.wheels:
        print(f"{tag}: --wheels DIR is required", file=sys.stderr)
        return 2
    wheels = {}
    for w in sorted(Path(args.wheels).glob(f"{prof.lib}-*.whl")):
        v = prof.wheel_version(w.name)
        if v and vkey(v) < vkey(prof.pinned):
            wheels.setdefault(v, w)
    if not wheels:
        print(f"{tag}: no wheels older than {prof.pinned} in {args.wheels}", file=sys.stderr)
        return 2
    if installed_version(prof) != prof.pinned:
        print(f"{tag}: the installed release is {installed_version(prof)}, not {prof.pinned}", file=sys.stderr)
        return 2
    versions = sorted(wheels, key=vkey)
    surfaces = {}
    for v in versions:
        try:
            surfaces[v] = surface(wheel_files(wheels[v], prof), prof)
        except (OSError, zipfile.BadZipFile) as exc:
            print(f"{tag}: cannot read {wheels[v]}: {exc}", file=sys.stderr)
            return 2
    surfaces[prof.pinned] = surface(installed_files(prof), prof)
    versions.append(prof.pinned)
    entries, removed = [], set()
    for a, b in zip(versions, versions[1:]):
        entries += diff(a, surfaces[a], b, surfaces[b], prof, removed)
    counts = {}
    for e in entries:
        counts[(e["version"], e["kind"])] = counts.get((e["version"], e["kind"]), 0) + 1
    for (v, k), n in sorted(counts.items(), key=lambda kv: (vkey(kv[0][0]), kv[0][1])):
        print(f"{v:<8} {k:<7} {n}")
    print(f"{len(entries)} entries from {', '.join(versions)}")
    if args.write:
        prof.out.write_text("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in entries), encoding="utf-8")
        rec = {"versions": versions, "wheels": {v: {"file": wheels[v].name, "sha256": hashlib.sha256(
            wheels[v].read_bytes()).hexdigest()} for v in versions if v in wheels},
            "pinned": f"installed {prof.lib} {prof.pinned}",
            "entries_sha256": hashlib.sha256(prof.out.read_bytes()).hexdigest()}
        prof.sources.write_text(json.dumps(rec, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        cov_path = prof.out.with_name("release_changes_coverage.json")
        try:
            cov = json.loads(cov_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            cov = {}
        cov[prof.lib] = {"versions": versions, "entries": len(entries)}
        cov_path.write_text(json.dumps(cov, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {prof.out.relative_to(REPO)} and {prof.sources.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
