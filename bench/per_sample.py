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

Every mode runs once per round, in a fresh process, for --repeats rounds (bench/repeats.py).
Printed (and written with --out): per mode the min / median / max seconds over the rounds,
the ratio of its median to `batch`'s with the spread of the per-round ratios (flagged
UNSETTLED when that spread is wider than the effect), whether every mode's rewards equal the
batched call's bit for bit, and the CPU and the load before and after. Goal (issue 53): every
coalesced mode within 1.1x of `batch`, medians of >= 5 rounds on an idle machine.

Needs the trainers' venv (scripts/install-trainers.sh):

    .venv-trainers/bin/python bench/per_sample.py [--samples 256] [--repeats 5] [--device cpu] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))
sys.path.insert(0, str(ROOT / "bench"))
import repeats  # noqa: E402

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
    ap.add_argument("--samples", type=int, default=256, help="samples scored by every mode")
    ap.add_argument("--repeats", type=int, default=5,
                    help="rounds: every mode runs once per round in a fresh process (default 5)")
    ap.add_argument("--device", default="cpu", help="the encoder's device (cpu, cuda)")
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated modes; batch is the reference")
    ap.add_argument("--out", type=Path, help="write the results here as JSON (atomically)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        secs, rewards = run_mode(args.child, args.samples, args.device)
        print(json.dumps({"seconds": secs, "rewards": rewards}))
        return 0
    modes = args.modes.split(",")
    repeats.warn_if_busy()
    where = repeats.machine()
    runs = {m: [] for m in modes}
    rewards = {}
    # Rounds of every mode, so that a drift of the machine during the run touches every mode.
    for k in range(args.repeats):
        for mode in modes:
            res = subprocess.run(
                [sys.executable, __file__, "--child", mode, "--samples", str(args.samples), "--device", args.device],
                capture_output=True, text=True,
            )
            if res.returncode != 0:
                print(f"{mode}: {res.stderr[-3000:]}", file=sys.stderr)
                return 1
            r = json.loads(res.stdout.strip().splitlines()[-1])
            runs[mode].append(r["seconds"])
            rewards.setdefault(mode, r["rewards"])
            print(f"round {k + 1}/{args.repeats} {mode}: {r['seconds']:.2f} s", flush=True)
    where["load_after"] = os.getloadavg()[0]
    reference = rewards.get("batch")
    results = {}
    for mode in modes:
        # OpenRLHF hands rewards back as float32 tensors: compared at float32.
        same = None if reference is None else [f32(x) for x in rewards[mode]] == [f32(x) for x in reference]
        results[mode] = {"seconds": repeats.spread(runs[mode]), "identical_to_batch": same}
        if "batch" in runs:
            results[mode]["vs_batch"] = repeats.ratio(runs[mode], runs["batch"])
    print(f"\n{where['cpu']}, {where['logical_cores']} logical cores; load {where['load_before']:.2f} before, "
          f"{where['load_after']:.2f} after; {args.samples} samples, {args.repeats} rounds\n")
    print(f"{'mode':<18}{'min':>8}{'median':>8}{'max':>8}  x batch (median; rounds)  identical")
    for mode, r in results.items():
        s_ = r["seconds"]
        vs = repeats.ratio_text(r["vs_batch"]) if "vs_batch" in r else "-"
        print(f"{mode:<18}{s_['min']:>8.2f}{s_['median']:>8.2f}{s_['max']:>8.2f}  {vs}  {r['identical_to_batch']}")
    if args.out:
        repeats.write_json_atomic(args.out, {"machine": where, "samples": args.samples, "device": args.device,
                                             "repeats": args.repeats, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
