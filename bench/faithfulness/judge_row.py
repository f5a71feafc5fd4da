"""The judge as a row of the faithfulness benchmark (docs/results/faithfulness.md).

    python3 bench/faithfulness/judge_row.py [--sdr target/release/sdr]

Scores every case of `bench/faithfulness/cases.jsonl` as the benchmark's `CheXpert-rule F1`
row does (bench/src/bin/faithfulness.rs): the example-level F1 of the CheXpert-14 labels of
the whole candidate report ("Findings: ...\\nImpression: ...") against those of the whole
reference, uncertain counted as present, and the reference against itself; drop = self -
candidate. It does so twice in one run of `sdr score --whole --judge-f1 --no-bertscore`
(the project's own labels and F1): `CheXpert-rule F1` with the rule labeler, and
`judge F1` with the judge (SPEC §8a: all-MiniLM-L6-v2 + LoRA trained on IU X-ray's human
MeSH coding; needs ~/.cache/sdr/models/all-MiniLM-L6-v2 and data/judge/).

Writes
- `docs/results/faithfulness/judge-cases.jsonl.gz`: one line per case, `{"id", "uid",
  "kind", "rules": {"self", "candidate"}, "judge": {"self", "candidate"}}` (gzip with
  mtime 0: byte-stable);
- `docs/results/faithfulness/judge.json`: for all cases and for the test reports alone
  (uid % 10 == 0), per labeler: the mean drop per kind, the reversed-finding drop (both
  directions pooled), the three goal ratios of summarize.py (reversed / unrelated,
  left-right / unrelated, rephrase / reversed), how often the rephrasing outranks each
  error (summarize.py's rule, ties count half), each error's drop minus the rephrasing's,
  and the number of cases whose score the edit changes; and the judge minus the rules for
  each figure but the counts. Every figure has a 95 % percentile interval from a bootstrap
  over studies (uids resampled with replacement, 1000 resamples, seed 43; comparisons are
  paired: both sides on the same resamples).

Deterministic. `python3 scripts/results.py` renders the page's blocks from judge.json
(scripts/pages/faithfulness_judge.py).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import random
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CASES = ROOT / "bench/faithfulness/cases.jsonl"
OUT_DIR = ROOT / "docs/results/faithfulness"
KINDS = [
    "rephrase",
    "absent_to_present",
    "present_to_absent",
    "left_right",
    "omission",
    "hallucination",
    "severity",
    "unrelated",
]
ERRORS = KINDS[1:]
LABELERS = {"rules": "CheXpert-rule F1", "judge": "judge F1"}
RESAMPLES, SEED, LEVEL = 1000, 43, 0.95
COMMAND = "python3 bench/faithfulness/judge_row.py"
JUDGE_WEIGHTS = "data/judge/iu-judge-minilm.safetensors"


def score(cases: list[dict], sdr: str) -> list[dict]:
    """Both labelers' example F1, self and candidate, per case (one `sdr score` run)."""
    refs: dict[str, int] = {}
    pairs = []
    for n, c in enumerate(cases):
        pairs.append({"id": f"c{n}", "hyp": c["candidate"], "ref": c["reference"]})
        if c["reference"] not in refs:
            refs[c["reference"]] = len(refs)
            pairs.append({"id": f"s{refs[c['reference']]}", "hyp": c["reference"], "ref": c["reference"]})
    with tempfile.TemporaryDirectory() as tmp:
        inp, out = Path(tmp) / "pairs.jsonl", Path(tmp) / "scores.jsonl"
        inp.write_text("".join(json.dumps(p) + "\n" for p in pairs), encoding="utf-8")
        cmd = [sdr, "score", "--whole", "--judge-f1", "--no-bertscore", str(inp), "-o", str(out)]
        print("+ " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, cwd=ROOT)
        got = {}
        for line in out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                v = json.loads(line)
                got[v["id"]] = v["whole"]
    if len(got) != len(pairs):
        raise SystemExit(f"sdr score returned {len(got)} lines for {len(pairs)} pairs")
    rows = []
    for n, c in enumerate(cases):
        cand, self_ = got[f"c{n}"], got[f"s{refs[c['reference']]}"]
        row = {"id": c["id"], "uid": c["uid"], "kind": c["kind"]}
        for key, metric in LABELERS.items():
            row[key] = {"self": self_[metric], "candidate": cand[metric]}
        rows.append(row)
    return rows


def write_gzip(path: Path, text: str) -> None:
    """gzip without a name or a time in its header, so the bytes depend on `text` only."""
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(text.encode("utf-8"))
    path.write_bytes(buf.getvalue())


class Study:
    """Per study (uid), per labeler: the sum and count of drops per kind, and the
    rephrased copy's and each error copy's candidate score."""

    def __init__(self):
        self.sum = {k: defaultdict(float) for k in LABELERS}
        self.n = defaultdict(int)
        self.cand = {k: {} for k in LABELERS}


def studies_of(rows: list[dict]) -> dict:
    out: dict = {}
    for r in rows:
        s = out.setdefault(r["uid"], Study())
        s.n[r["kind"]] += 1
        for k in LABELERS:
            s.sum[k][r["kind"]] += r[k]["self"] - r[k]["candidate"]
            s.cand[k][r["kind"]] = r[k]["candidate"]
    return out


def stats(sample: list[Study]) -> dict:
    """Every figure of one labeler set on one sample of studies: {labeler: {name: value}}."""
    n = defaultdict(int)
    for s in sample:
        for kind, c in s.n.items():
            n[kind] += c
    out = {}
    for k in LABELERS:
        tot = defaultdict(float)
        for s in sample:
            for kind, v in s.sum[k].items():
                tot[kind] += v
        drop = {kind: tot[kind] / n[kind] if n[kind] else float("nan") for kind in KINDS}
        nrev = n["absent_to_present"] + n["present_to_absent"]
        rev = (tot["absent_to_present"] + tot["present_to_absent"]) / nrev if nrev else float("nan")
        un = drop["unrelated"]
        f = {f"drop/{kind}": drop[kind] for kind in KINDS}
        f["reversed_drop"] = rev
        f["ratio/reversed/unrelated"] = rev / un if un else float("nan")
        f["ratio/left_right/unrelated"] = drop["left_right"] / un if un else float("nan")
        f["ratio/rephrase/reversed"] = drop["rephrase"] / rev if rev else float("nan")
        for e in ERRORS:
            f[f"sees/{e}"] = drop[e] - drop["rephrase"]
            w, m = 0.0, 0
            for s in sample:
                c = s.cand[k]
                if "rephrase" in c and e in c:
                    a, b = c["rephrase"], c[e]
                    w += 1.0 if a > b else 0.5 if a == b else 0.0
                    m += 1
            f[f"outranks/{e}"] = w / m if m else float("nan")
        out[k] = f
    out["judge_minus_rules"] = {name: out["judge"][name] - out["rules"][name] for name in out["rules"]}
    return out


def percentile(xs: list[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default)."""
    xs = sorted(x for x in xs if x == x)
    if not xs:
        return float("nan")
    pos = q * (len(xs) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(rows: list[dict]) -> dict:
    by_uid = studies_of(rows)
    uids = sorted(by_uid)
    studies = [by_uid[u] for u in uids]
    point = stats(studies)
    rng = random.Random(SEED)
    boots = [stats(rng.choices(studies, k=len(studies))) for _ in range(RESAMPLES)]
    a = (1 - LEVEL) / 2
    out = {
        "cases": len(rows),
        "studies": len(uids),
        "counts": {kind: sum(1 for r in rows if r["kind"] == kind) for kind in KINDS},
    }

    def nested(group: str) -> dict:
        res: dict = {}
        for name, v in point[group].items():
            xs = [b[group][name] for b in boots]
            cell = {"value": round(v, 6), "low": round(percentile(xs, a), 6), "high": round(percentile(xs, 1 - a), 6)}
            head, _, tail = name.partition("/")
            if tail:
                res.setdefault(head, {})[tail] = cell
            else:
                res[head] = cell
        return res

    for group in ("rules", "judge", "judge_minus_rules"):
        out[group] = nested(group)
    for k in LABELERS:
        # Cases whose score differs from the reference's own (the labels saw the edit).
        out[k]["changed"] = {kind: sum(1 for r in rows if r["kind"] == kind and r[k]["candidate"] != r[k]["self"])
                             for kind in KINDS}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdr", default="target/release/sdr", help="the sdr binary (default target/release/sdr)")
    ap.add_argument("--cases", type=Path, default=CASES)
    ap.add_argument("--out-dir", type=Path, default=OUT_DIR)
    args = ap.parse_args()
    cases = [json.loads(l) for l in args.cases.read_text(encoding="utf-8").splitlines() if l.strip()]
    sdr = Path(args.sdr)
    sdr = sdr.resolve() if sdr.exists() else ROOT / sdr  # relative to here, else to the repository
    rows = score(cases, str(sdr))
    args.out_dir.mkdir(parents=True, exist_ok=True)
    write_gzip(args.out_dir / "judge-cases.jsonl.gz",
               "".join(json.dumps(r, sort_keys=False) + "\n" for r in rows))
    test = [r for r in rows if int(r["uid"]) % 10 == 0]
    result = {
        "source": "bench/faithfulness/cases.jsonl",
        "cases_file": "docs/results/faithfulness/judge-cases.jsonl.gz",
        "command": COMMAND,
        "scorer": "sdr score --whole --judge-f1 --no-bertscore (example-level F1 of the whole reports' "
                  "CheXpert-14 labels, uncertain as present)",
        "labelers": LABELERS,
        # The judge's weights as they stand in the tree (bundled into `sdr` when it is built).
        "judge_weights": {"path": JUDGE_WEIGHTS,
                          "sha256": hashlib.sha256((ROOT / JUDGE_WEIGHTS).read_bytes()).hexdigest()},
        "bootstrap": {"unit": "study (uid)", "resamples": RESAMPLES, "seed": SEED, "level": LEVEL,
                      "interval": "percentile"},
        "goals": {"reversed/unrelated": [">=", 0.5], "left_right/unrelated": [">=", 0.5],
                  "rephrase/reversed": ["<=", 0.25]},
        "all": summarize(rows),
        "test": summarize(test),
    }
    path = args.out_dir / "judge.json"
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path.relative_to(ROOT)} and judge-cases.jsonl.gz ({len(rows)} cases)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
