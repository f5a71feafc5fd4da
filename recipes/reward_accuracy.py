"""Reward accuracy on real outputs (RewardBench-style): does each metric prefer the candidate
that the independent judge finds clinically better?

For every study of a candidates file (JSON Lines ``{"id": uid, "candidates": [text, ...]}``,
the ``sdr generate`` format; other keys ignored) and every pair of that study's candidates
whose **judge F1** against the reference differs, each metric *prefers the better one* when it
scores it higher (1), ties count half (0.5), else 0. The judge F1 is the example-level F1 of
the judge's CheXpert-14 labels (SPEC §8a: all-MiniLM-L6-v2 + LoRA trained on IU X-ray's
human coding), ``2|H n R| / (|H| + |R|)`` over the present observations, 1 when both sets
are empty (the F1 of ``sdr score --judge-f1``).

Reference modes (``--reference``):

- ``report``: candidates are full reports (``Findings:`` / ``Impression:`` headers or the
  ``<think>F</think><answer>I</answer>`` template); the reference is the study's Findings and
  Impression (``data/iu-xray/indiana_reports.csv``). A candidate's **content** is what
  ``sdr_rewards.parse_report`` finds in it: its Findings sentences then its Impression sentences,
  joined by a space (the text the reward's F1 term labels). A malformed candidate (a header
  missing, ``format_valid`` false) is judged on the sections that were parsed (none parsed:
  the empty text, which names no observation: judge F1 0 unless the reference names none
  either), and the text metrics score that same content; the SDR rewards score it as the
  reward does in training, 0 (no format term, no section terms, no F1 term).
- ``impression``: candidates are plain Impression texts (Findings -> Impression); the
  reference is the study's Impression. The content is the text with its whitespace collapsed;
  the SDR rewards are ``recipes/common.py``'s ``ImpressionReward`` (``R_fmt + R_sem^I``,
  the text scored as ``<think>I</think><answer>I</answer>`` against the reference Impression
  in both sections at ``semantic_weight=0.5``); an empty text scores 0.

Metrics (higher = preferred):

- ``cosine``: the paper's reward, ``sdr_rewards.SDRReward(metric="chamfer")``, the full reward
  ``R_fmt + R_sem^F + R_sem^I`` (format term included, as GRPO sees it);
- ``clinical``: the same with ``cost="clinical"`` (SPEC §10 defaults, lambda 1.5,
  unmatched 0.5);
- ``clinical_041``: ``cost="clinical:lambda=0.41,unmatched=1"``;
- ``clinical_recall`` / ``clinical_precision``: ``cost="clinical:added=0.25,omitted=1"`` (an
  omitted finding weighs 4x an added one) and ``"clinical:added=1,omitted=0.25"`` (the
  reverse), lambda 1.5;
- ``f1_term``: the F1 term alone, the ``clinical`` component of ``SDRReward(...,
  clinical_weight=1)``: CheXpert-rule example F1 of the content against the reference
  (uncertain counted as present; 0 for a malformed candidate);
- ``clinical_f1``: the clinical cost (defaults) + 1 x the F1 term;
- ``bertscore``, ``rouge_l``, ``bleu4``: BERTScore-F1 (all-MiniLM-L6-v2, layer 6, no idf, not
  rescaled), ROUGE-L and BLEU-4 of ``sdr_rewards.metrics.score(..., sections=False)`` on the content
  against the reference content (whole texts).

Aggregates (``--out-dir``/``NAME.json``), every interval a percentile bootstrap over the studies
(``--resamples`` 1,000, ``--seed`` 43, the same resampled studies for every metric, so
differences are paired):

- pairwise accuracy per metric = correct pairs / pairs over the resampled studies, over every
  pair (``judge``), the pairs of two well-formed candidates, the studies whose reference names
  a finding by the judge's labels (an observation other than No Finding and Support Devices)
  and those whose reference names none; and the same accuracy with the **rule labeler** as
  judge (``rules``: pairs whose CheXpert-rule example F1 differs);
- best-of-K: the mean judge example F1 of each metric's pick (the highest score; ties go to the
  lowest index, a random choice among exchangeable samples) minus the mean over all K
  candidates (random's expectation), and the corpus-level judge F1 macro-14 of the picks
  (random: the mean over the K candidate slots; oracle: the candidate with the highest judge
  F1);
- differences of pairwise accuracy between every two metrics, and of best-of-K judge F1 between
  every metric and the paper's reward.

Scores are rounded to 6 decimals before anything is compared, so the per-candidate file
(``NAME-scores.jsonl.gz``, gzip mtime 0) reproduces every aggregate and last-bit differences
between machines do not flip a comparison. Deterministic: a second run writes identical files.

    .venv-trainers/bin/python recipes/reward_accuracy.py \\
        --candidates data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl \\
        --reference report --name gemma \\
        --title "Gemma 3 270M full reports (the main job's candidates)"

(needs the ``sdr_rewards`` package with the judge, the ``sdr`` CLI for the example F1s
(``bash scripts/build-sdr.sh``, or ``$SDR_BIN``), all-mpnet-base-v2 (``scripts/fetch-model.sh``)
and all-MiniLM-L6-v2 (``scripts/fetch-minilm.sh``), the judge's base and BERTScore's model).
``python3 scripts/results.py`` then renders ``docs/results/reward-accuracy.md``.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "data/iu-xray/indiana_reports.csv"
MINILM = Path.home() / ".cache/sdr/models/all-MiniLM-L6-v2"
LABELERS = ("judge", "rules")

#: (key, label) of every metric, in the page's order.
METRICS = (
    ("cosine", "SDR reward, cosine Chamfer (the paper's)"),
    ("clinical", "SDR reward, clinical cost (defaults: lambda 1.5, unmatched 0.5)"),
    ("clinical_041", "SDR reward, clinical cost (lambda 0.41, unmatched 1)"),
    ("clinical_recall", "SDR reward, clinical cost (added 0.25, omitted 1)"),
    ("clinical_precision", "SDR reward, clinical cost (added 1, omitted 0.25)"),
    ("f1_term", "F1 term alone (CheXpert-rule example F1)"),
    ("clinical_f1", "clinical cost (defaults) + F1 term"),
    ("bertscore", "BERTScore-F1 (all-MiniLM-L6-v2)"),
    ("rouge_l", "ROUGE-L"),
    ("bleu4", "BLEU-4"),
)
TEXT_METRICS = {"bertscore": "BERTScore-F1", "rouge_l": "ROUGE-L", "bleu4": "BLEU-4"}
#: The SDR rewards: key -> SDRReward keyword arguments.
REWARDS = {
    "cosine": {"metric": "chamfer"},
    "clinical": {"metric": "chamfer", "cost": "clinical"},
    "clinical_041": {"metric": "chamfer", "cost": "clinical:lambda=0.41,unmatched=1"},
    # a finding omitted and one added weighed apart (issue 57 item 3)
    "clinical_recall": {"metric": "chamfer", "cost": "clinical:added=0.25,omitted=1"},
    "clinical_precision": {"metric": "chamfer", "cost": "clinical:added=1,omitted=0.25"},
    # its reward is the clinical cost + F1 term; its "clinical" component the F1 term alone
    "clinical_f1": {"metric": "chamfer", "cost": "clinical", "clinical_weight": 1.0},
}
DIGITS = 6


# -- inputs -----------------------------------------------------------------------------------


def read_candidates(path: Path, limit):
    rows = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        r = json.loads(line)
        if "id" not in r or not isinstance(r.get("candidates"), list) or not r["candidates"]:
            raise SystemExit(f"reward_accuracy: {path}:{n}: needs \"id\" and a non-empty \"candidates\" list")
        if not all(isinstance(c, str) for c in r["candidates"]):
            raise SystemExit(f"reward_accuracy: {path}:{n}: candidates must be strings")
        rows.append({"id": str(r["id"]), "candidates": r["candidates"]})
    ids = [r["id"] for r in rows]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"reward_accuracy: {path}: an id appears twice")
    return rows[:limit] if limit else rows


def read_references(ids):
    with open(REPORTS, newline="") as fh:
        by_uid = {row["uid"]: row for row in csv.DictReader(fh)}
    out = {}
    for i in ids:
        row = by_uid.get(i)
        if row is None:
            raise SystemExit(f"reward_accuracy: study {i} is not in {REPORTS.relative_to(ROOT)}")
        f, imp = " ".join(row["findings"].split()), " ".join(row["impression"].split())
        if not f or not imp:
            raise SystemExit(f"reward_accuracy: study {i} lacks its Findings or Impression")
        out[i] = {"findings": f, "impression": imp}
    return out


def content(text: str, mode: str):
    """(content the judge and the text metrics read, well-formed?) of one candidate."""
    import sdr_rewards as sdr

    if mode == "impression":
        t = " ".join(text.split())
        return t, bool(t)
    p = sdr.parse_report(text)
    return " ".join(p["findings"] + p["impression"]), bool(p["format_valid"])


def reward_text(text: str) -> str:
    """What the SDR rewards score of a full report (report mode): the paper's template
    ``<think>F</think><answer>I</answer>``, a well-formed candidate rewritten in it from its
    parsed sections (the reward reads only the template, a ``Findings:`` / ``Impression:``
    report scores 0 as written); a malformed one as it is (0, as in training)."""
    import sdr_rewards as sdr

    p = sdr.parse_report(text)
    if not p["format_valid"]:
        return text
    return f"<think>{' '.join(p['findings'])}</think><answer>{' '.join(p['impression'])}</answer>"


def reference_content(ref, mode: str) -> str:
    import sdr_rewards as sdr

    if mode == "impression":
        return ref["impression"]
    return " ".join(sdr.split_sentences(ref["findings"]) + sdr.split_sentences(ref["impression"]))


# -- scoring ----------------------------------------------------------------------------------


def present(labels) -> frozenset:
    """Observations labelled present (1) or uncertain (-1, counted as present, as the tables)."""
    return frozenset(k for k, v in labels.items() if v in (1, -1))


def sdr_bin() -> str:
    for cand in (os.environ.get("SDR_BIN"), str(ROOT / "target/release/sdr")):
        if cand and Path(cand).is_file():
            return cand
    raise SystemExit("the sdr CLI is not built: bash scripts/build-sdr.sh (or set SDR_BIN)")


def example_f1s(hyps, refs) -> dict:
    """Per labeler (``judge``, ``rules``), the example F1 of each ``hyps[i]`` against
    ``refs[i]``, both labelled whole as ``sdr_rewards.label`` labels them: ``sdr score --whole
    --no-bertscore --judge-f1``'s ``judge F1`` and ``CheXpert-rule F1``, i.e.
    ``sdr_clinical::example_f1`` (uncertain counted as present; 1 when both name nothing).
    No binding gives a per-pair F1 (``sdr_rewards.chexpert_f1`` is corpus-level)."""
    with tempfile.TemporaryDirectory(prefix="example-f1-") as tmp:
        pairs, scored = Path(tmp) / "pairs.jsonl", Path(tmp) / "scores.jsonl"
        pairs.write_text("".join(json.dumps({"hyp": h, "ref": r}) + "\n" for h, r in zip(hyps, refs)))
        r = subprocess.run([sdr_bin(), "score", "--whole", "--no-bertscore", "--judge-f1", "-o", str(scored),
                            str(pairs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise SystemExit(f"sdr score --judge-f1: {r.stderr.strip()}")
        lines = [json.loads(l)["whole"] for l in scored.read_text().splitlines() if l.strip()]
    if len(lines) != len(hyps):
        raise SystemExit(f"sdr score --judge-f1: {len(lines)} lines for {len(hyps)} pairs")
    return {"judge": [x["judge F1"] for x in lines], "rules": [x["CheXpert-rule F1"] for x in lines]}


def sdr_rewards(texts, refs, mode: str, cache_dir: str, log) -> dict:
    """Every SDR reward of `texts` (one list, all studies) against `refs` (one per text)."""
    import sdr_rewards as sdr

    if mode == "report":
        texts = [reward_text(t) for t in texts]
    cache = os.path.join(cache_dir, "sentences.cache")
    out = {}
    for key, kwargs in REWARDS.items():
        t0 = time.perf_counter()
        # One sentence cache for all four: each sentence is embedded once.
        if mode == "impression":
            imp = common.ImpressionReward(name=f"r_{key}", cache_path=cache, **kwargs)
            rw, res = imp.reward, imp.score(texts, [r["impression"] for r in refs])
        else:
            rw = sdr.SDRReward(name=f"r_{key}", cache_path=cache, **kwargs)
            res = rw.score(texts, references=refs)
        if any(res.get("failed", ())):
            log(f"  {key}: {sum(res['failed'])} section(s) with no finite distance (term 0)")
        out[key] = res["reward"]
        if key == "clinical_f1":
            out["f1_term"] = res["clinical"]
        rw.save_cache()
        log(f"  {key}: {time.perf_counter() - t0:.1f} s ({rw.last_stats()['embedded']:.0f} sentences embedded)")
    return out


def text_metrics(contents, ref_contents, bertscore_model) -> dict:
    from sdr_rewards import metrics

    res = metrics.score(
        contents, ref_contents, metrics=list(TEXT_METRICS.values()), sections=False,
        bertscore_model=str(bertscore_model),
    )
    return {key: [r["whole"][name] for r in res] for key, name in TEXT_METRICS.items()}


def score_all(rows, refs, mode: str, bertscore_model, log) -> list:
    """Per study: {"id", "candidates": [{k, format_valid, judge_f1, rules_f1, labels, scores}]},
    and per study the reference's labels."""
    import sdr_rewards as sdr

    texts, owners, contents, valid = [], [], [], []
    for s, r in enumerate(rows):
        for k, c in enumerate(r["candidates"]):
            t, ok = content(c, mode)
            texts.append(c)
            owners.append((s, k))
            contents.append(t)
            valid.append(ok)
    ref_list = [refs[rows[s]["id"]] for s, _ in owners]
    ref_text = {r["id"]: reference_content(refs[r["id"]], mode) for r in rows}
    ref_contents = [ref_text[rows[s]["id"]] for s, _ in owners]

    t0 = time.perf_counter()
    labels = {lab: {} for lab in LABELERS}
    for lab in LABELERS:
        for t in sorted(set(contents) | set(ref_text.values())):
            labels[lab][t] = present(sdr.label(t, labeler=lab))
    f1s = example_f1s(contents, ref_contents)
    log(f"labels and example F1 (judge and rules) of {len(set(contents))} distinct contents: "
        f"{time.perf_counter() - t0:.1f} s")

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="reward-accuracy-") as tmp:
        scores = sdr_rewards(texts, ref_list, mode, tmp, log)
    log(f"SDR rewards: {time.perf_counter() - t0:.1f} s")
    t0 = time.perf_counter()
    scores.update(text_metrics(contents, ref_contents, bertscore_model))
    log(f"BLEU-4, ROUGE-L, BERTScore-F1: {time.perf_counter() - t0:.1f} s")

    studies = [
        {
            "id": r["id"],
            "reference_labels": {lab: sorted(labels[lab][ref_text[r["id"]]]) for lab in LABELERS},
            "candidates": [],
        }
        for r in rows
    ]
    for n, (s, k) in enumerate(owners):
        sid = rows[s]["id"]
        cand = {"k": k, "format_valid": valid[n]}
        for lab in LABELERS:
            cand[f"{lab}_f1"] = round(f1s[lab][n], DIGITS)
            cand[f"{lab}_labels"] = sorted(labels[lab][contents[n]])
        cand["scores"] = {key: round(float(scores[key][n]), DIGITS) for key, _ in METRICS}
        studies[s]["candidates"].append(cand)
    # The F1 term is the rule F1 of the same content for a well-formed candidate (a check
    # that the recipe labels what the reward labels).
    for st in studies:
        for c in st["candidates"]:
            if c["format_valid"] and abs(c["scores"]["f1_term"] - c["rules_f1"]) > 1e-6:
                log(f"note: study {st['id']} candidate {c['k']}: F1 term {c['scores']['f1_term']} "
                    f"but rule F1 of the parsed content {c['rules_f1']}")
    return studies, {"contents": contents, "ref_text": ref_text, "owners": owners}


# -- aggregates -------------------------------------------------------------------------------


def percentile(sorted_values, q: float) -> float:
    """Linear interpolation between order statistics (numpy's default, as sdr-eval)."""
    n = len(sorted_values)
    pos = q * (n - 1)
    lo = int(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def interval(values):
    v = sorted(x for x in values if x is not None)
    return [percentile(v, 0.025), percentile(v, 0.975)] if v else None


NOT_FINDINGS = ("No Finding", "Support Devices")


def names_finding(labels) -> bool:
    return bool(set(labels) - set(NOT_FINDINGS))


#: The pair sets of the aggregates: name -> (labeler whose F1 decides, which pairs, doc).
PAIR_SETS = {
    "judge": ("judge", "all", "every pair whose judge F1 differs"),
    "judge_well_formed": ("judge", "well_formed", "both candidates well-formed"),
    "judge_reference_finding": ("judge", "reference_finding",
                                "studies whose reference names a finding (judge labels)"),
    "judge_reference_no_finding": ("judge", "reference_no_finding",
                                   "studies whose reference names none (judge labels)"),
    "rules": ("rules", "all", "every pair whose CheXpert-rule F1 differs"),
}


def pair_counts(study, metric: str, truth: str, which: str = "all"):
    """(credit, pairs, ties) of `metric` on the pairs of `study` whose `truth` F1 differs
    (restricted by `which`, a PAIR_SETS filter)."""
    if which in ("reference_finding", "reference_no_finding"):
        if names_finding(study["reference_labels"]["judge"]) != (which == "reference_finding"):
            return 0.0, 0, 0
    cands = study["candidates"]
    credit, pairs, ties = 0.0, 0, 0
    for a in range(len(cands)):
        for b in range(a + 1, len(cands)):
            ca, cb = cands[a], cands[b]
            if which == "well_formed" and not (ca["format_valid"] and cb["format_valid"]):
                continue
            ta, tb = ca[f"{truth}_f1"], cb[f"{truth}_f1"]
            if ta == tb:
                continue
            ma, mb = ca["scores"][metric], cb["scores"][metric]
            pairs += 1
            if ma == mb:
                credit += 0.5
                ties += 1
            elif (ma > mb) == (ta > tb):
                credit += 1.0
    return credit, pairs, ties


def malformed_pairs(studies) -> dict:
    """Pairs of one well-formed and one malformed candidate whose judge F1 differs, and in
    how many of them the malformed one has the higher judge F1 (the SDR rewards score it 0)."""
    pairs = won = 0
    for st in studies:
        cands = st["candidates"]
        for a in range(len(cands)):
            for b in range(a + 1, len(cands)):
                ca, cb = cands[a], cands[b]
                if ca["format_valid"] == cb["format_valid"] or ca["judge_f1"] == cb["judge_f1"]:
                    continue
                bad = ca if not ca["format_valid"] else cb
                good = cb if bad is ca else ca
                pairs += 1
                won += int(bad["judge_f1"] > good["judge_f1"])
    return {"pairs": pairs, "malformed_higher_judge_f1": won}


def finding_against_normal(studies, keys) -> dict:
    """In the studies whose reference names no finding (judge labels): the pairs of two
    well-formed candidates of which exactly one names a finding (judge labels), and per metric
    how many times it scores the one naming a finding higher (and ties)."""
    out = {"pairs": 0, "prefers_finding": {m: 0 for m in keys}, "ties": {m: 0 for m in keys}}
    for st in studies:
        if names_finding(st["reference_labels"]["judge"]):
            continue
        cands = [c for c in st["candidates"] if c["format_valid"]]
        for a in range(len(cands)):
            for b in range(a + 1, len(cands)):
                ca, cb = cands[a], cands[b]
                if names_finding(ca["judge_labels"]) == names_finding(cb["judge_labels"]):
                    continue
                fin, non = (ca, cb) if names_finding(ca["judge_labels"]) else (cb, ca)
                out["pairs"] += 1
                for m in keys:
                    x, y = fin["scores"][m], non["scores"][m]
                    out["prefers_finding"][m] += int(x > y)
                    out["ties"][m] += int(x == y)
    return out


def pick(study, metric: str) -> int:
    """Index of the candidate `metric` picks (highest score, lowest index among ties)."""
    cands = study["candidates"]
    key = (lambda c: c["judge_f1"]) if metric == "oracle" else (lambda c: c["scores"][metric])
    best = max(key(c) for c in cands)
    return next(i for i, c in enumerate(cands) if key(c) == best)


def aggregate(studies, texts, args) -> dict:
    import sdr_rewards as sdr

    n = len(studies)
    rng = random.Random(args.seed)
    draws = [[rng.randrange(n) for _ in range(n)] for _ in range(args.resamples)]
    keys = [k for k, _ in METRICS]

    def boot_ratio(num, den):
        out = []
        for d in draws:
            a, b = sum(num[i] for i in d), sum(den[i] for i in d)
            out.append(a / b if b else None)
        return out

    def boot_mean(values):
        return [sum(values[i] for i in d) / n for d in draws]

    pairwise, boot_acc = {}, {}
    for name, (truth, which, _) in PAIR_SETS.items():
        pairwise[name] = {}
        for m in keys:
            counts = [pair_counts(s, m, truth, which) for s in studies]
            num = [c[0] for c in counts]
            den = [c[1] for c in counts]
            total = sum(den)
            boots = boot_ratio(num, den)
            boot_acc[(name, m)] = boots
            pairwise[name][m] = {
                "accuracy": sum(num) / total if total else None,
                "interval": interval(boots),
                "pairs": total,
                "metric_ties": sum(c[2] for c in counts),
                "studies_with_pairs": sum(1 for d in den if d),
            }

    differences = {}
    for name in PAIR_SETS:
        rows = []
        for i, a in enumerate(keys):
            for b in keys[i + 1:]:
                ba, bb = boot_acc[(name, a)], boot_acc[(name, b)]
                d = [x - y if x is not None and y is not None else None for x, y in zip(ba, bb)]
                pa, pb = pairwise[name][a]["accuracy"], pairwise[name][b]["accuracy"]
                diff = None if pa is None or pb is None else pa - pb
                rows.append({"a": a, "b": b, "difference": diff, "interval": interval(d)})
        differences[name] = rows

    refs = [texts["ref_text"][s["id"]] for s in studies]
    by_owner = {o: t for o, t in zip(texts["owners"], texts["contents"])}
    mean_f1 = [sum(c["judge_f1"] for c in s["candidates"]) / len(s["candidates"]) for s in studies]
    k_max = max(len(s["candidates"]) for s in studies)
    slots = []
    for k in range(k_max):
        have = [(s, st) for s, st in enumerate(studies) if k < len(st["candidates"])]
        hyps = [by_owner[(s, k)] for s, _ in have]
        slots.append(sdr.chexpert_f1(hyps, [refs[s] for s, _ in have], labeler="judge")["macro_f1_14"])
    best_of = {
        "random": {
            "judge_f1": sum(mean_f1) / n,
            "corpus_judge_macro_14": sum(slots) / len(slots),
            "corpus_judge_macro_14_slots": slots,
        }
    }
    pick_f1 = {}
    for m in keys + ["oracle"]:
        picks = [pick(s, m) for s in studies]
        f1 = [s["candidates"][p]["judge_f1"] for s, p in zip(studies, picks)]
        pick_f1[m] = f1
        delta = [a - b for a, b in zip(f1, mean_f1)]
        hyps = [by_owner[(s, p)] for s, p in enumerate(picks)]
        corpus = sdr.chexpert_f1(hyps, refs, labeler="judge")
        best_of[m] = {
            "judge_f1": sum(f1) / n,
            "minus_random": sum(delta) / n,
            "minus_random_interval": interval(boot_mean(delta)),
            "rules_f1": sum(s["candidates"][p]["rules_f1"] for s, p in zip(studies, picks)) / n,
            "well_formed_picks": sum(1 for s, p in zip(studies, picks) if s["candidates"][p]["format_valid"]),
            "corpus_judge_macro_14": corpus["macro_f1_14"],
            "corpus_judge_micro_14": corpus["micro_f1_14"],
        }
    best_of_differences = []
    for m in keys[1:]:
        d = [a - b for a, b in zip(pick_f1[m], pick_f1["cosine"])]
        best_of_differences.append(
            {"a": m, "b": "cosine", "difference": sum(d) / n, "interval": interval(boot_mean(d))}
        )

    cands = [c for s in studies for c in s["candidates"]]
    return {
        "name": args.name,
        "title": args.title,
        "candidates_file": os.path.relpath(args.candidates, ROOT),
        "reference": args.reference,
        "studies": n,
        "candidates": len(cands),
        "candidates_per_study": k_max,
        "well_formed": sum(1 for c in cands if c["format_valid"]),
        "metrics": [{"key": k, "label": label} for k, label in METRICS],
        "bootstrap": {"resamples": args.resamples, "seed": args.seed, "unit": "study"},
        "pairwise": pairwise,
        "pairwise_differences": differences,
        "best_of": best_of,
        "best_of_differences": best_of_differences,
        "pair_sets": {name: doc for name, (_, _, doc) in PAIR_SETS.items()},
        "malformed_pairs": malformed_pairs(studies),
        "finding_against_normal_reference": finding_against_normal(studies, keys),
        "reference_names_a_finding": {
            lab: sum(1 for s in studies if names_finding(s["reference_labels"][lab])) for lab in LABELERS
        },
        "candidates_name_a_finding": {
            lab: sum(1 for c in cands if names_finding(c[f"{lab}_labels"])) for lab in LABELERS
        },
        "candidates_judge_f1_distinct_per_study": {
            "mean": sum(len({c["judge_f1"] for c in s["candidates"]}) for s in studies) / n,
        },
    }


def rounded(x):
    if isinstance(x, float):
        return round(x, DIGITS)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


def gzip_bytes(text: str) -> bytes:
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, mtime=0) as gz:
        gz.write(text.encode())
    return buf.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--candidates", type=Path, required=True, help='JSON Lines {"id", "candidates": [...]}')
    ap.add_argument("--reference", choices=("report", "impression"), required=True,
                    help="report: full reports against Findings + Impression; impression: Impression texts against the Impression")
    ap.add_argument("--name", required=True, help="writes OUT_DIR/NAME.json and OUT_DIR/NAME-scores.jsonl.gz")
    ap.add_argument("--title", default="", help="what the candidates are, for the page")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "docs/results/reward-accuracy")
    ap.add_argument("--bertscore-model", type=Path, default=MINILM)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=43)
    ap.add_argument("--limit", type=int, default=0, help="first N studies only (a quick try; not for the page)")
    args = ap.parse_args()

    def log(msg):
        print(msg, file=sys.stderr, flush=True)

    started = time.perf_counter()
    rows = read_candidates(args.candidates, args.limit)
    refs = read_references([r["id"] for r in rows])
    log(f"{len(rows)} studies, {sum(len(r['candidates']) for r in rows)} candidates, reference: {args.reference}")
    studies, texts = score_all(rows, refs, args.reference, args.bertscore_model, log)
    t0 = time.perf_counter()
    summary = rounded(aggregate(studies, texts, args))
    log(f"aggregates and bootstrap: {time.perf_counter() - t0:.1f} s")

    # One line per candidate, with its study's reference labels.
    lines = "".join(
        json.dumps({"id": s["id"], **c, "reference_labels": s["reference_labels"]}, sort_keys=True) + "\n"
        for s in studies for c in s["candidates"]
    )
    write_atomic(args.out_dir / f"{args.name}-scores.jsonl.gz", gzip_bytes(lines))
    write_atomic(args.out_dir / f"{args.name}.json", (json.dumps(summary, indent=1, sort_keys=True) + "\n").encode())
    log(f"wrote {args.out_dir / args.name}.json and {args.name}-scores.jsonl.gz "
        f"({time.perf_counter() - started:.0f} s in all)")
    for m, _ in METRICS:
        p = summary["pairwise"]["judge"][m]
        log(f"  {m:13s} pairwise {p['accuracy']:.3f} {p['interval']}  best-of-K minus random "
            f"{summary['best_of'][m]['minus_random']:+.3f} {summary['best_of'][m]['minus_random_interval']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
