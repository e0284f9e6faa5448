"""One-shot GPU evidence run for the distributed-and-backends references (not a pytest module).

Run on a CUDA machine where deepspeed 0.19.8 and dalle-pytorch 1.6.6 (plus its light deps
axial_positional_embedding and rotary-embedding-torch) are importable. It never downloads anything:
`taming.models.vqgan` and `omegaconf` (only imported by dalle_pytorch/vae.py for VQGAN) are stubbed.
Writes a JSON record to $OUT/result.json (or ./device_result.json) and prints it.

Checks: the train_dalle.py DeepSpeed dict as the script builds it (with the always-present `amp` key)
against deepspeed 0.19.8; the same dict without `amp` for fp16, bf16 and ZeRO-2; the checkpoint folder
layout; `attn_types=('sparse',)`; `--deepspeed_config` together with the in-script dict; torchvision
`make_grid(range=...)`; `import pkg_resources` with the machine's setuptools and with setuptools<82
on `ST81` (a folder that holds setuptools 81).
"""
import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time
import types

R = {}


def rec(key, fn):
    try:
        R[key] = fn()
    except BaseException as exc:  # record everything, including SystemExit from argparse
        R[key] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"


def env():
    import torch
    info = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda": torch.version.cuda,
            "cuda_available": torch.cuda.is_available()}
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["capability"] = list(torch.cuda.get_device_capability(0))
    for name in ("setuptools", "torchvision", "deepspeed", "dalle-pytorch"):
        try:
            from importlib.metadata import version
            info[name] = version(name)
        except Exception as exc:  # noqa: BLE001
            info[name] = f"absent ({type(exc).__name__})"
    return info


def pkg_resources_check():
    out = {}
    for label, extra in (("machine_setuptools", None), ("setuptools_81", os.environ.get("ST81"))):
        envv = dict(os.environ)
        if extra:
            envv["PYTHONPATH"] = extra + os.pathsep + envv.get("PYTHONPATH", "")
        p = subprocess.run([sys.executable, "-c", "import setuptools, pkg_resources; print(setuptools.__version__)"],
                           capture_output=True, text=True, env=envv, timeout=120)
        out[label] = p.stdout.strip() or p.stderr.strip().splitlines()[-1]
    return out


def make_grid_check():
    import torch
    from torchvision.utils import make_grid
    x = torch.rand(4, 3, 8, 8)
    res = {}
    try:
        make_grid(x, nrow=2, normalize=True, range=(-1, 1))
        res["range"] = "accepted"
    except TypeError as exc:
        res["range"] = f"TypeError: {exc}"
    res["value_range"] = list(make_grid(x, nrow=2, normalize=True, value_range=(-1, 1)).shape)
    return res


def stub_vqgan_deps():
    # requests and PIL are only used for downloads / image files; stubbed only where absent.
    for name in ("omegaconf", "taming", "taming.models", "taming.models.vqgan", "requests", "PIL"):
        if name not in sys.modules:
            try:
                __import__(name)
                continue
            except Exception:  # noqa: BLE001
                sys.modules[name] = types.ModuleType(name)
    sys.modules["omegaconf"].OmegaConf = getattr(sys.modules["omegaconf"], "OmegaConf", object)
    vq = sys.modules["taming.models.vqgan"]
    vq.VQModel = getattr(vq, "VQModel", object)
    vq.GumbelVQ = getattr(vq, "GumbelVQ", object)


def dalle_cfg(bs=4, ga=1, clip=0.5, fp16=False, amp=False):
    # Same keys and values as train_dalle.py@58c1e1a lines 481-500 build.
    return {"train_batch_size": bs, "gradient_accumulation_steps": ga, "gradient_clipping": clip,
            "fp16": {"enabled": fp16}, "amp": {"enabled": amp, "opt_level": "O1"},
            "flops_profiler": {"enabled": False, "profile_step": 200, "module_depth": -1, "top_modules": 1,
                               "detailed": True, "output_file": None}}


def main():
    rec("env", env)
    rec("pkg_resources", pkg_resources_check)
    rec("make_grid", make_grid_check)
    st81 = os.environ.get("ST81")
    if st81:
        sys.path.insert(0, st81)
    stub_vqgan_deps()
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import torch
    import dalle_pytorch
    from dalle_pytorch import DALLE, DiscreteVAE, distributed_utils
    R["import_dalle_pytorch"] = f"ok {dalle_pytorch.__version__}"
    parser = distributed_utils.wrap_arg_parser(argparse.ArgumentParser())
    args = parser.parse_args(["--deepspeed"])
    backend = distributed_utils.set_backend_from_args(args)
    backend.initialize()
    R["backend"] = [backend.BACKEND_NAME, backend.get_world_size(), backend.get_rank(), backend.get_local_rank()]

    def build(attn_types=("full", "axial_row", "axial_col", "conv_like")):
        torch.manual_seed(0)
        vae = DiscreteVAE(image_size=32, num_layers=2, num_tokens=64, codebook_dim=32, hidden_dim=16,
                          num_resnet_blocks=0)
        return DALLE(dim=64, vae=vae, num_text_tokens=100, text_seq_len=16, depth=4, heads=2, dim_head=16,
                     attn_types=attn_types)

    def train(cfg, half=False, steps=3, save_to=None, dtype=None):
        model = build()
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.Adam(params, lr=3e-4)
        engine, dopt, _, _ = backend.distribute(args=args, model=model, optimizer=opt, model_parameters=params,
                                                training_data=None, lr_scheduler=None, config_params=cfg)
        losses = []
        t0 = time.time()
        for _ in range(steps):
            text = torch.randint(1, 100, (4, 16)).cuda()
            images = torch.rand(4, 3, 32, 32)
            images = (images.half() if half else images).cuda()
            if dtype is not None:
                images = images.to(dtype)
            loss = engine(text, images, return_loss=True)
            engine.backward(loss)
            engine.step()
            losses.append(round(float(loss), 4))
        out = {"engine": type(engine).__name__, "optimizer": type(dopt).__name__, "losses": losses,
               "seconds": round(time.time() - t0, 2)}
        if save_to is not None:
            engine.save_checkpoint(str(save_to), client_state={"hparams": {"dim": 64}})
            out["files"] = sorted(str(p.relative_to(save_to.parent)) for p in save_to.rglob("*"))
        return out

    rec("train_dalle_dict_fp16_as_built", lambda: train(dalle_cfg(fp16=True), half=True))
    rec("train_dalle_dict_default_as_built", lambda: train(dalle_cfg()))

    def without_amp(**kw):
        cfg = dalle_cfg(**kw)
        cfg.pop("amp")
        return cfg

    rec("no_amp_fp32", lambda: train(without_amp()))
    rec("no_amp_fp16", lambda: train(without_amp(fp16=True), half=True))
    rec("no_amp_bf16_float_images", lambda: train({**without_amp(), "bf16": {"enabled": True}}))
    rec("no_amp_bf16_bf16_images", lambda: train({**without_amp(), "bf16": {"enabled": True}}, dtype=torch.bfloat16))
    rec("no_amp_torch_autocast_bf16", lambda: train({**without_amp(), "torch_autocast": {"enabled": True,
                                                                                      "dtype": "bfloat16"}}))
    tmp = pathlib.Path(tempfile.mkdtemp())
    rec("no_amp_fp16_zero2_save", lambda: train({**without_amp(fp16=True), "zero_optimization": {"stage": 2}},
                                                half=True, save_to=tmp / "dalle-ds-cp"))
    rec("batch_4_ga_3", lambda: train(without_amp(ga=3)))
    rec("attn_types_sparse", lambda: type(build(("sparse",))).__name__)
    jf = tmp / "ds.json"
    jf.write_text(json.dumps(without_amp()))

    def both():
        a2 = argparse.Namespace(**{**vars(args), "deepspeed_config": str(jf)})
        backend.distribute(args=a2, model=build(), optimizer=None, model_parameters=None,
                           config_params=without_amp())
        return "accepted"

    rec("json_and_dict", both)


if __name__ == "__main__":
    try:
        main()
    finally:
        text = json.dumps(R, indent=1, sort_keys=True)
        print(text)
        out = os.environ.get("OUT")
        pathlib.Path(out, "result.json").write_text(text) if out else pathlib.Path("device_result.json").write_text(text)
