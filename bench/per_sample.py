"""Per-sample reward calls, as verl and OpenRLHF make them, against one batched call.

verl 0.9's reward loop (`RewardLoopWorker.compute_score_batch`) and OpenRLHF 0.11's
`SingleTurnAgentExecutor` ask for the reward of one sample at a time, all samples of a
step concurrently. Each mode below scores the same `--samples` (default 256) IU X-ray
completions against their references, in a fresh process whose encoder is loaded and
warmed on other text first, with an empty sentence cache, so that every mode embeds the
same new sentences:

    batch          one SDRReward.score call over all samples (the reference cost)
    verl-sync      RewardLoopWorker (naive manager), compute_score: verl's thread pool
    verl-async     RewardLoopWorker (naive manager), compute_score_async
    verl-nocoal    as verl-sync with coalesce_ms=0 (each call scored alone: the old cost)
    openrlhf       SingleTurnAgentExecutor with sdr_rewards/openrlhf_reward.py (asyncio.to_thread)
    openrlhf-nocoal  the same with SDR_COALESCE_MS=0

Printed (and written with --out): seconds per mode (median of --repeats fresh
processes), the ratio to `batch`, and whether every mode's rewards equal the batched
call's bit for bit. Goal: the coalesced modes within 1.1x of `batch`.

Needs the trainers' venv (scripts/install-trainers.sh):

    .venv-trainers/bin/python bench/per_sample.py [--samples 256] [--repeats 3] [--device cpu]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))

MODES = ("batch", "verl-sync", "verl-async", "verl-nocoal", "openrlhf", "openrlhf-nocoal")


def samples(n):
    import common

    rows = [r for r in common.studies("train")]
    refs = [common.target(r) for r in rows[:n]]
    # Completions: another study's report (distinct sentences, realistic lengths).
    comps = [common.target(r) for r in rows[n : 2 * n]]
    return comps, refs


def warm(device):
    """Load the encoder and run it once on text no mode scores."""
    import sdr_rewards

    sdr_rewards.SDRReward(device=device).score(
        ["<think>Warm-up sentence one.</think><answer>Warm-up two.</answer>"],
        references=["<think>Warm-up three.</think><answer>Warm-up four.</answer>"],
    )


def run_mode(mode, n, device):
    """Seconds for `mode` and its rewards (in the child process)."""
    import sdr_rewards

    comps, refs = samples(n)
    if mode == "batch":
        warm(device)
        reward = sdr_rewards.SDRReward(device=device)
        t = time.perf_counter()
        out = reward.score(comps, references=refs)["reward"]
        return time.perf_counter() - t, out
    if mode.startswith("verl"):
        return run_verl(mode, comps, refs, device)
    return run_openrlhf(mode, comps, refs, device)


def run_verl(mode, comps, refs, device):
    import numpy as np
    import torch
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.experimental.reward_loop import RewardLoopWorker

    import common
    import verl_integration as vi

    gguf = common.find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    extra = [f"+reward.custom_reward_function.reward_kwargs.device={device}"]
    if mode == "verl-nocoal":
        extra.append("+reward.custom_reward_function.reward_kwargs.coalesce_ms=0")
    name = "compute_score_async" if mode == "verl-async" else "compute_score"
    with tempfile.TemporaryDirectory() as tmp:
        tok.save_pretrained(tmp)
        config = vi.compose(tmp, "naive", name, extra)
        data = vi.batch_of(tok, comps, refs)
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        worker = RewardLoopWorker(config)
        # Warm: the worker's own reward object loads its encoder on other text.
        loop.run_until_complete(worker.compute_score_batch(vi.batch_of(tok, ["<think>Warm-up a.</think><answer>b.</answer>"], ["<think>Warm-up c.</think><answer>d.</answer>"])))
        t = time.perf_counter()
        out = loop.run_until_complete(worker.compute_score_batch(data))
        elapsed = time.perf_counter() - t
    del np, torch, DataProto
    return elapsed, [o["reward_score"] for o in out]


def run_openrlhf(mode, comps, refs, device):
    import importlib.util
    from types import SimpleNamespace

    from openrlhf.utils.agent import SingleTurnAgentExecutor
    from transformers import AutoTokenizer

    import common
    import openrlhf_integration as oi
    import sdr_rewards

    os.environ["SDR_DEVICE"] = device
    os.environ["SDR_COALESCE_MS"] = "0" if mode == "openrlhf-nocoal" else "2"
    gguf = common.find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    prompts = [f"<|im_start|>user\nStudy {k}.<|im_end|>\n<|im_start|>assistant\n" for k in range(len(comps))]
    answers = {tuple(tok(p, add_special_tokens=False)["input_ids"]): c for p, c in zip(prompts, comps)}
    path = Path(sdr_rewards.__file__).with_name("openrlhf_reward.py")
    executor = SingleTurnAgentExecutor(str(path))
    engine = oi.Engine(tok, answers)
    # Warm: the loaded file's reward loads its encoder on other text.
    executor.reward_func(["<think>Warm-up a.</think><answer>b.</answer>"], [""], ["<think>Warm-up c.</think><answer>d.</answer>"])
    params = SimpleNamespace(max_tokens=512, logprobs=None)

    async def go():
        return await asyncio.gather(*(executor.execute(p, l, params, 4096, tok, engine) for p, l in zip(prompts, refs)))

    t = time.perf_counter()
    out = asyncio.run(go())
    elapsed = time.perf_counter() - t
    del importlib
    return elapsed, [oi.as_float(o["reward"]) for o in out]


def f32(x: float) -> float:
    import struct

    return struct.unpack("f", struct.pack("f", x))[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        secs, rewards = run_mode(args.child, args.samples, args.device)
        print(json.dumps({"seconds": secs, "rewards": rewards}))
        return 0
    results = {}
    reference = None
    for mode in args.modes.split(","):
        runs = []
        for _ in range(args.repeats):
            res = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--samples", str(args.samples), "--device", args.device],
                capture_output=True, text=True,
            )
            if res.returncode != 0:
                print(res.stderr[-3000:], file=sys.stderr)
                return 1
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        secs = statistics.median(r["seconds"] for r in runs)
        rewards = runs[0]["rewards"]
        if mode == "batch":
            reference = rewards
        # OpenRLHF hands rewards back as float32 tensors: compared at float32.
        same = None if reference is None else [f32(x) for x in rewards] == [f32(x) for x in reference]
        results[mode] = {"seconds": secs, "runs": [r["seconds"] for r in runs], "identical_to_batch": same}
    base = results.get("batch", {}).get("seconds")
    print(f"{'mode':<18}{'seconds':>10}{'x batch':>10}  identical")
    for mode, r in results.items():
        ratio = r["seconds"] / base if base else float("nan")
        r["ratio"] = ratio
        print(f"{mode:<18}{r['seconds']:>10.3f}{ratio:>10.2f}  {r['identical_to_batch']}")
    if args.out:
        args.out.write_text(json.dumps({"samples": args.samples, "device": args.device, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
