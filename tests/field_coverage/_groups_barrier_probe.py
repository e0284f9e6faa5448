"""Runs under `torchrun --nproc_per_node 2` (gloo, CPU, torch 2.13.0). One launch answers:

- which timeout each process group really has (default group, new_group, DeviceMesh dims,
  backend_override, _set_pg_timeout), read from the gloo backend's options;
- how dist.barrier() picks its device and when it warns ("barrier(): using the device under
  current context"), with the accelerator probe forced to a CUDA device so the branch a GPU
  machine takes runs here (the barrier itself then cannot allocate on this CPU build, which is
  recorded, not hidden);
- torch APIs torchtitan's recipes rely on: checkpoint_wrapper key names under fully_shard and in
  DCP state dicts, the Hugging Face safetensors storage writer/reader round trip, and the
  `python -m torch.distributed.checkpoint.format_utils` command line.

Rank 0 writes JSON to argv[1] (read by test_groups_barrier_titan.py)."""
import datetime
import json
import os
import runpy
import sys
import warnings

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.distributed.distributed_c10d as c10d
from torch.distributed.device_mesh import init_device_mesh

OUT_PATH = sys.argv[1]
WORK = os.path.dirname(OUT_PATH)
dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=77))
RANK = dist.get_rank()
OUT = {}


def every_rank(v):
    got = [None] * dist.get_world_size()
    dist.all_gather_object(got, v)
    return got


def timeout_s(group):
    return group._get_backend(torch.device("cpu")).options._timeout.total_seconds()


# --- 1. per-group timeouts -------------------------------------------------------------------
g_default = c10d._get_default_group()
g_plain = dist.new_group([0, 1])
g_given = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=55))
mesh = init_device_mesh("cpu", (1, 2), mesh_dim_names=("dp", "tp"))
opts = c10d.ProcessGroupGloo._Options()
opts._timeout = datetime.timedelta(seconds=44)
mesh_o = init_device_mesh("cpu", (1, 2), mesh_dim_names=("dp", "tp"), backend_override={"dp": ("gloo", opts)})
OUT["timeouts"] = {
    "default": timeout_s(g_default),
    "new_group_plain": timeout_s(g_plain),
    "new_group_given": timeout_s(g_given),
    "mesh_dim_whole_world": timeout_s(mesh.get_group("tp")),
    "mesh_dim_whole_world_is_default": mesh.get_group("tp") is g_default,
    "mesh_dim_sub": timeout_s(mesh.get_group("dp")),
    "mesh_dim_sub_override": timeout_s(mesh_o.get_group("dp")),
}
c10d._set_pg_timeout(datetime.timedelta(seconds=20), g_plain)
OUT["timeouts"]["new_group_after_set_pg_timeout"] = timeout_s(g_plain)

# --- 2. barrier device choice ----------------------------------------------------------------
made = []
_real_opts = c10d.BarrierOptions


def _recording_opts():
    o = _real_opts()
    made.append(o)
    return o


c10d.BarrierOptions = _recording_opts
DEVICE_WARNING = "barrier(): using the device under current context"


def barrier_case(**kw):
    """(warned, opts.device, error) for one barrier call with every warning recorded."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        err = None
        try:
            dist.barrier(**kw)
        except Exception as e:  # the forced-CUDA barrier cannot allocate on a CPU build
            err = type(e).__name__
    hits = [x for x in w if DEVICE_WARNING in str(x.message)]
    where = os.path.basename(hits[0].filename) if hits else None
    return {"warned": bool(hits), "device": str(made[-1].device), "error": err, "warned_at": where}


dist.all_reduce(torch.ones(1))  # an earlier collective with a tensor
OUT["barrier_gloo_cpu"] = every_rank(barrier_case())

_real_accel = torch._C._get_accelerator
# what a CUDA build returns: the device type with no index (c10::Device(type, -1) in torch/csrc/Module.cpp)
torch._C._get_accelerator = lambda *a, **k: torch.device("cuda")
_real_coll = c10d._get_object_coll_device
c10d._get_object_coll_device = lambda group=None: "cuda"  # as for an NCCL-only group
local = {}
try:  # gather only after the patches are undone: object collectives would pick the fake device
    local["after_collective"] = barrier_case()
    local["device_ids"] = barrier_case(device_ids=[1])
    # Python's default filter: one report per warning location; every barrier() call reaches
    # warnings.warn through the same c10d_logger wrapper line, so two call sites warn once
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("default")
        for _ in range(2):
            try:
                dist.barrier()
            except Exception:
                pass
        try:
            dist.barrier()  # a second call site
        except Exception:
            pass
    local["default_filter_three_calls"] = sum(DEVICE_WARNING in str(x.message) for x in w)
    # what init_process_group(device_id=...) stores on the group
    g_default.bound_device_id = torch.device("cuda", 2)
    local["bound_device"] = barrier_case()
finally:
    g_default.bound_device_id = None
    torch._C._get_accelerator = _real_accel
    c10d._get_object_coll_device = _real_coll
    c10d.BarrierOptions = _real_opts
for key, val in local.items():
    OUT["barrier_forced_cuda_" + key] = every_rank(val)
dist.barrier()

# --- 3. checkpoint_wrapper names under fully_shard (torchtitan: AC, then compile, then FSDP) ---
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper  # noqa: E402
from torch.distributed.checkpoint.state_dict import get_model_state_dict  # noqa: E402
from torch.distributed.fsdp import fully_shard  # noqa: E402

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 2))
model[0] = checkpoint_wrapper(model[0])
fully_shard(model[0])
fully_shard(model)
model(torch.randn(3, 4)).sum().backward()
OUT["ac_named_parameters"] = sorted(n for n, _ in model.named_parameters())
OUT["ac_state_dict_keys"] = sorted(model.state_dict())
OUT["ac_get_model_state_dict_keys"] = sorted(get_model_state_dict(model))
OUT["ac_grad_is_sharded"] = type(model[0]._checkpoint_wrapped_module.weight.grad).__name__

# FSDP1 -> FSDP2 names: what fully_shard accepts and which setters FSDPModule has
import inspect  # noqa: E402

from torch.distributed.fsdp import FSDPModule  # noqa: E402

OUT["fully_shard_params"] = sorted(inspect.signature(fully_shard).parameters)
OUT["fsdp_module_setters"] = sorted(m for m in dir(FSDPModule) if m.startswith("set_") or m in ("unshard", "reshard"))

# --- 3b. meta-device build, then shard, then materialize (torchtitan's init flow) --------------
with torch.device("meta"):
    big = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Linear(8, 6))
for layer in big:
    fully_shard(layer)
fully_shard(big)
big.to_empty(device="cpu")
torch.manual_seed(1)
for layer in big:
    layer.reset_parameters()  # init on the local shards, after sharding
OUT["meta_flow"] = {
    "is_meta": any(p.is_meta for p in big.parameters()),
    "local_shape": every_rank(list(big[0].weight.to_local().shape)),
    "global_shape": list(big[0].weight.shape),
    "device": str(big[0].weight.device),
}

# --- 3c. tensor parallelism on a 1-D mesh: colwise then rowwise equals the plain MLP -----------
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module  # noqa: E402

torch.manual_seed(2)
mlp = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
x = torch.randn(3, 4)
ref = mlp(x).detach().clone()
tp_mesh = init_device_mesh("cpu", (2,), mesh_dim_names=("tp",))
parallelize_module(mlp, tp_mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
y = mlp(x)
OUT["tp"] = {
    "placements": [str(mlp[0].weight.placements), str(mlp[2].weight.placements)],
    "local_shapes": [list(mlp[0].weight.to_local().shape), list(mlp[2].weight.to_local().shape)],
    "output_type": type(y).__name__,
    "matches_unsharded": every_rank(bool(torch.allclose(y, ref, atol=1e-6))),
}

# --- 3d. gradient clipping on FSDP2 parameters, one mesh and two meshes -------------------------
torch.manual_seed(3)
ref = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
xs = torch.randn(6, 4)
ref(xs).sum().backward()
ref_norm = torch.nn.utils.clip_grad_norm_(ref.parameters(), 1e9).item()


def sharded_copy(mesh0=None, mesh1=None):
    m = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    m.load_state_dict(ref.state_dict())
    fully_shard(m[0], mesh=mesh0)
    fully_shard(m[1], mesh=mesh1)
    fully_shard(m, mesh=mesh0)
    m(xs).sum().backward()
    return m


one = sharded_copy()
n1 = torch.nn.utils.clip_grad_norm_(one.parameters(), 1e9)
OUT["clip_one_mesh"] = {"type": type(n1).__name__, "placements": str(n1.placements),
                        "item_matches_unsharded": every_rank(abs(n1.item() - ref_norm) < 1e-4)}
mesh_a = init_device_mesh("cpu", (2,))
mesh_b = init_device_mesh("cpu", (1, 2), mesh_dim_names=("r", "s"))["s"]
two = sharded_copy(mesh_a, mesh_b)
try:
    torch.nn.utils.clip_grad_norm_(two.parameters(), 1.0)
    OUT["clip_two_meshes_error"] = None
except RuntimeError as e:
    OUT["clip_two_meshes_error"] = str(e).split(", but got")[0]
# workaround: one norm per mesh group, made plain with full_tensor(), combined, then clip
groups = [list(two[0].parameters()), list(two[1].parameters())]
norms = [torch.nn.utils.get_total_norm([p.grad for p in g]).full_tensor() for g in groups]
total = torch.linalg.vector_norm(torch.stack(norms))
for g in groups:  # one clip call per mesh: a single call over both meshes fails the same way
    torch.nn.utils.clip_grads_with_norm_(g, 1e9, total)
OUT["clip_two_meshes_workaround_matches"] = every_rank(abs(total.item() - ref_norm) < 1e-4)

# --- 3h. torch.save(model.state_dict()) of an FSDP2 model on rank 0 keeps rank 0's shard only -
lin_s = torch.nn.Linear(4, 6)
fully_shard(lin_s)
if RANK == 0:
    torch.save(lin_s.state_dict(), os.path.join(WORK, "rank0_sd.pt"))
full_sd = get_model_state_dict(lin_s, options=__import__(
    "torch.distributed.checkpoint.state_dict", fromlist=["StateDictOptions"]).StateDictOptions(
    full_state_dict=True, cpu_offload=True))
OUT["full_sd_rank_shapes"] = every_rank({k: list(v.shape) for k, v in full_sd.items()})
dist.barrier()

# --- 3f. tied weights: two FSDP groups may not share a parameter (torch 2.13 check) ------------
class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.body = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids):
        return self.head(self.body(self.embed(ids)))


ids = torch.tensor([[1, 2, 3]])
split = Tied()
fully_shard(split.embed)
fully_shard(split.body)
fully_shard(split)  # the root keeps head, whose weight is embed's
try:
    split(ids)
    OUT["tied_split_error"] = None
except ValueError as e:
    OUT["tied_split_error"] = str(e)
together = Tied()
fully_shard([together.embed, together.head])
fully_shard(together.body)
fully_shard(together)
out = together(ids)
out.sum().backward()
OUT["tied_together"] = {"ran": list(out.shape), "still_tied": together.head.weight is together.embed.weight}

# --- 3g. all_gather of tensors whose size differs per rank (gloo) -----------------------------
mine = torch.arange(2.0 + RANK)  # rank 0: 2 elements, rank 1: 3
try:
    dist.all_gather([torch.zeros(2), torch.zeros(3)], mine)
    OUT["ag_uneven_error"] = None
except RuntimeError as e:
    OUT["ag_uneven_error"] = str(e).splitlines()[0]
# the padding recipe: share the sizes, pad to the largest, gather, cut
n = torch.tensor([mine.numel()])
sizes = [torch.zeros_like(n) for _ in range(2)]
dist.all_gather(sizes, n)
top = int(max(s.item() for s in sizes))
padded = torch.cat([mine, mine.new_zeros(top - mine.numel())])
bufs = [torch.empty(top) for _ in range(2)]
dist.all_gather(bufs, padded)
OUT["ag_padded"] = every_rank([b[: int(s.item())].tolist() for b, s in zip(bufs, sizes)])

# --- 3e. what dcp.load does with keys that differ between checkpoint and target ---------------
from torch.distributed.checkpoint import DefaultLoadPlanner  # noqa: E402

ck = os.path.join(WORK, "keys_ckpt")
dcp.save({"w": torch.ones(4), "only_in_ckpt": torch.ones(2), "epoch": 3}, checkpoint_id=ck)


def try_load(target, **kw):
    try:
        dcp.load(target, checkpoint_id=ck, **kw)
        return None
    except Exception as e:
        return "Exception: " + " ".join(str(e).split())
    except BaseException as e:  # CheckpointException derives from BaseException, not Exception
        return type(e).__name__ + ": " + " ".join(str(e).split())


t1 = {"w": torch.zeros(4), "epoch": 0}
OUT["dcp_extra_ckpt_key"] = {"error": try_load(t1), "w": t1["w"].tolist(), "epoch": t1["epoch"]}
t2 = {"w": torch.zeros(4), "new_param": torch.full((2,), 7.0)}
err = try_load(t2)
OUT["dcp_missing_key_error"] = "Missing key in checkpoint state_dict: new_param" in (err or "")
OUT["dcp_error_type"] = (err or "").split(":")[0]
t3 = {"w": torch.zeros(4), "new_param": torch.full((2,), 7.0)}
OUT["dcp_partial"] = {"error": try_load(t3, planner=DefaultLoadPlanner(allow_partial_load=True)),
                      "w": t3["w"].tolist(), "new_param": t3["new_param"].tolist()}
err = try_load({"w": torch.zeros(5)})
OUT["dcp_shape_mismatch_error"] = bool(err) and "Size mismatch" in err
OUT["dcp_shape_mismatch_text"] = (err or "")[(err or "").find("Size mismatch"):][:160]

# a plain tensor whose values differ per rank is treated as replicated: one copy is written
ck3 = os.path.join(WORK, "per_rank_ckpt")
dcp.save({"t": torch.full((2,), float(RANK))}, checkpoint_id=ck3)
back = {"t": torch.full((2,), -1.0)}
dcp.load(back, checkpoint_id=ck3)
OUT["dcp_plain_per_rank_loaded"] = every_rank(back["t"].tolist())
OUT["dcp_plain_per_rank_sizes"] = every_rank(os.path.getsize(os.path.join(ck3, f"__{RANK}_0.distcp")))
ck4 = os.path.join(WORK, "per_rank_keys_ckpt")  # one key per rank (torchtitan's dataloader: dp_rank_N)
dcp.save({f"t_rank{RANK}": torch.full((2,), float(RANK))}, checkpoint_id=ck4)
back = {f"t_rank{RANK}": torch.full((2,), -1.0)}
dcp.load(back, checkpoint_id=ck4)
OUT["dcp_per_rank_keys_loaded"] = every_rank(back[f"t_rank{RANK}"].tolist())
from torch.distributed.tensor import DTensor, Shard  # noqa: E402

ck5 = os.path.join(WORK, "per_rank_dtensor_ckpt")  # or one DTensor, Shard(0) over the ranks
row_mesh = init_device_mesh("cpu", (2,))
dcp.save({"t": DTensor.from_local(torch.full((1, 2), float(RANK)), row_mesh, [Shard(0)])}, checkpoint_id=ck5)
back = {"t": DTensor.from_local(torch.full((1, 2), -1.0), row_mesh, [Shard(0)])}
dcp.load(back, checkpoint_id=ck5)
OUT["dcp_per_rank_dtensor_loaded"] = every_rank(back["t"].to_local().tolist())

# optimizer state: a never-stepped optimizer's own state_dict() has no state to fill
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict  # noqa: E402

torch.manual_seed(4)
lin = torch.nn.Linear(3, 2)
opt = torch.optim.Adam(lin.parameters())
lin(torch.randn(2, 3)).sum().backward()
opt.step()
ck2 = os.path.join(WORK, "optim_ckpt")
msd, osd = get_state_dict(lin, opt)
dcp.save({"model": msd, "optim": osd}, checkpoint_id=ck2)
lin2 = torch.nn.Linear(3, 2)
opt_bare = torch.optim.Adam(lin2.parameters())
target = {"optim": opt_bare.state_dict()}
dcp.load(target, checkpoint_id=ck2)
opt_bare.load_state_dict(target["optim"])
OUT["optim_bare_state_restored"] = len(opt_bare.state) > 0
lin3 = torch.nn.Linear(3, 2)
opt3 = torch.optim.Adam(lin3.parameters())
msd3, osd3 = get_state_dict(lin3, opt3)
state = {"model": msd3, "optim": osd3}
dcp.load(state, checkpoint_id=ck2)
set_state_dict(lin3, opt3, model_state_dict=state["model"], optim_state_dict=state["optim"])
OUT["optim_get_state_dict_restored"] = {
    "step": float(next(iter(opt3.state.values()))["step"]),
    "exp_avg_equal": bool(torch.equal(opt3.state[lin3.weight]["exp_avg"], opt.state[lin.weight]["exp_avg"])),
}

dist.barrier()
dist.destroy_process_group()

# --- 4. single-process conversions (rank 0, no process group: DCP runs without one) ----------
if RANK == 0:
    from torch.distributed.checkpoint import HuggingFaceStorageReader, HuggingFaceStorageWriter

    hf_dir = os.path.join(WORK, "hf")
    sd = {"model.w": torch.arange(6.0).reshape(2, 3), "model.b": torch.ones(2, dtype=torch.bfloat16)}
    dcp.save(sd, storage_writer=HuggingFaceStorageWriter(path=hf_dir))
    OUT["hf_files"] = sorted(os.listdir(hf_dir))
    back = {"model.w": torch.zeros(2, 3), "model.b": torch.zeros(2, dtype=torch.bfloat16)}
    dcp.load(back, storage_reader=HuggingFaceStorageReader(path=hf_dir))
    OUT["hf_roundtrip_equal"] = all(torch.equal(sd[k], back[k]) for k in sd)
    OUT["hf_roundtrip_dtype"] = str(back["model.b"].dtype)
    from safetensors import safe_open
    files = [f for f in OUT["hf_files"] if f.endswith(".safetensors")]
    with safe_open(os.path.join(hf_dir, files[0]), "pt") as f:
        OUT["hf_safetensors_keys"] = sorted(f.keys())

    # DCP -> torch.save through the module's command line; a missing source is not an error
    dcp_dir = os.path.join(WORK, "dcp")
    dcp.save({"w": torch.ones(2)}, checkpoint_id=dcp_dir)

    def cli(*argv):
        old = sys.argv
        sys.argv = ["format_utils", *argv]
        try:
            runpy.run_module("torch.distributed.checkpoint.format_utils", run_name="__main__")
            return 0
        except SystemExit as e:
            return e.code
        finally:
            sys.argv = old

    pt = os.path.join(WORK, "out.pt")
    OUT["cli_dcp_to_torch_rc"] = cli("dcp_to_torch", dcp_dir, pt)
    OUT["cli_dcp_to_torch_keys"] = sorted(torch.load(pt, weights_only=True))
    missing_pt = os.path.join(WORK, "never.pt")
    OUT["cli_missing_src_rc"] = cli("dcp_to_torch", os.path.join(WORK, "no_such_dir"), missing_pt)
    OUT["cli_missing_src_wrote"] = os.path.exists(missing_pt)

    loaded = torch.load(os.path.join(WORK, "rank0_sd.pt"), weights_only=False)
    OUT["rank0_torch_save"] = {k: {"type": type(v).__name__, "shape": list(v.shape),
                                   "local": list(v.to_local().shape)} for k, v in loaded.items()}

    # TORCH_CPP_LOG_LEVEL set after `import torch`: c10's logging was configured at import, so the
    # INFO lines a store connection prints (b41 in tests/torch_distributed shows them when the variable
    # is set before start) must not appear; the test reads torchrun's output for them
    os.environ["TORCH_CPP_LOG_LEVEL"] = "INFO"
    master = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    client = dist.TCPStore("127.0.0.1", master.port, is_master=False)
    client.set("k", "v")
    OUT["late_cpp_log_level_store_ok"] = master.get("k") == b"v"
    del client, master

    with open(OUT_PATH, "w") as f:
        json.dump(OUT, f, indent=1, sort_keys=True)
# Leave without interpreter teardown: under load a finished gloo rank can still abort while Python
# finalizes (SIGABRT, "terminate called without an active exception"; seen in CI even after
# destroy_process_group()). Every file is closed and stdout flushed first.
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
