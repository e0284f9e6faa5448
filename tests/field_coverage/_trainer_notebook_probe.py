"""A notebook kernel stand-in: ONE plain `python` process (no launcher, no LOCAL_RANK) that runs the
same Trainer function twice: first in the kernel itself, then through accelerate's
`notebook_launcher(train_fn, num_processes=2)` (transformers 5.25.0, accelerate 1.15.0, CPU: fork +
gloo, `use_cpu=True` because a CPU-only rank has no device backend otherwise). 32 samples,
per_device_train_batch_size=2, 1 epoch. Each run writes a JSON per rank into argv[1]; the kernel prints
"RESULT {json}" with {"kernel_pid", "in_kernel": [rank records], "refused": the launcher's ValueError when
called after the in-kernel run, "launched": [rank records]}.
argv[2] is the rendezvous port (read by test_trainer_parallel_mode_cpu.py)."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

OUT, PORT = sys.argv[1], sys.argv[2]


def train_fn(tag):
    import torch
    from _tiny_trainer_model import Tiny
    from transformers import Trainer, TrainingArguments

    g = torch.Generator().manual_seed(0)
    data = [{"x": torch.randn(4, generator=g), "labels": torch.randn((), generator=g)} for _ in range(32)]
    args = TrainingArguments(os.path.join(OUT, tag), use_cpu=True, per_device_train_batch_size=2,
                             num_train_epochs=1, report_to="none", save_strategy="no", disable_tqdm=True)
    trainer = Trainer(model=Tiny(), args=args, train_dataset=data)
    trainer.train()
    rec = {"pid": os.getpid(), "rank": args.process_index, "world_size": args.world_size,
           "parallel_mode": args.parallel_mode.name, "n_gpu": args.n_gpu, "steps": trainer.state.global_step,
           "model_wrapped": type(trainer.model_wrapped).__name__}
    with open(os.path.join(OUT, f"{tag}.{args.process_index}.json"), "w") as f:
        json.dump(rec, f)


def records(tag):
    names = sorted(n for n in os.listdir(OUT) if n.startswith(tag + ".") and n.endswith(".json"))
    return [json.load(open(os.path.join(OUT, n))) for n in names]


if __name__ == "__main__":
    from accelerate import notebook_launcher
    from accelerate.state import AcceleratorState

    train_fn("in_kernel")
    # A Trainer built in the kernel leaves Accelerate's shared state behind, and notebook_launcher
    # refuses to start then; a real notebook needs a kernel restart, here the state is reset.
    try:
        notebook_launcher(train_fn, args=("refused",), num_processes=2, use_port=PORT)
        refused = None
    except ValueError as exc:
        refused = str(exc)
    AcceleratorState._reset_state(True)
    notebook_launcher(train_fn, args=("launched",), num_processes=2, use_port=PORT)
    print("RESULT " + json.dumps({"kernel_pid": os.getpid(), "in_kernel": records("in_kernel"),
                                  "refused": refused, "launched": records("launched")}), flush=True)
