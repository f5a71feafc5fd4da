#!/usr/bin/env python3
"""How well a generator keeps the report format: per candidates file (from `sdr generate`),
the share of well-formed candidates (both sections parse, SPEC §1), the share that ran to the
token limit, the share whose text starts with a Findings header, and mean tokens.

    python3 tools/candidate_stats.py [--sdr target/release/sdr] GEN.jsonl [GEN.jsonl ...]

Prints one Markdown row per file. Only the standard library and the `sdr` binary.

    python3 tools/candidate_stats.py --parse-json docs/results/candidates/parse.json GEN.jsonl ...

also records, per file, each candidate's parse by `sdr parse --layout plain` (well-formed flag
and sentence counts per section, with the file's sha256 and the `sdr` version), merged into
that JSON: the results pages' format statistics are computed from it by
`scripts/pages/candidates.py` (one function for every page that states them).
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def parse(sdr, path):
    """(records, parsed): the file's records and `sdr parse --layout plain` of every candidate,
    in order."""
    records = [json.loads(l) for l in open(path) if l.strip()]
    texts = [c for r in records for c in r["candidates"]]
    inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    out = subprocess.run([sdr, "parse", "--layout", "plain"], input=inp, capture_output=True,
                         text=True, check=True).stdout
    parsed = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(parsed) == len(texts), (len(parsed), len(texts))
    return records, parsed


def parse_entry(sdr, path):
    """The `--parse-json` entry of one candidates file: per study, per candidate."""
    import hashlib

    records, parsed = parse(sdr, path)
    it = iter(parsed)
    studies = []
    for r in records:
        ps = [next(it) for _ in r["candidates"]]
        studies.append({
            "id": r["id"],
            "format_valid": [int(p["format_valid"]) for p in ps],
            "findings_sentences": [len(p.get("findings") or []) for p in ps],
            "impression_sentences": [len(p.get("impression") or []) for p in ps],
        })
    with open(path, "rb") as fh:
        sha = hashlib.sha256(fh.read()).hexdigest()
    return {"sha256": sha, "studies": studies}


def write_parse_json(sdr, files, out):
    data = {}
    if os.path.exists(out):
        with open(out) as fh:
            data = json.load(fh)
    import datetime

    version = subprocess.run([sdr, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "unknown"
    data["sdr"] = f"{version}, parsed {datetime.date.today().isoformat()} at commit {commit}"
    data.setdefault("files", {})
    for f in files:
        data["files"][os.path.relpath(os.path.abspath(f), ROOT)] = parse_entry(sdr, f)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(data, fh, separators=(",", ":"), sort_keys=True)
        fh.write("\n")
    os.replace(tmp, out)


def stats(sdr, path):
    records = [json.loads(l) for l in open(path) if l.strip()]
    texts = [c for r in records for c in r["candidates"]]
    finish = [f for r in records for f in r["finish"]]
    tokens = [t for r in records for t in r["tokens"]]
    inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    out = subprocess.run([sdr, "parse", "--layout", "plain"], input=inp, capture_output=True,
                         text=True, check=True).stdout
    parsed = [json.loads(l) for l in out.splitlines() if l.strip()]
    assert len(parsed) == len(texts), (len(parsed), len(texts))
    n = len(texts)
    valid = sum(p["format_valid"] for p in parsed)
    length = sum(f == "length" for f in finish)
    header = sum(t.lstrip().lower().startswith("findings") for t in texts)
    studies_with_valid = sum(
        any(p["format_valid"] for p in parsed[i * len(r["candidates"]):(i + 1) * len(r["candidates"])])
        for i, r in enumerate(records))
    return {
        "file": path, "studies": len(records), "candidates": n,
        "well_formed": valid / n, "token_limit": length / n, "starts_with_findings": header / n,
        "studies_with_a_well_formed": studies_with_valid / len(records),
        "mean_tokens": sum(tokens) / n,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--sdr", default=os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "sdr"))
    ap.add_argument("--json", action="store_true", help="print JSON objects instead of a table")
    ap.add_argument("--parse-json", metavar="OUT", help="also merge each candidate's parse into OUT "
                    "(docs/results/candidates/parse.json, read by scripts/pages/candidates.py)")
    args = ap.parse_args()
    if args.parse_json:
        write_parse_json(args.sdr, args.files, args.parse_json)
    rows = [stats(args.sdr, f) for f in args.files]
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return
    print("| candidates file | studies | candidates | well-formed % | at token limit % | starts with Findings % | studies with a well-formed candidate % | mean tokens |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| `{r['file']}` | {r['studies']} | {r['candidates']} | {100 * r['well_formed']:.1f} | "
              f"{100 * r['token_limit']:.1f} | {100 * r['starts_with_findings']:.1f} | "
              f"{100 * r['studies_with_a_well_formed']:.1f} | {r['mean_tokens']:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
