"""Re-judge the GRPO result pages' clinical numbers with the independent judge.

Every clinical number of ``docs/results/grpo-impression.md`` and ``docs/results/grpo.md``
("CheXpert-rule F1") came from the rule labeler (SPEC §8), which also shapes the clinical
cost and the F1 term of the rewards. This script rescores the COMMITTED generations (no
model runs) under both labelers: the rules (uncertain counted as present, as the tables
do) and the judge trained on IU X-ray's human coding (SPEC §8a, ``labeler="judge"``).

For every policy of every table: CheXpert F1 macro-14, micro-14, macro-5 and micro-5 on
the same test studies against the same references as the published table (Findings ->
Impression: the first 200 test studies, the reference Impression, the generated text with
its whitespace collapsed, as ``evaluate_impression.py``; full reports: the first 100 test
studies, each section as ``sdr_rewards.metrics.section_texts`` cuts it against the same section
of the reference, as ``evaluate.py``), and how many studies each labeler labels with at least one finding
(an observation other than No Finding and Support Devices present; the rules count
uncertain as present). For every comparison a page states (each policy against the page's
baseline, SFT or SFT2) and for the policy-versus-policy rankings the pages claim, the
relative change in % of the full-sample F1 and its 95 % paired-bootstrap interval
(``sdr_rewards.metrics.chexpert_f1_bootstrap``: 1,000 resamples of the studies, seed 43; ``null``
where a resample's baseline F1 is 0, as in the published tables).

The rule-labeler figures must reproduce the published ones (``summary.json`` of each
attempt: macro-14 and micro-5 F1 and the macro-14 interval against the baseline); the
script stops if they do not. Writes, rounded to 6 decimals with sorted keys, atomically:

- ``docs/results/grpo-impression/judged.json`` (the four Findings -> Impression attempts)
- ``docs/results/grpo/judged.json`` (the full-report policies, Findings and Impression)

``scripts/pages/grpo_judged.py`` renders them into the two pages (``python3
scripts/results.py``). Deterministic: a second run writes identical files.

    .venv-trainers/bin/python recipes/rejudge.py

(needs the ``sdr-rewards`` wheel with the judge, and all-MiniLM-L6-v2 from
``scripts/fetch-minilm.sh``, the judge's base model).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

LABELERS = ("rules", "judge")
KEYS = ("macro_f1_14", "micro_f1_14", "macro_f1_5", "micro_f1_5")
#: Observations that are not findings for the "names a finding" count.
NOT_FINDINGS = ("No Finding", "Support Devices")

COS, COS_F1 = "GRPO(cosine)", "GRPO(cosine + F1 term)"
CLIN, CLIN_F1 = "GRPO(clinical cost)", "GRPO(clinical cost + F1 term)"
RECALL = "GRPO(clinical, added 0.25, omitted 1)"
CLIN3, COS_F1_3 = f"{CLIN}, third attempt", "GRPO(cosine + F1 term), third attempt"

#: The four Findings -> Impression attempts, as their page reports them: results folder,
#: policies in the table's order (the first is the baseline) and the policy-versus-policy
#: comparisons (policy, against) behind the rankings the page claims.
IMPRESSION_ATTEMPTS = (
    {
        "key": "first",
        "title": "First attempt (50 steps, groups of 4, no KL term, lr 2e-5)",
        "dir": "docs/results/grpo-impression/first-attempt",
        "policies": ("SFT", COS, COS_F1, CLIN),
        "pairs": ((COS_F1, COS), (CLIN, COS), (CLIN, COS_F1)),
    },
    {
        "key": "second",
        "title": "Second attempt (60 steps, groups of 8, KL 0.04, half abnormal prompts)",
        "dir": "docs/results/grpo-impression",
        "policies": ("SFT", COS, COS_F1, CLIN, CLIN_F1),
        "pairs": ((COS_F1, COS), (CLIN, COS), (CLIN, COS_F1), (CLIN_F1, CLIN), (CLIN_F1, COS_F1)),
    },
    {
        "key": "third",
        "title": "Third attempt (from SFT2, 40 steps)",
        "dir": "docs/results/grpo-impression/stronger-sft",
        "policies": ("SFT2", "SFT", COS, COS_F1, CLIN),
        "pairs": ((COS_F1, COS), (CLIN, COS), (CLIN, COS_F1), (COS_F1, "SFT")),
    },
    {
        "key": "recall",
        "title": "Fourth attempt (from SFT2, 40 steps, the clinical cost pricing an omitted finding 4x an added one)",
        "dir": "docs/results/grpo-impression/recall",
        "policies": ("SFT2", "SFT", RECALL),
        # The third attempt's policies, from the same SFT2 on the same studies (its folder).
        "borrowed": {CLIN3: ("docs/results/grpo-impression/stronger-sft", CLIN),
                     COS_F1_3: ("docs/results/grpo-impression/stronger-sft", COS_F1)},
        "pairs": ((RECALL, "SFT"), (RECALL, CLIN3), (RECALL, COS_F1_3)),
    },
)

#: The full-report page: policies in the table's order (SFT the baseline) and the
#: policy-versus-policy comparisons of its claims (the set distances against the paper's
#: exact-match baseline, Hausdorff against Chamfer, the Chamfer variants against R_cham).
REPORT = {
    "dir": "docs/results/grpo",
    "policies": (
        "SFT",
        "GRPO(R_exact)",
        "GRPO(R_fmt)",
        "GRPO(R_cham)",
        "GRPO(R_haus)",
        "GRPO(R_cham, distinct)",
        "GRPO(R_cham, KL 0.04)",
        "GRPO(R_cham, KL 0.2)",
    ),
    "pairs": (
        ("GRPO(R_cham)", "GRPO(R_exact)"),
        ("GRPO(R_haus)", "GRPO(R_exact)"),
        ("GRPO(R_haus)", "GRPO(R_cham)"),
        ("GRPO(R_cham, distinct)", "GRPO(R_cham)"),
        ("GRPO(R_cham, KL 0.04)", "GRPO(R_cham)"),
        ("GRPO(R_cham, KL 0.2)", "GRPO(R_cham)"),
    ),
}
SECTIONS = ("findings", "impression")


def slug(name: str) -> str:
    """The generations file name `evaluate*.py` gave policy `name`."""
    return "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()


def read_generations(folder: Path, name: str, rows) -> list:
    """The generated texts of policy `name`, in the order of `rows` (every study present)."""
    path = folder / "generations" / f"{slug(name)}.jsonl"
    gens = {}
    for line in path.read_text().splitlines():
        if line.strip():
            g = json.loads(line)
            gens[int(g["id"])] = g["text"]
    missing = [r["uid"] for r in rows if int(r["uid"]) not in gens]
    if missing:
        raise SystemExit(f"rejudge: {path} lacks {len(missing)} of the {len(rows)} studies")
    return [gens[int(r["uid"])] for r in rows]


def names_finding(texts, labeler: str) -> int:
    """How many of `texts` the labeler labels with at least one finding (the rules count
    uncertain as present; the judge has no uncertain label)."""
    import sdr_rewards

    n = 0
    for t in texts:
        labels = sdr_rewards.label(t, labeler=labeler)
        if any(v in (1, -1) for o, v in labels.items() if o not in NOT_FINDINGS):
            n += 1
    return n


def f1_of(hyps, refs) -> dict:
    import sdr_rewards

    out = {}
    for lab in LABELERS:
        r = sdr_rewards.chexpert_f1(hyps, refs, labeler=lab)
        out[lab] = {k: r[k] for k in KEYS}
    return out


def change(a: float, b: float):
    return None if b == 0 else 100.0 * (a - b) / b


def compare(name: str, base: str, kind: str, hyps: dict, refs, f1: dict) -> dict:
    """Relative change of `name` against `base` under both labelers, with intervals."""
    from sdr_rewards import metrics

    out = {"policy": name, "against": base, "kind": kind, "studies": len(refs)}
    for lab in LABELERS:
        ci = metrics.chexpert_f1_bootstrap(hyps[name], hyps[base], refs, labeler=lab)
        out[lab] = {
            k: {
                "change_pct": change(f1[name][lab][k], f1[base][lab][k]),
                "interval_pct": None if ci[k] is None else [ci[k][0], ci[k][1]],
            }
            for k in KEYS
        }
    return out


def check_published(what: str, got: float, want: float) -> None:
    if abs(got - want) > 1e-9:
        raise SystemExit(f"rejudge: {what}: the rules give {got!r}, the published table {want!r}")


def check_interval(what: str, got, want) -> None:
    if (got is None) != (want is None) or (got is not None and max(abs(a - b) for a, b in zip(got, want)) > 1e-9):
        raise SystemExit(f"rejudge: {what}: the rules give the interval {got!r}, the published table {want!r}")


def impression_attempts() -> dict:
    rows = common.studies("test")[:200]
    refs = [common.impression_target(r) for r in rows]
    out = {
        "studies": len(rows),
        "reference": "the study's Impression (whitespace collapsed)",
        "references_name_a_finding": {lab: names_finding(refs, lab) for lab in LABELERS},
        "attempts": [],
    }
    for att in IMPRESSION_ATTEMPTS:
        folder = common.ROOT / att["dir"]
        published = json.loads((folder / "summary.json").read_text())
        if published["studies"] != len(rows):
            raise SystemExit(f"rejudge: {folder}/summary.json has {published['studies']} studies, not {len(rows)}")
        base = att["policies"][0]
        hyps, f1, policies = {}, {}, []
        for name in att["policies"]:
            hyps[name] = [" ".join(t.split()) for t in read_generations(folder, name, rows)]
            f1[name] = f1_of(hyps[name], refs)
            pub = published["summaries"][name]
            check_published(f"{att['key']} {name} macro-14", f1[name]["rules"]["macro_f1_14"],
                            pub["CheXpert-rule F1 (14, macro)"])
            check_published(f"{att['key']} {name} micro-5", f1[name]["rules"]["micro_f1_5"],
                            pub["CheXpert-rule F1 (5, micro)"])
            policies.append({
                "name": name,
                "generations": f"{att['dir']}/generations/{slug(name)}.jsonl",
                "f1": f1[name],
                "name_a_finding": {lab: names_finding(hyps[name], lab) for lab in LABELERS},
            })
        comparisons = []
        for name in att["policies"][1:]:
            c = compare(name, base, "baseline", hyps, refs, f1)
            check_interval(f"{att['key']} {name} macro-14 interval",
                           c["rules"]["macro_f1_14"]["interval_pct"],
                           published["intervals_vs_first"][name]["CheXpert-rule F1 (14, macro)"])
            comparisons.append(c)
        borrowed = []
        for name, (other, as_name) in att.get("borrowed", {}).items():
            hyps[name] = [" ".join(t.split()) for t in read_generations(common.ROOT / other, as_name, rows)]
            f1[name] = f1_of(hyps[name], refs)
            borrowed.append({"name": name, "folder": other, "as": as_name,
                             "generations": f"{other}/generations/{slug(as_name)}.jsonl"})
        for name, against in att["pairs"]:
            comparisons.append(compare(name, against, "policy", hyps, refs, f1))
        out["attempts"].append({
            "key": att["key"],
            "title": att["title"],
            "baseline": base,
            "policies": policies,
            **({"borrowed": borrowed} if borrowed else {}),
            "comparisons": comparisons,
        })
        print(f"rejudge: Findings -> Impression, {att['key']} attempt done", flush=True)
    return out


def report_sections() -> dict:
    from sdr_rewards import metrics

    rows = common.studies("test")[:100]
    folder = common.ROOT / REPORT["dir"]
    published = json.loads((folder / "summary.json").read_text())
    texts = {name: read_generations(folder, name, rows) for name in REPORT["policies"]}
    # Each generated section as `sdr score` (and evaluate.py) cuts it.
    sections = {name: metrics.section_texts(ts) for name, ts in texts.items()}
    out = {"studies": len(rows), "sections": []}
    for sec in SECTIONS:
        refs = [" ".join(r[sec].split()) for r in rows]
        base = REPORT["policies"][0]
        hyps, f1, policies = {}, {}, []
        for name in REPORT["policies"]:
            hyps[name] = sections[name][sec]
            f1[name] = f1_of(hyps[name], refs)
            pub = published["summaries"][name]
            check_published(f"{sec} {name} macro-14", f1[name]["rules"]["macro_f1_14"],
                            pub[f"{sec}/CheXpert-rule F1 (14, macro)"])
            check_published(f"{sec} {name} micro-5", f1[name]["rules"]["micro_f1_5"],
                            pub[f"{sec}/CheXpert-rule F1 (5, micro)"])
            policies.append({
                "name": name,
                "generations": f"{REPORT['dir']}/generations/{slug(name)}.jsonl",
                "f1": f1[name],
                "name_a_finding": {lab: names_finding(hyps[name], lab) for lab in LABELERS},
            })
        comparisons = []
        for name in REPORT["policies"][1:]:
            c = compare(name, base, "baseline", hyps, refs, f1)
            check_interval(f"{sec} {name} macro-14 interval", c["rules"]["macro_f1_14"]["interval_pct"],
                           published["intervals_vs_first"][name][f"{sec}/CheXpert-rule F1 (14, macro)"])
            comparisons.append(c)
        for name, against in REPORT["pairs"]:
            comparisons.append(compare(name, against, "policy", hyps, refs, f1))
        out["sections"].append({
            "section": sec,
            "reference": f"the study's {sec.capitalize()} (whitespace collapsed)",
            "references_name_a_finding": {lab: names_finding(refs, lab) for lab in LABELERS},
            "baseline": base,
            "policies": policies,
            "comparisons": comparisons,
        })
        print(f"rejudge: full reports, {sec} done", flush=True)
    return out


def rounded(x):
    if isinstance(x, float):
        r = round(x, 6)
        return 0.0 if r == 0 else r  # no "-0.0"
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [rounded(v) for v in x]
    return x


def write_json_atomic(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(json.dumps(rounded(obj), indent=1, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def header() -> dict:
    from sdr_rewards import metrics  # noqa: F401  (the wheel must have the judge's bootstrap)

    return {
        "script": "recipes/rejudge.py",
        "labelers": {
            "rules": "sdr_rewards.chexpert_f1(labeler='rules'): SPEC §8's rule labeler, uncertain counted as present",
            "judge": "sdr_rewards.chexpert_f1(labeler='judge'): SPEC §8a's judge (all-MiniLM-L6-v2 + LoRA, "
            "trained on IU X-ray's human MeSH coding)",
        },
        "bootstrap": {"resamples": 1000, "seed": 43, "level": 0.95,
                      "function": "sdr_rewards.metrics.chexpert_f1_bootstrap",
                      "value": "relative change of corpus-level F1 in %, policy against `against`"},
        "name_a_finding": "studies whose text has an observation other than No Finding and Support Devices "
        "present (rules: positive or uncertain)",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=("impression", "report"), help="rescore one page only")
    args = ap.parse_args()
    if args.only in (None, "impression"):
        data = {**header(), **impression_attempts()}
        write_json_atomic(common.ROOT / "docs/results/grpo-impression/judged.json", data)
        print("rejudge: wrote docs/results/grpo-impression/judged.json")
    if args.only in (None, "report"):
        data = {**header(), **report_sections()}
        write_json_atomic(common.ROOT / "docs/results/grpo/judged.json", data)
        print("rejudge: wrote docs/results/grpo/judged.json")


if __name__ == "__main__":
    main()
