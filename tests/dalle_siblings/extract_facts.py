"""Regenerate facts_<commit>.json from a lucidrains/DALLE-pytorch git directory.

Not a test module (pytest collects only test_*.py). It reads train_vae.py,
train_dalle.py, generate.py and README.md at one commit with `git show`,
walks the scripts with `ast`, and writes only extracted facts (flag names,
defaults, types, actions, groups, a few call keywords) - never the code.

Usage:
  python tests/dalle_siblings/extract_facts.py --git-dir /path/to/DALLE-pytorch/.git \
      --commit 58c1e1a4fef10725a79bd45cdb5581c03e3e59e7 --out tests/dalle_siblings/facts_58c1e1a.json

Exit codes: 0 written; 2 bad input (git failed, file missing, unparsable source).
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import subprocess
import sys

SCRIPTS = ("train_vae.py", "train_dalle.py", "generate.py")


def git_show(git_dir: str, commit: str, path: str) -> str:
    res = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"error: git show {commit}:{path} failed: {res.stderr.strip()}")
    return res.stdout


def literal(node):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return {"expr": ast.unparse(node)}


def type_name(node):
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Lambda):
        return "lambda"
    return ast.unparse(node)


def extract_flags(tree: ast.Module) -> list[dict]:
    """Every add_argument call: which object it is called on, resolved to a group title."""
    groups: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            call = node.value
            if isinstance(call.func, ast.Attribute) and call.func.attr in (
                    "add_argument_group", "add_mutually_exclusive_group"):
                title = (literal(call.args[0]) if call.args else "mutually exclusive"
                         if call.func.attr == "add_mutually_exclusive_group" else None)
                for tgt in node.targets:
                    if isinstance(tgt, ast.Name):
                        groups[tgt.id] = title
    flags = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        kw = {k.arg: k.value for k in node.keywords}
        names = [literal(a) for a in node.args]
        receiver = node.func.value.id if isinstance(node.func.value, ast.Name) else "?"
        action = literal(kw.get("action"))
        if "default" in kw:
            default = literal(kw["default"])
        elif action == "store_true":
            default = False
        else:
            default = None
        dest = literal(kw["dest"]) if "dest" in kw else names[0].lstrip("-").replace("-", "_")
        flags.append({
            "flags": names,
            "dest": dest,
            "default": default,
            "type": type_name(kw.get("type")),
            "action": action,
            "required": bool(literal(kw["required"])) if "required" in kw else False,
            "group": groups.get(receiver, "top-level"),
            "lineno": node.lineno,
        })
    flags.sort(key=lambda f: f["lineno"])
    return flags


def call_keywords(tree: ast.Module, func_name: str) -> list[list[str]]:
    """Keyword names of every call whose callee ends with func_name."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name == func_name:
                out.append(sorted(k.arg for k in node.keywords if k.arg))
    return out


def call_keyword_sources(tree: ast.Module, func_name: str) -> list[dict]:
    """For every call whose callee ends with func_name: keyword -> source text of its value."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name == func_name:
                out.append({k.arg: ast.unparse(k.value) for k in node.keywords if k.arg})
    return out


def assigned_sources(tree: ast.Module, var: str) -> list[str]:
    """Source text of every value assigned to the plain name var."""
    return [ast.unparse(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == var for t in n.targets)]


def called_names(tree: ast.Module) -> list[str]:
    """Names of everything called in the module (attribute or plain name)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name:
                names.add(name)
    return sorted(names)


def messages(tree: ast.Module) -> list[str]:
    """String pieces of assert messages, raised exceptions and print calls (user-visible text)."""
    found = set()

    def pieces(node):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.strip():
                found.add(sub.value)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is not None:
            pieces(node.msg)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            pieces(node.exc)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
            pieces(node)
    return sorted(found)


def dict_keys_assigned(tree: ast.Module, var: str) -> list[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == var
                                                for t in node.targets):
            v = node.value
            if isinstance(v, ast.Call) and getattr(v.func, "id", None) == "dict":
                return [k.arg for k in v.keywords]
            if isinstance(v, ast.Dict):
                return [literal(k) for k in v.keys if k is not None]
    return []


def string_constants(tree: ast.Module, pattern: str) -> list[str]:
    rx = re.compile(pattern)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and rx.search(node.value):
            found.add(node.value)
    return sorted(found)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--git-dir", required=True, help="git directory of lucidrains/DALLE-pytorch")
    ap.add_argument("--commit", required=True, help="full commit hash to read")
    ap.add_argument("--out", required=True, help="JSON file to write")
    a = ap.parse_args(argv)

    facts: dict = {"repository": "lucidrains/DALLE-pytorch", "commit": a.commit,
                   "extracted_with": "tests/dalle_siblings/extract_facts.py (ast over git show <commit>:<file>)",
                   "scripts": {}}
    trees = {}
    for script in SCRIPTS:
        src = git_show(a.git_dir, a.commit, script)
        try:
            tree = ast.parse(src)
        except SyntaxError as exc:
            print(f"error: cannot parse {script}: {exc}", file=sys.stderr)
            return 2
        trees[script] = tree
        facts["scripts"][script] = {
            "flags": extract_flags(tree),
            "called": called_names(tree),
            "messages": messages(tree),
            "calls_wrap_arg_parser": bool(call_keywords(tree, "wrap_arg_parser")),
        }
    vae, dalle, gen = trees["train_vae.py"], trees["train_dalle.py"], trees["generate.py"]
    facts["scripts"]["train_vae.py"].update({
        "make_grid_keywords": call_keywords(vae, "make_grid"),
        "saved_files": string_constants(vae, r"^\./vae.*\.pt$"),
        "vae_params_keys": dict_keys_assigned(vae, "vae_params"),
        "discrete_vae_extra_keywords": call_keywords(vae, "DiscreteVAE"),
        "deepspeed_config_keys": dict_keys_assigned(vae, "deepspeed_config"),
        "wandb_projects": string_constants(vae, r"^dalle_train_vae$"),
        "dataloader_keywords": call_keywords(vae, "DataLoader"),
        "distribute_keywords": call_keywords(vae, "distribute"),
    })
    facts["scripts"]["train_dalle.py"].update({
        "dalle_params_keys": dict_keys_assigned(dalle, "dalle_params"),
        "reduce_lr_on_plateau_keywords": call_keywords(dalle, "ReduceLROnPlateau"),
        "deepspeed_config_keys": dict_keys_assigned(dalle, "deepspeed_config"),
        "save_obj_keys": dict_keys_assigned(dalle, "save_obj"),
        "aux_filename": string_constants(dalle, r"^auxiliary\.pt$"),
        "generate_images_keywords": call_keywords(dalle, "generate_images"),
        "dataloader_keywords": call_keywords(dalle, "DataLoader"),
        "webloader_keywords": call_keywords(dalle, "WebLoader"),
        "stream_prefixes": string_constants(dalle, r"^pipe:"),
        "torch_load_keywords": call_keywords(dalle, "load"),
        "model_call_keywords": call_keywords(dalle, "distr_dalle"),
        "distribute_keywords": call_keywords(dalle, "distribute"),
        "text_image_dataset_keywords": call_keyword_sources(dalle, "TextImageDataset"),
        "text_seq_len_assignments": assigned_sources(dalle, "TEXT_SEQ_LEN"),
        "tokenize_calls": call_keyword_sources(dalle, "tokenize"),
    })
    facts["scripts"]["generate.py"].update({
        "generate_images_keywords": call_keywords(gen, "generate_images"),
        "generate_texts_keywords": call_keywords(gen, "generate_texts"),
        "save_image_keywords": call_keywords(gen, "save_image"),
        "output_file_patterns": string_constants(gen, r"\.(png|jpg)$|caption\.txt"),
        "torch_load_keywords": call_keywords(gen, "load"),
    })
    readme = git_show(a.git_dir, a.commit, "README.md")
    facts["readme"] = {
        "generate_flags_shown": sorted(set(re.findall(r"generate\.py[^\n`]*?(--gen\w+)", readme))),
        "generate_output_pattern": sorted(set(re.findall(r"\./outputs/[^`\n]*?\.(?:jpg|png)", readme))),
        "generate_images_keywords": sorted({kw for call in re.findall(r"generate_images\(([^)]*)\)", readme)
                                            for kw in re.findall(r"(\w+)\s*=", call)}),
    }
    with open(a.out, "w", encoding="utf-8") as fh:
        json.dump(facts, fh, indent=1, sort_keys=False)
        fh.write("\n")
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
