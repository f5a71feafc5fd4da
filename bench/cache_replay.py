"""The sentence cache over a GRPO run: hit rate and reward time per step, with and
without the cache, on the same stream of completions, in one run.

The stream is `--steps` GRPO steps of `--prompts` prompts x `--group` completions.
With `--completions FILE` it replays logged completions (JSON Lines
`{"step", "completion", "reference"}`, as `recipes/grpo.py --log-completions`
writes them). Without it, it builds a stand-in from IU X-ray: each step's prompts
are train studies drawn at random (their reports, in the template, are the
references) and each prompt's completions are reports of other train studies,
so the completions repeat sentences at the rate IU's radiologists do (a policy
trained towards these reports writes the same kinds of sentences).

For every step the script times `SDRReward.score` on the step's batch with one
reward object that lives through the run (its sentence cache fills as the run
goes) and, on every `--uncached-every`-th step, with a reward object whose cache
is off (`cache_mib=0`, references too), on the same strings; it reports the hit
rate, sentences embedded, seconds, and the largest reward difference between the
two (the cache returns the vectors a sentence got the first time it was embedded,
the uncached path re-embeds it in another batch: SPEC §2 bounds the difference).

With `--serve SDR_BIN` it also starts `sdr serve` on loopback and sends one
OpenRLHF request of 64 completions twice: both times, the reply's rewards, and
their difference.

    .venv-bench/bin/python bench/cache_replay.py [--steps 20] [--serve target/release/sdr] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from model_dir import default_model_dir  # noqa: E402
from rewards import load_reports  # noqa: E402

import sdr_rewards  # noqa: E402


def template(f: str, i: str) -> str:
    return f"<think>{f}</think><answer>{i}</answer>"


def iu_stream(steps: int, prompts: int, group: int, seed: int):
    _, train = load_reports()
    rng = random.Random(seed)
    for _ in range(steps):
        comps, refs = [], []
        for f, i in rng.sample(train, prompts):
            ref = template(f, i)
            for _ in range(group):
                cf, ci = rng.choice(train)
                comps.append(template(cf, ci))
                refs.append(ref)
        yield comps, refs


def logged_stream(path: str, steps: int):
    by_step: dict = {}
    with open(path) as f:
        for line in f:
            row = json.loads(line)
            by_step.setdefault(row["step"], ([], []))
            by_step[row["step"]][0].append(row["completion"])
            by_step[row["step"]][1].append(row["reference"])
    for step in sorted(by_step)[:steps]:
        yield by_step[step]


def serve_twice(sdr_bin: str, model_dir: str) -> dict:
    """One 64-completion OpenRLHF request to a fresh `sdr serve`, sent twice."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sdr_bin, "serve", "--port", str(port), "--model", model_dir],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1).read()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    raise RuntimeError("sdr serve did not start")
                time.sleep(0.2)
        comps, refs = next(iu_stream(1, 8, 8, seed=7))
        body = json.dumps({"query": comps, "prompts": [""] * len(comps), "labels": refs}).encode()
        out = []
        for _ in range(2):
            req = urllib.request.Request(
                f"http://127.0.0.1:{port}/get_reward", data=body, headers={"Content-Type": "application/json"}
            )
            t = time.perf_counter()
            reply = json.loads(urllib.request.urlopen(req, timeout=600).read())
            out.append((time.perf_counter() - t, reply["rewards"]))
        health = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/health").read())
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    (t1, r1), (t2, r2) = out
    return {
        "completions": len(comps),
        "first_seconds": t1,
        "second_seconds": t2,
        "speedup": t1 / t2,
        "identical_rewards": r1 == r2,
        "max_abs_reward_diff": max(abs(a - b) for a, b in zip(r1, r2)),
        "cache": health.get("cache"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--uncached-every", type=int, default=4, help="time the uncached path on every N-th step (1 = all)")
    ap.add_argument("--completions", help="JSON Lines of logged completions to replay instead of the IU stand-in")
    ap.add_argument("--serve", metavar="SDR_BIN", help="also time one OpenRLHF request sent twice to `sdr serve`")
    ap.add_argument("--json")
    args = ap.parse_args()

    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; cpus {os.cpu_count()}", flush=True)
    model_dir = default_model_dir()
    stream = (
        logged_stream(args.completions, args.steps)
        if args.completions
        else iu_stream(args.steps, args.prompts, args.group, args.seed)
    )
    warm = sdr_rewards.SDRReward(model_dir=model_dir)
    cold = sdr_rewards.SDRReward(model_dir=model_dir, cache_mib=0)
    for r in (warm, cold):  # load the model outside the timings
        r.score(["<think>x.</think><answer>y.</answer>"], references=["<think>a.</think><answer>b.</answer>"])
    warm.score(["<think>x.</think><answer>y.</answer>"], references=["<think>a.</think><answer>b.</answer>"])

    rows = []
    print("step  completions  distinct  hit rate  embedded  cached s  uncached s  ratio  max |dR|", flush=True)
    for step, (comps, refs) in enumerate(stream, start=1):
        t = time.perf_counter()
        ours = warm.score(comps, references=refs)["reward"]
        cached_s = time.perf_counter() - t
        st = warm.last_stats()
        row = {
            "step": step,
            "completions": len(comps),
            "distinct": st["distinct"],
            "hit_rate": st["hit_rate"],
            "embedded": st["embedded"],
            "cached_seconds": cached_s,
            "encode_seconds": st["encode_seconds"],
        }
        if (step - 1) % args.uncached_every == 0 or step == args.steps:
            t = time.perf_counter()
            base = cold.score(comps, references=refs)["reward"]
            row["uncached_seconds"] = time.perf_counter() - t
            row["max_abs_reward_diff"] = max(abs(a - b) for a, b in zip(ours, base))
        rows.append(row)
        un = row.get("uncached_seconds")
        print(
            f"{step:4d}  {len(comps):11d}  {st['distinct']:8d}  {st['hit_rate']:8.3f}  {st['embedded']:8d}"
            f"  {cached_s:8.2f}  {'' if un is None else f'{un:10.2f}':>10}"
            f"  {'' if un is None else f'{un / cached_s:5.1f}x':>6}"
            f"  {'' if un is None else '%.1e' % row['max_abs_reward_diff']:>8}",
            flush=True,
        )
    paired = [r for r in rows if "uncached_seconds" in r]
    later = [r for r in paired if r["step"] > 1]
    result = {
        "source": args.completions or f"IU X-ray stand-in (train reports of other studies), seed {args.seed}",
        "steps": rows,
        "cache": warm.cache_info(),
        "uncached_over_cached_after_step_1": (
            sum(r["uncached_seconds"] for r in later) / sum(r["cached_seconds"] for r in later) if later else None
        ),
        "max_abs_reward_diff": max(r["max_abs_reward_diff"] for r in paired),
        "load_before": load[0],
        "cpus": os.cpu_count(),
    }
    if args.serve:
        result["serve_same_request_twice"] = serve_twice(args.serve, model_dir)
    summary = {k: v for k, v in result.items() if k != "steps"}
    print(json.dumps(summary, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
