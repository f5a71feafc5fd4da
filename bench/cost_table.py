"""The reward's cost per interface, for the README's cost table.

Each interface runs in a fresh process, on `--batch` (default 64) IU X-ray samples
(completion: another study's report; reference: the study's report):

    python     SDRReward.score
    trl        SDRReward as TRL calls it (chat-message completions, the dataset column,
               log_extra / log_metric callbacks)
    verl       verl 0.9's RewardLoopWorker (naive manager, compute_score_async):
               one concurrent call per sample (needs the trainers' venv)
    serve      `sdr serve`, one POST /v1/rewards per batch

Columns: load (seconds to load the encoder: the first call's set-up, or the server's
start until /health answers), ms per sample cold (the first batch after loading, empty
sentence cache), warm (a second batch of new samples), cached (that batch again: every
sentence in the sentence cache), peak resident memory (the process's VmHWM, the server's
for `serve`), and the machine (CPU model, cores). Times are medians of `--repeats` fresh
processes. Markdown table on stdout, JSON with --out.

    .venv-trainers/bin/python bench/cost_table.py --sdr target/release/sdr [--batch 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))
INTERFACES = ("python", "trl", "verl", "serve")


def batches(n):
    import common

    rows = common.studies("train")
    refs = [common.target(r) for r in rows[: 3 * n]]
    comps = [common.target(r) for r in rows[3 * n : 6 * n]]
    return [(comps[k * n : (k + 1) * n], refs[k * n : (k + 1) * n]) for k in range(2)]


def peak_mib(pid=None) -> float:
    if pid is None:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def child(interface, n, sdr_bin):
    (c1, r1), (c2, r2) = batches(n)
    if interface in ("python", "trl"):
        import sdr_rewards

        reward = sdr_rewards.SDRReward()
        load = timed(lambda: reward.cache_info())  # builds the scorer: loads the encoder
        if interface == "python":
            call = lambda c, r: reward.score(c, references=r)  # noqa: E731
        else:
            logs = {}
            call = lambda c, r: reward(  # noqa: E731
                prompts=[[{"role": "user", "content": "x"}]] * len(c),
                completions=[[{"role": "assistant", "content": t}] for t in c],
                solution=r,
                log_extra=lambda k, v: logs.__setitem__(k, v),
                log_metric=lambda k, v: logs.__setitem__(k, v),
            )
        times = [timed(lambda: call(c1, r1)), timed(lambda: call(c2, r2)), timed(lambda: call(c2, r2))]
        return {"load_s": load, "times": times, "peak_mib": peak_mib()}
    if interface == "verl":
        import asyncio
        import tempfile

        from transformers import AutoTokenizer
        from verl.experimental.reward_loop import RewardLoopWorker

        import common
        import verl_integration as vi

        gguf = common.find_gguf()
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        with tempfile.TemporaryDirectory() as tmp:
            tok.save_pretrained(tmp)
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            worker = RewardLoopWorker(vi.compose(tmp, "naive", "compute_score_async"))
            import sdr_rewards.verl

            load = timed(lambda: sdr_rewards.verl._scorer({"metric": "chamfer"})["reward"].cache_info())
            d1, d2 = vi.batch_of(tok, c1, r1), vi.batch_of(tok, c2, r2)
            run = lambda d: loop.run_until_complete(worker.compute_score_batch(d))  # noqa: E731
            times = [timed(lambda: run(d1)), timed(lambda: run(d2)), timed(lambda: run(d2))]
        return {"load_s": load, "times": times, "peak_mib": peak_mib()}
    # serve
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.perf_counter()
    server = subprocess.Popen([sdr_bin, "serve", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.02)
        load = time.perf_counter() - t

        def post(c, r):
            body = json.dumps({"completions": c, "references": r}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/rewards", data=body,
                                         headers={"Content-Type": "application/json"})
            urllib.request.urlopen(req, timeout=600).read()

        times = [timed(lambda: post(c1, r1)), timed(lambda: post(c2, r2)), timed(lambda: post(c2, r2))]
        peak = peak_mib(server.pid)
    finally:
        server.terminate()
        server.wait(30)
    return {"load_s": load, "times": times, "peak_mib": peak}


def machine() -> str:
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical cores"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdr", default=str(ROOT / "target/release/sdr"))
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--interfaces", default=",".join(INTERFACES))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.batch, args.sdr)))
        return 0
    rows = {}
    for interface in args.interfaces.split(","):
        runs = []
        for _ in range(args.repeats):
            res = subprocess.run([sys.executable, __file__, "--child", interface, "--batch", str(args.batch),
                                  "--sdr", args.sdr], capture_output=True, text=True)
            if res.returncode != 0:
                print(f"{interface}: {res.stderr[-2000:]}", file=sys.stderr)
                break
            runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        if not runs:
            continue
        med = lambda xs: statistics.median(xs)  # noqa: E731
        rows[interface] = {
            "load_s": med([r["load_s"] for r in runs]),
            "cold_ms": med([r["times"][0] for r in runs]) * 1000 / args.batch,
            "warm_ms": med([r["times"][1] for r in runs]) * 1000 / args.batch,
            "cached_ms": med([r["times"][2] for r in runs]) * 1000 / args.batch,
            "peak_mib": max(r["peak_mib"] for r in runs),
        }
    where = machine()
    print(f"Machine: {where}; batches of {args.batch} samples; medians of {args.repeats} fresh processes.\n")
    print("| interface | load (s) | cold (ms/sample) | warm (ms/sample) | cached (ms/sample) | peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['load_s']:.2f} | {r['cold_ms']:.2f} | {r['warm_ms']:.2f} | {r['cached_ms']:.3f} | {r['peak_mib']:.0f} |")
    if args.out:
        args.out.write_text(json.dumps({"machine": where, "batch": args.batch, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
