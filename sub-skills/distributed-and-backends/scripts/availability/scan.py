"""Static scan of the running interpreter's environment.  Imports nothing it reports on.

* Distributions: one ``os.scandir`` per ``sys.path`` entry, picking out
  ``*.dist-info`` / ``*.egg-info``; metadata files are read only for the
  distributions that matter.
* Modules: the same scan records top-level modules, packages and extension
  modules, resolved in ``sys.path`` order the way ``PathFinder`` does (a
  regular package or module wins; namespace portions count only when nothing
  regular is found).
* Build facts: plain files (``torch/version.py``,
  ``deepspeed/git_version_info_installed.py``, accelerate's ``constants.py``)
  read as text and parsed with ``ast`` / regular expressions, never imported.
"""

import ast
import os
import re
import stat
import sys
from importlib.machinery import EXTENSION_SUFFIXES

from .targets import ACCELERATE_FALLBACK, NAMESPACE_OK, TARGETS

_DIST_RE = re.compile(r"^(?P<name>[^-]+(?:-[^-\d][^-]*)*)(?:-(?P<version>[^-]+))?(?:-py\d[\w.]*)?\.(?P<kind>dist|egg)-info$")
_EXT_SUFFIXES = tuple(sorted(EXTENSION_SUFFIXES, key=len, reverse=True))


def normalize(name):
    """PEP 503 normalisation of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


ZIP_NAME_LIMIT = 200000  # entries read from one zip archive on sys.path
READ_LIMIT = 4 * 1024 * 1024  # bytes read from any one file; metadata and build files are far smaller


def _read(path, limit=None):
    """Text of a regular file (UTF-8, undecodable bytes replaced), at most ``limit`` bytes; else None.

    Opened non-blocking and checked with fstat so that a FIFO, a device such as
    /dev/zero, a directory or a socket in place of a file can neither hang the
    checker nor feed it without end."""
    limit = READ_LIMIT if limit is None else min(limit, READ_LIMIT)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    except (OSError, ValueError, MemoryError):
        return None
    finally:
        os.close(fd)


class Dist:
    """One installed distribution (a dist-info or egg-info entry)."""

    __slots__ = ("name", "key", "version", "path", "entry", "is_dir", "_meta", "_top", "_record")

    def __init__(self, name, version, path, entry, is_dir):
        self.name = name
        self.key = normalize(name)
        self.version = version
        self.path = path
        self.entry = entry
        self.is_dir = is_dir
        self._meta = None
        self._top = None
        self._record = None

    def _file(self, fname):
        if not self.is_dir:
            return _read(self.path) if fname in ("METADATA", "PKG-INFO") else None
        return _read(os.path.join(self.path, fname))

    def metadata(self):
        """Header fields of METADATA / PKG-INFO (Name, Version, Summary, Requires-Dist)."""
        if self._meta is None:
            text = self._file("METADATA") or self._file("PKG-INFO") or ""
            head = text.split("\n\n", 1)[0]
            meta = {"Requires-Dist": []}
            for line in head.splitlines():
                key, sep, value = line.partition(":")
                if not sep or line[:1].isspace():
                    continue
                value = value.strip()
                if key == "Requires-Dist":
                    meta["Requires-Dist"].append(value)
                elif key in ("Name", "Version", "Summary", "Home-page"):
                    meta.setdefault(key, value)
            self._meta = meta
            if meta.get("Version"):
                self.version = meta["Version"]
            if meta.get("Name"):
                self.name = meta["Name"]
        return self._meta

    def top_level(self):
        """Top-level import names this distribution installs."""
        if self._top is None:
            text = self._file("top_level.txt")
            if text is not None:
                self._top = {line.strip().replace("/", ".").split(".")[0]
                             for line in text.splitlines() if line.strip()}
            else:
                self._top = self.record_top_level()
        return self._top

    def record_top_level(self):
        if self._record is None:
            text = self._file("RECORD") or self._file("installed-files.txt") or ""
            names = set()
            for first in re.findall(r"^([^/,\r\n]+)[/,]", text, re.M):
                if first.endswith((".dist-info", ".egg-info", ".data", ".pth")) or first.startswith(".."):
                    continue
                if first == "__pycache__":
                    continue
                names.add(_module_name(first) or first)
            self._record = names
        return self._record

    def entry_points(self, group):
        text = self._file("entry_points.txt") if self.is_dir else None
        if not text:
            return []
        out, current = [], None
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("["):
                current = line.strip("[]").strip()
            elif current == group and "=" in line:
                name, _, target = line.partition("=")
                out.append((name.strip(), target.strip()))
        return out

    def direct_url_editable(self):
        text = self._file("direct_url.json") if self.is_dir else None
        return bool(text and re.search(r'"editable"\s*:\s*true', text))


def _module_name(filename):
    """Import name for a file name in a path entry, or None if it is not a module."""
    if filename.endswith(".py"):
        stem = filename[:-3]
    else:
        for suffix in _EXT_SUFFIXES:
            if filename.endswith(suffix):
                stem = filename[: -len(suffix)]
                break
        else:
            return None
    return stem if stem.isidentifier() else None


class Environment:
    """Everything found on sys.path, in order."""

    def __init__(self, path_entries):
        self.path = [p for p in path_entries]
        self.dists = []            # Dist, in path order
        self.by_key = {}           # normalised name -> [Dist] in path order
        self.modules = {}          # import name -> [(index, kind, fullpath)]
        for index, entry in enumerate(self.path):
            self._scan_entry(index, entry)

    def _scan_entry(self, index, entry):
        try:
            it = os.scandir(entry or ".")
        except NotADirectoryError:  # a file: zipimport serves a zip archive on sys.path
            self._scan_zip(index, entry)
            return
        except (OSError, ValueError):  # a broken link, a loop, no permission, a NUL byte
            return
        with it:
            while True:
                try:
                    de = next(it)
                except StopIteration:
                    break
                except OSError:  # the directory vanished or became unreadable mid-scan: keep what was read
                    break
                name = de.name
                if name.endswith((".dist-info", ".egg-info")):
                    m = _DIST_RE.match(name)
                    if m:
                        dname, version = m.group("name"), m.group("version") or ""
                    else:
                        dname, version = name.rsplit(".", 1)[0], ""
                    try:
                        is_dir = de.is_dir()
                    except OSError:
                        is_dir = False
                    dist = Dist(dname, version, de.path, entry, is_dir)
                    if not version:
                        # folder name without a parseable version ("torch.egg-info", "x-y.dist-info"):
                        # METADATA's Name is the authority for both name and lookup key
                        dist.metadata()
                        dist.key = normalize(dist.name)
                    self.dists.append(dist)
                    self.by_key.setdefault(dist.key, []).append(dist)
                    continue
                try:
                    is_dir = de.is_dir()
                except OSError:
                    continue
                if is_dir:
                    if not name.isidentifier():
                        continue
                    kind = "pkg?"  # regular vs namespace decided lazily
                    mod = name
                else:
                    mod = _module_name(name)
                    if mod is None:
                        continue
                    kind = "module"
                self.modules.setdefault(mod, []).append([index, kind, de.path])

    def _scan_zip(self, index, entry):
        """Top-level modules / packages / dist-info folders of a zip archive on sys.path.

        Only the central directory is read (zipfile.namelist); metadata files inside the
        archive are not opened, so a zipped distribution's version comes from its folder name."""
        import zipfile
        try:
            if not zipfile.is_zipfile(entry):
                return
            with zipfile.ZipFile(entry) as zf:
                names = zf.namelist()[:ZIP_NAME_LIMIT]
        except Exception:  # BadZipFile, OSError, EOFError, NotImplementedError...: not importable either
            return
        tops = {}
        for n in names:
            first, sep, rest = n.partition("/")
            if first:
                tops.setdefault(first, set())
                if sep and rest:
                    tops[first].add(rest)
        for name in sorted(tops):
            full = os.path.join(entry, name)
            if name.endswith((".dist-info", ".egg-info")):
                m = _DIST_RE.match(name)
                dname, version = (m.group("name"), m.group("version") or "") if m else (name.rsplit(".", 1)[0], "")
                dist = Dist(dname, version, full, entry, bool(tops[name]))
                self.dists.append(dist)
                self.by_key.setdefault(dist.key, []).append(dist)
            elif tops[name]:
                if name.isidentifier():
                    init = {"__init__.py", "__init__.pyc"} & tops[name]
                    self.modules.setdefault(name, []).append([index, "package" if init else "namespace", full])
            else:
                mod = _module_name(name) or (name[:-4] if name.endswith(".pyc") and name[:-4].isidentifier() else None)
                if mod:
                    self.modules.setdefault(mod, []).append([index, "module", full])

    # -- modules -------------------------------------------------------------
    def _kind(self, hit):
        if hit[1] == "pkg?":
            hit[1] = "package" if os.path.isfile(os.path.join(hit[2], "__init__.py")) else "namespace"
        return hit[1]

    def resolve(self, mod):
        """Return (location, kind, other_regular_locations) the way PathFinder would."""
        hits = self.modules.get(mod, [])
        regular = [h for h in hits if self._kind(h) != "namespace"]
        if regular:
            # a package directory and a module file in the same entry: package wins
            first = regular[0]
            others = [h[2] for h in regular[1:] if h[0] != first[0]]
            return first[2], first[1], others
        ns = [h for h in hits if h[1] == "namespace"]
        if ns:
            return ns[0][2], "namespace", []
        return None, None, []

    def has_module(self, mod):
        return self.resolve(mod)[0] is not None

    # -- distributions ---------------------------------------------------------
    def dist(self, name):
        found = self.by_key.get(normalize(name))
        return found[0] if found else None

    def providers(self, mod):
        """Distributions whose top-level names include ``mod``."""
        return [d for d in self.dists if mod in d.top_level()]


# ---------------------------------------------------------------------------
# build facts from plain files


PARSE_LIMIT = 256 * 1024  # characters; torch/version.py and DeepSpeed's build info are ~1 KB


def parse_assignments(text):
    """Literal module-level assignments of a Python file, without executing it."""
    out = {}
    if len(text) > PARSE_LIMIT:
        return _line_assignments(text)
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # malformed, NUL bytes, too deep
        return _line_assignments(text)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            target, value = node.target.id, node.value
        else:
            continue
        try:
            out[target] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    return out


_LINE_ASSIGN_RE = re.compile(r"^([A-Za-z_]\w*)[ \t]*(?::[^=\n]*)?=[ \t]*([^\n]{1,10000})$", re.M)


def _line_assignments(text):
    """Fallback for a file ast cannot take (too big, a syntax error elsewhere, too deeply nested):
    column-0 one-line ``name = literal`` assignments, each evaluated on its own; only a name's
    first assignment counts (a non-literal first one leaves the name out)."""
    out, seen = {}, set()
    for m in _LINE_ASSIGN_RE.finditer(text):
        if m.group(1) in seen:
            continue
        seen.add(m.group(1))
        try:
            out[m.group(1)] = ast.literal_eval(m.group(2).strip())
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
    return out


def torch_build(torch_dir):
    """torch/version.py facts: version, cuda, hip, xpu, debug and the build flavour."""
    text = _read(os.path.join(torch_dir, "version.py"))
    if text is None:
        return {"flavour": "unknown", "source": "torch/version.py missing"}
    vals = parse_assignments(text)
    facts = {k: vals.get(k) for k in ("__version__", "cuda", "hip", "rocm", "xpu", "debug", "git_version")}
    odd = [k for k in ("cuda", "hip", "xpu") if vals.get(k) is not None and not isinstance(vals[k], str)]
    if odd:  # torch writes a version string or None; anything else is not a torch build file
        flavour = "unknown"
        facts["odd_values"] = odd
    elif vals.get("cuda"):
        flavour = "cuda"
    elif vals.get("hip"):
        flavour = "rocm"
    elif vals.get("xpu"):
        flavour = "xpu"
    elif "cuda" in vals or "hip" in vals:
        flavour = "cpu"
    else:
        flavour = "unknown"
    facts["flavour"] = flavour
    facts["source"] = "torch/version.py"
    return facts


def deepspeed_facts(ds_dir):
    facts = {}
    text = _read(os.path.join(ds_dir, "git_version_info_installed.py"))
    if text is not None:
        vals = parse_assignments(text)
        facts["build_info"] = {k: vals.get(k) for k in
                               ("version", "git_hash", "git_branch", "installed_ops",
                                "accelerator_name", "torch_info") if k in vals}
        ops = vals.get("installed_ops") or {}
        facts["prebuilt_ops"] = sorted(str(k) for k, v in ops.items() if v) if isinstance(ops, dict) else []
    else:
        facts["build_info"] = None
        facts["prebuilt_ops"] = []
    facts["sparse_attention_shipped"] = (
        os.path.isdir(os.path.join(ds_dir, "ops", "sparse_attention"))
        or os.path.isfile(os.path.join(ds_dir, "ops", "op_builder", "sparse_attn.py")))
    cfg = _read(os.path.join(ds_dir, "runtime", "config.py"))
    removed = []
    if cfg:
        m = re.search(r"^_REMOVED_TOP_LEVEL_CONFIG_KEYS\s*=\s*\{(.*?)^\}", cfg, re.S | re.M)
        if m:
            removed = re.findall(r'^\s*"([A-Za-z_]+)"\s*:', m.group(1), re.M)
    facts["removed_config_keys"] = removed
    return facts


def accelerate_facts(acc_dir):
    facts = dict(ACCELERATE_FALLBACK)
    sources = {}
    const = _read(os.path.join(acc_dir, "utils", "constants.py")) or ""
    for key in ("FSDP_PYTORCH_VERSION", "FSDP2_PYTORCH_VERSION"):
        m = re.search(r"^%s\s*=\s*\(?\s*[\"']([^\"']+)[\"']" % key, const, re.M)
        if m:
            facts[key] = m.group(1)
            sources[key] = "accelerate/utils/constants.py"
    imports = _read(os.path.join(acc_dir, "utils", "imports.py")) or ""
    m = re.search(r"def is_torchao_available\(.*?compare_versions\([^,]+,\s*\"(>=)\",\s*\"([^\"]+)\"", imports, re.S)
    if m:
        facts["torchao_min"] = m.group(2)
        sources["torchao_min"] = "accelerate/utils/imports.py is_torchao_available"
    m = re.search(r"def is_megatron_lm_available\(.*?compare_versions\([^,]+,\s*\"(>=)\",\s*\"([^\"]+)\"", imports, re.S)
    if m:
        facts["megatron_core_min"] = m.group(2)
        sources["megatron_core_min"] = "accelerate/utils/imports.py is_megatron_lm_available"
    facts["sources"] = sources
    return facts


def apex_flavour(apex_dir, env, dist):
    """'nvidia', 'pypi-namesake' or 'unknown', with the evidence."""
    evidence = []
    if apex_dir and os.path.isdir(apex_dir):
        for sub in ("amp", "normalization", "optimizers", "transformer", "contrib"):
            if os.path.isdir(os.path.join(apex_dir, sub)):
                evidence.append("apex/%s/" % sub)
    for ext in ("amp_C", "apex_C", "fused_layer_norm_cuda", "fused_dense_cuda"):
        loc, kind, _ = env.resolve(ext)
        if loc and kind == "module":
            evidence.append(os.path.basename(loc))
    if evidence:
        return "nvidia", evidence
    summary = (dist.metadata().get("Summary") or "") if dist else ""
    if dist is not None and (re.search(r"pyramid", summary, re.I) or (dist.version or "").startswith("0.9")):
        return "pypi-namesake", ["distribution apex %s (%s)" % (dist.version, summary or "no summary")]
    if apex_dir:
        return "pypi-namesake", ["apex/ has none of amp/, normalization/, optimizers/ and no amp_C extension"]
    return "unknown", []


_IMPORT_RE = re.compile(r"^(?:from[ \t]+(?P<from>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>.+)|import[ \t]+(?P<mods>.+))$", re.M)


def import_closure(pkg_dir, pkg_name):
    """Top-level external modules imported at module level when ``import pkg_name`` runs.

    Follows the package's own modules (absolute and relative imports), reading
    only column-0 import statements (imports inside functions or try-blocks
    are not needed at import time).  Returns {module: first file that needs it}.
    """
    stdlib = getattr(sys, "stdlib_module_names", frozenset())
    needed, seen = {}, set()
    queue = [os.path.join(pkg_dir, "__init__.py")]

    def internal_file(parts):
        base = os.path.join(os.path.dirname(pkg_dir), *parts)
        for cand in (base + ".py", os.path.join(base, "__init__.py")):
            if os.path.isfile(cand):
                return cand
        return None

    while queue:
        path = queue.pop()
        if path in seen:
            continue
        seen.add(path)
        text = _read(path)
        if text is None:
            continue
        text = re.sub(r"\\\r?\n", " ", text)
        rel_here = os.path.relpath(path, os.path.dirname(pkg_dir)).replace(os.sep, "/")
        here_parts = rel_here[:-3].split("/")
        if here_parts[-1] == "__init__":
            here_parts = here_parts[:-1]
            pkg_parts = here_parts
        else:
            pkg_parts = here_parts[:-1]
        for m in _IMPORT_RE.finditer(text):
            if m.group("mods"):
                mods = [p.strip().split(" as ")[0].strip() for p in m.group("mods").split(",")]
                targets = [(mod, []) for mod in mods if mod]
            else:
                src = m.group("from")
                names = [n.strip().split(" as ")[0].strip("() ") for n in m.group("names").split(",")]
                dots = len(src) - len(src.lstrip("."))
                if dots:
                    base = pkg_parts[: len(pkg_parts) - (dots - 1)] if dots > 1 else list(pkg_parts)
                    rest = src[dots:]
                    mod = ".".join(base + ([rest] if rest else []))
                else:
                    mod = src
                targets = [(mod, names)]
            for mod, names in targets:
                parts = mod.split(".")
                if parts[0] == pkg_name:
                    for i in range(1, len(parts) + 1):
                        f = internal_file(parts[:i])
                        if f:
                            queue.append(f)
                    for n in names:
                        f = internal_file(parts + [n])
                        if f:
                            queue.append(f)
                elif parts[0] and parts[0] not in stdlib and parts[0] != "__future__":
                    needed.setdefault(parts[0], os.path.relpath(path, os.path.dirname(pkg_dir)).replace(os.sep, "/"))
    return needed


def dalle_facts(pkg_dir, env):
    facts = {}
    needed = import_closure(pkg_dir, "dalle_pytorch")
    facts["import_needs"] = sorted(needed)
    facts["import_missing"] = {m: needed[m] for m in sorted(needed) if not env.has_module(m)}
    backends = {}
    bdir = os.path.join(pkg_dir, "distributed_backends")
    try:
        names = sorted(os.listdir(bdir))
    except OSError:
        names = []
    for fname in names:
        if fname.endswith("_backend.py"):
            text = _read(os.path.join(bdir, fname)) or ""
            bn = re.search(r"BACKEND_NAME\s*=\s*['\"]([^'\"]+)", text)
            bm = re.search(r"BACKEND_MODULE_NAME\s*=\s*['\"]([^'\"]+)", text)
            if bn:
                backends[bn.group(1)] = bm.group(1) if bm else None
    facts["backends"] = backends
    return facts


def horovod_facts(hvd_dir):
    tdir = os.path.join(hvd_dir, "torch")
    try:
        libs = sorted(f for f in os.listdir(tdir) if f.startswith("mpi_lib") and _module_name(f))
    except OSError:
        libs = []
    return {"torch_extension": libs}


def bnb_facts(bnb_dir):
    try:
        libs = sorted(f for f in os.listdir(bnb_dir) if f.startswith("libbitsandbytes"))
    except OSError:
        libs = []
    return {"native_libraries": libs}


# ---------------------------------------------------------------------------
# host hints (files only, no tools run)


def host_hints():
    hints = {}
    gpus = []
    try:
        gpus = sorted(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        pass
    drv = _read("/proc/driver/nvidia/version", 400)
    m = re.search(r"Kernel Module(?: for [\w]+)?\s+([\d.]+)", drv or "")
    hints["nvidia_driver"] = m.group(1) if m else None
    hints["nvidia_gpus_proc"] = len(gpus)
    try:
        dev = os.listdir("/dev")
    except OSError:
        dev = []
    hints["dev_nvidia"] = len([d for d in dev if re.match(r"^nvidia\d+$", d)])
    hints["dev_kfd"] = "kfd" in dev
    hints["dev_accel"] = len([d for d in dev if d.startswith("accel")])
    for var in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "DS_ACCELERATOR",
                "TORCH_DEVICE_BACKEND_AUTOLOAD", "USE_TORCH_XLA", "PJRT_DEVICE", "ACCELERATE_USE_MEGATRON_LM"):
        if var in os.environ:
            hints.setdefault("env", {})[var] = os.environ[var]
    hints["gpu_files_seen"] = bool(hints["nvidia_gpus_proc"] or hints["dev_nvidia"] or hints["dev_kfd"])
    return hints


# ---------------------------------------------------------------------------


def package_report(env):
    """Per-target installation state plus build facts."""
    packages = {}
    for name, (dist_names, mod, _probe) in TARGETS.items():
        dists = [d for dn in dist_names for d in env.by_key.get(normalize(dn), [])]
        dists.sort(key=lambda d: env.path.index(d.entry) if d.entry in env.path else 0)
        loc, kind, shadowed = env.resolve(mod)
        rec = {"import_name": mod}
        if dists:
            first = dists[0]
            first.metadata()
            rec["dist"] = first.name
            rec["version"] = first.version
            rec["dist_path"] = first.path
        else:
            rec["dist"] = rec["version"] = rec["dist_path"] = None
        rec["module_path"] = loc
        rec["module_kind"] = kind
        editable = bool(dists) and dists[0].direct_url_editable()
        if dists and (loc or editable):
            state = "installed"
        elif dists:
            state = "metadata_only"
        elif loc and kind == "namespace" and mod in NAMESPACE_OK:
            state = "module_only"
        elif loc:
            state = "module_only"
        else:
            state = "not_installed"
        rec["state"] = state
        notes = []
        if editable and not loc:
            notes.append("editable install: module found through an import hook, not on sys.path")
        if shadowed:
            notes.append("also found (shadowed, not used): " + ", ".join(shadowed))
            rec["shadowed"] = shadowed
        rec["dists_found"] = sorted({d.key for d in dists})
        if len(dists) > 1:
            rec["other_dists"] = ["%s %s (%s)" % (d.name, d.version, d.path) for d in dists[1:]]
        facts = {}
        if loc and kind in ("package", "namespace"):
            if name == "torch":
                facts = torch_build(loc)
            elif name == "deepspeed":
                facts = deepspeed_facts(loc)
            elif name == "accelerate":
                facts = accelerate_facts(loc)
            elif name == "dalle-pytorch":
                facts = dalle_facts(loc, env)
            elif name == "horovod":
                facts = horovod_facts(loc)
            elif name == "bitsandbytes":
                facts = bnb_facts(loc)
            elif name == "megatron-core":
                facts = {"megatron/core": env_has_sub(env, "megatron", "core"),
                         "megatron/training": env_has_sub(env, "megatron", "training")}
            elif name == "habana":
                facts = {"habana_frameworks/torch": env_has_sub(env, "habana_frameworks", "torch")}
        if name == "apex" and (loc or dists):
            flavour, evidence = apex_flavour(loc if kind == "package" else None, env, dists[0] if dists else None)
            facts["flavour"] = flavour
            facts["evidence"] = evidence
        if name == "triton" and len({d.key for d in dists}) > 1:
            notes.append("several triton flavours installed: " + ", ".join(sorted({d.name for d in dists})))
        if name == "torch-xla":
            libtpu = env.dist("libtpu") or env.dist("libtpu-nightly")
            facts["libtpu"] = libtpu.version if libtpu else None
        rec["facts"] = facts
        rec["notes"] = notes
        packages[name] = rec
    return packages


def env_has_sub(env, top, sub):
    for hit in env.modules.get(top, []):
        base = os.path.join(hit[2], sub)
        if os.path.isdir(base) or os.path.isfile(base + ".py"):
            return True
    return False


def conflicts_report(env, packages):
    """Two or more distributions providing one (non-namespace) target module."""
    out = []
    for name, rec in packages.items():
        mod = rec["import_name"]
        if mod in NAMESPACE_OK or rec["module_kind"] == "namespace":
            continue
        provs = env.providers(mod)
        for d in provs:
            d.metadata()
        keys = {d.key for d in provs}
        if len(keys) > 1:
            out.append({
                "module": mod,
                "target": name,
                "dists": ["%s %s" % (d.name, d.version) for d in provs],
                "paths": [d.path for d in provs],
                "message": "%d distributions provide the module %r: %s; the files on disk belong to "
                           "whichever was installed last" % (len(keys), mod, ", ".join(sorted({d.name for d in provs}))),
            })
    return out


def nccl_report(env, torch_dist):
    wheels = []
    for d in env.dists:
        if re.match(r"^nvidia-nccl(-cu\d+)?$", d.key):
            d.metadata()
            wheels.append({"dist": d.name, "version": d.version, "path": d.path})
    findings = []
    majors = {re.sub(r"^nvidia-nccl-?", "", normalize(w["dist"])) for w in wheels}
    if len(wheels) > 1:
        findings.append("%d NCCL wheels installed (%s): they share nvidia/nccl/lib/libnccl.so.2, so one "
                        "overwrote the other; keep only the one torch requires"
                        % (len(wheels), ", ".join("%s %s" % (w["dist"], w["version"]) for w in wheels)))
    pins = []
    if torch_dist is not None:
        for req in torch_dist.metadata().get("Requires-Dist", []):
            m = re.match(r"^(nvidia-nccl[\w-]*)\s*(?:\(?\s*([=<>!~]=?[^;)]*))?", req)
            if m:
                pins.append({"requirement": req.split(";")[0].strip()})
                want = normalize(m.group(1))
                have = [w for w in wheels if normalize(w["dist"]) == want]
                spec = (m.group(2) or "").strip()
                if not have:
                    findings.append("torch requires %s but it is not installed" % req.split(";")[0].strip())
                elif spec.startswith("==") and have[0]["version"] != spec[2:].strip():
                    findings.append("torch pins %s but %s %s is installed" % (req.split(";")[0].strip(),
                                                                               have[0]["dist"], have[0]["version"]))
    del majors
    return {"wheels": wheels, "torch_requires": pins, "findings": findings}


def torch_plugins(env):
    out = []
    for d in env.dists:
        for name, target in d.entry_points("torch.backends"):
            d.metadata()
            out.append({"dist": d.name, "name": name, "target": target})
    return out


def duplicate_dists(env):
    out = []
    for key, ds in env.by_key.items():
        if len(ds) > 1:
            out.append({"dist": key, "installs": ["%s (%s)" % (d.version, d.path) for d in ds]})
    return out
