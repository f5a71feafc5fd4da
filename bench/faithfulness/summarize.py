"""Tables of the faithfulness benchmark from the scorer's output.

    python3 bench/faithfulness/summarize.py RESULTS.jsonl [--markdown OUT.md]

RESULTS.jsonl is written by the `faithfulness` program of the bench crate (one line
per case: the candidate's and the reference-against-itself scores per
configuration). For each configuration it prints:

- the mean drop per kind of edit (self - candidate; higher = the edit costs more);
- how often the rephrasing outranks each error: over the reports that have both a
  `rephrase` case and a case of that error, the share where the rephrased report
  scores strictly higher than the erroneous one (ties count half);
- the issue's goals: reversed-finding drop (both directions pooled) / unrelated
  drop, left-right drop / unrelated drop (the `left_right` cases and the wider `side_any`
  ones), rephrasing drop / reversed drop.

Pure Python, no dependencies.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

KINDS = [
    "rephrase",
    "absent_to_present",
    "present_to_absent",
    "left_right",
    "side_any",
    "omission",
    "hallucination",
    "severity",
    "unrelated",
]
ERRORS = KINDS[1:]
TEXT = ["BLEU-4", "ROUGE-L", "METEOR", "BERTScore-F1", "CheXpert-rule F1"]


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def configs(line):
    keys = list(line["candidate"])
    metrics = [k.split("/", 1)[1] for k in keys if k.startswith("cosine/")]
    # A sweep writes clinical@L/<metric> (or clinical@L,unmatched=U/<metric>) beside
    # clinical/<metric>.
    # (or clinical@L,added=A,omitted=O/<metric>) beside clinical/<metric>.
    def order(p):
        lam, *params = p.split("@", 1)[1].split(",")
        kv = dict(x.split("=", 1) for x in params)
        both = float(kv.get("unmatched", 1))
        return float(lam), -float(kv.get("added", both)), -float(kv.get("omitted", both))

    sweeps = sorted({k.split("/", 1)[0] for k in keys if k.startswith("clinical@")}, key=order)
    out = []
    for m in metrics:
        out += [f"cosine/{m}", f"cosine+term/{m}", f"clinical/{m}"] + [f"{p}/{m}" for p in sweeps]
    return out + [k for k in TEXT if k in keys]


SPLITS = {"test": 0, "validation": 1}


def in_split(line, split):
    """Cases of one split of the reports (uid % 10: test 0, validation 1); all without."""
    return split is None or int(line["uid"]) % 10 == SPLITS[split]


def summarize(lines):
    drops = defaultdict(lambda: defaultdict(list))  # config -> kind -> drops
    score = defaultdict(dict)  # (uid, kind) -> {config: candidate score}
    cfgs = configs(lines[0])
    for ln in lines:
        for c in cfgs:
            drops[c][ln["kind"]].append(ln["self"][c] - ln["candidate"][c])
        score[(ln["uid"], ln["kind"])] = ln["candidate"]
    rows = []
    for c in cfgs:
        d = {k: mean(drops[c][k]) for k in KINDS}
        wins = {}
        for e in ERRORS:
            w, n = 0.0, 0
            for (uid, kind), s in score.items():
                if kind != "rephrase" or (uid, e) not in score:
                    continue
                a, b = s[c], score[(uid, e)][c]
                w += 1.0 if a > b else 0.5 if a == b else 0.0
                n += 1
            wins[e] = w / n if n else float("nan")
        reversed_ = mean(drops[c]["absent_to_present"] + drops[c]["present_to_absent"])
        un = d["unrelated"]
        goals = {
            "reversed/unrelated": reversed_ / un if un else float("nan"),
            "left_right/unrelated": d["left_right"] / un if un else float("nan"),
            "side_any/unrelated": d["side_any"] / un if un else float("nan"),
            "rephrase/reversed": d["rephrase"] / reversed_ if reversed_ else float("nan"),
        }
        rows.append((c, d, wins, goals, reversed_))
    counts = {k: len(drops[cfgs[0]][k]) for k in KINDS}
    # Share of cases whose clinical cost differs from the cosine cost (the
    # facts saw a conflict), per kind, read on Chamfer.
    seen = defaultdict(list)
    for ln in lines:
        c = ln["candidate"]
        if "clinical/chamfer" in c:
            seen[ln["kind"]].append(c["clinical/chamfer"] != c["cosine/chamfer"])
    coverage = {k: mean(seen[k]) for k in KINDS}
    return rows, counts, coverage


def fmt(x, digits=3):
    return "n/a" if x != x else f"{x:.{digits}f}"


def markdown(rows, counts, coverage):
    out = ["### Cases where the sentence facts see a conflict", ""]
    out += ["| " + " | ".join(KINDS) + " |", "|" + "---:|" * len(KINDS)]
    out += ["| " + " | ".join(fmt(coverage[k], 2) for k in KINDS) + " |", ""]
    head = "| configuration | " + " | ".join(f"{k} ({counts[k]})" for k in KINDS) + " |"
    out += ["### Mean drop per kind of edit", "", head, "|---|" + "---:|" * len(KINDS)]
    for c, d, _, _, _ in rows:
        out.append(f"| `{c}` | " + " | ".join(fmt(d[k]) for k in KINDS) + " |")
    out += ["", "### How often the rephrasing outranks each error", ""]
    out += ["| configuration | " + " | ".join(ERRORS) + " |", "|---|" + "---:|" * len(ERRORS)]
    for c, _, w, _, _ in rows:
        out.append(f"| `{c}` | " + " | ".join(fmt(w[e], 2) for e in ERRORS) + " |")
    out += ["", "### Goals", ""]
    out += [
        "| configuration | reversed drop | reversed / unrelated (>= 0.5) | left-right / unrelated (>= 0.5) | any side / unrelated (>= 0.5) | rephrase / reversed (<= 0.25) | all met |",
        "|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for c, _, _, g, rev in rows:
        if "/" not in c:
            continue
        ok = (
            g["reversed/unrelated"] >= 0.5
            and g["left_right/unrelated"] >= 0.5
            and g["side_any/unrelated"] >= 0.5
            and g["rephrase/reversed"] <= 0.25
        )
        out.append(
            f"| `{c}` | {fmt(rev)} | {fmt(g['reversed/unrelated'], 2)} | {fmt(g['left_right/unrelated'], 2)} | "
            f"{fmt(g['side_any/unrelated'], 2)} | {fmt(g['rephrase/reversed'], 2)} | {'yes' if ok else 'no'} |"
        )
    return "\n".join(out) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", type=Path)
    ap.add_argument("--markdown", type=Path)
    ap.add_argument("--split", choices=sorted(SPLITS), help="only the cases of this split's reports")
    ap.add_argument("--only", help="only configurations whose name contains this text (e.g. chamfer)")
    args = ap.parse_args()
    lines = [json.loads(l) for l in open(args.results, encoding="utf-8") if l.strip()]
    lines = [l for l in lines if in_split(l, args.split)]
    if not lines:
        print(f"{args.results}: no results", file=sys.stderr)
        return 1
    rows, counts, coverage = summarize(lines)
    if args.only:
        rows = [r for r in rows if args.only in r[0]]
    md = markdown(rows, counts, coverage)
    if args.markdown:
        args.markdown.write_text(md, encoding="utf-8")
    else:
        print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
