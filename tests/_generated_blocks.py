"""Generated blocks in the bundle's Markdown pages, shared by the generators that render a committed
capture into a page (tests/*/_*_matrix.py, _ds_methods.py).

A block is the text between `<!-- generated: NAME -->` (plus its newline) and `<!-- end generated -->`.
`block` reads one, `replace` rewrites every rendered block of a page, `cli` is the common
capture / render / write front of a generator whose blocks live in one page or, mapped by block name, in several.
"""
from __future__ import annotations

import json
import sys
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
    `--check` reruns the probe and says which rendered blocks differ from the capture's (exit 1 if any)."""
    if arg == "--check":
        fresh, kept = render(collect()), render(load_json(capture))
        bad = [k for k, v in fresh.items() if v != kept.get(k)]
        print("differs: " + ", ".join(bad) if bad else "capture reproduced")
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
