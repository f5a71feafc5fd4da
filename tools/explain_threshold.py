"""Derive the default threshold tau of `sdr explain` from IU X-ray data (SPEC §9).

tau decides when a sentence counts as missing (no candidate sentence within tau of
a reference sentence) or unsupported (no reference sentence within tau of a candidate
sentence). It should separate "the other report states this finding" from "it does
not", on nearest-neighbour cosine costs d = (1 - cos) / 2 between one sentence and
the sentences of another report's same section, which is exactly what `sdr explain`
thresholds.

Data: the IU X-ray train split (uid % 10 not 0 or 1). Every train report A is paired
with `--partners` other train reports B drawn at random (seeded); `sdr explain`
(chamfer, all-mpnet-base-v2) gives each sentence s of A its nearest-neighbour cost
into B's same section.

Ground truth "same thing vs different things": the project's rule-based CheXpert
labeler (`sdr label`, SPEC §8) on each sentence alone. A sentence's key is its set of
(observation, value) pairs, No Finding left out; sentences without a key (no
observation mentioned: "The XXXX are intact.") have no ground truth and are skipped.

- same: B's section has a sentence with exactly s's key but other wording (verbatim
  repeats cost 0 and say nothing about tau, so they are left out);
- different: no sentence of B's section shares any (observation, value) pair with s
  (B does not mention the finding, or contradicts it);
- pairs in between (partial overlap) are left out.

tau maximises Youden's J = TPR - FPR (with "cost <= tau" predicting "same") over a
grid of step 0.005, rounded to two decimals. The script prints class sizes, cost
quantiles, the ROC AUC, J's optimum and the rates at a few thresholds, overall and
per section.

    nice -n 10 python3 tools/explain_threshold.py --sdr target/release/sdr

Pure Python (no numpy); the embedding is `sdr explain`'s, a few minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def train_reports(path: Path):
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            uid = int(row["uid"])
            if uid % 10 in (0, 1):
                continue
            findings, impression = row["findings"].strip(), row["impression"].strip()
            if findings and impression:
                yield uid, f"Findings: {findings}\nImpression: {impression}"


def run(cmd, stdin_path: Path, out_path: Path):
    with open(stdin_path, "rb") as fin, open(out_path, "wb") as fout:
        subprocess.run(cmd, stdin=fin, stdout=fout, check=True)


def quantiles(xs, qs=(0.1, 0.25, 0.5, 0.75, 0.9)):
    s = sorted(xs)
    return [s[min(len(s) - 1, int(q * len(s)))] for q in qs]


def auc(pos, neg):
    """P(cost of a 'same' < cost of a 'different'), ties counted half (Mann-Whitney)."""
    allv = sorted([(c, 1) for c in pos] + [(c, 0) for c in neg])
    rank_sum, i = 0.0, 0
    while i < len(allv):
        j = i
        while j < len(allv) and allv[j][0] == allv[i][0]:
            j += 1
        avg = (i + j + 1) / 2  # 1-based average rank of the tie block
        rank_sum += avg * sum(1 for k in range(i, j) if allv[k][1] == 1)
        i = j
    n1, n0 = len(pos), len(neg)
    # Lower cost = "same": AUC of the score -cost.
    return 1 - (rank_sum - n1 * (n1 + 1) / 2) / (n1 * n0)


def rates(pos, neg, tau):
    tpr = sum(c <= tau for c in pos) / len(pos)
    fpr = sum(c <= tau for c in neg) / len(neg)
    return tpr, fpr


def best_tau(pos, neg):
    grid = [round(0.005 * k, 3) for k in range(0, 101)]
    scored = [(rates(pos, neg, t), t) for t in grid]
    (tpr, fpr), t = max(scored, key=lambda x: (x[0][0] - x[0][1], -x[1]))
    return t, tpr, fpr


def report(name, pos, neg):
    print(f"\n[{name}] same: {len(pos)}  different: {len(neg)}")
    print("  cost quantiles 10/25/50/75/90 %:")
    print("    same      " + "  ".join(f"{q:.3f}" for q in quantiles(pos)))
    print("    different " + "  ".join(f"{q:.3f}" for q in quantiles(neg)))
    print(f"  ROC AUC {auc(pos, neg):.3f}")
    t, tpr, fpr = best_tau(pos, neg)
    print(f"  Youden's J max at tau = {t:.3f}: TPR {tpr:.3f}, FPR {fpr:.3f}, J {tpr - fpr:.3f}")
    for tau in (0.10, 0.15, 0.20, 0.25, 0.30):
        a, b = rates(pos, neg, tau)
        print(f"    tau {tau:.2f}: same kept {a:.3f}, different flagged {1 - b:.3f}, J {a - b:.3f}")
    return t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sdr", default=str(ROOT / "target/release/sdr"), help="the sdr binary")
    ap.add_argument("--csv", default=str(ROOT / "data/iu-xray/indiana_reports.csv"))
    ap.add_argument("--partners", type=int, default=3, help="random partner reports per train report")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--encoder", default="mpnet", help="sdr --encoder (hash-DIM for a dry run)")
    args = ap.parse_args()

    reports = list(train_reports(Path(args.csv)))
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pairs = tmp / "pairs.jsonl"
        with open(pairs, "w", encoding="utf-8") as f:
            for k, (uid, text) in enumerate(reports):
                for _ in range(args.partners):
                    b = rng.randrange(len(reports) - 1)
                    b += b >= k  # another report
                    f.write(json.dumps({"id": f"{uid}/{reports[b][0]}", "candidate": text, "reference": reports[b][1]}) + "\n")
        explained = tmp / "explained.jsonl"
        run([args.sdr, "explain", "--metric", "chamfer", "--encoder", args.encoder], pairs, explained)
        lines = [json.loads(l) for l in open(explained, encoding="utf-8")]

        sentences = sorted(
            {
                s["sentence"]
                for e in lines
                if e["sections"]
                for sec in e["sections"].values()
                for side in ("candidate", "reference")
                for s in sec[side]
            }
        )
        texts = tmp / "sentences.jsonl"
        with open(texts, "w", encoding="utf-8") as f:
            for s in sentences:
                f.write(json.dumps({"text": s}) + "\n")
        labelled = tmp / "labels.jsonl"
        run([args.sdr, "label"], texts, labelled)
        keys = {}
        for s, l in zip(sentences, open(labelled, encoding="utf-8")):
            labels = json.loads(l)["labels"]
            keys[s] = frozenset((o, v) for o, v in labels.items() if v is not None and o != "No Finding")

    def norm(s):
        return " ".join(s.lower().rstrip(".").split())

    pos = {"findings": [], "impression": []}
    neg = {"findings": [], "impression": []}
    skipped = {"no key": 0, "verbatim": 0, "partial": 0}
    for e in lines:
        if not e["sections"]:
            continue
        for name, sec in e["sections"].items():
            ref = sec["reference"]
            for s in sec["candidate"]:
                key = keys[s["sentence"]]
                if not key:
                    skipped["no key"] += 1
                    continue
                if any(norm(r["sentence"]) == norm(s["sentence"]) for r in ref):
                    skipped["verbatim"] += 1
                elif any(keys[r["sentence"]] == key for r in ref):
                    pos[name].append(s["nearest_cost"])
                elif not any(keys[r["sentence"]] & key for r in ref):
                    neg[name].append(s["nearest_cost"])
                else:
                    skipped["partial"] += 1

    print(f"IU X-ray train reports with both sections: {len(reports)}; pairs: {len(lines)} "
          f"({args.partners} random partners each, seed {args.seed}); distinct sentences: {len(sentences)}")
    print(f"candidate sentences left out: {skipped}")
    for name in ("findings", "impression"):
        report(name, pos[name], neg[name])
    tau = report("both sections", pos["findings"] + pos["impression"], neg["findings"] + neg["impression"])
    print(f"\nchosen default tau = {round(tau, 2):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
