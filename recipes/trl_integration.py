"""Integration check: `sdr_rewards.SDRReward` inside TRL's own code, in a few minutes on a CPU.

A tiny randomly initialised Llama (SmolLM2's tokenizer, 2 layers of width 128), first
fitted for a few seconds on IU X-ray reports so that it writes the paper's template,
then driven through three of TRL's paths:

1. `GRPOTrainer`, 2 steps, plain chat template: completions reach the reward as
   `[{"role": "assistant", "content": text}]`.
2. `GRPOTrainer`, 2 steps, the tokenizer given Qwen3's chat template and TRL's response
   schema for it (`add_response_schema`, as TRL does for the qwen3 family, glm4moe,
   lfm2_5, nemotron_3, deepseek_r1_distill): completions reach the reward parsed,
   `{"reasoning_content": FINDINGS, "content": "<answer>IMPRESSION</answer>"}`. The
   reward must rebuild the report; before it did, every reward here was 0.
3. `AsyncGRPOTrainer`'s rollout scoring (trl.experimental.async_grpo): the reward is
   pickled, unpickled in a spawned child with `CUDA_VISIBLE_DEVICES=""`, and called
   per group by `_AsyncRolloutLoop._score_group` through `asyncio.to_thread`; the
   rewards must equal `SDRReward.score` on the same reports. (The rollout worker's
   generation needs a vLLM server, whose pins conflict with TRL's; the scoring is
   TRL's own code.)

Exit status 0 when every expectation holds; each failure is printed.

    .venv-train/bin/python recipes/trl_integration.py
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing as mp
import pickle
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

LOG_KEYS = ("format", "findings", "impression", "seconds")


def tiny_model(tok, rows, steps=120):
    """A 2-layer Llama fitted briefly to answer each prompt with its report."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
    )
    model = LlamaForCausalLM(cfg)
    seqs = []
    for r in rows:
        prompt = tok.apply_chat_template(common.prompt_messages(r), add_generation_prompt=True, tokenize=False)
        p_ids = tok(prompt, add_special_tokens=False)["input_ids"]
        t_ids = tok(common.target(r) + tok.eos_token, add_special_tokens=False)["input_ids"]
        seqs.append((p_ids, t_ids))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(steps):
        loss = 0.0
        for p_ids, t_ids in seqs:
            ids = torch.tensor([p_ids + t_ids])
            labels = torch.tensor([[-100] * len(p_ids) + t_ids])
            loss = loss + model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        (loss / len(seqs)).backward()
        opt.step()
    model.eval()
    return model, float(loss) / len(seqs)


def grpo(tok, rows, reward, max_len):
    """2 GRPO steps; the log history and what the reward was called with."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    model, loss = tiny_model(tok, rows)
    ds = Dataset.from_list([{"prompt": common.prompt_messages(r), "solution": common.target(r)} for r in rows])
    with tempfile.TemporaryDirectory() as out:
        args = GRPOConfig(
            output_dir=out,
            max_steps=2,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=max_len,
            learning_rate=1e-5,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            seed=0,
            gradient_checkpointing=False,
        )
        trainer = GRPOTrainer(model=model, processing_class=tok, reward_funcs=[reward], args=args, train_dataset=ds)
        trainer.train()
    return trainer.state.global_step, trainer.state.log_history, loss


def recording_reward(sdr_rewards, name, seen):
    class Recording(sdr_rewards.SDRReward):
        def __call__(self, *args, **kwargs):
            seen.setdefault("kwargs", sorted(kwargs))
            seen.setdefault("completions", kwargs.get("completions"))
            return super().__call__(*args, **kwargs)

    return Recording(metric="chamfer", name=name)


def check_grpo(label, steps, history, seen, name, problems, min_reward):
    if steps != 2:
        problems.append(f"{label}: ran {steps} steps, expected 2")
    logged = {k for h in history for k in h}
    for key in ("reward", f"rewards/{name}/mean") + tuple(f"{name}/{k}" for k in LOG_KEYS):
        if key not in logged:
            problems.append(f"{label}: TRL's log history has no {key!r} (logged: {sorted(logged)})")
    for col in ("prompts", "completions", "solution", "log_extra", "log_metric"):
        if col not in seen.get("kwargs", []):
            problems.append(f"{label}: the reward was not given {col!r} (got {seen.get('kwargs')})")
    rewards = [h["reward"] for h in history if "reward" in h]
    # Every step's mean in [0, 3], and the best at least `min_reward`: the tiny model may run
    # every completion of a later step to the token limit, which is malformed and rightly 0.
    if not rewards or any(not (0.0 <= r <= 3.0) for r in rewards) or max(rewards) < min_reward:
        problems.append(f"{label}: mean rewards {rewards} outside [0, 3] or all below {min_reward}")
    return rewards


def _async_child(blob, group_blob, out):
    """In a spawned child, as TRL's AsyncRolloutWorker runs its loop."""
    import asyncio

    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop, _scrub_child_env

    _scrub_child_env()
    # As TRL's own child does: its loop logs through accelerate, which needs the state.
    from accelerate.state import PartialState

    PartialState()
    reward = pickle.loads(blob)
    group = pickle.loads(group_blob)

    class Loop:  # the attributes _score_group reads
        reward_funcs = [reward]
        reward_func_names = [reward.__name__]
        _env_reward_types = []
        _provides_rollout_reward = False

    samples = asyncio.run(_AsyncRolloutLoop._score_group(Loop(), group))
    out.put([s.metrics for s in samples])


def check_async(sdr_rewards, tok, rows, problems):
    from trl.chat_template_utils import parse_response
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence

    reward = sdr_rewards.SDRReward(metric="chamfer", name="sdr_chamfer")
    texts = [common.target(r) for r in rows]
    # What the rollout loop hands the reward: each completion parsed with the response schema.
    def prompt_ids(r):
        text = tok.apply_chat_template(common.prompt_messages(r), add_generation_prompt=True, tokenize=False)
        return tok(text, add_special_tokens=False)["input_ids"]

    completions = [
        [parse_response(tok, tok(t + "<|im_end|>", add_special_tokens=False)["input_ids"], prefix=prompt_ids(r))]
        for r, t in zip(rows, texts)
    ]
    # TRL 1.16.0's dataclass names its conversation (`rollout_id`); earlier builds had no such field.
    fields = {f.name for f in dataclasses.fields(TrainingSequence)}
    extra = {"rollout_id": "0"} if "rollout_id" in fields else {}
    seq = TrainingSequence(input_ids=[1, 2], completion_mask=[0, 1], old_log_probs=[0.0, 0.0], **extra)
    group = RolloutGroup(
        prompts=[common.prompt_messages(r) for r in rows],
        reward_kwargs={"solution": [texts[0]] * len(rows)},
        completions=completions,
        completions_ids=[[0]] * len(rows),
        completions_sequences=[[seq]] * len(rows),
        tool_call_counts=[0] * len(rows),
        tool_failure_counts=[0] * len(rows),
        model_version=0,
        group_id=0,
        env_rewards=[None] * len(rows),
        rollout_rewards=[None] * len(rows),
    )
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=_async_child, args=(pickle.dumps(reward), pickle.dumps(group), out))
    proc.start()
    metrics = out.get(timeout=600)
    proc.join(60)
    got = [m["rewards/sdr_chamfer"] for m in metrics]
    expected = reward.score(texts, references=[texts[0]] * len(rows))["reward"]
    if got != expected:
        problems.append(f"async rollout: rewards {got} != SDRReward.score {expected}")
    if not all(isinstance(c[0].get("reasoning_content"), str) for c in completions):
        problems.append(f"async rollout: parse_response gave no reasoning_content: {completions[0]}")
    return got


def main() -> int:
    from transformers import AutoTokenizer
    from trl.chat_template_utils import add_response_schema, qwen3_chat_template

    import sdr_rewards

    gguf = common.find_gguf()
    rows = common.studies("train")[:4]
    max_len = 8 + max(
        len(AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)(common.target(r))["input_ids"])
        for r in rows
    )
    problems: list = []
    report: dict = {}

    # 1. Plain chat template: content strings.
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    seen: dict = {}
    steps, history, loss = grpo(tok, rows, recording_reward(sdr_rewards, "sdr_chamfer", seen), max_len)
    report["plain"] = {"steps": steps, "fit_loss": loss, "rewards": check_grpo(
        "GRPOTrainer (no schema)", steps, history, seen, "sdr_chamfer", problems, 0.0)}

    # 2. Qwen3's template and TRL's response schema: parsed completions.
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tok.chat_template = qwen3_chat_template
    add_response_schema(tok)
    seen = {}
    steps, history, loss = grpo(tok, rows, recording_reward(sdr_rewards, "sdr_chamfer", seen), max_len)
    first = (seen.get("completions") or [[{}]])[0]
    report["schema"] = {
        "steps": steps,
        "fit_loss": loss,
        "completion_keys": sorted(first[0]) if isinstance(first, list) and first else None,
        "rewards": check_grpo("GRPOTrainer (qwen3 response schema)", steps, history, seen, "sdr_chamfer",
                              problems, 0.5),
    }
    formats = [h.get("sdr_chamfer/format") for h in history if "sdr_chamfer/format" in h]
    if not any(f and f > 0 for f in formats):
        problems.append(f"GRPOTrainer (qwen3 response schema): format term 0 on every step {formats}")
    if "reasoning_content" not in (report["schema"]["completion_keys"] or []):
        problems.append(f"GRPOTrainer (qwen3 response schema): completions not parsed: {first!r:.300}")

    # 3. AsyncGRPOTrainer's scoring: pickle, spawn, asyncio.to_thread.
    report["async_rewards"] = check_async(sdr_rewards, tok, rows, problems)

    print(json.dumps(report))
    for p in problems:
        print(f"trl_integration: FAIL: {p}", file=sys.stderr)
    if not problems:
        print("trl_integration: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
