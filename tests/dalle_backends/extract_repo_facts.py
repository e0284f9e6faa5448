"""Regenerate repo_facts_58c1e1a.json from a git directory of lucidrains/DALLE-pytorch.

Not a test module. The facts file records *facts* (flag names, defaults, dict keys, line numbers,
the commands the Docker/install scripts run) extracted from the pinned commit, never the code itself,
so the tests can check the references without a clone of the repository.

    python tests/dalle_backends/extract_repo_facts.py GIT_DIR [COMMIT] > tests/dalle_backends/repo_facts_58c1e1a.json
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys

SCRIPTS = ("train_dalle.py", "train_vae.py", "generate.py")


def show(git_dir: str, commit: str, path: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{path}"], check=True,
                          capture_output=True, text=True).stdout


def literal(node):
    if node is None:
        return None
    try:
        return ast.literal_eval(node)
    except ValueError:
        return {"expr": ast.unparse(node)}


def flags(src: str) -> list[dict]:
    out = []
    tree = ast.parse(src)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant)]
        kw = {k.arg: k.value for k in node.keywords}
        action = literal(kw.get("action"))
        typ = ast.unparse(kw["type"]) if "type" in kw else None
        if "default" in kw:
            default = literal(kw["default"])
        elif action == "store_true":
            default = False
        else:
            default = None
        dest = literal(kw.get("dest")) or names[0].lstrip("-").replace("-", "_")
        out.append({"flags": names, "dest": dest, "default": default, "action": action, "type": typ,
                    "required": bool(literal(kw.get("required"))), "group": ast.unparse(node.func.value),
                    "line": node.lineno})
    return sorted(out, key=lambda f: f["line"])


def find_dict(src: str, name: str) -> dict:
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets) \
                and isinstance(node.value, ast.Dict):
            d = {}
            spans = {k.value: [k.lineno, v.end_lineno] for k, v in zip(node.value.keys, node.value.values)}
            for k, v in zip(node.value.keys, node.value.values):
                if isinstance(v, ast.Dict):
                    d[k.value] = {kk.value: ast.unparse(vv) for kk, vv in zip(v.keys, v.values)}
                else:
                    d[k.value] = ast.unparse(v)
            return {"line_start": node.lineno, "line_end": node.end_lineno, "keys": list(d), "values": d,
                    "key_lines": spans}
    raise KeyError(name)


def lines_containing(src: str, needle: str) -> list[int]:
    return [i for i, line in enumerate(src.splitlines(), 1) if needle in line]


def main() -> None:
    git_dir = sys.argv[1]
    commit = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    full = subprocess.run(["git", "--git-dir", git_dir, "rev-parse", commit], check=True, capture_output=True,
                          text=True).stdout.strip()
    srcs = {p: show(git_dir, full, p) for p in SCRIPTS}
    td, tv = srcs["train_dalle.py"], srcs["train_vae.py"]
    facts = {
        "repository": "lucidrains/DALLE-pytorch",
        "commit": full,
        "note": "Facts extracted with tests/dalle_backends/extract_repo_facts.py; line numbers refer to this commit.",
        "scripts": {p: {"flags": flags(s)} for p, s in srcs.items()},
        "train_dalle.py": {
            "deepspeed_config": find_dict(td, "deepspeed_config"),
            "wrap_arg_parser_line": lines_containing(td, "distributed_utils.wrap_arg_parser(parser)"),
            "set_backend_line": lines_containing(td, "distributed_utils.set_backend_from_args(args)"),
            "check_batch_size_line": lines_containing(td, "distr_backend.check_batch_size(BATCH_SIZE)"),
            "zero_stage_checks": lines_containing(td, "get('zero_optimization', {}).get('stage', 0) >= 2"),
            "aux_filename": "auxiliary.pt" if "DEEPSPEED_CP_AUX_FILENAME = 'auxiliary.pt'" in td else None,
            "aux_filename_line": lines_containing(td, "DEEPSPEED_CP_AUX_FILENAME = "),
            "cp_path_to_dir_line": lines_containing(td, "def cp_path_to_dir"),
            "cp_dir_format": "{stem}-{tag}-cp" if "f'{path_sans_extension}-{tag}-cp'" in td else None,
            "ds_tag": "ds" if "cp_path_to_dir(dalle_path, 'ds')" in td else None,
            "load_checkpoint_line": lines_containing(td, "distr_dalle.load_checkpoint("),
            "save_checkpoint_line": lines_containing(td, "distr_dalle.save_checkpoint("),
            "keep_n_glob": "global*" if 'cp_dir / "global*"' in td else None,
            "keep_n_line": lines_containing(td, 'glob(str(cp_dir / "global*"))'),
            "reduce_lr_on_plateau_verbose_line": lines_containing(td, "verbose=True"),
            "webdataset_batched_line": lines_containing(td, ".batched(BATCH_SIZE / distr_backend.get_world_size()"),
            "distributed_sampler_line": lines_containing(td, "torch.utils.data.distributed.DistributedSampler("),
            "lr_scheduler_not_passed_line": lines_containing(td, "lr_scheduler=scheduler if LR_DECAY and not using_deepspeed else None"),
            "fp16_skip_samples_line": lines_containing(td, "avoid_model_calls = using_deepspeed and args.fp16"),
            "half_without_deepspeed_line": lines_containing(td, "dalle = dalle.half()"),
            "cuda_calls": lines_containing(td, ".cuda()"),
            "flops_profiler_stop_line": lines_containing(td, "if i == 201 and args.flops_profiler"),
            "imports_wandb_at_top": lines_containing(td, "import wandb")[:1],
            "set_epoch_lines": lines_containing(td, ".set_epoch("),
            "training_data_line": lines_containing(td, "training_data=("),
            "webdataset_not_handed_to_deepspeed": "(None if ENABLE_WEBDATASET else ds)" in td,
        },
        "train_vae.py": {
            "deepspeed_config": find_dict(tv, "deepspeed_config"),
            "ds_cp_suffix_line": lines_containing(tv, "+ '-ds-cp'"),
            "wrap_arg_parser_line": lines_containing(tv, "distributed_utils.wrap_arg_parser(parser)"),
            "set_backend_line": lines_containing(tv, "distributed_utils.set_backend_from_args(args)"),
            "cuda_calls": lines_containing(tv, ".cuda()"),
            "imports_wandb_on_root_line": lines_containing(tv, "import wandb"),
            "set_epoch_lines": lines_containing(tv, ".set_epoch("),
            "training_data_line": lines_containing(tv, "training_data=ds if using_deepspeed else dl"),
            "make_grid_range_line": lines_containing(tv, "range = (-1, 1)"),
            "final_save_line": lines_containing(tv, "save_model('./vae-final.pt')"),
            "distributed_sampler_line": lines_containing(tv, "torch.utils.data.distributed.DistributedSampler("),
        },
        "generate.py": {
            "torch_load_line": lines_containing(srcs["generate.py"], "torch.load(str(dalle_path))"),
            "imports_distributed_utils": "distributed_utils" in srcs["generate.py"],
            "cuda_calls": lines_containing(srcs["generate.py"], ".cuda()"),
            "load_state_dict_line": lines_containing(srcs["generate.py"], "dalle.load_state_dict(weights)"),
        },
    }
    docker = show(git_dir, full, "docker/Dockerfile").splitlines()
    facts["docker/Dockerfile"] = {"lines": {str(i): l for i, l in enumerate(docker, 1) if l.strip()}}
    for p in ("install_deepspeed.sh", "install_apex.sh"):
        facts[p] = {"lines": {str(i): l for i, l in enumerate(show(git_dir, full, p).splitlines(), 1) if l.strip()}}
    setup = show(git_dir, full, "setup.py")
    for node in ast.walk(ast.parse(setup)):
        if isinstance(node, ast.keyword) and node.arg == "install_requires":
            facts["setup.py"] = {"install_requires": ast.literal_eval(node.value)}
    facts[".gitignore"] = {"ignores_dalle_ds_cp": "dalle-ds-cp/" in show(git_dir, full, ".gitignore").splitlines()}
    readme = show(git_dir, full, "README.md")
    readme_lines = readme.splitlines()
    facts["README.md"] = {
        "selected_lines": {str(i): readme_lines[i - 1] for i in sorted(set(
            lines_containing(readme, "$ deepspeed <file>.py [args...] --deepspeed")
            + lines_containing(readme, "horovodrun -np <num-gpus> <file>.py [args...] --distributed_backend horovod")
            + lines_containing(readme, "pip install triton==0.4.2")
            + lines_containing(readme, "docker build -t dalle docker")
            + lines_containing(readme, "docker run --gpus all")
            + lines_containing(readme, "rescale the learning rate")))},
        "deepspeed_launch_line": lines_containing(readme, "$ deepspeed <file>.py [args...] --deepspeed"),
        "horovod_launch_line": lines_containing(readme, "horovodrun -np <num-gpus> <file>.py [args...] --distributed_backend horovod"),
        "triton_pin_line": lines_containing(readme, "pip install triton==0.4.2"),
        "amp_example_lines": lines_containing(readme, "--amp"),
        "docker_build_line": lines_containing(readme, "docker build -t dalle docker"),
        "docker_run_line": lines_containing(readme, "docker run --gpus all"),
    }
    json.dump(facts, sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
