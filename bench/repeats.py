"""Repeated fresh-process timings that say how much they move: shared by bench/per_sample.py and
bench/cost_table.py.

A benchmark runs every mode once per round, round after round (interleaved, so that a change
of the machine's state during the run touches every mode alike), each time in a fresh process.
It reports, per mode, the minimum, median and maximum over the rounds, and for a ratio between
two modes the ratio of the medians with the spread of the per-round ratios (the two modes of
one round ran back to back). A ratio is flagged *unsettled* when that spread is wider than the
effect it reports (max - min of the per-round ratios above |median ratio - 1|): then the run
cannot tell the two modes apart, and a repeat may well reverse it. The load average before
and after the run, the CPU model and the date are recorded beside the figures.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown CPU"


def machine() -> dict:
    """The CPU model, its logical cores, the load now, the date and the commit measured."""
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    return {"cpu": cpu_model(), "logical_cores": os.cpu_count(), "load_before": os.getloadavg()[0],
            "date": datetime.date.today().isoformat(), "commit": commit}


def spread(xs) -> dict:
    """min / median / max of one mode's rounds, and the rounds themselves."""
    xs = list(xs)
    return {"min": min(xs), "median": statistics.median(xs), "max": max(xs), "runs": xs}


def ratio(a, b) -> dict:
    """`a` against `b` (paired by round): the ratio of the medians, the per-round ratios'
    min / median / max, and whether their spread is wider than the effect."""
    per = [x / y for x, y in zip(a, b, strict=True)]
    of_medians = statistics.median(a) / statistics.median(b)
    width = max(per) - min(per)
    return {"ratio": of_medians, "per_round": spread(per), "unsettled": width > abs(of_medians - 1.0)}


def ratio_text(r: dict) -> str:
    p = r["per_round"]
    flag = "  UNSETTLED: spread wider than the effect" if r["unsettled"] else ""
    return f"{r['ratio']:.2f}x (rounds {p['min']:.2f}-{p['max']:.2f}){flag}"


def write_json_atomic(path: Path, obj) -> None:
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(obj, indent=1) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def warn_if_busy(limit: float = 0.5) -> None:
    load = os.getloadavg()[0]
    if load >= limit:
        print(f"warning: load average {load:.2f} >= {limit}: the machine is not idle, timings will move",
              flush=True)
