"""Impressions chosen by their own Findings (issue 57 item 2, SPEC §10a): do the picks of the
Findings-consistency policy agree better with the radiologist's Impression than random picks and
than the paper's corpus policies?

Input: a candidates file of sampled Impressions, JSON Lines ``{"id": uid, "candidates":
[impression, ...]}`` (other keys ignored), ``uid`` an IU X-ray study of
``data/iu-xray/indiana_reports.csv`` with Findings and Impression (the Findings are what the
model read; the Impression is the reference, which no policy sees).

Policies (each picks one candidate per study):

- ``random``: a uniform pick, as its expectation over the K slots (every value below is the mean
  over the study's candidates);
- ``findings-consistency``: ``sdr select --findings-consistency`` with the study's Findings:
  fewest contradicted, unsupported and omitted findings (1 / 0.5 / 0.5, omissions weighed by how
  often radiologists' Impressions name the finding), ties to the Impression closest to the
  Findings in embedding (directed Chamfer), then the lowest index;
- ``chamfer@min``, ``chamfer@avg``, ``chamfer@knn:k=5``: the paper's corpus policies, ``sdr select
  --corpus C --metric chamfer --agg ...`` over the train split's reports (``sdr corpus build
  --split train``, built once into ``--corpus``). Each candidate is scored as the report
  ``<think>FINDINGS</think><answer>CANDIDATE</answer>`` with the study's own Findings, so
  ``D_F`` is the same for every candidate of a study and the pick is the argmin of ``D_I``, the
  distance of the candidate to the train Impressions;
- ``fc-score-then-index`` and ``fc-directed-chamfer-only``: ablations of it, from its
  per-candidate breakdown: the consistency score with ties to the lowest index (no embedding),
  and the directed Chamfer distance to the Findings alone (no facts);
- ``oracle``: the candidate with the highest judge F1 (a ceiling, not a policy).

An empty candidate (no sentence) is malformed for every policy (never picked unless all are).

Measures of a pick, each against the study's reference Impression:

- **judge F1**: example F1 of the judge's CheXpert-14 labels (SPEC §8a; ``labeler="judge"``),
  ``2|H n R| / (|H| + |R|)`` over the present observations, 1 when both are empty;
- **rule F1**: the same with the CheXpert-rule labeler (SPEC §8; uncertain counted present);
- corpus-level macro-14 F1 of the picks (judge and rules; random: the mean over the K slots);
- **contradicts its Findings**: the pick has a contradiction by the Findings-consistency check
  (``contradictions > 0``: polarity, hedge, side, bilateral or grade), and, stricter, by
  ``contradicts()`` of ``recipes/evaluate_impression.py`` (a present-vs-absent polarity conflict
  of ``sdr_rewards.clinical_conflicts``).

Intervals: 95 % percentile bootstrap over the studies (``--resamples`` 1,000, ``--seed`` 43, the
same resampled studies for every comparison, so differences are paired) of policy minus random
and of Findings-consistency minus each corpus policy and each ablation (per-study differences of
judge F1, rule F1 and the contradiction indicators).

Writes ``--out-dir``/``NAME.json`` (aggregates) and ``NAME-picks.jsonl.gz`` (per study: every
candidate's F1s, consistency breakdown and flags, and each policy's pick; gzip mtime 0).
Deterministic: a second run writes identical files.

    .venv-trainers/bin/python recipes/findings_selection.py \\
        --candidates recipes/out/ra/sft-impressions.jsonl --name sft \\
        --title "SFT impressions (K = 8)"

    # a stand-in candidates file to try it: 30 test studies, 8 candidates each, the study's own
    # reference Impression among seven other studies' (recipes/out/findings-selection/)
    .venv-trainers/bin/python recipes/findings_selection.py --standin 30

Needs the ``sdr`` CLI (``bash scripts/build-sdr.sh``, or ``$SDR_BIN``), the ``sdr_rewards``
wheel with the judge, all-mpnet-base-v2 (``scripts/fetch-model.sh``) and all-MiniLM-L6-v2
(``scripts/fetch-minilm.sh``, the judge's base).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The result files are written as reward_accuracy.py writes its own (6 decimals, byte-stable gzip),
# and the example F1s are computed as there (sdr score --judge-f1).
from reward_accuracy import example_f1s, gzip_bytes, rounded, write_atomic  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "data/iu-xray/indiana_reports.csv"
WORK = ROOT / "recipes/out/findings-selection"
FC = "findings-consistency"
CORPUS_POLICIES = ("chamfer@min", "chamfer@avg", "chamfer@knn:k=5")
#: Ablations of the Findings-consistency policy, from its per-candidate breakdown: the fact
#: score with ties to the lowest index (no embedding), and the embedding term alone.
ABLATIONS = ("fc-score-then-index", "fc-directed-chamfer-only")
POLICIES = ("random", FC) + ABLATIONS + CORPUS_POLICIES + ("oracle",)
LABELERS = ("judge", "rules")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def collapse(t: str) -> str:
    return " ".join(t.split())


def split_of(uid: int) -> str:
    r = uid % 10
    return "test" if r == 0 else "validation" if r == 1 else "train"


# -- inputs -----------------------------------------------------------------------------------


def read_reports():
    with open(REPORTS, newline="") as fh:
        return {row["uid"]: row for row in csv.DictReader(fh)}


def read_candidates(path: Path, limit: int):
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        if "id" not in r or not isinstance(r.get("candidates"), list) or not r["candidates"]:
            raise SystemExit(f'findings_selection: {path}:{n}: needs "id" and a non-empty "candidates" list')
        if not all(isinstance(c, str) for c in r["candidates"]):
            raise SystemExit(f"findings_selection: {path}:{n}: candidates must be strings")
        rows.append({"id": str(r["id"]), "candidates": [collapse(c) for c in r["candidates"]]})
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"findings_selection: {path}: an id appears twice")
    return rows[:limit] if limit else rows


def read_references(ids, reports):
    out = {}
    for i in ids:
        row = reports.get(i)
        if row is None:
            raise SystemExit(f"findings_selection: study {i} is not in {REPORTS.relative_to(ROOT)}")
        f, imp = collapse(row["findings"]), collapse(row["impression"])
        if not f or not imp:
            raise SystemExit(f"findings_selection: study {i} lacks its Findings or Impression")
        out[i] = {"findings": f, "impression": imp}
    return out


def make_standin(n: int, out: Path, seed: int) -> None:
    """`n` test studies with both sections (uid order), each with its own reference Impression
    and seven other test studies' at random slots."""
    rows = [r for r in read_reports().values()
            if split_of(int(r["uid"])) == "test" and collapse(r["findings"]) and collapse(r["impression"])]
    rows.sort(key=lambda r: int(r["uid"]))
    rng = random.Random(seed)
    pool = [collapse(r["impression"]) for r in rows]
    lines = []
    for r in rows[:n]:
        own = collapse(r["impression"])
        others = rng.sample([p for p in pool if p != own], 7)
        cands = others + [own]
        rng.shuffle(cands)
        lines.append(json.dumps({"id": int(r["uid"]), "candidates": cands}))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    log(f"wrote {out} ({len(lines)} studies, 8 candidates each)")


# -- the sdr CLI ------------------------------------------------------------------------------


def sdr_bin() -> str:
    for cand in (os.environ.get("SDR_BIN"), str(ROOT / "target/release/sdr")):
        if cand and Path(cand).is_file():
            return cand
    raise SystemExit("findings_selection: the sdr CLI is not built: bash scripts/build-sdr.sh (or set SDR_BIN)")


def run_sdr(args) -> None:
    t0 = time.perf_counter()
    r = subprocess.run([sdr_bin(), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise SystemExit(f"findings_selection: sdr {' '.join(map(str, args[:3]))} ...: {r.stderr.strip()}")
    log(f"  sdr {' '.join(map(str, args[:4]))} ...: {time.perf_counter() - t0:.1f} s")


def read_jsonl(path: Path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def ensure_corpus(path: Path) -> None:
    if path.exists():
        return
    log(f"building the train corpus {path} (sdr corpus build --split train, all-mpnet-base-v2)")
    path.parent.mkdir(parents=True, exist_ok=True)
    run_sdr(["corpus", "build", "--input", REPORTS, "--format", "csv", "--split", "train", "--out", path])


def select_all(rows, refs, corpus: Path, work: Path):
    """Per policy key, per study id: the chosen index; and per study the Findings-consistency
    breakdown of every candidate."""
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    fc_in, corpus_in = work / "fc-input.jsonl", work / "corpus-input.jsonl"
    fc_in.write_text("".join(
        json.dumps({"id": r["id"], "candidates": r["candidates"], "findings": refs[r["id"]]["findings"]}) + "\n"
        for r in rows))
    corpus_in.write_text("".join(
        json.dumps({"id": r["id"], "candidates": [
            f"<think>{refs[r['id']]['findings']}</think><answer>{c}</answer>" for c in r["candidates"]]}) + "\n"
        for r in rows))
    picks, breakdown = {}, {}
    out = work / "fc.jsonl"
    run_sdr(["select", "--findings-consistency", "--quiet", "--cache-dir", cache, "-o", out, fc_in])
    picks[FC] = {}
    for a in ABLATIONS:
        picks[a] = {}
    for o in read_jsonl(out):
        sid, b = str(o["id"]), o["breakdown"]
        picks[FC][sid] = o["chosen"]
        breakdown[sid] = b
        live = [k for k, x in enumerate(b) if x is not None] or [0]
        picks["fc-score-then-index"][sid] = min(live, key=lambda k: (round(b[k]["score"] * 1e9), k) if b[k] else (0, k))
        picks["fc-directed-chamfer-only"][sid] = min(live, key=lambda k: (b[k]["semantic"], k) if b[k] else (0, k))
    ensure_corpus(corpus)
    for key in CORPUS_POLICIES:
        metric, agg = key.split("@")
        out = work / f"corpus-{agg.replace(':', '-').replace('=', '')}.jsonl"
        run_sdr(["select", "--corpus", corpus, "--metric", metric, "--agg", agg, "--quiet",
                 "--cache-dir", cache, "-o", out, corpus_in])
        got = read_jsonl(out)
        if any(o["policy"] != key for o in got):
            raise SystemExit(f"findings_selection: {out}: expected policy {key}")
        picks[key] = {str(o["id"]): o["chosen"] for o in got}
    return picks, breakdown


# -- labels and measures ----------------------------------------------------------------------


def present(labels) -> frozenset:
    return frozenset(k for k, v in labels.items() if v in (1, -1))


def score_candidates(rows, refs, breakdown):
    """Per study: {"id", "candidates": [{judge_f1, rules_f1, fc_score, fc_contradicts,
    polarity_contradicts, well_formed}]}."""
    import sdr_rewards
    from evaluate_impression import contradicts

    t0 = time.perf_counter()
    pairs = [(r["id"], k) for r in rows for k in range(len(r["candidates"]))]
    f1s = example_f1s([c for r in rows for c in r["candidates"]],
                      [refs[r["id"]]["impression"] for r in rows for _ in r["candidates"]])
    f1 = {lab: dict(zip(pairs, f1s[lab])) for lab in LABELERS}
    judge = {t: present(sdr_rewards.label(t, labeler="judge")) for t in {refs[r["id"]]["impression"] for r in rows}}
    log(f"judge and rule F1 of {len(pairs)} candidates: {time.perf_counter() - t0:.1f} s")
    studies = []
    for r in rows:
        sid, ref = r["id"], refs[r["id"]]
        cands = []
        for k, c in enumerate(r["candidates"]):
            b = breakdown[sid][k]
            cands.append({
                "k": k,
                "well_formed": b is not None,
                "judge_f1": f1["judge"][(sid, k)],
                "rules_f1": f1["rules"][(sid, k)],
                "fc_score": None if b is None else b["score"],
                "fc_contradictions": 0.0 if b is None else b["contradictions"],
                "fc_contradicts": b is not None and b["contradictions"] > 0,
                "polarity_contradicts": bool(c) and contradicts(c, ref["findings"]),
            })
        studies.append({"id": sid, "candidates": cands,
                        "reference_judge": sorted(judge[ref["impression"]])})
    return studies


# -- aggregates -------------------------------------------------------------------------------


def percentile(sorted_values, q: float) -> float:
    n = len(sorted_values)
    pos = q * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def interval(values):
    v = sorted(values)
    return [percentile(v, 0.025), percentile(v, 0.975)]


MEASURES = ("judge_f1", "rules_f1", "fc_contradicts", "polarity_contradicts")


def per_study_values(study, policy: str, picks) -> dict:
    """Each measure of `policy`'s pick in `study` (random: the mean over the candidates)."""
    cands = study["candidates"]
    if policy == "random":
        return {m: sum(float(c[m]) for c in cands) / len(cands) for m in MEASURES}
    if policy == "oracle":
        best = max(c["judge_f1"] for c in cands)
        k = next(i for i, c in enumerate(cands) if c["judge_f1"] == best)
    else:
        k = picks[policy][study["id"]]
    return {m: float(cands[k][m]) for m in MEASURES}


def pick_index(study, policy: str, picks):
    if policy == "random":
        return None
    if policy == "oracle":
        cands = study["candidates"]
        best = max(c["judge_f1"] for c in cands)
        return next(i for i, c in enumerate(cands) if c["judge_f1"] == best)
    return picks[policy][study["id"]]


def aggregate(studies, rows, refs, picks, args) -> dict:
    import sdr_rewards

    n = len(studies)
    rng = random.Random(args.seed)
    draws = [[rng.randrange(n) for _ in range(n)] for _ in range(args.resamples)]
    values = {p: [per_study_values(s, p, picks) for s in studies] for p in POLICIES}

    def boot_mean(xs):
        return [sum(xs[i] for i in d) / n for d in draws]

    def diff(a: str, b: str) -> dict:
        out = {}
        for m in MEASURES:
            d = [x[m] - y[m] for x, y in zip(values[a], values[b])]
            out[m] = {"difference": sum(d) / n, "interval": interval(boot_mean(d))}
        return out

    cand_text = {(r["id"], k): c for r in rows for k, c in enumerate(r["candidates"])}
    ref_list = [refs[s["id"]]["impression"] for s in studies]
    k_max = max(len(s["candidates"]) for s in studies)
    corpus_f1 = {}
    for lab in LABELERS:
        slots = []
        for k in range(k_max):
            have = [s for s in studies if k < len(s["candidates"])]
            slots.append(sdr_rewards.chexpert_f1(
                [cand_text[(s["id"], k)] for s in have], [refs[s["id"]]["impression"] for s in have],
                labeler=lab)["macro_f1_14"])
        corpus_f1[("random", lab)] = sum(slots) / len(slots)
        for p in POLICIES[1:]:
            hyps = [cand_text[(s["id"], pick_index(s, p, picks))] for s in studies]
            corpus_f1[(p, lab)] = sdr_rewards.chexpert_f1(hyps, ref_list, labeler=lab)["macro_f1_14"]

    policies = {}
    for p in POLICIES:
        v = values[p]
        policies[p] = {
            **{m: sum(x[m] for x in v) / n for m in MEASURES},
            "corpus_judge_macro_14": corpus_f1[(p, "judge")],
            "corpus_rules_macro_14": corpus_f1[(p, "rules")],
        }
        if p != "random":
            policies[p]["minus_random"] = diff(p, "random")
    fc_vs = {b: diff(FC, b) for b in ABLATIONS + CORPUS_POLICIES}

    # How the Findings-consistency policy decided: by the fact score alone (one candidate with
    # the lowest score), or by the embedding tie-break among several.
    by_score = 0
    for s in studies:
        sc = [c["fc_score"] for c in s["candidates"] if c["fc_score"] is not None]
        if sc and sum(1 for x in sc if abs(x - min(sc)) < 1e-9) == 1:
            by_score += 1
    cands = [c for s in studies for c in s["candidates"]]
    return {
        "name": args.name,
        "title": args.title,
        "candidates_file": os.path.relpath(args.candidates, ROOT),
        "corpus": os.path.relpath(args.corpus, ROOT),
        "studies": n,
        "candidates": len(cands),
        "candidates_per_study": k_max,
        "well_formed": sum(1 for c in cands if c["well_formed"]),
        "bootstrap": {"resamples": args.resamples, "seed": args.seed, "unit": "study"},
        "measures": {
            "judge_f1": "mean judge example F1 of the picks against the reference Impression",
            "rules_f1": "mean CheXpert-rule example F1 of the picks against the reference Impression",
            "fc_contradicts": "share of picks with a contradiction of their own Findings by the Findings-consistency check",
            "polarity_contradicts": "share of picks with a present-vs-absent conflict with their own Findings "
                                    "(contradicts() of recipes/evaluate_impression.py)",
            "corpus_judge_macro_14": "corpus-level judge F1, macro over the 14 observations (random: mean over the K slots)",
            "corpus_rules_macro_14": "corpus-level CheXpert-rule F1, macro over the 14 observations",
        },
        "policies": policies,
        "findings_consistency_minus": fc_vs,
        "findings_consistency_decided_by_score": by_score,
        "candidates_with_a_contradiction": {
            "findings_consistency": sum(1 for c in cands if c["fc_contradicts"]),
            "polarity": sum(1 for c in cands if c["polarity_contradicts"]),
        },
        "reference_names_a_finding_judge": sum(
            1 for s in studies if set(s["reference_judge"]) - {"No Finding", "Support Devices"}),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", type=Path, help='JSON Lines {"id": uid, "candidates": [impression, ...]}')
    ap.add_argument("--name", help="writes OUT_DIR/NAME.json and OUT_DIR/NAME-picks.jsonl.gz")
    ap.add_argument("--title", default="", help="what the candidates are, for the page")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs/results/findings-selection")
    ap.add_argument("--corpus", type=Path, default=WORK / "iu-train.safetensors",
                    help="train corpus for the paper's policies (built there when missing)")
    ap.add_argument("--work", type=Path, default=None, help="scratch folder (default recipes/out/findings-selection/NAME)")
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--limit", type=int, default=0, help="first N studies only (a quick try; not for the page)")
    ap.add_argument("--standin", type=int, default=0, metavar="N",
                    help="write a stand-in candidates file of N test studies to recipes/out/findings-selection/ and stop")
    args = ap.parse_args()

    if args.standin:
        make_standin(args.standin, WORK / "standin-impressions.jsonl", args.seed)
        return 0
    if not args.candidates or not args.name:
        ap.error("--candidates and --name are required (or --standin N)")
    started = time.perf_counter()
    rows = read_candidates(args.candidates, args.limit)
    refs = read_references([r["id"] for r in rows], read_reports())
    log(f"{len(rows)} studies, {sum(len(r['candidates']) for r in rows)} candidates")
    picks, breakdown = select_all(rows, refs, args.corpus, args.work or WORK / args.name)
    studies = score_candidates(rows, refs, breakdown)
    t0 = time.perf_counter()
    summary = rounded(aggregate(studies, rows, refs, picks, args))
    log(f"aggregates and bootstrap: {time.perf_counter() - t0:.1f} s")
    lines = "".join(
        json.dumps({**s, "picks": {p: pick_index(s, p, picks) for p in POLICIES if p != "random"}},
                   sort_keys=True) + "\n"
        for s in rounded(studies))
    write_atomic(args.out_dir / f"{args.name}-picks.jsonl.gz", gzip_bytes(lines))
    write_atomic(args.out_dir / f"{args.name}.json", (json.dumps(summary, indent=1, sort_keys=True) + "\n").encode())
    log(f"wrote {args.out_dir / args.name}.json and {args.name}-picks.jsonl.gz ({time.perf_counter() - started:.0f} s in all)")
    for p in POLICIES:
        s = summary["policies"][p]
        extra = ""
        if p != "random":
            d = s["minus_random"]["judge_f1"]
            extra = f"  judge F1 - random {d['difference']:+.3f} {d['interval']}"
        log(f"  {p:18s} judge F1 {s['judge_f1']:.3f}  rule F1 {s['rules_f1']:.3f}  "
            f"contradicting {100 * s['fc_contradicts']:.1f} % (polarity {100 * s['polarity_contradicts']:.1f} %){extra}")
    for b, d in summary["findings_consistency_minus"].items():
        log(f"  {FC} - {b}: judge F1 {d['judge_f1']['difference']:+.3f} {d['judge_f1']['interval']}, "
            f"rule F1 {d['rules_f1']['difference']:+.3f} {d['rules_f1']['interval']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
