#!/usr/bin/env python3
"""Selection scoring: SDR (Rust) against a straightforward Python implementation
(numpy + POT + SciPy), same inputs, same run.

    .venv-bench/bin/python bench/selection.py --corpus C.safetensors --cands CANDS.bin [--budget 120]
    .venv-bench/bin/python bench/selection.py --corpus BIG.safetensors --cands CANDS.bin --chamfer-only

1. All 45 policies (15 metric specs x min / avg / knn:k=5) for K candidates
   against the corpus. Rust: `bench-select all` (the library's batched GEMM
   scoring, median of the repeats). Python: per corpus report and section,
   the set distance from `bench/distances.py`'s per-pair functions (numpy for
   Chamfer/Hausdorff, POT for OT/Sinkhorn/UOT/GW/partial, SciPy for
   Hungarian), shared by the three aggregations; the same f32 embeddings,
   widened to f64. Python runs over the first reports until BUDGET seconds
   are spent; its time for the whole corpus is extrapolated linearly from
   the reports it finished (printed). Rust is also run on exactly that
   subset, and the two sets of scores are compared.
2. `--chamfer-only`: chamfer@min with lower-bound pruning and without, Rust
   only (the 200,000-report goal is per candidate).

CANDS.bin comes from `bench-select embed` (see bench/src/bin/bench-select.rs).
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from distances import SPECS, python_metric  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_safetensors(path):
    """Minimal reader (header JSON + little-endian arrays); no extra package."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    dt = {"F32": "<f4", "I64": "<i8", "U32": "<u4", "U8": "u1"}
    out = {}
    for k, v in header.items():
        a, b = v["data_offsets"]
        out[k] = np.frombuffer(raw[8 + n + a:8 + n + b], dtype=dt[v["dtype"]]).reshape(v["shape"])
    return out, meta


def load_cands(path, dim):
    raw = open(path, "rb").read()
    pos, cands = 0, []
    while pos < len(raw):
        nf, ni = struct.unpack("<II", raw[pos:pos + 8])
        pos += 8
        f = np.frombuffer(raw[pos:pos + nf * dim * 4], "<f4").reshape(nf, dim).astype(np.float64)
        pos += nf * dim * 4
        i = np.frombuffer(raw[pos:pos + ni * dim * 4], "<f4").reshape(ni, dim).astype(np.float64)
        pos += ni * dim * 4
        cands.append((f, i) if nf and ni else None)
    return cands


def rust(args, *extra):
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    exe = os.path.join(target, "release", "bench-select")
    out = subprocess.run([exe, *map(str, extra)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def aggregate(d, agg):
    d = np.sort(np.asarray(d))
    if agg == "min":
        return d[0]
    if agg == "avg":
        return d.mean()
    return d[:5].mean()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--cands", required=True)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--budget", type=float, default=120.0, help="Python seconds before extrapolating")
    ap.add_argument("--chamfer-only", action="store_true")
    args = ap.parse_args()

    print("building bench-select (release) ...", file=sys.stderr)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sdr-bench", "--bin", "bench-select"],
                   cwd=ROOT, check=True)
    t, meta = load_safetensors(args.corpus)
    n_reports = int(meta["n_reports"])
    dim = int(meta["dim"])
    load = os.getloadavg()

    if args.chamfer_only:
        r = rust(args, "chamfer", args.corpus, args.cands, args.k, args.repeats)
        tp, tb = statistics.median(r["pruned_times"]), statistics.median(r["unpruned_times"])
        k = r["candidates"]
        print(f"Corpus: {n_reports:,} reports ({r['distinct_sets'][0]:,} / {r['distinct_sets'][1]:,} distinct "
              f"Findings / Impression sets), encoder {meta['encoder']}; {k} candidates; Rust threads "
              f"{r['threads']}; load average {load[0]:.2f}; open {r['open_s']*1e3:.0f} ms, index {r['index_s']*1e3:.0f} ms")
        print()
        print("| chamfer@min | total (median of %d) | per candidate | sets evaluated |" % args.repeats)
        print("|---|---:|---:|---:|")
        print(f"| pruned | {tp*1e3:.1f} ms | {tp/k*1e3:.1f} ms | {r['pruned_evaluated']:,} |")
        print(f"| unpruned | {tb*1e3:.1f} ms | {tb/k*1e3:.1f} ms | {r['unpruned_evaluated']:,} |")
        return

    cands = load_cands(args.cands, dim)[: args.k]
    E = t["embeddings"].astype(np.float64)
    secs = []
    for s in ("findings", "impression"):
        off, idx = t[f"{s}.offsets"], t[f"{s}.indices"]
        secs.append([E[idx[off[r]:off[r + 1]]] for r in range(n_reports)])
    funcs = {spec: python_metric(spec) for spec in SPECS}
    warnings.simplefilter("ignore")

    # Python: reports in corpus order until the budget is spent.
    dists = {spec: [[[], []] for _ in cands] for spec in SPECS}
    t0 = time.perf_counter()
    done = 0
    for r in range(n_reports):
        for si in range(2):
            b = secs[si][r]
            if len(b) == 0:
                continue
            for ci, c in enumerate(cands):
                if c is None:
                    continue
                for spec in SPECS:
                    dists[spec][ci][si].append(funcs[spec](c[si], b))
        done = r + 1
        if time.perf_counter() - t0 > args.budget:
            break
    py_partial = time.perf_counter() - t0
    py_scores = []
    for spec in SPECS:
        for agg in ("min", "avg", "knn"):
            py_scores.append([None if c is None else
                              aggregate(dists[spec][ci][0], agg) + aggregate(dists[spec][ci][1], agg)
                              for ci, c in enumerate(cands)])
    py_full = py_partial * n_reports / done

    sub = rust(args, "all", args.corpus, args.cands, args.k, args.repeats, done)
    full = rust(args, "all", args.corpus, args.cands, args.k, args.repeats)
    r_sub = statistics.median(sub["times"])
    r_full = statistics.median(full["times"])
    diff = 0.0
    same_choice = 0
    for pi, key in enumerate(sub["policies"]):
        a, b = sub["total"][pi], py_scores[pi]
        for x, y in zip(a, b):
            if x is not None and y is not None:
                diff = max(diff, abs(x - y))
        fa = [x if x is not None else float("inf") for x in a]
        fb = [y if y is not None else float("inf") for y in b]
        same_choice += int(np.argmin(fa) == np.argmin(fb))
    print(f"Corpus: {n_reports:,} reports ({full['distinct_sets'][0]:,} / {full['distinct_sets'][1]:,} distinct "
          f"Findings / Impression sets), encoder {meta['encoder']}, {len(cands)} candidates "
          f"({sum(c is not None for c in cands)} well-formed), 45 policies. Rust threads {full['threads']}, "
          f"load average at start {load[0]:.2f}. POT, SciPy, numpy {np.__version__}.")
    print()
    print("| run | reports | Python | Rust (median of %d) | ratio |" % args.repeats)
    print("|---|---:|---:|---:|---:|")
    print(f"| same subset | {done:,} | {py_partial:.1f} s | {r_sub*1e3:.1f} ms | {py_partial/r_sub:,.0f}x |")
    print(f"| full corpus | {n_reports:,} | {py_full:.1f} s (extrapolated from {done:,}) | {r_full*1e3:.1f} ms "
          f"| {py_full/r_full:,.0f}x |")
    print()
    print(f"Subset parity: max |Rust - Python| score over 45 policies x {len(cands)} candidates = {diff:.1e}; "
          f"same choice in {same_choice}/45 policies. Rust first run (cold caches) {full['times'][0]*1e3:.1f} ms; "
          f"corpus open {full['open_s']*1e3:.0f} ms, index {full['index_s']*1e3:.0f} ms.")


if __name__ == "__main__":
    main()
