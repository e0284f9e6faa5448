"""Generated blocks in the bundle's Markdown pages, shared by the generators that render a committed
capture into a page (tests/*/_*_matrix.py, _ds_methods.py).

A block is the text between `<!-- generated: NAME -->` (plus its newline) and `<!-- end generated -->`.
`block` reads one, `replace` rewrites every rendered block of a page, `cli` is the common
capture / render / write front of a generator whose blocks live in one page or, mapped by block name, in several.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, Union

END = "<!-- end generated -->"

# A generator's blocks live in one page (a Path) or are spread over several (a dict block name -> Path).
Pages = Union[Path, Dict[str, Path]]


def page_for(pages: Pages, name: str) -> Path:
    """The page that holds block NAME."""
    return pages if isinstance(pages, Path) else pages[name]


def _by_page(pages: Pages, rendered: Dict[str, str]) -> Dict[Path, Dict[str, str]]:
    out: Dict[Path, Dict[str, str]] = {}
    for name, text in rendered.items():
        out.setdefault(page_for(pages, name), {})[name] = text
    return out


def start(name: str) -> str:
    return f"<!-- generated: {name} -->\n"


def block(doc: str, name: str) -> str:
    """The text of block NAME in DOC (KeyError-like IndexError when the page lacks it)."""
    return doc.split(start(name), 1)[1].split(END, 1)[0]


def replace(doc: str, rendered: Dict[str, str]) -> str:
    """DOC with each block named in RENDERED replaced by its new text."""
    for name, text in rendered.items():
        head, rest = doc.split(start(name), 1)
        doc = head + start(name) + text + END + rest.split(END, 1)[1]
    return doc


def write(pages: Pages, rendered: Dict[str, str]) -> None:
    for page, part in _by_page(pages, rendered).items():
        page.write_text(replace(page.read_text(encoding="utf-8"), part), encoding="utf-8")


def show(rendered: Dict[str, str]) -> None:
    for name, text in rendered.items():
        print(f"{start(name)}{text}{END}\n")


def load_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def save_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def cli(arg: str, *, page: Pages, capture: Path, collect: Callable[[], object],
        render: Callable[[object], Dict[str, str]], usage: str) -> None:
    """`capture` reruns the probe into CAPTURE; `render` prints the blocks; `write` puts them in PAGE;
    `--check` reruns the probe, prints the first differing line of each block that changed, keeps the
    fresh run beside the system temp folder's other files and exits 1 if any block differs."""
    if arg == "--check":
        data = collect()
        fresh, kept = render(data), render(load_json(capture))
        bad = [k for k, v in fresh.items() if v != kept.get(k)]
        for k in bad:  # the first differing line, so a drift can be judged without another full run
            pairs = zip((kept.get(k) or "").splitlines(), fresh[k].splitlines())
            x, y = next(((a, b) for a, b in pairs if a != b), ("(shorter)", "(longer)"))
            print(f"{k}:\n  committed: {x}\n  now:       {y}")
        out = Path(tempfile.gettempdir()) / (capture.stem + ".check.json")
        save_json(out, data)
        print(("differs: " + ", ".join(bad) if bad else "capture reproduced") + f" (this run: {out})")
        sys.exit(1 if bad else 0)
    if arg == "capture":
        save_json(capture, collect())
    elif arg == "render":
        show(render(load_json(capture)))
    elif arg == "write":
        write(page, render(load_json(capture)))
    else:
        print(usage)
        sys.exit(2)


def assert_page_is_rendered(pages: Pages, rendered: Dict[str, str]) -> None:
    """Every rendered block is word for word in its page (the generators' comparison test)."""
    for page, part in _by_page(pages, rendered).items():
        doc = page.read_text(encoding="utf-8")
        for name, text in part.items():
            assert block(doc, name) == text, f"{page.name}: block {name!r} differs from the rendered capture"


def run_ranks(cmd: list, envs: list, out: Path, timeout: int, err_key: str, tail: int) -> dict:
    """Start CMD once per environment in ENVS (one per rank, each in its own session, run in OUT), wait
    for all, kill a rank's process group past TIMEOUT; {"rankN": the JSON rank N wrote to OUT/rankN.json,
    or {ERR_KEY: the last TAIL characters of its stderr}}."""
    procs = [subprocess.Popen(cmd, env=env, cwd=out, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              start_new_session=True) for env in envs]
    errs = []
    for p in procs:
        try:
            errs.append(p.communicate(timeout=timeout)[1])
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            errs.append("TIMEOUT " + (p.communicate()[1] or ""))
    got = {}
    for r in range(len(procs)):
        f = out / f"rank{r}.json"
        got[f"rank{r}"] = json.loads(f.read_text()) if f.exists() else {err_key: errs[r][-tail:]}
    return got


LAUNCHER_VARS = ("ACCELERATE_", "FSDP_", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_")


def child_env(root: Path, **extra: str) -> dict:
    """os.environ without what a launcher or an earlier probe exported (LAUNCHER_VARS prefixes), one
    thread, a fixed hash seed and a private HF_HOME under ROOT, then EXTRA: the environment a probe child
    starts from, so no variable of the caller's shell leaks into a captured run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(LAUNCHER_VARS)}
    env.update(OMP_NUM_THREADS="1", HF_HOME=str(root / "hf"), PYTHONHASHSEED="0")
    env.update(extra)
    return env


class Notes:
    """Exception texts as numbered notes under a generated table (E1, E2, ...); `|` is escaped so a
    message cannot split a Markdown cell."""

    def __init__(self):
        self.texts: list = []

    def ref(self, text: str) -> str:
        if text not in self.texts:
            self.texts.append(text)
        return f"[E{self.texts.index(text) + 1}]"

    def block(self) -> str:
        return "".join(f"E{i + 1}: {t.replace('|', '&#124;')}<br>\n" for i, t in enumerate(self.texts))
