"""Tables of the faithfulness benchmark from the scorer's output.

    python3 bench/faithfulness/summarize.py RESULTS.jsonl[.gz] [--markdown OUT.md]

RESULTS.jsonl (or its gzipped copy, as committed under docs/results/faithfulness/) is written by the `faithfulness` program of the bench crate (one line
per case: the candidate's and the reference-against-itself scores per
configuration). For each configuration it prints:

- the mean drop per kind of edit (self - candidate; higher = the edit costs more);
- how often the rephrasing outranks each error: over the reports that have both a
  `rephrase` case and a case of that error, the share where the rephrased report
  scores strictly higher than the erroneous one (ties count half);
- the issue's goals: reversed-finding drop (both directions pooled) / unrelated
  drop, left-right drop / unrelated drop (the `left_right` cases and the wider `side_any`
  ones), rephrasing drop / reversed drop.

`Bootstrap` resamples studies (uids drawn with replacement, 1,000 resamples, seed 43, as
judge_row.py and sides.py) for 95 % percentile intervals of the same quantities and of paired
differences between configurations (scripts/pages/faithfulness_tables.py).

Pure Python, no dependencies.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
from array import array
from collections import defaultdict
from operator import itemgetter
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


def read(path) -> list[dict]:
    """The scorer's lines from RESULTS.jsonl or RESULTS.jsonl.gz."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(l) for l in fh if l.strip()]


def write_rounded(lines, path) -> None:
    """`lines` as gzipped JSON Lines with every score rounded to 6 decimals (gzip mtime 0:
    byte-stable), the form committed under docs/results/faithfulness/."""
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as gz:
        for ln in lines:
            out = dict(ln)
            for side in ("candidate", "self"):
                out[side] = {c: round(v, 6) for c, v in ln[side].items()}
            gz.write((json.dumps(out, separators=(",", ":")) + "\n").encode())


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
        # `clinical@L` is written at the default unmatched weight (0.5).
        both = float(kv.get("unmatched", 0.5))
        return float(lam), -float(kv.get("added", both)), -float(kv.get("omitted", both)), p

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
    score = defaultdict(dict)  # uid -> kind -> {config: candidate score}
    cfgs = configs(lines[0])
    for ln in lines:
        for c in cfgs:
            drops[c][ln["kind"]].append(ln["self"][c] - ln["candidate"][c])
        score[ln["uid"]][ln["kind"]] = ln["candidate"]
    # Per error, the (rephrased, erroneous) candidates of the reports that have both.
    pairs = {e: [(ks["rephrase"], ks[e]) for ks in score.values() if "rephrase" in ks and e in ks] for e in ERRORS}
    rows = []
    for c in cfgs:
        d = {k: mean(drops[c][k]) for k in KINDS}
        wins = {}
        for e in ERRORS:
            w = sum(1.0 if a[c] > b[c] else 0.5 if a[c] == b[c] else 0.0 for a, b in pairs[e])
            n = len(pairs[e])
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


RESAMPLES, SEED, LEVEL = 1000, 43, 0.95
REVERSED = ("absent_to_present", "present_to_absent")  # "reversed": both directions pooled


def percentile(xs, q):
    """Linear interpolation between order statistics (numpy's default; judge_row.py's)."""
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


class Bootstrap:
    """Bootstrap over studies of `summarize`'s quantities: mean drops per kind, goal ratios
    (ratio of the resample's means), rephrasing-outranks shares, and paired differences of
    any of them between configurations (both on the same resamples).

    Studies (uids, sorted) are drawn with replacement, `resamples` times, by
    `random.Random(seed).choices` (judge_row.py's draws). Drops are read in millionths (the
    committed files carry 6 decimals), so every resampled sum is exact: each study's sums of
    (drop + OFF) per (configuration, kind), its case count per kind and its outrank wins (in
    halves) per (configuration in `wins`, error) are packed as 64-bit fields of one integer,
    and a resample's sums are the sum of its studies' integers (one addition per drawn study
    for all fields at once).
    """

    SCALE, OFF = 10**6, 1 << 24

    def __init__(self, lines, cfgs=None, wins=(), resamples=RESAMPLES, seed=SEED):
        cfgs = list(cfgs or configs(lines[0]))
        wins = [c for c in wins if c in cfgs]
        uids = sorted({int(l["uid"]) for l in lines})
        at = {u: i for i, u in enumerate(uids)}
        field = {}
        for c in cfgs:
            for k in KINDS:
                field[(c, k)] = len(field)
        for k in KINDS:
            field[("#", k)] = len(field)
        for c in wins:
            for e in ERRORS:
                field[("win", c, e)] = len(field)
        for e in ERRORS:
            field[("#pair", e)] = len(field)
        self.field, self.cfgs, self.studies = field, cfgs, len(uids)
        per = [[0] * len(field) for _ in uids]
        cand = defaultdict(dict)  # uid -> kind -> candidate scores
        S, OFF = self.SCALE, self.OFF
        for ln in lines:
            row, k = per[at[int(ln["uid"])]], ln["kind"]
            s, c_ = ln["self"], ln["candidate"]
            for c in cfgs:
                row[field[(c, k)]] += round(S * s[c]) - round(S * c_[c]) + OFF
            row[field[("#", k)]] += 1
            cand[int(ln["uid"])][k] = c_
        for u, ks in cand.items():
            if "rephrase" not in ks:
                continue
            row, a = per[at[u]], ks["rephrase"]
            for e in ERRORS:
                if e not in ks:
                    continue
                row[field[("#pair", e)]] += 1
                for c in wins:
                    x, y = a[c], ks[e][c]
                    row[field[("win", c, e)]] += 2 if x > y else 1 if x == y else 0
        packed = [int.from_bytes(array("Q", r).tobytes(), "little") for r in per]
        self.full = array("Q", sum(packed).to_bytes(8 * len(field), "little"))
        rng = random.Random(seed)
        idx = range(len(uids))
        self.boots = []
        for _ in range(resamples):
            total = sum(itemgetter(*rng.choices(idx, k=len(uids)))(packed))
            self.boots.append(array("Q", total.to_bytes(8 * len(field), "little")))

    @property
    def _cols(self):
        """The resamples' sums field by field (one tuple per field)."""
        if not hasattr(self, "_columns"):
            self._columns = list(zip(*self.boots))
        return self._columns

    def _series(self, q):
        """(value on all studies, [value on each resample]) of quantity `q`: ("drop", cfg, kind),
        ("ratio", cfg, kind, kind), ("share", cfg, error) or ("diff", q1, q2); kind "reversed"
        pools both directions. Cached."""
        cache = self.__dict__.setdefault("_cache", {})
        if q in cache:
            return cache[q]
        if q[0] == "drop":
            kinds = REVERSED if q[2] == "reversed" else (q[2],)
            vals = [self.field[(q[1], k)] for k in kinds]
            cnts = [self.field[("#", k)] for k in kinds]

            def at(cols):
                s = [sum(x) for x in zip(*(cols[i] for i in vals))] if len(vals) > 1 else cols[vals[0]]
                n = [sum(x) for x in zip(*(cols[i] for i in cnts))] if len(cnts) > 1 else cols[cnts[0]]
                return [(a - self.OFF * m) / m / self.SCALE if m else float("nan") for a, m in zip(s, n)]

            full = at([[x] for x in self.full])[0]
            out = (full, at(self._cols))
        elif q[0] == "share":
            w, n = self.field[("win", q[1], q[2])], self.field[("#pair", q[2])]
            f = lambda a, m: a / 2 / m if m else float("nan")
            out = (f(self.full[w], self.full[n]), [f(a, m) for a, m in zip(self._cols[w], self._cols[n])])
        elif q[0] == "ratio":
            (na, xa), (nb, xb) = self._series(("drop", q[1], q[2])), self._series(("drop", q[1], q[3]))
            f = lambda a, b: a / b if b else float("nan")
            out = (f(na, nb), [f(a, b) for a, b in zip(xa, xb)])
        elif q[0] == "diff":
            (na, xa), (nb, xb) = self._series(q[1]), self._series(q[2])
            out = (na - nb, [a - b for a, b in zip(xa, xb)])
        else:
            raise ValueError(q)
        cache[q] = out
        return out

    def interval(self, *q):
        """(value on all studies, low, high): the 95 % percentile interval."""
        value, xs = self._series(q)
        a = (1 - LEVEL) / 2
        return value, percentile(xs, a), percentile(xs, 1 - a)


def fmt(x, digits=3):
    if x != x:
        return "n/a"
    out = f"{x:.{digits}f}"
    return out[1:] if out.startswith("-") and out.lstrip("-0.") == "" else out  # -0.000 reads 0.000


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
    ap.add_argument("--write-gz", type=Path, metavar="OUT.jsonl.gz",
                    help="also write every line, scores rounded to 6 decimals, gzipped (the committed form)")
    args = ap.parse_args()
    if args.write_gz:
        write_rounded(read(args.results), args.write_gz)
    lines = [l for l in read(args.results) if in_split(l, args.split)]
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
