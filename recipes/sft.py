"""SFT stage: SmolLM2-135M-Instruct taught the report template on IU X-ray train studies.

Input: the study's indication and comparison (system + user chat messages).
Output: ``<think>FINDINGS</think><answer>IMPRESSION</answer>`` (the paper's template).
Loss on the completion only (TRL's prompt-completion format). The checkpoint is
saved as safetensors under ``--out`` (``final/``) for the GRPO stage, and the run
resumes from its last checkpoint when started again with the same ``--out``.

    python recipes/sft.py --samples 1200 --epochs 1        # what docs/results/grpo.md used
    python recipes/sft.py --task impression --samples 800   # Findings -> Impression (docs/results/grpo-impression.md)
    python recipes/sft.py --task impression --init recipes/out/f2i-sft/final --skip 800 --samples 960 \\
        --out recipes/out/f2i-sft2                          # the same, continued on 960 further studies

bf16 autocast (AMX on CPUs that have it) is on by default: ``--no-bf16`` for fp32.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def dataset_rows(n: int, seed: int, task: str = "report", skip: int = 0):
    rows = common.studies("train")
    random.Random(seed).shuffle(rows)
    rows = rows[skip:]
    rows = rows[:n] if n > 0 else rows
    out = []
    for r in rows:
        prompt, target = common.task_example(task, r)
        out.append({"prompt": prompt, "completion": [{"role": "assistant", "content": target}], "uid": r["uid"]})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=1200, help="train studies used (0: all)")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1e-4, help="paper's SFT learning rate")
    ap.add_argument("--batch-size", type=int, default=8, help="per step, before accumulation")
    ap.add_argument("--grad-accum", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=320, help="prompt + completion tokens")
    ap.add_argument("--save-steps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-bf16", action="store_true", help="train in fp32")
    ap.add_argument(
        "--task",
        default="report",
        choices=common.TASKS,
        help="report: indication -> <think>F</think><answer>I</answer>; impression: Findings -> Impression text",
    )
    ap.add_argument(
        "--init",
        default=None,
        help="continue from this checkpoint instead of the base model (e.g. recipes/out/f2i-sft/final)",
    )
    ap.add_argument(
        "--skip",
        type=int,
        default=0,
        help="leave out the first N shuffled train studies (with --init: the ones that checkpoint already saw)",
    )
    ap.add_argument("--out", default=None, help="default recipes/out/sft (report), recipes/out/f2i-sft (impression)")
    args = ap.parse_args()
    if args.out is None:
        args.out = str(common.ROOT / ("recipes/out/sft" if args.task == "report" else "recipes/out/f2i-sft"))

    import torch
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    common.set_threads()
    torch.manual_seed(args.seed)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.init:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not (Path(args.init) / "config.json").is_file():
            raise SystemExit(f"--init {args.init}: no checkpoint there (config.json missing)")
        tok = AutoTokenizer.from_pretrained(args.init)
        model = AutoModelForCausalLM.from_pretrained(args.init, dtype=torch.float32)
    else:
        model, tok = common.load_base()
    rows = dataset_rows(args.samples, args.seed, args.task, args.skip)
    if not rows:
        raise SystemExit(f"--skip {args.skip}: no train studies left")
    ds = Dataset.from_list([{k: r[k] for k in ("prompt", "completion")} for r in rows])
    cfg = SFTConfig(
        output_dir=str(out),
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch_size,
        gradient_accumulation_steps=args.grad_accum,
        learning_rate=args.lr,
        lr_scheduler_type="cosine",
        warmup_steps=0.05,  # a fraction below 1: share of the steps (transformers 5)
        max_length=args.max_length,
        completion_only_loss=True,
        logging_steps=1,
        save_strategy="steps",
        save_steps=args.save_steps,
        save_total_limit=2,
        report_to=[],
        use_cpu=True,
        bf16=not args.no_bf16,
        seed=args.seed,
        dataloader_num_workers=0,
        # TRL turns it on by default; a 135M model needs no memory saving and
        # recomputing activations costs a third more time on CPU.
        gradient_checkpointing=False,
    )
    trainer = SFTTrainer(model=model, args=cfg, train_dataset=ds, processing_class=tok)
    wall, resume = common.train_and_save(trainer, tok, out, "sft")
    meta = {
        "task": args.task,
        "samples": len(rows),
        "init": args.init,
        "skip": args.skip,
        "epochs": args.epochs,
        "steps": trainer.state.global_step,
        "effective_batch": args.batch_size * args.grad_accum,
        "lr": args.lr,
        "bf16": not args.no_bf16,
        "max_length": args.max_length,
        "train_seconds_this_session": round(wall, 1),
        "resumed_from": resume,
        "torch_threads": torch.get_num_threads(),
    }
    (out / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    print(json.dumps(meta), flush=True)


if __name__ == "__main__":
    main()
