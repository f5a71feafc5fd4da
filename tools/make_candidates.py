#!/usr/bin/env python3
"""Write the bundled stand-in candidate file for the main job (seeded, stdlib only).

    python3 tools/make_candidates.py [--csv data/iu-xray/indiana_reports.csv]
        [--k 5] [--seed 20240611] [--out data/candidates/iu-test-k5.jsonl]

Until the generation issue lands, the main job selects among candidates that
are NOT model outputs: for every IU X-ray test study (uid % 10 == 0, both
sections present) it draws K candidate reports from OTHER studies, namely the
validation split (uid % 10 == 1), which is disjoint from both the test
studies and the train-split corpus. A candidate never contains the study's
own report, and a validation report whose Findings and Impression both equal
the study's (common for normal studies) is never drawn for it.

Per study, the K = 5 candidates are, in shuffled order:
  * 2 validation reports whose Problems labels overlap the study's
    (for a normal study: other normal reports),
  * 1 validation report with disjoint Problems labels,
  * 1 sentence-level perturbation of a label-overlapping validation report:
    one of drop-a-sentence, swap-in a sentence from a random validation report,
    or shuffle the sentence order (each section),
  * 1 "wild" slot: with probability 0.5 a malformed report that is missing
    a section (only Findings, only Impression, or an unclosed template tag),
    otherwise another random validation report.
Candidates are written as plain `Findings: ... Impression: ...` text or in the
`<think>F</think><answer>I</answer>` template (half each), as the two layouts
SDR parses. Each line is {"id": uid, "candidates": [...], "origin": [...]},
with `origin` naming how each candidate was made.
"""
import argparse
import csv
import json
import os
import random
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sentences(text):
    # Coarse split, only used to perturb candidates (SDR re-segments them).
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z0-9])", text.strip())
    return [p.strip() for p in parts if p.strip()]


def labels(problems):
    return frozenset(p.strip().lower() for p in problems.split(";") if p.strip())


def render(findings, impression, rng):
    if rng.random() < 0.5:
        return f"Findings: {findings}\nImpression: {impression}"
    return f"<think>{findings}</think><answer>{impression}</answer>"


def perturb(report, pool, rng):
    f, i = report["findings"], report["impression"]
    kind = rng.choice(["drop", "swap", "shuffle"])
    fs, is_ = sentences(f), sentences(i)
    if kind == "drop" and len(fs) > 1:
        fs.pop(rng.randrange(len(fs)))
    elif kind == "swap":
        donor = rng.choice(pool)
        ds = sentences(donor["findings"])
        if ds and fs:
            fs[rng.randrange(len(fs))] = rng.choice(ds)
    else:
        rng.shuffle(fs)
        rng.shuffle(is_)
    return " ".join(fs) or f, " ".join(is_) or i, kind


def malformed(report, rng):
    f, i = report["findings"], report["impression"]
    kind = rng.choice(["findings-only", "impression-only", "unclosed-tag"])
    if kind == "findings-only":
        return f"Findings: {f}", kind
    if kind == "impression-only":
        return f"Impression: {i}", kind
    return f"<think>{f}<answer>{i}</answer>", kind


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", default=os.path.join(ROOT, "data/iu-xray/indiana_reports.csv"))
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--seed", type=int, default=20240611)
    ap.add_argument("--out", default=os.path.join(ROOT, "data/candidates/iu-test-k5.jsonl"))
    args = ap.parse_args()
    if args.k != 5:
        raise SystemExit("the slot recipe above is for K = 5")

    with open(args.csv, newline="", encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh)]
    full = [
        {"uid": int(r["uid"]), "findings": r["findings"].strip(), "impression": r["impression"].strip(),
         "labels": labels(r["Problems"])}
        for r in rows if r["findings"].strip() and r["impression"].strip()
    ]
    test = [r for r in full if r["uid"] % 10 == 0]
    val = [r for r in full if r["uid"] % 10 == 1]
    rng = random.Random(args.seed)

    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        for study in test:
            own = (study["findings"], study["impression"])
            pool = [v for v in val if (v["findings"], v["impression"]) != own]
            similar = [v for v in pool if v["labels"] & study["labels"]] or pool
            different = [v for v in pool if not (v["labels"] & study["labels"])] or pool
            cands = []
            for v in rng.sample(similar, 2) if len(similar) >= 2 else [rng.choice(pool) for _ in range(2)]:
                cands.append((render(v["findings"], v["impression"], rng), f"similar-labels:{v['uid']}"))
            v = rng.choice(different)
            cands.append((render(v["findings"], v["impression"], rng), f"different-labels:{v['uid']}"))
            v = rng.choice(similar)
            f, i, kind = perturb(v, pool, rng)
            cands.append((render(f, i, rng), f"perturbed-{kind}:{v['uid']}"))
            v = rng.choice(pool)
            if rng.random() < 0.5:
                text, kind = malformed(v, rng)
                cands.append((text, f"malformed-{kind}:{v['uid']}"))
            else:
                cands.append((render(v["findings"], v["impression"], rng), f"random:{v['uid']}"))
            rng.shuffle(cands)
            out.write(json.dumps({"id": str(study["uid"]), "candidates": [c for c, _ in cands],
                                  "origin": [o for _, o in cands]}) + "\n")
    os.replace(tmp, args.out)
    print(f"{len(test)} test studies x {args.k} candidates -> {args.out}")


if __name__ == "__main__":
    main()
