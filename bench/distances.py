#!/usr/bin/env python3
"""Throughput of every SDR metric in Rust against POT/SciPy, same pairs, same run.

    .venv-bench/bin/python bench/distances.py [--pairs 10000] [--budget 30] [--pool SETS]

Generates PAIRS seeded set pairs (sizes 3..12 per side, 768-d, clustered like
sentence embeddings, f32 values as encoders emit them; Python computes in f64 on
the same values, Rust holds the rows as f32 and accumulates in f64), times each metric spec with the Python peers (numpy for
Chamfer/Hausdorff, POT for OT/Sinkhorn/UOT/GW/partial OT, SciPy for Hungarian),
then runs the Rust `bench-distances` binary (release) on the same pairs (each
side runs BENCH_REPEAT passes, default 3, and keeps the median rate; a Rust or
`sdr_rewards.distance_batch` pass repeats the pairs until it has lasted
BENCH_MIN_SECONDS, default 0.25, since one run can take 10 ms) and
prints a Markdown table: pairs/s for Python, Rust on 1 thread and Rust on all
threads, the ratios, the same metric through the Python package
(`sdr_rewards.distance_batch` on the pairs as float32 arrays, all threads; when `sdr_rewards`
is installed in this interpreter), the ceiling that memory bandwidth puts on the all-threads
rate (Rust reading every pair's rows once with no arithmetic, all threads, timed
just before each of the metric's passes, and its ratio to the Python rate), and
the largest |Rust - Python| value difference.

Two layouts. By default every set is distinct: 10,000 pairs are 460 MB of f32
rows, each read from memory once, and Rust is bound by memory bandwidth on
this machine. With `--pool SETS` the pairs draw their two sets from SETS
distinct sets, as in a GRPO step (64 prompts x 8 completions compare 512
completion sets with 64 reference sets per section: `--pool 576`, 14 MB),
where the rows stay in the last-level cache.

A Python pass that has not finished all pairs after BUDGET / BENCH_REPEAT seconds
is timed on the pairs it finished (the table says how many); Rust always runs
all pairs.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import ot
from scipy.optimize import linear_sum_assignment

try:  # the Python package, when installed here (bash scripts/test-python.sh builds it)
    import sdr_rewards
except ImportError:
    sdr_rewards = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SPECS = [
    "chamfer", "hausdorff", "ot",
    "sinkhorn:eps=0.01", "sinkhorn:eps=0.1", "sinkhorn:eps=0.5",
    "uot:eps=0.1,tau=0.5", "uot:eps=0.1,tau=1", "gw:eps=0.1",
    "hung-nn", "hung-pen:alpha=0.1", "hung-pen:alpha=0.5",
    "pot:rho=adaptive", "pot:rho=0.5", "pot:rho=0.8",
]


def make_pairs(count, dim, seed, pool=None):
    """(sets, pairs): the distinct sets and, per pair, the indices of its two."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(64, dim))

    def one(k):
        idx = rng.integers(0, 64, size=k)
        # f32 values (what encoders emit), held as f64 on the Python side.
        x = centres[idx] + 0.6 * rng.normal(size=(k, dim))
        return x.astype(np.float32).astype(np.float64)

    if pool is None:
        sets = []
        for _ in range(count):
            n, m = rng.integers(3, 13, size=2)
            sets += [one(n), one(m)]
        return sets, [(2 * k, 2 * k + 1) for k in range(count)]
    sets = [one(k) for k in rng.integers(3, 13, size=pool)]
    pairs = []
    for _ in range(count):
        i, j = rng.choice(pool, size=2, replace=False)
        pairs.append((int(i), int(j)))
    return sets, pairs


def cost(a, b):
    an = a / np.linalg.norm(a, axis=1, keepdims=True)
    bn = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.clip((1.0 - an @ bn.T) / 2.0, 0.0, 1.0)


def normalized(M):
    mx = M.max()
    return None if mx <= 0 else M / mx


def hung(M, alpha=None):
    n, m = M.shape
    T = M if n <= m else M.T
    r, c = linear_sum_assignment(T)
    matched = T[r, c].sum()
    if alpha is not None:
        return matched / min(n, m) + alpha * abs(n - m)
    unmatched = np.setdiff1d(np.arange(T.shape[1]), c)
    return (matched + T[:, unmatched].min(axis=0).sum()) / max(n, m)


def python_metric(spec):
    """Per-pair function computing `spec` the way a Python user would."""
    def uniform(M):
        n, m = M.shape
        return np.full(n, 1.0 / n), np.full(m, 1.0 / m)

    def ot_family(solve):
        def f(a, b):
            Mt = normalized(cost(a, b))
            if Mt is None:
                return 0.0
            p, q = uniform(Mt)
            return solve(p, q, Mt)
        return f

    name, _, params = spec.partition(":")
    kv = dict(x.split("=") for x in params.split(",")) if params else {}
    if name == "chamfer":
        return lambda a, b: (lambda M: 0.5 * (M.min(1).mean() + M.min(0).mean()))(cost(a, b))
    if name == "hausdorff":
        return lambda a, b: (lambda M: max(M.min(1).max(), M.min(0).max()))(cost(a, b))
    if name == "ot":
        return ot_family(lambda p, q, M: ot.emd2(p, q, M, numItermax=10**7))
    if name == "sinkhorn":
        eps = float(kv["eps"])
        return ot_family(lambda p, q, M: float((ot.sinkhorn(
            p, q, M, eps, method="sinkhorn_log", stopThr=1e-9, numItermax=10**6) * M).sum()))
    if name == "uot":
        eps, tau = float(kv["eps"]), float(kv["tau"])
        return ot_family(lambda p, q, M: float((ot.unbalanced.sinkhorn_unbalanced(
            p, q, M, eps, tau, reg_type="entropy", stopThr=1e-9, numItermax=10**6) * M).sum()))
    if name == "gw":
        eps = float(kv["eps"])

        def gw(a, b):
            if min(len(a), len(b)) < 2:
                return 1.0
            Ca, Cb = cost(a, a), cost(b, b)
            Ca = Ca / Ca.max() if Ca.max() > 0 else Ca
            Cb = Cb / Cb.max() if Cb.max() > 0 else Cb
            p, q = np.full(len(a), 1 / len(a)), np.full(len(b), 1 / len(b))
            T = ot.gromov.entropic_gromov_wasserstein(Ca, Cb, p, q, "square_loss", epsilon=eps)
            constC, hC1, hC2 = ot.gromov.init_matrix(Ca, Cb, p, q, "square_loss")
            return float(ot.gromov.gwloss(constC, hC1, hC2, T))
        return gw
    if name == "hung-nn":
        return lambda a, b: hung(cost(a, b))
    if name == "hung-pen":
        alpha = float(kv["alpha"])
        return lambda a, b: hung(cost(a, b), alpha)
    if name == "pot":
        rho = kv["rho"]

        def pot(a, b):
            Mt = normalized(cost(a, b))
            if Mt is None:
                return 0.0
            p, q = uniform(Mt)
            r = min(Mt.shape) / max(Mt.shape) if rho == "adaptive" else float(rho)
            # POT rejects m > sum(p) when 1/n rounds the sum just below 1.
            r = min(r, p.sum(), q.sum())
            return float(ot.partial.partial_wasserstein2(p, q, Mt, m=r))
        return pot
    raise ValueError(spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=10000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--budget", type=float, default=30.0, help="max Python seconds per metric")
    ap.add_argument("--pool", type=int, default=None,
                    help="draw both sets of every pair from this many distinct sets (576: one GRPO "
                         "step's sets per section); default: every set distinct")
    ap.add_argument("--out", default=None, help="also write the table (Markdown) here")
    ap.add_argument("--metrics", default=None, help="subset of the specs, separated by semicolons (specs contain commas; default: all 15)")
    args = ap.parse_args()
    global SPECS
    if args.metrics:
        unknown = [m for m in args.metrics.split(";") if m not in SPECS]
        if unknown:
            sys.exit(f"--metrics: unknown spec(s) {unknown}; known: {SPECS}")
        SPECS = args.metrics.split(";")

    if args.pool is not None and args.pool < 2:
        sys.exit("--pool: at least 2 sets")
    sets, index = make_pairs(args.pairs, args.dim, args.seed, args.pool)
    pairs = [(sets[i], sets[j]) for i, j in index]
    tmp = tempfile.mkdtemp(prefix="sdr-bench-")
    with open(os.path.join(tmp, "pairs.json"), "w") as f:
        json.dump({"dim": args.dim, "sets": [len(s) for s in sets], "pairs": index}, f)
    with open(os.path.join(tmp, "pairs.bin"), "wb") as f:
        for s in sets:
            f.write(np.ascontiguousarray(s, dtype="<f8").tobytes())

    # Write the (up to ~1 GB of) sets back to disk now, not during the first timings.
    os.sync()
    print(f"building the Rust side (release) ...", file=sys.stderr)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sdr-bench", "--bin", "bench-distances"],
                   cwd=ROOT, check=True)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    print(f"Rust: {len(pairs)} pairs x {len(SPECS)} metrics ...", file=sys.stderr)
    try:
        rust = json.loads(subprocess.run(
            [os.path.join(target, "release", "bench-distances"),
             os.path.join(tmp, "pairs.json"), os.path.join(tmp, "pairs.bin")],
            check=True, capture_output=True, text=True).stdout)
    finally:
        # Up to ~1 GB per run: not left behind in /tmp.
        shutil.rmtree(tmp, ignore_errors=True)

    # What a Python user of the package gets: one `sdr_rewards.distance_batch` call
    # over float32 arrays (what encoders emit; made once, outside the timing).
    if sdr_rewards is not None:
        sets32 = [s.astype(np.float32) for s in sets]
        pairs32 = [(sets32[i], sets32[j]) for i, j in index]
    else:
        print("the `sdr_rewards` package is not installed here: no sdr_rewards.distance_batch column", file=sys.stderr)
    rows = []
    warnings.simplefilter("ignore")
    for spec in SPECS:
        f = python_metric(spec)
        t_warm = time.perf_counter()
        for a, b in pairs[:20]:  # warm-up, bounded by a tenth of the budget
            f(a, b)
            if time.perf_counter() - t_warm > args.budget / 10:
                break
        # As many passes as the Rust side (BENCH_REPEAT, default 3), each with its
        # share of the budget; the median rate is kept (the host's speed drifts
        # between passes on this VM, and the first metric timed is often slower).
        repeat = int(os.environ.get("BENCH_REPEAT", "3"))
        rates, vals = [], []
        for _ in range(repeat):
            pass_vals = []
            t0 = time.perf_counter()
            for a, b in pairs:
                pass_vals.append(f(a, b))
                if time.perf_counter() - t0 > args.budget / repeat:
                    break
            rates.append(len(pass_vals) / (time.perf_counter() - t0))
            if len(pass_vals) > len(vals):
                vals = pass_vals
        done = len(vals)
        py_rate = sorted(rates)[len(rates) // 2]
        r = rust[spec]
        r1 = len(pairs) / r["single"]
        rp = len(pairs) / r["parallel"]
        diff = float(np.max(np.abs(np.array(vals) - np.array(r["values"][:done]))))
        batch = None
        if sdr_rewards is not None:
            sdr_rewards.distance_batch(pairs32[:50], spec)  # warm-up
            # Each pass repeats the call until it has lasted BENCH_MIN_SECONDS,
            # as the Rust binary does: one call over the pairs can take 10 ms.
            min_s = float(os.environ.get("BENCH_MIN_SECONDS", "0.25"))
            times = []
            for _ in range(repeat):
                calls, t0 = 0, time.perf_counter()
                while True:
                    got = sdr_rewards.distance_batch(pairs32, spec)
                    calls += 1
                    if time.perf_counter() - t0 >= min_s:
                        break
                times.append((time.perf_counter() - t0) / calls)
            if got.tolist() != r["values"]:
                sys.exit(f"{spec}: sdr_rewards.distance_batch differs from the Rust binary's values")
            batch = len(pairs) / sorted(times)[len(times) // 2]
        # Reading every pair's rows once with no arithmetic, timed just before
        # each Rust pass: the memory system's ceiling on any metric's rate here.
        read_p = len(pairs) / r["read_parallel"]
        rows.append((spec, done, py_rate, r1, rp, r1 / py_rate, rp / py_rate, batch, read_p, diff))
        passes = lambda key: ", ".join(f"{len(pairs) / t:,.0f}" for t in r[key])
        print(f"  {spec}: python passes, pairs/s: [{', '.join(f'{x:,.0f}' for x in rates)}] "
              f"(up to {done} pairs); Rust passes, pairs/s: "
              f"1 thread [{passes('single_passes')}], all threads [{passes('parallel_passes')}]",
              file=sys.stderr)

    lines = [
        f"Pairs: {len(pairs)} (sizes 3-12 per side, {args.dim}-d; "
        + ("every set distinct" if args.pool is None else f"drawn from {args.pool} distinct sets")
        + f", {sum(len(s) for s in sets) * args.dim * 4 / 1e6:,.0f} MB of f32 rows)"
        f", Rust threads: {rust['threads']}"
        f"; median of {os.environ.get('BENCH_REPEAT', '3')} passes on each side, "
        f"POT {ot.__version__}, numpy {np.__version__}",
        "",
        "| metric | Python pairs timed | Python pairs/s | Rust 1-thread pairs/s | Rust all-threads pairs/s "
        "| ratio 1-thread | ratio all-threads | `sdr_rewards.distance_batch` pairs/s (ratio) "
        "| read-only all-threads pairs/s (ratio) | max abs diff |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for spec, done, py, r1, rp, x1, xp, batch, read_p, diff in rows:
        b = "not installed" if batch is None else f"{batch:,.0f} ({batch / py:,.0f}x)"
        lines.append(f"| `{spec}` | {done} | {py:,.0f} | {r1:,.0f} | {rp:,.0f} | {x1:,.0f}x | {xp:,.0f}x "
                     f"| {b} | {read_p:,.0f} ({read_p / py:,.0f}x) | {diff:.1e} |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(table + "\n")
        os.replace(args.out + ".tmp", args.out)


if __name__ == "__main__":
    main()
