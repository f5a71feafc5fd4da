"""Rewards per second: `sdr_rewards.SDRReward` against a straightforward Python implementation.

One GRPO batch of 512 completions (64 prompts x 8), built from IU X-ray: the
references are 64 test-split reports in the `<think>F</think><answer>I</answer>`
template; each prompt's 8 completions are other reports' sections (drawn with a
fixed seed from the train split), one in eight deliberately malformed. Both
implementations get the same strings in the same run:

- sdr: `sdr_rewards.SDRReward(metric="chamfer")` (Rust: segmentation, one encoder call over
  the batch's distinct sentences not in its sentence cache, Chamfer), timed cold (a
  fresh reward object) and warm: a second batch with the same references (they
  recur each epoch) and new completions (another seed), after the first batch has
  filled the cache (bench/cache_replay.py measures the cache over a whole run);
- python: sentence-transformers `encode` on every sentence of the batch (one call,
  batch size 32) + numpy Chamfer per section, with the same parsing (`sdr_rewards.parse_report`).

    .venv-bench/bin/python bench/rewards.py [--repeats 3] [--precision f32|bf16] [--encoder sdr|table] [--json out.json]

`--precision bf16` runs SDR's encoder with bf16 GEMMs (on CPUs with AVX-512 BF16 or
AMX; f32 elsewhere); the Python side stays sentence-transformers f32, and the reward
difference column then shows what bf16 moves.

`--encoder table` measures what the reward costs besides encoding, as with an encoder
already on the trainer's GPU (`SDRReward(encoder=...)`): both sides get the same
stand-in encoder, a lookup of vectors computed before timing (768-d, seeded by each
sentence), so the figures are parsing, deduplication, the hand-over of the arrays,
caching and the distances. The rewards are then not SDR's, only equal on both sides.
It also times verl's two reward managers on the batch: `sdr_rewards.verl.compute_score` once
per sample (naive) and once for the batch (batch).

Needs: the `sdr-rewards` wheel, sentence-transformers (torch), numpy, and the model folder
(scripts/fetch-model.sh): all in .venv-bench (`bash scripts/setup-bench.sh`).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import random
import time
import zlib
from pathlib import Path

import numpy as np

import sdr_rewards

from model_dir import default_model_dir

ROOT = Path(__file__).resolve().parents[1]


def load_reports():
    test, train = [], []
    with open(ROOT / "data/iu-xray/indiana_reports.csv", newline="") as f:
        for r in csv.DictReader(f):
            fi, im = r["findings"].strip(), r["impression"].strip()
            if not fi or not im:
                continue
            (test if int(r["uid"]) % 10 == 0 else train).append((fi, im))
    return test, train


def make_batch(prompts=64, group=8, seed=0):
    """`prompts` test references x `group` completions drawn (with `seed`) from train."""
    test, train = load_reports()
    rng = random.Random(seed)
    refs, comps = [], []
    for p in range(prompts):
        f, i = test[p]
        ref = f"<think>{f}</think><answer>{i}</answer>"
        for g in range(group):
            cf, ci = rng.choice(train)
            text = f"<think>{cf}</think><answer>{ci}</answer>"
            if g == group - 1:
                text = text.replace("</answer>", "")  # malformed: reward 0
            comps.append(text)
            refs.append(ref)
    return comps, refs


def python_rewards(model, comps, refs):
    """The straightforward implementation: embed everything, numpy Chamfer."""
    parsed_c = [sdr_rewards.parse_report(c) for c in comps]
    parsed_r = [sdr_rewards.parse_report(r) for r in refs]
    sentences = []
    for pc, pr in zip(parsed_c, parsed_r):
        sentences += pr["findings"] + pr["impression"]
        if pc["format_valid"]:
            sentences += pc["findings"] + pc["impression"]
    emb = model.encode(sentences, batch_size=32, convert_to_numpy=True, normalize_embeddings=True)
    k = 0

    def take(n):
        nonlocal k
        out = emb[k:k + n]
        k += n
        return out

    def chamfer(a, b):
        m = (1.0 - a.astype(np.float64) @ b.astype(np.float64).T) / 2.0
        m = np.clip(m, 0.0, 1.0)
        return (m.min(axis=1).mean() + m.min(axis=0).mean()) / 2.0

    rewards = []
    for pc, pr in zip(parsed_c, parsed_r):
        rf, ri = take(len(pr["findings"])), take(len(pr["impression"]))
        if not pc["format_valid"]:
            rewards.append(0.0)
            continue
        gf, gi = take(len(pc["findings"])), take(len(pc["impression"]))
        rewards.append(1.0 + (1 - min(chamfer(gf, rf), 1.0)) + (1 - min(chamfer(gi, ri), 1.0)))
    return rewards, len(sentences)


class Table:
    """A stand-in for an encoder already on the trainer's GPU: vectors computed
    before timing, looked up per sentence (a miss, such as SDRReward's probe, is
    computed on the spot). Callable for `SDRReward(encoder=...)`, and with
    sentence-transformers' `encode` for the Python implementation."""

    def __init__(self, sentences, dim=768):
        self.dim = dim
        self.vec = {}
        for s in sentences:
            self.lookup(s)

    def lookup(self, s):
        v = self.vec.get(s)
        if v is None:
            rng = np.random.default_rng(zlib.crc32(s.encode()))
            v = self.vec[s] = rng.standard_normal(self.dim).astype(np.float32)
        return v

    def __call__(self, sentences):
        return np.stack([self.lookup(s) for s in sentences])

    def encode(self, sentences, batch_size=32, convert_to_numpy=True, normalize_embeddings=True):
        e = self(sentences)
        return e / np.linalg.norm(e, axis=1, keepdims=True)


def all_sentences(*texts):
    out = set()
    for group in texts:
        for t in group:
            p = sdr_rewards.parse_report(t)
            out.update(p["findings"])
            out.update(p["impression"])
    return out


def best(f, repeats):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - t)
    return min(times), out


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="SDRReward's encoder precision (the Python side stays f32)")
    ap.add_argument("--encoder", choices=["sdr", "table"], default="sdr",
                    help="sdr: SDR's encoder against sentence-transformers on this CPU; table: "
                         "both sides get the same precomputed-vector lookup (the cost besides encoding)")
    args = ap.parse_args()

    load = os.getloadavg()
    print(f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; cpus {os.cpu_count()}")
    comps, refs = make_batch()
    comps2, refs2 = make_batch(seed=1)
    assert refs2 == refs
    n = len(comps)
    model_dir = default_model_dir()

    # sdr: cold = a fresh reward object (no cached reference sentences); warm = next call.
    cold_times, warm_times = [], []
    table = Table(all_sentences(comps, comps2, refs)) if args.encoder == "table" else None
    for _ in range(args.repeats):
        if table is not None:
            r = sdr_rewards.SDRReward(metric="chamfer", encoder=table)
        else:
            r = sdr_rewards.SDRReward(metric="chamfer", model_dir=model_dir, precision=args.precision)
        r.score(["<think>x.</think><answer>y.</answer>"], references=["<think>a.</think><answer>b.</answer>"])  # load the model
        t = time.perf_counter()
        ours = r.score(comps, references=refs)["reward"]
        cold_times.append(time.perf_counter() - t)
        stats = r.last_stats()
        t = time.perf_counter()
        ours_warm = r.score(comps2, references=refs)["reward"]
        warm_times.append(time.perf_counter() - t)
        warm_stats = r.last_stats()

    if table is not None:
        model, torch_threads = table, None
    else:
        from sentence_transformers import SentenceTransformer
        import torch

        model = SentenceTransformer(model_dir, device="cpu")
        model.encode(["warm up"])
        torch_threads = torch.get_num_threads()
    py_time, (theirs, py_sentences) = best(lambda: python_rewards(model, comps, refs), args.repeats)
    py_time2, (theirs2, _) = best(lambda: python_rewards(model, comps2, refs), args.repeats)

    verl = {}
    if table is not None:
        # verl's two reward managers, cold (a fresh reward per repeat): naive calls
        # compute_score once per sample, batch once per batch.
        import sdr_rewards.verl as sdr_verl

        def naive():
            sdr_verl._rewards.clear()
            return [sdr_verl.compute_score("iu", c, r, encoder=table)["score"] for c, r in zip(comps, refs)]

        def batch():
            sdr_verl._rewards.clear()
            out = sdr_verl.compute_score(data_sources=["iu"] * n, solution_strs=comps, ground_truths=refs,
                                         extra_infos=[None] * n, encoder=table)
            return [o["score"] for o in out]

        verl["verl_naive_seconds"], a = best(naive, args.repeats)
        verl["verl_batch_seconds"], b = best(batch, args.repeats)
        assert np.allclose(a, b, atol=1e-6) and np.allclose(a, ours, atol=1e-6)

    diff = float(
        max(np.max(np.abs(np.array(ours) - np.array(theirs))), np.max(np.abs(np.array(ours_warm) - np.array(theirs2))))
    )
    result = {
        "completions": n,
        "sdr_cold_seconds": min(cold_times),
        "sdr_warm_seconds": min(warm_times),
        "python_seconds": py_time,
        "python_seconds_second_batch": py_time2,
        "sdr_cold_rewards_per_s": n / min(cold_times),
        "sdr_warm_rewards_per_s": n / min(warm_times),
        "python_rewards_per_s": n / py_time,
        "speedup_cold": py_time / min(cold_times),
        "speedup_warm": py_time2 / min(warm_times),
        "max_abs_reward_diff": diff,
        "sdr_batch_stats_cold": stats,
        "sdr_batch_stats_warm": warm_stats,
        "python_sentences_embedded": py_sentences,
        "torch_threads": torch_threads,
        "encoder": args.encoder,
        "cpus": os.cpu_count(),
        "machine": platform.processor() or platform.machine(),
        "cpu": _cpu_model(),
        "date": __import__("datetime").date.today().isoformat(),
        "load_after": os.getloadavg()[0],
        "repeats": args.repeats,
        "sdr_precision": args.precision,
        "load_before": load[0],
        **verl,
    }
    print(json.dumps(result, indent=1))
    if args.json:
        tmp = Path(args.json + ".tmp")
        tmp.write_text(json.dumps(result, indent=1) + "\n")
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
