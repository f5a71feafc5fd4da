"""The clinical cost's price: `SDRReward(cost="clinical")` against `SDRReward()` on the
same GRPO batch (issue 45's goal: within 1.3x of the cosine reward's time).

The batch is `bench/rewards.py`'s: 512 completions (64 prompts x 8) built from IU X-ray,
one in eight malformed. Both rewards are timed

- cold: a fresh reward object (the encoder embeds the batch's distinct sentences; the
  clinical cost also labels each distinct sentence's facts once);
- warm: a second batch with the same references and new completions, after the first
  filled the sentence cache (and the fact cache);
- table: both with the same stand-in encoder (a lookup of precomputed vectors), so the
  figures are parsing, caching, the facts and the distances alone.

    .venv-bench/bin/python bench/clinical_cost.py [--repeats 3] [--json out.json]

Prints the best of `--repeats` per case, the ratio clinical / cosine and the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rewards as rb  # noqa: E402  (the batch and the table encoder)


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> int:
    import sdr_rewards

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()
    comps, refs = rb.make_batch(seed=0)
    comps2, _ = rb.make_batch(seed=1)
    table = rb.Table(rb.all_sentences(comps, comps2, refs))
    rows = {}
    for cost in ("cosine", "clinical"):
        def cold():
            r = sdr_rewards.SDRReward(metric="chamfer", cost=cost)
            t = time.perf_counter()
            r.score(comps, references=refs)
            return time.perf_counter() - t

        warm_r = sdr_rewards.SDRReward(metric="chamfer", cost=cost)
        warm_r.score(comps, references=refs)

        def warm():
            t = time.perf_counter()
            warm_r.score(comps2, references=refs)
            return time.perf_counter() - t

        def tab():
            r = sdr_rewards.SDRReward(metric="chamfer", cost=cost, encoder=table)
            r.score(comps, references=refs)  # fills the caches
            t = time.perf_counter()
            r.score(comps2, references=refs)
            return time.perf_counter() - t

        rows[cost] = {
            name: min(f() for _ in range(args.repeats)) for name, f in (("cold", cold), ("warm", warm), ("table", tab))
        }
    load = os.getloadavg()[0]
    print(f"{cpu_name()}, {os.cpu_count()} cores, load average {load:.2f}; batch of {len(comps)}, best of {args.repeats}")
    print("| case | cosine (ms) | clinical (ms) | clinical / cosine |")
    print("|---|---:|---:|---:|")
    for case in ("cold", "warm", "table"):
        a, b = rows["cosine"][case], rows["clinical"][case]
        print(f"| {case} | {1000 * a:.1f} | {1000 * b:.1f} | {b / a:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_name(), "load": load, "seconds": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
