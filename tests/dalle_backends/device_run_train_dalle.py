"""One-shot GPU evidence run of the real repository scripts (not a pytest module).

Runs train_dalle.py and generate.py from lucidrains/DALLE-pytorch commit 58c1e1a (copies given in
SCRIPTS_DIR) on one CUDA GPU with deepspeed 0.19.8 and dalle-pytorch 1.6.6 importable, using a tiny
DiscreteVAE and 8 generated images. Stand-ins (stub modules) replace only what needs the network or is
unused here: wandb, youtokentome, taming.models.vqgan and omegaconf. Writes $OUT/train_dalle_run.json.

Runs, in order:
  unpatched   deepspeed launcher, --deepspeed --fp16        (expected: the amp DeepSpeedConfigError)
  lr_decay    python, no backend, --lr_decay                (expected: ReduceLROnPlateau verbose TypeError)
  patched     deepspeed launcher, amp lines 488-491 removed (expected: trains, saves dalle.pt + dalle-ds-cp/)
  resume      patched, --dalle_path dalle.pt --deepspeed    (expected: resumes from dalle-ds-cp/)
  generate    generate.py on dalle.pt; then on dalle-ds-cp/auxiliary.pt (expected: works; fails)
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time

OUT = pathlib.Path(os.environ.get("OUT", "."))
SCRIPTS = pathlib.Path(os.environ["SCRIPTS_DIR"])
WORK = pathlib.Path("/tmp/dalle_work")
STUBS = pathlib.Path("/tmp/dalle_stubs")
R = {}

STUB_FILES = {
    "wandb.py": (
        "class _Run:\n    def log_artifact(self, *a, **k):\n        pass\n"
        "def init(*a, **k):\n    return _Run()\n"
        "def log(*a, **k):\n    pass\n"
        "def save(*a, **k):\n    pass\n"
        "def finish(*a, **k):\n    pass\n"
        "class Image:\n    def __init__(self, *a, **k):\n        pass\n"
        "class Histogram(Image):\n    pass\n"
        "class Artifact:\n    def __init__(self, *a, **k):\n        pass\n"
        "    def add_file(self, *a, **k):\n        pass\n"),
    "youtokentome.py": "class BPE:\n    pass\nclass OutputType:\n    ID = 0\n",
    "omegaconf.py": "class OmegaConf:\n    pass\n",
    "taming/__init__.py": "",
    "taming/models/__init__.py": "",
    "taming/models/vqgan.py": "class VQModel:\n    pass\nclass GumbelVQ(VQModel):\n    pass\n",
}


def run(name, cmd, cwd, timeout=420):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(STUBS), env.get("PYTHONPATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    t0 = time.time()
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    text = p.stdout + p.stderr
    lines = [l for l in text.splitlines() if l.strip() and "[INFO]" not in l]
    errors = [l for l in lines if ("Error" in l or "error" in l) and not l.startswith(" ")]
    R[name] = {"cmd": " ".join(cmd[1:] if cmd[0] == sys.executable else cmd).replace("-m deepspeed.launcher.runner", "deepspeed"), "rc": p.returncode,
               "seconds": round(time.time() - t0, 1), "error_lines": errors[-4:],
               "loss_lines": [l for l in lines if "loss -" in l][-4:], "tail": lines[-6:]}
    return p.returncode


def main():
    for rel, text in STUB_FILES.items():
        f = STUBS / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    sys.path.insert(0, str(STUBS))
    if WORK.exists():
        shutil.rmtree(WORK)
    (WORK / "data").mkdir(parents=True)
    import numpy as np
    import torch
    from PIL import Image
    from dalle_pytorch import DiscreteVAE

    rng = np.random.default_rng(0)
    for i in range(8):
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(WORK / "data" / f"img{i}.png")
        (WORK / "data" / f"img{i}.txt").write_text(f"a noisy square number {i}\nrandom pixels {i}\n")
    hp = dict(image_size=32, num_layers=2, num_tokens=64, codebook_dim=32, hidden_dim=16, num_resnet_blocks=0)
    torch.save({"hparams": hp, "weights": DiscreteVAE(**hp).state_dict()}, WORK / "vae.pt")
    src = (SCRIPTS / "train_dalle.py").read_text().splitlines(keepends=True)
    assert src[487].strip() == "'amp': {" and src[490].strip() == "},", src[487:491]
    (WORK / "train_dalle.py").write_text("".join(src))
    (WORK / "train_dalle_patched.py").write_text("".join(src[:487] + src[491:]))
    shutil.copy(SCRIPTS / "generate.py", WORK / "generate.py")
    R["env"] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    common = ["--image_text_folder", "data", "--vae_path", "vae.pt", "--dim", "64", "--depth", "2", "--heads",
              "2", "--dim_head", "16", "--text_seq_len", "16", "--batch_size", "4", "--epochs", "1",
              "--truncate_captions", "--attn_types", "full,axial_row"]
    # the `deepspeed` console script is `deepspeed.launcher.runner:main`; call the module so no PATH entry is needed
    ds_cmd = [sys.executable, "-m", "deepspeed.launcher.runner"]
    run("unpatched", [*ds_cmd, "--num_gpus", "1", "train_dalle.py", *common, "--deepspeed", "--fp16"], WORK)
    run("lr_decay", [sys.executable, "train_dalle.py", *common, "--lr_decay"], WORK)
    run("patched", [*ds_cmd, "--num_gpus", "1", "train_dalle_patched.py", *common, "--deepspeed", "--fp16"], WORK)
    R["after_patched"] = sorted(str(p.relative_to(WORK)) for p in WORK.rglob("*")
                                if "data" not in p.parts and p.suffix not in (".py",))
    if (WORK / "dalle.pt").exists():
        ck = torch.load(WORK / "dalle.pt", map_location="cpu", weights_only=False)
        aux = torch.load(WORK / "dalle-ds-cp" / "auxiliary.pt", map_location="cpu", weights_only=False)
        R["dalle_pt_keys"] = sorted(ck)
        R["auxiliary_keys"] = sorted(aux)
        R["auxiliary_weights_type"] = type(aux["weights"]).__name__
        R["auxiliary_epoch"] = aux.get("epoch")
    resume = [a if a != "1" or common[i - 1] != "--epochs" else "2" for i, a in enumerate(common)]
    resume = [a for a in resume if a not in ("--vae_path", "vae.pt")]
    run("resume", [*ds_cmd, "--num_gpus", "1", "train_dalle_patched.py", *resume, "--dalle_path", "dalle.pt",
                   "--deepspeed", "--fp16"], WORK)
    run("generate_plain", [sys.executable, "generate.py", "--dalle_path", "dalle.pt", "--text", "a noisy square",
                           "--num_images", "2", "--batch_size", "2"], WORK)
    R["generated"] = sorted(str(p.relative_to(WORK)) for p in (WORK / "outputs").rglob("*")) \
        if (WORK / "outputs").exists() else []
    run("generate_auxiliary", [sys.executable, "generate.py", "--dalle_path", "dalle-ds-cp/auxiliary.pt", "--text",
                               "a noisy square", "--num_images", "2", "--batch_size", "2"], WORK)


if __name__ == "__main__":
    try:
        main()
    finally:
        text = json.dumps(R, indent=1, sort_keys=True)
        print(text)
        (OUT / "train_dalle_run.json").write_text(text)
