#!/usr/bin/env python3
"""Sentence-embedding throughput: sentence-transformers vs `sdr embed` (issue 3).

In one run, on this machine:
  1. the same N distinct IU X-ray sentences through sentence-transformers (PyTorch, CPU)
     and through `sdr embed` (release build, f32), sentences/s and the ratio;
  2. a GRPO-like batch (64 prompts x 8 sampled reports with realistic sentence overlap,
     built from IU reports) with and without SDR's sentence cache;
  3. reduced-precision paths with their parity (min cosine against sentence-transformers).

    .venv-bench/bin/python bench/embed.py --sdr target/release/sdr \
        [--sdr-mkl PATH_TO_SDR_BUILT_WITH_--features_mkl] \
        [--gemm-peak target/release/examples/gemm_peak] [--out FILE.json]

`--gemm-peak` runs the gemm_peak example first (`cargo build --release -p sdr-embed --features
bench-internals --example gemm_peak`) and reports each row's dense-GEMM throughput as a share of
the measured f32 / bf16 instruction peak (the roofline of issue 53); `--out` writes the rows, the
peaks, the CPU and the load before and after as JSON.

`sdr` times are wall-clock of the whole process (model load included); the load time,
measured on a 1-sentence input, is also printed and subtracted in the `net` column.
sentence-transformers is timed in this process with its model loaded, so `net` is the
like-for-like column. `--in-process` adds `sdr_rewards.Encoder.embed` timed the same way as
sentence-transformers (a Python process that has loaded the model first), and
`--processes` a second table of whole processes on both sides (interpreter start, imports,
model load, encoding, writing the .npy), sentence-transformers included.
Needs .venv-bench (`bash scripts/setup-bench.sh`: sentence-transformers and the sdr-rewards wheel);
no network.
"""

import os
import sys

# A script in bench/ named like a standard module (it once held select.py, which shadowed
# the `select` that subprocess imports) must not be imported in its place: drop this
# script's folder from the import path first.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse  # noqa: E402
import csv  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

# `subprocess` (and its `select`) is imported: this folder may come back for one import.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_dir import default_model_dir  # noqa: E402

sys.path.pop(0)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
IU = os.path.join(ROOT, "data", "iu-xray", "indiana_reports.csv")
# FLOPs per token of all-mpnet-base-v2's 12 layers' dense GEMMs (qkv, o, two FFN):
# 2 * 12 * (768*2304 + 768*768 + 2*768*3072); attention scores add 4*seq*768 per layer.
FLOP_PER_TOKEN = 2 * 12 * (768 * 2304 + 768 * 768 + 2 * 768 * 3072)


def split(text):
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", (text or "").strip()) if s.strip()]


def iu_reports():
    with open(IU, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            sents = split(row.get("findings")) + split(row.get("impression"))
            if sents:
                yield sents


def distinct_sentences(n, seed=0):
    seen, out = set(), []
    for sents in iu_reports():
        for s in sents:
            if s not in seen:
                seen.add(s)
                out.append(s)
    random.Random(seed).shuffle(out)
    return out[:n]


def grpo_batch(prompts=64, samples=8, seed=0):
    """64 references x 8 'sampled' reports: each sampled sentence is the reference's own
    (p=0.6), a frequent IU sentence (p=0.25, the generator's stock phrases), or
    dropped (p=0.15); one stock sentence is appended with p=0.3."""
    rng = random.Random(seed)
    reports = list(iu_reports())
    counts = {}
    for r in reports:
        for s in r:
            counts[s] = counts.get(s, 0) + 1
    stock = [s for s, _ in sorted(counts.items(), key=lambda kv: -kv[1])[:300]]
    lines = []
    for ref in rng.sample(reports, prompts):
        for _ in range(samples):
            for s in ref:
                u = rng.random()
                if u < 0.6:
                    lines.append(s)
                elif u < 0.85:
                    lines.append(rng.choice(stock))
            if rng.random() < 0.3:
                lines.append(rng.choice(stock))
    return lines


def cos_rows(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a * b).sum(axis=1)


def run_sdr(sdr, model, lines, extra, env=None):
    with tempfile.TemporaryDirectory() as d:
        inp, out = os.path.join(d, "in.txt"), os.path.join(d, "out.npy")
        with open(inp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        cmd = [sdr, "embed", inp, "--format", "npy", "-o", out, "--model", model] + extra
        t = time.perf_counter()
        subprocess.run(cmd, check=True, env=env)
        dt = time.perf_counter() - t
        return np.load(out), dt


ST_PROCESS = r"""
import sys, time
t0 = time.perf_counter()
import numpy as np
from sentence_transformers import SentenceTransformer
model, inp, out, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
texts = open(inp, encoding="utf-8").read().splitlines()
st = SentenceTransformer(model, device="cpu")
t1 = time.perf_counter()
np.save(out, st.encode(texts, batch_size=batch, convert_to_numpy=True))
print(t1 - t0, time.perf_counter() - t1)
"""

SDR_IN_PROCESS = r"""
import sys, time
import numpy as np
import sdr_rewards
model, inp, out, precision = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
texts = open(inp, encoding="utf-8").read().splitlines()
enc = sdr_rewards.Encoder(model, precision=precision)
enc.embed(["warm up"])
enc.clear_cache()
t = time.perf_counter()
np.save(out, enc.embed(texts))
print(time.perf_counter() - t)
"""


def run_python(script, args_, lines):
    """Runs `script` in a fresh interpreter on `lines`; (embeddings, wall s, its stdout floats)."""
    with tempfile.TemporaryDirectory() as d:
        inp, out = os.path.join(d, "in.txt"), os.path.join(d, "out.npy")
        with open(inp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        t = time.perf_counter()
        res = subprocess.run([sys.executable, "-c", script, args_[0], inp, out] + args_[1:],
                             check=True, capture_output=True, text=True)
        dt = time.perf_counter() - t
        return np.load(out), dt, [float(x) for x in res.stdout.split()]


def gemm_peaks(exe, runs=3):
    """The gemm_peak example's measured GEMM throughputs and instruction peaks (GFLOP/s): the best
    of `runs` runs, since a busy minute of a shared host can only lower a peak."""
    import re

    best = {"gemm": {}, "threads": None, "f32": None, "bf16": None}
    for _ in range(runs):
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
        print(out, end="", flush=True)
        for m in re.finditer(r"^([^:\n]+): \d+x\d+x\d+: ([\d.]+) GFLOP/s", out, re.M):
            best["gemm"][m.group(1)] = max(best["gemm"].get(m.group(1), 0.0), float(m.group(2)))
        lines = [l for l in out.splitlines() if l.startswith("peak, ")]
        last = lines[-1] if lines else ""
        best["threads"] = last.split(" thread")[0].removeprefix("peak, ") if last else None
        for key, pattern in (("f32", r"f32 FMA ([\d.]+)"), ("bf16", r"bf16 vdpbf16ps ([\d.]+)")):
            m = re.search(pattern, last)
            if m:
                best[key] = max(best[key] or 0.0, float(m.group(1)))
    return best


def stage_profile(exe, texts, precision, batch_size):
    """The encoder_profile example's stage totals for `texts` (its JSON), printed as they come."""
    import json

    args = [exe, str(len(texts)), precision, "auto", str(batch_size), "--json"]
    out = subprocess.run(args, input="\n".join(texts) + "\n", capture_output=True, text=True,
                         check=True).stdout
    prof = json.loads(out)
    timed = sum(st["seconds"] for st in prof["stages"])
    print(f"# stage profile, {precision}: {prof['wall_s']:.2f} s wall on {prof['threads']} threads, "
          f"{timed:.2f} s timed in stages", flush=True)
    for st in prof["stages"]:
        rate = f", {st['flops'] / 1e9 / st['seconds']:.0f} GFLOP/s" if st["flops"] and st["seconds"] else ""
        print(f"#   {st['stage']}: {st['seconds']:.3f} s ({100 * st['seconds'] / timed:.1f} %){rate}", flush=True)
    return prof


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdr", default=os.path.join(ROOT, "target", "release", "sdr"))
    ap.add_argument("--sdr-mkl", help="an sdr built with --features mkl (optional)")
    ap.add_argument(
        "--model",
        default=default_model_dir(),
    )
    ap.add_argument("-n", type=int, default=2000, help="distinct IU sentences")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--prompts", type=int, default=64, help="GRPO-like batch: prompts (x 8 samples)")
    ap.add_argument("--skip-grpo", action="store_true")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time the distinct sentences this many interleaved rounds and keep each "
                         "run's median (the host's speed moves by 10-20 %% within minutes)")
    ap.add_argument("--st-bf16", action="store_true",
                    help="also time sentence-transformers with bf16 weights (PyTorch's oneDNN bf16 GEMMs)")
    ap.add_argument("--in-process", action="store_true",
                    help="also time the Python package's `sdr_rewards.Encoder.embed` in a process that has "
                         "loaded the model, as sentence-transformers is timed (needs `sdr_rewards` installed)")
    ap.add_argument("--processes", action="store_true",
                    help="also time whole processes on both sides: a fresh Python process that "
                         "imports sentence-transformers, loads the model and encodes, against `sdr embed`")
    ap.add_argument("--candle-bf16", action="store_true", help="also time candle's (slow) bf16 path")
    ap.add_argument("--gemm-peak", metavar="EXE",
                    help="the gemm_peak example (cargo build --release -p sdr-embed --features bench-internals "
                         "--example gemm_peak): run first (best of 3 runs), on an idle machine, and give each "
                         "row its share of the measured f32 / bf16 instruction peak on all threads")
    ap.add_argument("--profile", metavar="EXE",
                    help="the encoder_profile example (cargo build --release -p sdr-embed --features "
                         "bench-internals --example encoder_profile): after the timed rounds, time each stage "
                         "of the encoder (GEMMs, attention, norms, ...) on the same sentences, f32 and bf16")
    ap.add_argument("--out", help="also write the rows, the machine and the peaks as JSON (atomically)")
    args = ap.parse_args()
    peaks = gemm_peaks(args.gemm_peak) if args.gemm_peak else None

    import sentence_transformers
    import torch
    from sentence_transformers import SentenceTransformer

    load_start = os.getloadavg()
    print(f"# load: {load_start} | torch {torch.__version__} threads {torch.get_num_threads()} "
          f"| sentence-transformers {sentence_transformers.__version__}", flush=True)
    texts = distinct_sentences(args.n)
    st = SentenceTransformer(args.model, device="cpu")
    st.encode(texts[:32], batch_size=args.batch_size)
    n_tok = sum(len(x) for x in st.tokenizer(texts, truncation=True, max_length=384)["input_ids"])
    gflop = n_tok * FLOP_PER_TOKEN / 1e9
    rows = []

    def add(name, n, dt, cos=None, startup=0.0, spread=None):
        net = max(dt - startup, 1e-9)
        rows.append((name, n, dt, n / dt, n / net, cos, gflop / net if n == len(texts) else None,
                     spread))

    st16 = None
    if args.st_bf16:
        st16 = SentenceTransformer(args.model, device="cpu", model_kwargs={"torch_dtype": torch.bfloat16})
        st16.encode(texts[:32], batch_size=args.batch_size)
    # Start-up (model load, weight packing, 1 sentence) per binary and precision: a bf16
    # encoder packs its weights to bf16 at load, which an f32 start-up would not count.
    startups = {}

    def startup_of(exe, extra):
        prec = [a for i, a in enumerate(extra) if i and extra[i - 1] == "--precision"]
        key = (exe, tuple(prec))
        if key not in startups:
            # The median of 3: the first run after a build reads the binary and the
            # weights from disk (1.3 s against 0.5 s warm on the Xeon of bench/README.md).
            runs = sorted(run_sdr(exe, args.model, ["warm up"],
                                  ["--precision", prec[0]] if prec else [])[1] for _ in range(3))
            startups[key] = runs[1]
            print(f"# sdr start-up {prec[0] if prec else 'f32'} (model load, 1 sentence, median of 3): "
                  f"{startups[key]:.2f} s ({runs[0]:.2f}-{runs[2]:.2f})", flush=True)
        return startups[key]

    print(f"# {n_tok} tokens, {gflop:.0f} GFLOP of dense GEMMs for the {len(texts)} sentences",
          flush=True)
    variants = [(args.sdr, "sdr f32", ["--no-cache"]),
                (args.sdr, "sdr f32 --parallelism gemm", ["--no-cache", "--parallelism", "gemm"]),
                (args.sdr, "sdr bf16 (`--precision bf16`)", ["--no-cache", "--precision", "bf16"])]
    if args.candle_bf16:
        variants.append((args.sdr, "sdr bf16 (candle)", ["--no-cache", "--precision", "bf16-candle"]))
    if args.sdr_mkl:
        variants += [(args.sdr_mkl, "sdr f32 (MKL)", ["--no-cache"]),
                     (args.sdr_mkl, "sdr mixed-bf16 (MKL)", ["--no-cache", "--precision", "mixed-bf16"])]
    # Every timing `--repeat` times, the rounds interleaved (sentence-transformers, then
    # each sdr variant, round after round) so that a slow minute of a shared host falls
    # on all of them; the table keeps each one's median wall time.
    times, cosines = {}, {}
    ref = None
    for r in range(args.repeat):
        t = time.perf_counter()
        out = st.encode(texts, batch_size=args.batch_size, convert_to_numpy=True)
        times.setdefault("st", []).append(time.perf_counter() - t)
        ref = out if ref is None else ref
        if st16 is not None:
            t = time.perf_counter()
            e16 = np.asarray(st16.encode(texts, batch_size=args.batch_size), dtype=np.float32)
            times.setdefault("st16", []).append(time.perf_counter() - t)
            cosines["st16"] = float(cos_rows(e16, ref).min())
        for exe, name, extra in variants:
            startup_of(exe, extra)
            emb, dt = run_sdr(exe, args.model, texts, extra + ["--batch-size", str(args.batch_size)])
            times.setdefault(name, []).append(dt)
            cosines[name] = float(cos_rows(emb, ref).min())
            print(f"  round {r + 1}: {name}: {dt:.1f} s", flush=True)
        for prec in (["f32", "bf16"] if args.in_process else []):
            name = f"sdr {prec}, Python `sdr_rewards.Encoder` (model loaded first)"
            emb, _, (dt,) = run_python(SDR_IN_PROCESS, [args.model, prec], texts)
            times.setdefault(name, []).append(dt)
            cosines[name] = float(cos_rows(emb, ref).min())
            print(f"  round {r + 1}: {name}: {dt:.1f} s", flush=True)
        if args.processes:
            emb, dt, (start, enc) = run_python(ST_PROCESS, [args.model, str(args.batch_size)], texts)
            times.setdefault("st process", []).append(dt)
            times.setdefault("st process start", []).append(start)
            cosines["st process"] = float(cos_rows(emb, ref).min())
            print(f"  round {r + 1}: sentence-transformers whole process: {dt:.1f} s "
                  f"(imports and model load {start:.1f} s, encoding {enc:.1f} s)", flush=True)

    def median(key):
        ts = sorted(times[key])
        return ts[len(ts) // 2], (ts[0], ts[-1]) if len(ts) > 1 else None

    dt, spread = median("st")
    add("sentence-transformers f32", len(texts), dt, spread=spread)
    if st16 is not None:
        dt, spread = median("st16")
        add("sentence-transformers bf16 (oneDNN)", len(texts), dt, cosines["st16"], spread=spread)
        del st16
    for exe, name, extra in variants:
        dt, spread = median(name)
        add(name, len(texts), dt, cosines[name], startup_of(exe, extra), spread)
    for prec in (["f32", "bf16"] if args.in_process else []):
        name = f"sdr {prec}, Python `sdr_rewards.Encoder` (model loaded first)"
        dt, spread = median(name)
        add(name, len(texts), dt, cosines[name], 0.0, spread)

    if not args.skip_grpo:
        lines = grpo_batch(prompts=args.prompts)
        distinct = len(set(lines))
        t = time.perf_counter()
        st.encode(lines, batch_size=args.batch_size, convert_to_numpy=True)
        add(f"GRPO batch: sentence-transformers ({len(lines)} lines, {distinct} distinct)",
            len(lines), time.perf_counter() - t)
        best = args.sdr_mkl or args.sdr
        for name, extra in [("GRPO batch: sdr f32, no cache", ["--no-cache"]),
                            ("GRPO batch: sdr f32, cache", []),
                            ("GRPO batch: sdr bf16, no cache", ["--no-cache", "--precision", "bf16"]),
                            ("GRPO batch: sdr bf16, cache", ["--precision", "bf16"])]:
            startup = startup_of(best, extra)
            _, dt = run_sdr(best, args.model, lines, extra + ["--batch-size", str(args.batch_size)])
            add(name, len(lines), dt, None, startup)
            print(f"  {name}: {dt:.1f} s", flush=True)

    print()
    if args.repeat > 1:
        print(f"wall s: the median of {args.repeat} interleaved rounds (min-max in brackets)")
        print()
    print(f"| run | items | wall s | items/s | net items/s | x st | min cos vs st | GFLOP/s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    base = {}
    for name, n, dt, rate, net, cos, gf, spread in rows:
        key = "grpo" if name.startswith("GRPO") else "plain"
        base.setdefault(key, rate)
        ratio = net / base[key]
        wall = f"{dt:.1f}" + ("" if spread is None else f" ({spread[0]:.1f}-{spread[1]:.1f})")
        print(f"| {name} | {n} | {wall} | {rate:.1f} | {net:.1f} | {ratio:.2f} | "
              f"{'' if cos is None else f'{cos:.6f}'} | {'' if gf is None else f'{gf:.0f}'} |")
    if args.processes:
        # Whole processes on both sides: what a user who runs a command waits for.
        print()
        print(f"Whole processes, {len(texts)} distinct sentences (start-up included on both sides; "
              f"median of {args.repeat} interleaved rounds):")
        print()
        print("| process | wall s | sentences/s | x st process | min cos vs st |")
        print("|---|---:|---:|---:|---:|")
        st_dt, st_spread = median("st process")
        start, _ = median("st process start")
        procs = [(f"sentence-transformers f32 (python: imports and model load {start:.1f} s, then encode)",
                  st_dt, st_spread, cosines["st process"])]
        procs += [(f"`sdr embed {' '.join(extra)}`", *median(name), cosines[name])
                  for _, name, extra in variants]
        for name, dt, spread, cos in procs:
            wall = f"{dt:.1f}" + ("" if spread is None else f" ({spread[0]:.1f}-{spread[1]:.1f})")
            print(f"| {name} | {wall} | {len(texts) / dt:.1f} | {st_dt / dt:.2f} | {cos:.6f} |")
    if peaks:
        print()
        print(f"Share of the measured instruction peak on {peaks['threads']} threads (f32 FMA "
              f"{peaks['f32']} GFLOP/s, bf16 {peaks['bf16']} GFLOP/s), dense GEMMs' FLOPs over net time:")
        for name, n, dt, rate, net, cos, gf, spread in rows:
            if gf is None or name.startswith("GRPO"):
                continue
            peak = peaks["bf16"] if "bf16" in name and peaks["bf16"] else peaks["f32"]
            print(f"  {name}: {gf:.0f} GFLOP/s = {100 * gf / peak:.0f} % of peak")
    profile = {prec: stage_profile(args.profile, texts, prec, args.batch_size)
               for prec in ("f32", "bf16")} if args.profile else None
    load_end = os.getloadavg()
    print(f"\n# load at end: {load_end}")
    if args.out:
        import json

        sys.path.insert(0, os.path.join(ROOT, "bench"))
        import repeats

        where = repeats.machine()
        where["load_before"], where["load_after"] = load_start[0], load_end[0]
        data = {"machine": where, "sentences": len(texts), "tokens": n_tok, "gflop": gflop,
                "rounds": args.repeat, "peaks": peaks, "profile": profile,
                "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                "sentence_transformers": sentence_transformers.__version__,
                "rows": [{"name": name, "items": n, "wall_s": dt, "wall_range": spread, "items_per_s": rate,
                          "net_items_per_s": net, "min_cos_vs_st": cos, "gflop_per_s": gf}
                         for name, n, dt, rate, net, cos, gf, spread in rows]}
        repeats.write_json_atomic(Path(args.out), data)


if __name__ == "__main__":
    sys.exit(main())
