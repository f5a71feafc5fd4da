#!/usr/bin/env python3
"""Labeler throughput: SDR's CheXpert-rule labeler against a straightforward Python regex labeler.

    python3 bench/labeler.py [--seconds 5] [--bench target/release/bench-labeler]   # standard library only

Both label the same IU X-ray reports (Findings and Impression of every report with text) on one
thread. The Python labeler is what one writes first: one compiled regular expression per mention
phrase of data/clinical/chexpert_rules.json (word boundaries), sentences split on ". ", and a
mention negative when "no", "without" or "negative for" stands before it in its sentence. It is a
speed reference, not an accuracy one. The Rust figure comes from the `bench-labeler` binary
(`cargo build --release -p sdr-bench --bin bench-labeler`), run in the same invocation.
"""
import argparse
import csv
import json
import os
import re
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reports(path):
    out = []
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            findings, impression = row["findings"].strip(), row["impression"].strip()
            if findings or impression:
                out.append(f"FINDINGS: {findings}\nIMPRESSION: {impression}")
    return out


def compile_rules(path):
    rules = json.load(open(path))
    compiled = []
    for name, obs in rules["observations"].items():
        for phrase in obs.get("mentions", []):
            body = re.escape(phrase.rstrip("*").lower()).replace("\\-", "[- ]").replace("\\ ", "[- ]")
            tail = r"\w*" if phrase.endswith("*") else r"\b"
            compiled.append((name, re.compile(r"\b" + body + tail)))
    return compiled


NEG = re.compile(r"\b(no|without|negative for)\b")


def label(text, compiled):
    labels = {}
    for sentence in re.split(r"(?<=[.!?])\s+", text.lower()):
        for name, rx in compiled:
            m = rx.search(sentence)
            if m:
                value = 0 if NEG.search(sentence, 0, m.start()) else 1
                labels[name] = max(labels.get(name, value), value)
    return labels


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--csv", default=os.path.join(ROOT, "data/iu-xray/indiana_reports.csv"))
    ap.add_argument("--bench", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release/bench-labeler"))
    args = ap.parse_args()
    texts = reports(args.csv)
    compiled = compile_rules(os.path.join(ROOT, "data/clinical/chexpert_rules.json"))
    for t in texts:  # warm-up
        label(t, compiled)
    start, passes = time.perf_counter(), 0
    while passes == 0 or time.perf_counter() - start < args.seconds:
        for t in texts:
            label(t, compiled)
        passes += 1
    py_rate = passes * len(texts) / (time.perf_counter() - start)
    rust = json.loads(subprocess.run([args.bench, "--csv", args.csv, "--seconds", str(args.seconds), "--json"],
                                     check=True, capture_output=True, text=True).stdout)
    print(f"reports: {len(texts)}; regex phrases: {len(compiled)}")
    print(f"Python regex labeler, 1 thread: {py_rate:,.0f} reports/s")
    print(f"SDR labeler (Rust), 1 thread:   {rust['reports_per_s']:,.0f} reports/s")
    print(f"ratio: {rust['reports_per_s'] / py_rate:.1f}x; load average: {rust['load_average']}")


if __name__ == "__main__":
    main()
