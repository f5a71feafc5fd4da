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
for `serve`), and the machine (CPU model, cores, load before and after). A row per
interface and `--precision` (f32, bf16). Every row runs once per round in a fresh process
for `--repeats` rounds (bench/repeats.py): medians with [min, max] over the rounds, and the
in-process reward against `sdr serve` per sample with the per-round spread (issue 53's goal:
within 1.05x or faster). Markdown table on stdout, JSON with --out (scripts/pages/bench.py
renders the README's table from it).

    .venv-trainers/bin/python bench/cost_table.py --sdr target/release/sdr [--batch 64] [--repeats 5] \
        [--precision f32,bf16] [--out bench/results-cost-table.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "recipes"))
sys.path.insert(0, str(ROOT / "bench"))
import repeats  # noqa: E402
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


def child(interface, n, sdr_bin, precision="f32"):
    (c1, r1), (c2, r2) = batches(n)
    if interface in ("python", "trl"):
        import sdr_rewards

        reward = sdr_rewards.SDRReward(precision=precision)
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
            worker = RewardLoopWorker(vi.compose(
                tmp, "naive", "compute_score_async",
                [f"+reward.custom_reward_function.reward_kwargs.precision={precision}"]))
            import sdr_rewards.verl

            load = timed(lambda: sdr_rewards.verl._scorer({"metric": "chamfer", "precision": precision})["reward"]
                         .cache_info())
            d1, d2 = vi.batch_of(tok, c1, r1), vi.batch_of(tok, c2, r2)
            run = lambda d: loop.run_until_complete(worker.compute_score_batch(d))  # noqa: E731
            times = [timed(lambda: run(d1)), timed(lambda: run(d2)), timed(lambda: run(d2))]
        return {"load_s": load, "times": times, "peak_mib": peak_mib()}
    # serve
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = time.perf_counter()
    server = subprocess.Popen([sdr_bin, "serve", "--port", str(port), "--precision", precision],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


COLUMNS = (("load_s", "load (s)", 2), ("cold_ms", "cold (ms/sample)", 1), ("warm_ms", "warm (ms/sample)", 1),
           ("cached_ms", "cached (ms/sample)", 3))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdr", default=str(ROOT / "target/release/sdr"), help="the sdr binary `serve` starts")
    ap.add_argument("--batch", type=int, default=64, help="samples per batch")
    ap.add_argument("--repeats", type=int, default=5,
                    help="rounds: every interface runs once per round in a fresh process (default 5)")
    ap.add_argument("--interfaces", default=",".join(INTERFACES), help="comma-separated interfaces")
    ap.add_argument("--precision", default="f32",
                    help="comma-separated encoder precisions, a row per interface and precision (f32, bf16)")
    ap.add_argument("--out", type=Path, help="write the results here as JSON (atomically)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--child-precision", default="f32", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.batch, args.sdr, args.child_precision)))
        return 0
    repeats.warn_if_busy()
    where = repeats.machine()
    rows_of = [(i, p) for p in args.precision.split(",") for i in args.interfaces.split(",")]
    runs = {f"{i}/{p}": [] for i, p in rows_of}
    for k in range(args.repeats):
        for interface, precision in rows_of:
            res = subprocess.run([sys.executable, __file__, "--child", interface, "--batch", str(args.batch),
                                  "--sdr", args.sdr, "--child-precision", precision], capture_output=True, text=True)
            if res.returncode != 0:
                print(f"{interface} ({precision}): {res.stderr[-2000:]}", file=sys.stderr)
                return 1
            r = json.loads(res.stdout.strip().splitlines()[-1])
            runs[f"{interface}/{precision}"].append(r)
            print(f"round {k + 1}/{args.repeats} {interface} ({precision}): cold "
                  f"{r['times'][0] * 1000 / args.batch:.1f} ms/sample", flush=True)
    where["load_after"] = os.getloadavg()[0]
    rows = {}
    for key, rs in runs.items():
        per = lambda i: [r["times"][i] * 1000 / args.batch for r in rs]  # noqa: E731
        rows[key] = {"load_s": repeats.spread([r["load_s"] for r in rs]), "cold_ms": repeats.spread(per(0)),
                     "warm_ms": repeats.spread(per(1)), "cached_ms": repeats.spread(per(2)),
                     "peak_mib": max(r["peak_mib"] for r in rs)}
    # The in-process reward against the server, per sample (issue 53: within 1.05x or faster).
    versus = {}
    for p in args.precision.split(","):
        a, b = rows.get(f"python/{p}"), rows.get(f"serve/{p}")
        if a and b:
            versus[p] = {c: repeats.ratio(a[c]["runs"], b[c]["runs"]) for c in ("cold_ms", "warm_ms")}
    print(f"\n{where['cpu']}, {where['logical_cores']} logical cores; load {where['load_before']:.2f} before, "
          f"{where['load_after']:.2f} after; batches of {args.batch} samples; medians of {args.repeats} fresh "
          f"processes, [min, max] over them.\n")
    print("| interface | precision | " + " | ".join(h for _, h, _ in COLUMNS) + " | peak RSS (MiB) |")
    print("|---|---|" + "---:|" * (len(COLUMNS) + 1))
    for key, r in rows.items():
        interface, precision = key.split("/")
        cells = [f"{r[c]['median']:.{d}f} [{r[c]['min']:.{d}f}, {r[c]['max']:.{d}f}]" for c, _, d in COLUMNS]
        print(f"| {interface} | {precision} | " + " | ".join(cells) + f" | {r['peak_mib']:.0f} |")
    for p, v in versus.items():
        print(f"\nin-process / serve ({p}): cold {repeats.ratio_text(v['cold_ms'])}; warm {repeats.ratio_text(v['warm_ms'])}")
    if args.out:
        repeats.write_json_atomic(args.out, {"machine": where, "batch": args.batch, "repeats": args.repeats,
                                             "rows": rows, "python_vs_serve": versus})
    return 0


if __name__ == "__main__":
    sys.exit(main())
