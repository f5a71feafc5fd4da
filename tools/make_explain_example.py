"""Write the bundled `sdr explain` example, data/explain/iu-test-example.jsonl.

Candidates for IU X-ray test studies, each with the study's reference report from
data/iu-xray/indiana_reports.csv:
- `--standins` studies with a real radiologist's report of a *similar* study
  (data/candidates/iu-test-k5.jsonl, origin "similar-labels": a validation-split report
  whose Problems labels overlap the study's, see tools/make_candidates.py);
- `--generated` studies with a SmolLM2-135M generation
  (data/candidates/iu-test-smollm2-k8-p2.jsonl, README "Where the candidates come
  from"): the study's first well-formed candidate (both sections, by `sdr parse`);
- one study whose first SmolLM2 candidate is malformed, to show that case.

    python3 tools/make_explain_example.py --sdr target/release/sdr
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def well_formed(sdr: str, texts):
    out = subprocess.run(
        [sdr, "parse"],
        input="".join(json.dumps({"text": t}) + "\n" for t in texts),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [json.loads(l)["format_valid"] for l in out]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdr", default=str(ROOT / "target/release/sdr"))
    ap.add_argument("--standins", type=int, default=3)
    ap.add_argument("--generated", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "data/explain/iu-test-example.jsonl"))
    args = ap.parse_args()

    with open(ROOT / "data/iu-xray/indiana_reports.csv", newline="", encoding="utf-8") as f:
        refs = {r["uid"]: f"Findings: {r['findings']}\nImpression: {r['impression']}" for r in csv.DictReader(f)}
    out = []

    standins = [json.loads(l) for l in open(ROOT / "data/candidates/iu-test-k5.jsonl", encoding="utf-8")]
    for s in standins:
        if len(out) == args.standins:
            break
        picks = [c for c, o in zip(s["candidates"], s["origin"]) if o.startswith("similar-labels")]
        ok = well_formed(args.sdr, picks) if picks else []
        if s["id"] in refs and True in ok:
            out.append({"id": f"{s['id']} (other report)", "candidate": picks[ok.index(True)], "reference": refs[s["id"]]})

    generated = [json.loads(l) for l in open(ROOT / "data/candidates/iu-test-smollm2-k8-p2.jsonl", encoding="utf-8")]
    flags = iter(well_formed(args.sdr, [c for s in generated for c in s["candidates"]]))
    count, malformed = 0, False
    for s in generated:
        ok = [next(flags) for _ in s["candidates"]]
        if s["id"] not in refs:
            continue
        if True in ok and count < args.generated:
            out.append({"id": f"{s['id']} (SmolLM2)", "candidate": s["candidates"][ok.index(True)], "reference": refs[s["id"]]})
            count += 1
        elif not malformed and not ok[0]:
            out.append({"id": f"{s['id']} (SmolLM2)", "candidate": s["candidates"][0], "reference": refs[s["id"]]})
            malformed = True

    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        for line in out:
            f.write(json.dumps(line) + "\n")
    print(f"wrote {len(out)} studies to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
