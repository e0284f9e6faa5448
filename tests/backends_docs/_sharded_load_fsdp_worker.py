"""One rank of test_trainer_fsdp_sharded_load.py: a tiny Llama loaded with
from_pretrained(folder, distributed_config=DistributedConfig(fsdp_size=2)) under 2 gloo ranks, handed to a plain
Trainer. Records which prepare_model call the Trainer made, how often it entered
Trainer._defer_fsdp_gradient_reduction, the error of the default save_strategy, and the training result.
argv: model folder, output folder; or --build FOLDER to save the tiny random model first (no download).
Ends with os._exit."""
import contextlib
import json
import os
import sys


def build(folder: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    LlamaForCausalLM(cfg).save_pretrained(folder)


def main() -> None:
    if sys.argv[1] == "--build":
        build(sys.argv[2])
        return
    import accelerate
    import torch
    from torch.distributed.fsdp import FSDPModule
    from transformers import AutoModelForCausalLM, DistributedConfig, Trainer, TrainingArguments

    folder, out = sys.argv[1], sys.argv[2]
    res: dict = {}
    model = AutoModelForCausalLM.from_pretrained(folder, distributed_config=DistributedConfig(fsdp_size=2))
    res["flag"] = bool(model.is_distributed_loading_by_transformers)
    res["fsdp_root"] = isinstance(model, FSDPModule)

    calls: dict = {"prepare_model": [], "defer": 0}
    orig_pm = accelerate.Accelerator.prepare_model

    def prepare_model(self, model, device_placement=None, evaluation_mode=False):
        calls["prepare_model"].append({"device_placement": device_placement, "evaluation_mode": evaluation_mode})
        return orig_pm(self, model, device_placement=device_placement, evaluation_mode=evaluation_mode)

    accelerate.Accelerator.prepare_model = prepare_model
    orig_defer = Trainer._defer_fsdp_gradient_reduction

    @contextlib.contextmanager
    def defer(self):
        calls["defer"] += 1
        with orig_defer(self):
            yield

    Trainer._defer_fsdp_gradient_reduction = defer

    class DS(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            ids = (torch.arange(8) + i) % 50
            return {"input_ids": ids, "labels": ids}

    try:
        Trainer(model=model, args=TrainingArguments(output_dir=out + "/steps", use_cpu=True, report_to=[], max_steps=1))
        res["default_save_error"] = None
    except ValueError as e:
        res["default_save_error"] = str(e)
    args = TrainingArguments(output_dir=out + "/train", use_cpu=True, report_to=[], max_steps=2,
                             per_device_train_batch_size=2, gradient_accumulation_steps=2, save_strategy="no",
                             disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=DS())
    result = trainer.train()
    res["loss_finite"] = bool(torch.isfinite(torch.tensor(result.training_loss)).item())
    res["global_step"] = trainer.state.global_step
    res["calls"] = calls
    res["still_fsdp_no_ddp"] = isinstance(trainer.model_wrapped, FSDPModule) and not isinstance(
        trainer.model_wrapped, torch.nn.parallel.DistributedDataParallel)
    with open(os.path.join(out, f"rank{os.environ['RANK']}.json"), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    code = 1
    try:
        main()
        code = 0
    except BaseException:
        import traceback
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
