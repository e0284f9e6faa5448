"""Behaviour claims of the DALLE-pytorch sub-skills, run on CPU with a tiny model (dalle_cpu.py).

Each fixture runs DALLE-pytorch 1.6.6's own code once in a child process and returns what it saw;
each test checks one or more statements of the references against that observation. Claims about
what the repository-only training scripts do run the scripts' own lines, recorded verbatim with
their line numbers in script_lines_58c1e1a.json.
"""
from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path

import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from dalle_cpu import run  # noqa: E402

REPO = HERE.parent.parent
SUB = REPO / "sub-skills"
LINES = json.loads((HERE / "script_lines_58c1e1a.json").read_text())


def doc(rel: str) -> str:
    return " ".join((SUB / rel).read_text(encoding="utf-8").split())


def row(rel: str, first_cell: str) -> str:
    rows = [ln for ln in (SUB / rel).read_text(encoding="utf-8").splitlines() if ln.startswith("| " + first_cell)]
    assert rows, (rel, first_cell)
    return rows[0]  # the first table that has the row


GEN = "generation-and-ranking/references/clip-reranking.md"
GEN_SCRIPT = "generation-and-ranking/references/generate-script.md"
ARGS = "dalle-training/references/dalle-model-arguments.md"
VAE = "vae-training/references/vae-choices.md"
TRAIN_VAE = "vae-training/references/train-vae-script.md"
FLAGS = "dalle-training/references/train-dalle-flags.md"


@pytest.fixture(scope="module")
def gen():
    """generate_images: truncation, the top-k filter, priming, CLIP scoring, decode range."""
    return run('''
import dalle_pytorch.dalle_pytorch as dp
obs = {}
dalle = tiny_dalle()
g = lambda s: torch.Generator().manual_seed(s)
text = torch.randint(1, 20, (2, 4), generator=g(3))
# rows longer than text_seq_len are cut
torch.manual_seed(1); a = dalle.generate_images(torch.cat([text, text], 1))
torch.manual_seed(1); b = dalle.generate_images(text)
obs["cut"] = torch.equal(a, b)
obs["shape"] = list(b.shape)
# filter: what reaches gumbel_sample
kept = []
orig = dp.gumbel_sample
def spy(t, temperature=1., dim=-1):
    fin = torch.isfinite(t[0])
    kept.append([int(fin.sum()), int(fin[dalle.num_text_tokens:].sum())])
    return orig(t, temperature=temperature, dim=dim)
dp.gumbel_sample = spy
for thres in (0.5, 0.9):
    kept.clear(); dalle.generate_images(text[:1], filter_thres=thres)
    obs[f"kept-{thres}"] = list(kept)
dp.gumbel_sample = orig
obs["n"] = dalle.total_tokens; obs["num_text_tokens"] = dalle.num_text_tokens; obs["image_seq_len"] = dalle.image_seq_len
# priming
calls = []
fwd = DALLE.forward
def count(self, *a, **k):
    calls.append(1); return fwd(self, *a, **k)
DALLE.forward = count
img = torch.rand(1, 3, 8, 8, generator=g(4))
dalle.generate_images(text[:1], img=img); obs["primed_calls"] = len(calls)
calls.clear(); dalle.generate_images(text[:1], img=img, num_init_img_tokens=3); obs["primed_calls_3"] = len(calls)
calls.clear(); dalle.generate_images(text[:1], filter_thres=0.9); obs["sample_calls"] = len(calls)
DALLE.forward = fwd
try:
    dalle.generate_images(text[:1], img=img, num_init_img_tokens=16); obs["prime_all"] = "ok"
except AssertionError as e:
    obs["prime_all"] = str(e)
rgba = tiny_dalle(vae=DiscreteVAE(image_size=8, num_layers=1, num_tokens=16, codebook_dim=8, hidden_dim=8, channels=4))
try:
    rgba.generate_images(text[:1], img=torch.rand(1, 4, 8, 8)); obs["rgba_prime"] = "ok"
except AssertionError as e:
    obs["rgba_prime"] = "AssertionError"
try:
    dalle.generate_images(text[:1], mask=torch.ones(1, 4).bool()); obs["mask"] = "ok"
except TypeError as e:
    obs["mask"] = str(e)
# CLIP scoring
clip = CLIP(dim_text=16, dim_image=16, dim_latent=16, num_text_tokens=20, text_enc_depth=1, text_seq_len=4,
            text_heads=2, visual_enc_depth=1, visual_heads=2, visual_image_size=8, visual_patch_size=4)
torch.manual_seed(2); res = dalle.generate_images(text, clip=clip)
obs["clip_result"] = [type(res).__name__, len(res), list(res[1].shape)]
obs["clip_scores_match"] = torch.allclose(res[1], clip(text, res[0], return_loss=False))
# decode is not clamped
obs["decode_range"] = [float(res[0].min()), float(res[0].max())]
print(json.dumps(obs))
''')


@pytest.fixture(scope="module")
def clip_and_texts():
    """CLIP's failure modes and generate_texts."""
    return run('''
obs = {}
def err(fn):
    try:
        fn(); return "ok"
    except Exception as e:
        return type(e).__name__ + ": " + str(e)[:120]
def mk(**kw):
    args = dict(dim_text=16, dim_image=16, dim_latent=16, num_text_tokens=20, text_enc_depth=1, text_seq_len=4,
                text_heads=2, visual_enc_depth=1, visual_heads=2, visual_image_size=8, visual_patch_size=4)
    args.update(kw); torch.manual_seed(0); return CLIP(**args)
clip = mk()
text = torch.tensor([[5, 3, 0, 0]]); img = torch.rand(1, 3, 8, 8)
obs["ids_too_big"] = err(lambda: clip(torch.tensor([[25, 3, 0, 0]]), img))
obs["patch_not_dividing_ctor"] = err(lambda: mk(visual_patch_size=3))
obs["image_not_divisible"] = err(lambda: clip(text, torch.rand(1, 3, 10, 10)))
obs["image_larger"] = err(lambda: clip(text, torch.rand(1, 3, 16, 16)))
obs["image_smaller"] = err(lambda: clip(text, torch.rand(1, 3, 4, 4)))
a, b = mk(), mk(num_visual_tokens=1)
obs["num_visual_tokens_unused"] = torch.equal(a(text, img), b(text, img)) and \
    [(k, v.shape) for k, v in a.state_dict().items()] == [(k, v.shape) for k, v in b.state_dict().items()]
mask = text != 0
obs["padding_in_average"] = not torch.allclose(clip(text, img), clip(text, img, text_mask=mask))
obs["score_formula"] = float(clip.temperature.exp())
# generate_texts
dalle = tiny_dalle()
obs["texts_cpu"] = err(lambda: dalle.generate_texts(None))
class Lib:
    def encode(self, s): return [int(c) for c in s.split()]
    def decode(self, toks, pad_tokens=()):
        return " ".join(str(int(t)) for t in toks if int(t) not in pad_tokens)
class Wrapped:
    tokenizer = Lib()
torch.Tensor.cuda = lambda self, *a, **k: self
toks, texts = dalle.generate_texts(Wrapped(), None)
obs["texts_scratch"] = [list(toks.shape), type(texts).__name__, len(texts), int(toks[0, 0])]
toks, texts = dalle.generate_texts(Wrapped(), "7 8")
obs["texts_prompt"] = [toks[0, :2].tolist(), list(toks.shape)]
obs["texts_no_attr"] = err(lambda: dalle.generate_texts(object(), "7 8"))
print(json.dumps(obs))
''')


@pytest.fixture(scope="module")
def model():
    """DALLE constructor arguments and forward."""
    return run('''
from dalle_pytorch.transformer import LayerScale, NonCached, CachedAs
from dalle_pytorch.attention import Attention
obs = {}
def err(fn):
    try:
        fn(); return "ok"
    except Exception as e:
        return type(e).__name__ + ": " + str(e)[:140]
g = lambda s: torch.Generator().manual_seed(s)
text = torch.tensor([[5, 3, 0, 0]]); img = torch.rand(1, 3, 8, 8, generator=g(4))
base = tiny_dalle()
obs["vae_frozen"] = not any(p.requires_grad for p in base.vae.parameters())
obs["num_text_tokens"] = base.num_text_tokens
def logits(m, t=text): 
    m.eval(); return m(t, img)
obs["sparse_attn_noop"] = torch.equal(logits(tiny_dalle()), logits(tiny_dalle(sparse_attn=True)))
obs["attn_types_none_is_full"] = torch.equal(logits(tiny_dalle()), logits(tiny_dalle(attn_types=("full",))))
pad = base.num_text_tokens - base.text_seq_len
obs["zero_is_padding"] = torch.equal(logits(base), logits(base, torch.tensor([[5, 3, pad + 2, pad + 3]])))
obs["wrong_len"] = err(lambda: base(torch.tensor([[5, 3, 0]]), img))
losses = {}
for w in (0, 1, 7):
    m = tiny_dalle(loss_img_weight=w); m.eval(); losses[w] = float(m(text, img, return_loss=True))
t, i = losses[0], 2 * losses[1] - losses[0]
obs["loss_formula"] = abs(losses[7] - (t + 7 * i) / 8) < 1e-5
names = lambda m: {n.split(".")[0] for n, _ in m.named_parameters()}
obs["rotary_pos_params"] = sorted(names(tiny_dalle()) & {"text_pos_emb", "image_pos_emb"})
obs["learned_pos_params"] = sorted(names(tiny_dalle(rotary_emb=False)) & {"text_pos_emb", "image_pos_emb"})
count = lambda m: sum(p.numel() for p in m.parameters())
shared = tiny_dalle(depth=2, shared_attn_ids=(0, 0))
attns = {id(l[0].fn.fn) for l in shared.transformer.layers.layers}
obs["shared_attn"] = [count(shared) < count(tiny_dalle(depth=2)), len({id(m) for m in shared.modules() if isinstance(m, Attention)})]
obs["shared_mismatch"] = err(lambda: tiny_dalle(depth=2, attn_types=("full", "conv_like"), shared_attn_ids=(0, 0)))
tied = tiny_dalle(share_input_output_emb=True)
obs["tied"] = [count(tied) < count(tiny_dalle()), sorted(n for n, _ in tied.named_parameters() if "emb" in n and "pos" not in n)]
obs["unknown_type"] = err(lambda: tiny_dalle(attn_types=("dense",)))
deep = tiny_dalle(depth=25)
scales = [float(m.scale.flatten()[0]) for m in deep.modules() if isinstance(m, LayerScale)][::2]
obs["layerscale"] = [scales[0], scales[17], scales[18], scales[23], scales[24]]
ff = tiny_dalle().transformer.layers.layers[0][1].fn.fn
lin = [m for m in ff.modules() if isinstance(m, torch.nn.Linear)]
obs["ff_shapes"] = [[l.in_features, l.out_features] for l in lin]
# which layers keep a key/value cache during guided, cached generation
def cache_kinds(**kw):
    m = tiny_dalle(depth=4, **kw)
    seen = {}
    orig = DALLE.forward
    def spy(self, *a, cache=None, **k):
        out = orig(self, *a, cache=cache, **k)
        if cache is not None:
            for key, v in cache.items():
                if key is None or str(key).startswith("attn_"):
                    seen[str(key)] = "kv" if isinstance(v, tuple) else "input"
        return out
    DALLE.forward = spy
    try:
        m.generate_images(text, cond_scale=2, use_cache=True)
    finally:
        DALLE.forward = orig
    return seen
obs["cache_plain"] = cache_kinds(attn_types=("full", "axial_row", "axial_col", "conv_like"), shift_tokens=False)
obs["cache_optimized"] = cache_kinds(attn_types=("full", "axial_row", "axial_col", "conv_like"), shift_tokens=False, optimize_for_inference=True)
st = tiny_dalle(stable=True)
obs["stable"] = type(getattr(st, "norm_by_max", None)).__name__
h = tiny_dalle().half()
obs["half_vae"] = str(next(h.vae.parameters()).dtype)
# one training step per sparse attention type, with and without rotary embeddings
obs["train_attn"] = {}
for attn in ("full", "axial_row", "axial_col", "conv_like"):
    for rot in (False, True):
        try:
            m = tiny_dalle(attn_types=(attn,), rotary_emb=rot)
            m(torch.randint(1, 20, (1, 4)), torch.randint(0, 16, (1, 16)), return_loss=True).backward()
            obs["train_attn"][f"{attn}/{rot}"] = "ok"
        except RuntimeError as e:
            obs["train_attn"][f"{attn}/{rot}"] = str(e).splitlines()[0][:80]
print(json.dumps(obs))
''')


@pytest.fixture(scope="module")
def vae():
    """DiscreteVAE."""
    return run('''
obs = {}
def err(fn):
    try:
        fn(); return "ok"
    except Exception as e:
        return type(e).__name__ + ": " + str(e)[:140]
kw = dict(image_size=8, num_layers=1, num_tokens=16, codebook_dim=8, hidden_dim=8)
obs["not_pow2"] = err(lambda: DiscreteVAE(**{**kw, "image_size": 12}))
obs["zero_layers"] = err(lambda: DiscreteVAE(**{**kw, "num_layers": 0}))
torch.manual_seed(0)
vae = DiscreteVAE(**kw, smooth_l1_loss=True, kl_div_loss_weight=0.1)
img = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
res = vae(img, return_loss=True, return_recons=True, temp=0.7)
obs["loss_recons"] = [res[0].dim(), list(res[1].shape)]
logits = vae(img, return_logits=True)
obs["logits_shape"] = list(logits.shape)
a, b = vae.get_codebook_indices(img), vae.get_codebook_indices(img)
obs["indices_argmax"] = torch.equal(a, b) and torch.equal(a, logits.argmax(1).flatten(1))
seen = []
h = vae.encoder.register_forward_pre_hook(lambda m, inp: seen.append(inp[0]))
vae(img, return_logits=True); h.remove()
obs["normalised_input"] = torch.allclose(seen[0], (img - 0.5) / 0.5)
obs["norm_rgba"] = [list(map(list, DiscreteVAE(**kw, channels=4).normalization)), list(map(list, vae.normalization))]
torch.manual_seed(3); t_default = vae(img)
torch.manual_seed(3); t_09 = vae(img, temp=0.9)
obs["default_temp"] = torch.equal(t_default, t_09)
torch.manual_seed(0); r1 = DiscreteVAE(**kw, reinmax=True)
torch.manual_seed(0); r0 = DiscreteVAE(**kw)
torch.manual_seed(4); o1 = r1(img, return_loss=True)
torch.manual_seed(4); o0 = r0(img, return_loss=True)
obs["reinmax_alone_noop"] = torch.equal(o1, o0)
hparams = dict(image_size=8, num_layers=1, num_tokens=16, channels=3, codebook_dim=8, hidden_dim=8, num_resnet_blocks=0)
rebuilt = DiscreteVAE(**hparams); rebuilt.load_state_dict(vae.state_dict())
obs["rebuilt_same_codes"] = torch.equal(rebuilt.get_codebook_indices(img), a) and torch.equal(rebuilt.decode(a), vae.decode(a))
d = tiny_dalle(vae=DiscreteVAE(image_size=16, num_layers=2, num_tokens=16, codebook_dim=8, hidden_dim=8))
obs["image_seq_len"] = d.image_seq_len
print(json.dumps(obs))
''')


@pytest.fixture(scope="module")
def guidance():
    """What cond_scale != 1 does to the prompt tensor."""
    return run('''
obs = {}
m = tiny_dalle()
text = torch.tensor([[5, 3, 7, 0]])
seen = []
orig = DALLE.forward
def spy(self, text, *a, null_cond_prob=0., **k):
    seen.append((null_cond_prob, text[0].tolist()))
    return orig(self, text, *a, null_cond_prob=null_cond_prob, **k)
DALLE.forward = spy
m.generate_images(text, cond_scale=2)
obs["caller_text_after"] = text[0].tolist()
obs["first_calls"] = seen[:4]
t2 = torch.tensor([[5, 3, 7, 0]]); seen.clear()
m.generate_images(t2)
obs["caller_text_after_scale1"] = t2[0].tolist()
# per token: does the conditional pass equal the text-dropped one? (uncached and cached)
outs = []
def spy2(self, *a, **k):
    o = orig(self, *a, **k); outs.append(o[:, -1].clone()); return o
DALLE.forward = spy2
for uc in (False, True):
    outs.clear()
    m.generate_images(torch.tensor([[5, 3, 7, 0]]), cond_scale=2, use_cache=uc)
    obs[f"same-pair-{uc}"] = [bool(torch.allclose(c, n)) for c, n in zip(outs[0::2], outs[1::2])]
DALLE.forward = orig
# with clip=: what text does CLIP score against?
clip = CLIP(dim_text=16, dim_image=16, dim_latent=16, num_text_tokens=20, text_enc_depth=1, text_seq_len=4,
            text_heads=2, visual_enc_depth=1, visual_heads=2, visual_image_size=8, visual_patch_size=4)
seen_text = []
orig_clip = CLIP.forward
def clip_spy(self, text, *a, **k):
    seen_text.append(text[0].tolist()); return orig_clip(self, text, *a, **k)
CLIP.forward = clip_spy
m.generate_images(torch.tensor([[5, 3, 7, 0]]), cond_scale=2, clip=clip)
CLIP.forward = orig_clip
obs["clip_text"] = seen_text[0]
# the out-of-place patch of DALLE.forward restores guidance
import inspect, textwrap
src = textwrap.dedent(inspect.getsource(orig))
assert src.count("text *= rearrange(~null_mask, 'b -> b 1')") == 1
ns = dict(vars(sys.modules[DALLE.__module__]))
exec(src.replace("text *= rearrange(~null_mask, 'b -> b 1')", "text = text * rearrange(~null_mask, 'b -> b 1')"), ns)
DALLE.forward = ns["forward"]
t3 = torch.tensor([[5, 3, 7, 0]]); outs.clear()
def spy3(self, text, *a, null_cond_prob=0., **k):
    outs.append((null_cond_prob, text[0].tolist())); return ns["forward"](self, text, *a, null_cond_prob=null_cond_prob, **k)
DALLE.forward = spy3
m.generate_images(t3, cond_scale=2)
obs["patched_calls"] = outs[2:4]
obs["patched_caller_text"] = t3[0].tolist()
DALLE.forward = orig
print(json.dumps(obs))
''')


@pytest.fixture(scope="module")
def loader():
    """TextImageDataset (dalle_pytorch/loader.py) on a small folder; PIL and torchvision replaced by
    stand-ins that hand the path through (a file holding b"bad" is an unreadable image)."""
    return run('''
import tempfile, pathlib, types, random
tv = types.ModuleType("torchvision"); tvt = types.ModuleType("torchvision.transforms")
class _T:
    def __init__(self, *a, **k): pass
    def __call__(self, x): return x
class Compose:
    def __init__(self, fs): self.fs = fs
    def __call__(self, x):
        for f in self.fs: x = f(x)
        return x
tvt.Compose, tvt.Lambda, tvt.RandomResizedCrop, tvt.ToTensor = Compose, _T, _T, _T
tv.transforms = tvt; sys.modules["torchvision"] = tv; sys.modules["torchvision.transforms"] = tvt
PIL = sys.modules["PIL"]
class UnidentifiedImageError(OSError): pass
PIL.UnidentifiedImageError = UnidentifiedImageError
def _open(path):
    if pathlib.Path(path).read_bytes() == b"bad": raise UnidentifiedImageError(path)
    return str(path)
PIL.Image = types.SimpleNamespace(open=_open)
from dalle_pytorch.loader import TextImageDataset
class Tok:
    def tokenize(self, text, context_length, truncate_text=False):
        return torch.tensor([[len(text)]])
obs = {}
root = pathlib.Path(tempfile.mkdtemp())
(root / "a").mkdir(); (root / "b").mkdir(); (root / "c").mkdir()
(root / "a" / "one.jpg").write_bytes(b"img"); (root / "b" / "one.txt").write_text("first\\n\\nsecond\\n")
(root / "a" / "UP.JPG").write_bytes(b"img"); (root / "a" / "UP.txt").write_text("x")
(root / "a" / "two.png").write_bytes(b"img"); (root / "c" / "two.png").write_bytes(b"img"); (root / "a" / "two.txt").write_text("yy")
(root / "a" / "empty.bmp").write_bytes(b"img"); (root / "a" / "empty.txt").write_text("\\n\\n")
(root / "a" / "bad.jpeg").write_bytes(b"bad"); (root / "a" / "bad.txt").write_text("zzz")
ds = TextImageDataset(str(root), tokenizer=Tok(), shuffle=False)
obs["keys"] = sorted(ds.keys)
lens = set()
random.seed(0)
k = ds.keys.index("one")
for _ in range(40):
    lens.add(int(ds[k][0]))
obs["one_caption_lengths"] = sorted(lens)
obs["order"] = list(ds.keys)
obs["skip"] = {name: int(ds[ds.keys.index(name)][0]) for name in ("empty", "bad")}
obs["empty_folder"] = len(TextImageDataset(tempfile.mkdtemp(), tokenizer=Tok()))
print(json.dumps(obs))
''')


@pytest.fixture(scope="module")
def checkpoint():
    """What generate.py and a resume do with a saved DALLE state dict."""
    return run('''
        obs = {}
        trained = tiny_dalle()
        sd = trained.state_dict()
        obs["vae_keys"] = sum(k.startswith("vae.") for k in sd)
        torch.manual_seed(7)
        fresh = DALLE(vae=DiscreteVAE(image_size=8, num_layers=1, num_tokens=16, codebook_dim=8, hidden_dim=8),
                      dim=32, num_text_tokens=20, text_seq_len=4, depth=1, heads=2, dim_head=16)
        fresh.load_state_dict(sd)
        obs["vae_restored"] = all(torch.equal(a, b) for a, b in zip(fresh.vae.state_dict().values(), trained.vae.state_dict().values()))
        try:
            fresh.load_state_dict("weights are in the DeepSpeed folder")
            obs["string_weights"] = "ok"
        except TypeError as e:
            obs["string_weights"] = str(e)
        p = [torch.nn.Parameter(torch.zeros(1))]
        old = torch.optim.Adam(p, lr=3e-4); new = torch.optim.Adam(p, lr=1e-3)
        new.load_state_dict(old.state_dict())
        obs["lr_after_restore"] = new.param_groups[0]["lr"]
        print(json.dumps(obs))
    ''')


# ----------------------------------------------------------------------------- generate_images

def test_text_rows_are_cut_and_images_have_the_vae_shape(gen):
    assert gen["cut"] and gen["shape"] == [2, 3, 8, 8]
    r = row(GEN, "`text` | required")
    assert "longer rows are cut to `text_seq_len`" in r
    assert "shape `(batch, channels, image_size, image_size)`" in doc(GEN)


def test_filter_keeps_k_of_the_whole_vocabulary_and_image_codes_are_min_k(gen):
    n, text_tokens = gen["n"], gen["num_text_tokens"]
    codes = n - text_tokens
    for thres in (0.5, 0.9):
        k = max(int((1 - thres) * n), 1)  # the expression the reference states
        steps = gen[f"kept-{thres}"]
        assert len(steps) == gen["image_seq_len"]
        assert all(total == k and image == min(k, codes) for total, image in steps), (thres, steps)
    assert "Keep the top `max(int((1 - filter_thres) * n), 1)` logits, `n` = text + image vocabulary" in row(GEN, "`filter_thres` |")
    assert "the image-token candidates are `min(k, num_tokens)`" in doc(GEN_SCRIPT)


def test_priming_length_and_its_limits(gen):
    seq = gen["image_seq_len"]
    assert gen["primed_calls"] == seq - int(0.4375 * seq)  # one forward per token not primed
    assert gen["primed_calls_3"] == seq - 3
    assert "must be less than the total image token sequence length" in gen["prime_all"]
    assert gen["rgba_prime"] == "AssertionError"
    r = row(GEN, "`num_init_img_tokens` |")
    assert "`None` means `int(0.4375 * image_seq_len)`; must be below `image_seq_len`" in r
    assert "Asserts 3 channels, so RGBA (`--transparent`) models cannot be primed" in row(GEN, "`img` |")


def test_one_uncached_forward_per_image_token_for_the_training_sample(gen):
    # train_dalle.py's sampling call, run as the script writes it
    assert "dalle.generate_images(text[:1], filter_thres=0.9)" in LINES["train_dalle.py"]["646"]
    assert gen["sample_calls"] == gen["image_seq_len"]
    assert "one uncached forward pass per image token" in doc(FLAGS)
    assert "One forward pass per image token" in doc(GEN_SCRIPT)


def test_unknown_keyword_mask_is_a_type_error(gen):
    assert gen["mask"] == "DALLE.generate_images() got an unexpected keyword argument 'mask'"
    assert "`TypeError: generate_images() got an unexpected keyword argument 'mask'`" in doc(GEN)


def test_clip_scores_come_back_with_the_images(gen):
    kind, length, shape = gen["clip_result"]
    assert (kind, length, shape) == ("tuple", 2, [2]) and gen["clip_scores_match"]
    assert "when given, the result is `(images, scores)`" in row(GEN, "`clip` |")
    assert "`generate_images` calls `clip(text_tokens, images, return_loss=False)`, which returns one similarity per row" in doc(GEN)
    assert "shape `(batch,)`" in doc(GEN)


def test_discrete_vae_decode_is_not_clamped(gen):
    low, high = gen["decode_range"]
    assert low < 0  # outside [0, 1]: no clamp, no de-normalisation
    assert "not clamped: `decode` does not undo `norm`" in row(GEN, "`DiscreteVAE` |")


def test_guidance_zeroes_the_prompt_in_place(guidance):
    calls = guidance["first_calls"]
    assert calls[0] == [0.0, [5, 3, 7, 0]] and calls[1] == [1.0, [5, 3, 7, 0]]
    assert calls[2] == [0.0, [0, 0, 0, 0]]  # the conditional pass of the second token sees no prompt
    assert guidance["caller_text_after"] == [0, 0, 0, 0]
    assert guidance["caller_text_after_scale1"] == [5, 3, 7, 0]
    # uncached: from the second token on both passes are identical, so guidance changes nothing
    uncached, cached = guidance["same-pair-False"], guidance["same-pair-True"]
    assert uncached[0] is False and all(uncached[1:]), uncached
    assert not all(cached[1:])  # cached: the passes differ, so cached and uncached guidance disagree
    assert guidance["clip_text"] == [0, 0, 0, 0]  # CLIP scores against the zeroed prompt
    # patched out of place: the second token's conditional pass still sees the prompt, the caller's tensor is kept
    assert guidance["patched_calls"] == [[0.0, [5, 3, 7, 0]], [1.0, [5, 3, 7, 0]]]
    assert guidance["patched_caller_text"] == [5, 3, 7, 0]
    text = doc(GEN)
    assert "the first image token's text-dropped pass zeroes the prompt in place" in text
    assert "your `text` tensor comes back filled with zeros" in text
    assert "patch that line of `dalle_pytorch/dalle_pytorch.py` (`DALLE.forward`) to the out-of-place `text = text * ...`" in text
    assert "with `clip=`, CLIP scores the images against the zeroed prompt" in text
    assert "from the second image token on, both passes are identical" in text
    assert "`use_cache=True` gives other results than `use_cache=False` under guidance" in text
    assert "**Broken in 1.6.6**" in row(GEN, "`cond_scale` |")
    assert "zeroes the prompt tensor in place" in doc("generation-and-ranking/SKILL.md")


# ----------------------------------------------------------------------------- CLIP and generate_texts

def test_clip_failure_modes(clip_and_texts):
    o = clip_and_texts
    assert o["ids_too_big"] == "IndexError: index out of range in self"
    assert o["patch_not_dividing_ctor"] == "AssertionError: Image dimensions must be divisible by the patch size."
    assert o["image_not_divisible"].startswith("EinopsError")
    assert o["image_larger"] == "IndexError: index out of range in self" and o["image_smaller"] == "ok"
    pit = doc(GEN)
    assert "`IndexError: index out of range in self` in CLIP's text embedding" in pit
    assert "`AssertionError: Image dimensions must be divisible by the patch size.` when building `CLIP`" in pit
    assert "`EinopsError` in CLIP's patch `rearrange` while scoring" in pit
    assert "Images larger than `visual_image_size`" in pit and "Smaller images pass silently" in pit


def test_clip_constructor_and_score_facts(clip_and_texts):
    assert clip_and_texts["num_visual_tokens_unused"]
    assert "unused by the forward pass" in row(GEN, "`num_visual_tokens` |")
    assert clip_and_texts["padding_in_average"]  # without a mask the padding positions count
    assert "No text mask is passed, so padding positions take part in the text average" in doc(GEN)
    assert abs(clip_and_texts["score_formula"] - math.e) < 1e-5  # exp(learned temperature), initialised to 1
    assert "cosine similarity times `exp(temperature)`" in doc(GEN)


def test_generate_texts_needs_cuda_a_wrapped_tokenizer_and_returns_one_text(clip_and_texts):
    o = clip_and_texts
    assert o["texts_cpu"] == "AssertionError: Torch not compiled with CUDA enabled"
    assert o["texts_scratch"] == [[1, 4], "list", 1, 0]  # from scratch: starts at token 0
    assert o["texts_prompt"] == [[7, 8], [1, 4]]
    assert o["texts_no_attr"].startswith("AttributeError") and "'tokenizer'" in o["texts_no_attr"]
    text = doc(GEN)
    assert "Needs a CUDA device: the prompt tokens are moved with `.cuda()`" in text
    assert "a `(1, text_seq_len)` tensor and a list with one string" in text
    assert "`None` or empty starts from scratch" in row(GEN, "`text` | `None`")
    assert "the default `SimpleTokenizer` has none: `AttributeError`" in row(GEN, "`tokenizer` |")


# ----------------------------------------------------------------------------- DALLE arguments

def test_dalle_constructor_arguments_behave_as_documented(model):
    assert model["vae_frozen"] and "frozen (no gradients)" in row(ARGS, "`vae` |")
    assert model["num_text_tokens"] == 20 + 4
    assert "`text_seq_len` reserved padding ids are added on top" in row(ARGS, "`num_text_tokens` |")
    assert model["sparse_attn_noop"] and "has no effect in 1.6.6" in row(ARGS, "`sparse_attn` |")
    assert model["attn_types_none_is_full"] and "`None` means `('full',)`" in row(ARGS, "`attn_types` |")
    assert model["rotary_pos_params"] == [] and model["learned_pos_params"] == ["image_pos_emb", "text_pos_emb"]
    assert "learned text and axial image position embeddings are then disabled" in row(ARGS, "`rotary_emb` |")
    fewer, n_attn = model["shared_attn"]
    assert fewer and n_attn == 1 and "equal ids share one attention module" in row(ARGS, "`shared_attn_ids` |")
    assert model["shared_mismatch"].startswith("ValueError: attn_types do not match shared_attn_ids")
    assert "layers sharing an id must have the same attention type" in doc(ARGS)
    fewer, own_tables = model["tied"]
    assert fewer and own_tables == [] and "reuse slices of the output projection weight" in row(ARGS, "`share_input_output_emb` |")
    assert model["unknown_type"] == 'ValueError: attention type "dense" is not valid'
    assert 'An unknown value raises `ValueError: attention type "..." is not valid`' in doc(ARGS)
    assert model["stable"] == "DivideMax" and "output `DivideMax`" in row(ARGS, "`stable` |")


def test_fixed_internals(model):
    first, at18, at19, at24, at25 = model["layerscale"]
    assert math.isclose(first, 0.1, rel_tol=1e-6) and math.isclose(at18, 0.1, rel_tol=1e-6)
    assert math.isclose(at19, 1e-5, rel_tol=1e-6) and math.isclose(at24, 1e-5, rel_tol=1e-6)
    assert math.isclose(at25, 1e-6, rel_tol=1e-6)
    assert model["ff_shapes"] == [[32, 32 * 4 * 2], [32 * 4, 32]]  # GEGLU: doubled input projection
    text = doc(ARGS)
    assert "feed-forward multiplier 4 with GEGLU" in text and "(0.1 up to layer 18, 1e-5 up to 24, 1e-6 beyond)" in text


def test_loss_weighting_and_padding_and_length_check(model):
    assert model["loss_formula"]
    assert "loss = (text + w * image) / (w + 1)" in row(FLAGS, "`--loss_img_weight` |")
    assert model["zero_is_padding"]
    assert "`DALLE.forward` turns every 0 into a padding id" in doc("dalle-training/references/data-and-tokenizers.md")
    assert "does not have the correct length" in model["wrong_len"]
    assert "does not have the correct length" in doc("dalle-training/SKILL.md")


def test_which_attention_types_keep_a_generation_cache(model):
    # attn_0 full, attn_1 axial_row, attn_2 axial_col, attn_3 conv_like; 'None' holds the inputs
    # of the layers that recompute
    assert model["cache_plain"] == {"attn_0": "kv", "None": "input"}
    assert model["cache_optimized"] == {"attn_0": "kv", "attn_1": "kv", "attn_2": "kv", "None": "input"}
    assert re.search(r"\| `full` \| [^|]+\| yes \|", (SUB / ARGS).read_text())
    for axial in ("axial_row", "axial_col"):
        assert "only with `optimize_for_inference=True`" in row(ARGS, f"`{axial}` |")
    assert row(ARGS, "`conv_like` |").split("|")[3].strip() == "no"


def test_sparse_attention_types_train_only_with_rotary_embeddings(model):
    # torch 2.13.0: without rotary embeddings q is a view of to_qkv(x).chunk(...), and
    # `q *= self.scale` (attention.py, SparseConvCausalAttention / SparseAxialCausalAttention) is an
    # in-place write autograd refuses; apply_pos_emb makes a fresh q when rotary_emb is on
    t = model["train_attn"]
    assert t["full/False"] == t["full/True"] == "ok"
    for attn in ("axial_row", "axial_col", "conv_like"):
        assert t[f"{attn}/True"] == "ok"
        assert t[f"{attn}/False"].startswith("Output 0 of ReshapeAlias is a view and is being modified inplace")
    text = " ".join((SUB / ARGS).read_text().split())
    assert "Output 0 of ReshapeAlias is a view and is being modified inplace" in text
    assert "--rotary_emb" in text.split("## Attention types", 1)[1]


def test_fp16_flag_casts_the_vae_too(model):
    assert model["half_vae"] == "torch.float16"
    assert "the whole model (VAE included) is cast with `.half()`" in row(FLAGS, "`--fp16` |")


# ----------------------------------------------------------------------------- DiscreteVAE

def test_discrete_vae_checks_and_outputs(vae):
    assert vae["not_pow2"] == "AssertionError: image size must be a power of 2"
    assert "`AssertionError: image size must be a power of 2`" in doc(TRAIN_VAE)
    assert vae["zero_layers"].startswith("AssertionError") and "must be at least 1" in row(VAE, "`num_layers` |")
    assert vae["loss_recons"] == [0, [2, 3, 8, 8]]
    assert "Forward with `return_loss=True, return_recons=True, temp=<current>`" in doc(TRAIN_VAE)
    assert vae["logits_shape"] == [2, 16, 4, 4]
    assert "the encoder's last 1x1 conv outputs this many channels" in row(VAE, "`num_tokens` |")
    assert vae["indices_argmax"] and "(argmax of encoder logits, no sampling)" in doc(VAE)
    assert vae["normalised_input"] and "normalizes internally (mean 0.5, std 0.5 per channel by default)" in doc(TRAIN_VAE)
    rgba, rgb = vae["norm_rgba"]
    assert rgba == [[0.5, 0.5, 0.5, 0], [0.5, 0.5, 0.5, 1]] and rgb == [[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]]
    assert "sliced to `channels`" in row(VAE, "`normalization` |")
    assert vae["default_temp"] and "when `forward` gets no `temp`" in row(VAE, "`temperature` |")
    assert vae["reinmax_alone_noop"] and "only used together with `straight_through=True`" in row(VAE, "`reinmax` |")


def test_vae_rebuilt_from_saved_hparams_encodes_the_same(vae):
    assert vae["rebuilt_same_codes"]
    assert "other options fall back to class defaults, which do not affect encoding" in doc(TRAIN_VAE)
    assert vae["image_seq_len"] == (16 // 2 ** 2) ** 2
    text = doc(VAE)
    assert "feature map side = `image_size // 2**num_layers`" in text and "side squared (this is `DALLE.image_seq_len`)" in text


# ----------------------------------------------------------------------------- training-script lines, run

def test_train_vae_anneals_and_decays_only_every_100_iterations():
    lines = LINES["train_vae.py"]
    assert lines["252"].strip() == "if i % 100 == 0:" and lines["303"].strip() == "global_step += 1"
    anneal = lines["278"].strip()
    assert anneal.startswith("temp = ")
    expr = anneal[len("temp = "):]

    def run_epochs(iters_per_epoch, epochs, start=1.0, floor=0.5, rate=1e-6):
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
        sched = torch.optim.lr_scheduler.ExponentialLR(opt, gamma=0.98)
        temp, global_step, decays, floor_at = start, 0, 0, None
        for _ in range(epochs):
            for i in range(iters_per_epoch):
                if i % 100 == 0:
                    temp = eval(expr, {"max": max, "math": math, "temp": temp, "ANNEAL_RATE": rate,
                                       "global_step": global_step, "TEMP_MIN": floor})
                    sched.step()
                    decays += 1
                    if temp <= floor and floor_at is None:
                        floor_at = global_step
                global_step += 1
        return temp, decays, floor_at

    _, decays, _ = run_epochs(250, 2)
    assert decays == 2 * math.ceil(250 / 100)
    _, decays, _ = run_epochs(30, 3)
    assert decays == 3  # fewer than 100 iterations: once per epoch
    assert "the LR decays `ceil(iterations_per_epoch / 100)` times per epoch; with few images per epoch it decays once per epoch" in doc(TRAIN_VAE)
    _, _, floor_at = run_epochs(100, 200)
    assert floor_at is not None and f"after about {floor_at:,} steps" in doc(TRAIN_VAE), floor_at


def test_lr_decay_can_lower_the_rate_at_most_once_in_20_epochs():
    lines = LINES["train_dalle.py"]
    call = "".join(lines[str(n)].strip() for n in range(449, 458))
    kwargs = dict(re.findall(r"(\w+)=([^,()]+)", call))
    assert kwargs.pop("verbose") == "True"
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=3e-4)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **{k: eval(v) for k, v in kwargs.items()})
    with pytest.raises(TypeError, match="verbose"):
        torch.optim.lr_scheduler.ReduceLROnPlateau(opt, verbose=True)
    rates = []
    for _ in range(20):  # the script steps it once per epoch (line 663) with the last batch's loss
        sched.step(1.0)
        rates.append(opt.param_groups[0]["lr"])
    assert len(set(rates)) == 2  # a flat loss: exactly one halving in the default 20 epochs
    assert lines["663"].strip() == "distr_scheduler.step(avg_loss)"
    assert "so with the default 20 epochs it can lower the rate at most about once" in row(FLAGS, "`--lr_decay` |")


def test_save_sample_and_profiler_conditions_fire_where_documented():
    lines = LINES["train_dalle.py"]
    save, sample, prof = (lines[n].strip() for n in ("636", "639", "656"))
    fires = lambda cond, **env: [i for i in range(0, 450) if eval(cond[3:-1], {}, {"i": i, **env})]
    assert fires(save, SAVE_EVERY_N_STEPS=1000) == [0]  # iteration 0 of every epoch saves
    assert fires(sample, is_root=True) == [0, 100, 200, 300, 400]
    assert fires(prof, args=type("A", (), {"flops_profiler": True})) == [201]
    assert fires(prof, args=type("A", (), {"flops_profiler": False})) == []
    assert "StopIteration" in lines["657"]
    assert "(also at iteration 0 of every epoch)" in row(FLAGS, "`--save_every_n_steps` |")
    assert "the script then stops at iteration 201 with `StopIteration` (also without DeepSpeed)" in row(FLAGS, "`--flops_profiler` |")
    assert "Every 100th iteration of an epoch the root process also samples one image" in doc(FLAGS)


def test_folder_loader_drops_the_last_partial_batch():
    line = LINES["train_dalle.py"]["423"]
    assert "drop_last=True" in line and "num_workers" not in line
    from torch.utils.data import DataLoader
    assert len(DataLoader(list(range(3)), batch_size=4, drop_last=True)) == 0
    assert "fewer pairs than this gives zero steps" in row(FLAGS, "`--batch_size` |")


# ----------------------------------------------------------------------------- loader and checkpoints

def test_folder_loader_pairs_by_stem_with_lower_case_extensions(loader):
    assert sorted(loader["keys"]) == ["bad", "empty", "one", "two"]  # UP.JPG is not found
    TOK = "dalle-training/references/data-and-tokenizers.md"
    text = doc(TOK)
    assert "Extensions are matched as written (lower case); on a case-sensitive file system `IMG.JPG` is not found." in text
    # one.jpg in a/ pairs with one.txt in b/; two.png in a/ and c/ collide into one key
    assert "Two files named `0001.jpg` in different folders collide; only one survives. Image and caption need not be in the same folder." in text
    assert loader["one_caption_lengths"] == [5, 6]  # 'first' or 'second'; the empty line is never chosen
    assert "Each `.txt` is split on newlines, empty lines dropped, one line chosen at random per access" in text
    order = loader["order"]
    lengths = {"one": {5, 6}, "two": {2}}

    def landing(name):  # not shuffling: the next index (wrapping to 0), skipping again if that fails too
        i = order.index(name)
        while order[i] not in lengths:
            i = (i + 1) % len(order) if i < len(order) - 1 else 0
        return order[i]

    for name in ("empty", "bad"):
        assert loader["skip"][name] in lengths[landing(name)], (name, order)
    assert "Prints a message and returns another sample (random one when shuffling, else the next index)" in text
    assert loader["empty_folder"] == 0


def test_checkpoint_weights_carry_the_vae_and_a_string_is_refused(checkpoint):
    assert checkpoint["vae_keys"] > 0 and checkpoint["vae_restored"]
    assert "The VAE weights come from the DALL-E state dict, so no separate `vae.pt` is needed" in doc(GEN_SCRIPT)
    assert "includes the frozen VAE's weights under `vae.`" in doc("dalle-training/references/checkpoints-and-resume.md")
    assert checkpoint["string_weights"].startswith("Expected state_dict to be dict-like, got <class 'str'>")
    assert "`TypeError: Expected state_dict to be dict-like, got <class 'str'>.`" in doc("distributed-and-backends/references/troubleshooting.md")


def test_restored_optimizer_state_overrides_a_new_learning_rate(checkpoint):
    assert checkpoint["lr_after_restore"] == 3e-4
    assert "A changed `--learning_rate` is overridden by the restored `opt_state`, which carries the old rate." in doc("dalle-training/references/checkpoints-and-resume.md")
    loop = LINES["train_dalle.py"]["596"]
    epochs = eval(loop[loop.index("range"):-1], {}, {"resume_epoch": 3, "EPOCHS": 20})
    assert epochs[0] == 3 and epochs[-1] == 19  # the saved epoch runs again, up to --epochs exclusive
    assert "the saved epoch is repeated from its start" in doc("dalle-training/references/checkpoints-and-resume.md")


def test_vae_registers_its_codebook_only_after_the_deepspeed_backend_is_set():
    obs = run('''
        from dalle_pytorch import distributed_utils as du
        calls = []
        fake = types.SimpleNamespace(zero=types.SimpleNamespace(register_external_parameter=lambda m, p: calls.append(list(p.shape))))
        kw = dict(image_size=8, num_layers=1, num_tokens=16, codebook_dim=8, hidden_dim=8)
        ds = next(b for b in du.BACKENDS if isinstance(b, du.DeepSpeedBackend))
        ds.backend_module = fake
        du.is_distributed, du.backend = False, du.BACKENDS[0]
        DiscreteVAE(**kw)
        before = list(calls)
        du.is_distributed, du.backend = True, ds
        DiscreteVAE(**kw)
        print(json.dumps({"before": before, "after": calls}))
    ''')
    assert obs == {"before": [], "after": [[16, 8]]}
    text = doc("distributed-and-backends/references/distributed-backends.md")
    assert "register their codebook weight with `deepspeed.zero.register_external_parameter` only when `is_distributed` is set and the backend is DeepSpeed" in text
    assert "Built earlier, the registration is silently skipped" in text


def test_training_sample_is_skipped_only_under_deepspeed_with_fp16():
    lines = LINES["train_dalle.py"]
    assert lines["644"].strip() == "if not avoid_model_calls:"
    expr = lines["529"].split("=", 1)[1].strip()
    skipped = {(ds, fp16) for ds in (False, True) for fp16 in (False, True)
               if eval(expr, {}, {"using_deepspeed": ds, "args": type("A", (), {"fp16": fp16})})}
    assert skipped == {(True, True)}
    assert "It is skipped only with DeepSpeed plus `--fp16`; no flag turns it off." in doc(FLAGS)
    assert "With DeepSpeed: `fp16.enabled` in its config and no sample images during training." in row(FLAGS, "`--fp16` |")
