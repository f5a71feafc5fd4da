"""Resident memory of N reward worker processes (verl starts 8 per machine by default).

Two set-ups, each with `--workers` (default 8) spawned processes that import `sdr_rewards`,
score one sample through `sdr_rewards.verl.compute_score`, and then wait while their memory
is read:

    own       each worker loads SDR's own encoder (the default): the weights, packed for the
              GEMMs, are mapped read-only from the packed-weights cache file
              (~/.cache/sdr/packed/, written by the first worker to load), so the workers
              share one copy of their pages
    serve     `reward_kwargs: serve_url` (sdr_rewards/serve_client.py): each worker posts to one
              `sdr serve` on the machine, which holds the only encoder

Reported per set-up: each process's RSS and PSS (proportional set size: pages shared
between processes are divided among them, so PSS sums to the memory really used), the
sum over workers (plus the server for `serve`), and the ratio of that sum to one
`own` worker. Goal: N workers together under 2x one worker's memory. Linux only
(/proc/PID/smaps_rollup).

    .venv-bench/bin/python bench/worker_memory.py --sdr target/release/sdr [--workers 8] [--out FILE]

The workers import `sdr_rewards`: run it with .venv-bench (`bash scripts/setup-bench.sh`) or
.venv-trainers, not a bare python3.
"""

from __future__ import annotations

import argparse
import json
import os
import multiprocessing as mp
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOOD = "<think>The heart is normal in size. Lungs are clear.</think><answer>No acute disease.</answer>"
REF = "<think>Heart size is normal. The lungs are clear.</think><answer>No acute cardiopulmonary abnormality.</answer>"


def memory(pid: int) -> dict:
    """RSS and PSS of a process, in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Rss", "Pss"):
            out[key.lower()] = int(value.split()[0]) / 1024
    return out


def worker(serve_url, ready, done):
    import sdr_rewards.verl

    kwargs = {"serve_url": serve_url} if serve_url else {}
    score = sdr_rewards.verl.compute_score(None, GOOD, REF, **kwargs)["score"]
    ready.put(score)
    done.wait()


def run(n: int, serve_url) -> list:
    ctx = mp.get_context("spawn")
    ready, done = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=worker, args=(serve_url, ready, done)) for _ in range(n)]
    for p in procs:
        p.start()
    scores = [ready.get(timeout=600) for _ in procs]
    mem = [memory(p.pid) for p in procs]
    done.set()
    for p in procs:
        p.join(60)
    assert len(set(scores)) == 1, scores
    return mem


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdr", default=str(ROOT / "target/release/sdr"), help="the sdr CLI (for sdr serve)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    result = {"workers": args.workers}

    # The first worker ever to load the encoder packs the weights and writes the cache
    # file; the others, and every later start, map it. Measure that steady state.
    run(1, None)
    one = run(1, None)[0]
    result["one_own_worker"] = one
    own = run(args.workers, None)
    result["own"] = {"per_worker": own, "rss_sum": sum(m["rss"] for m in own), "pss_sum": sum(m["pss"] for m in own)}

    port = free_port()
    server = subprocess.Popen([args.sdr, "serve", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        served = run(args.workers, f"http://127.0.0.1:{port}")
        srv = memory(server.pid)
    finally:
        server.terminate()
        server.wait(30)
    result["serve"] = {
        "per_worker": served,
        "server": srv,
        "rss_sum": sum(m["rss"] for m in served) + srv["rss"],
        "pss_sum": sum(m["pss"] for m in served) + srv["pss"],
    }
    for setup in ("own", "serve"):
        r = result[setup]
        r["pss_ratio_to_one"] = r["pss_sum"] / one["pss"]
        r["rss_ratio_to_one"] = r["rss_sum"] / one["rss"]
    print(f"one worker with its own encoder: RSS {one['rss']:.0f} MiB, PSS {one['pss']:.0f} MiB")
    for setup in ("own", "serve"):
        r = result[setup]
        print(f"{args.workers} workers, {setup:<5}: RSS sum {r['rss_sum']:.0f} MiB ({r['rss_ratio_to_one']:.2f}x), "
              f"PSS sum {r['pss_sum']:.0f} MiB ({r['pss_ratio_to_one']:.2f}x)")
    if args.out:
        sys.path.insert(0, str(ROOT / "bench"))
        import repeats

        result["machine"] = {**repeats.machine(), "load_before": load_before}
        repeats.write_json_atomic(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
