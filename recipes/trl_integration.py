"""Integration check: `sdr.SDRReward` inside a real TRL `GRPOTrainer`, in a minute.

A tiny randomly initialised Llama (SmolLM2's tokenizer and chat template, 2 layers of
width 64) runs 2 GRPO steps with SDRReward as the reward. A TRL upgrade that changes
the reward call signature (prompts, completions, completion_ids, dataset columns,
log_extra / log_metric, trainer_state) or the logging breaks this check. Exit status
0 when every expectation holds; each failure is printed.

    .venv-train/bin/python recipes/trl_integration.py
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def main() -> int:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer

    import sdr

    torch.manual_seed(0)
    gguf = common.find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(cfg)
    rows = common.studies("train")[:4]
    ds = Dataset.from_list(
        [{"prompt": common.prompt_messages(r), "solution": common.target(r)} for r in rows]
    )
    seen = {}

    class Recording(sdr.SDRReward):
        def __call__(self, *args, **kwargs):
            seen.setdefault("kwargs", sorted(kwargs))
            return super().__call__(*args, **kwargs)

    reward = Recording(metric="chamfer", name="sdr_chamfer")
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out,
            max_steps=2,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=24,
            learning_rate=1e-4,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            seed=0,
            gradient_checkpointing=False,
        )
        trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=[reward], args=args, train_dataset=ds)
        trainer.train()
        history = trainer.state.log_history
    problems = []
    if trainer.state.global_step != 2:
        problems.append(f"ran {trainer.state.global_step} steps, expected 2")
    logged = {k for h in history for k in h}
    for key in (
        "reward",
        "rewards/sdr_chamfer/mean",
        "sdr_chamfer/format",
        "sdr_chamfer/findings",
        "sdr_chamfer/impression",
        "sdr_chamfer/seconds",
    ):
        if key not in logged:
            problems.append(f"TRL's log history has no {key!r} (logged: {sorted(logged)})")
    for col in ("prompts", "completions", "solution", "log_extra", "log_metric"):
        if col not in seen.get("kwargs", []):
            problems.append(f"the reward was not given {col!r} (got {seen.get('kwargs')})")
    rewards = [h["reward"] for h in history if "reward" in h]
    if any(not (0.0 <= r <= 3.0) for r in rewards):
        problems.append(f"rewards outside [0, 3]: {rewards}")
    print(json.dumps({"steps": trainer.state.global_step, "rewards": rewards, "reward_kwargs": seen.get("kwargs")}))
    for p in problems:
        print(f"trl_integration: FAIL: {p}", file=sys.stderr)
    if not problems:
        print("trl_integration: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
