"""The main job's page (docs/results/main-job.md): what the judge says beside the rules.

Reads the improvement-over-random tables that `sdr select-eval --judge-f1` wrote
(docs/results/main-job/{findings,impression}_vs_random_wf[_abnormal].md, copied from
results/main-job/ by scripts/main-job.sh's caller) and counts, per cost family (the paper's cosine
cost; `clinical/...`), how many of the 60 policies fall below random and how many do so with an
interval that excludes 0, under the rule labeler and under the judge.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DIR = ROOT / "docs/results/main-job"
CELL = re.compile(r"^(-?\d+(?:\.\d+)?) \[([+-]\d+(?:\.\d+)?), ([+-]\d+(?:\.\d+)?)\]\*?$")
COLUMNS = [
    ("CheXpert-rule F1 macro-14", "rules macro-14"),
    ("judge F1 macro-14", "judge macro-14"),
    ("CheXpert-rule F1 micro-14", "rules micro-14"),
    ("judge F1 micro-14", "judge micro-14"),
]


def read_table(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    rows = [l for l in path.read_text().splitlines() if l.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    body = {}
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        body[cells[0]] = cells
    return header, body


def family_stats(path: Path) -> dict:
    header, body = read_table(path)
    out = {}
    for fam, keep in (("cosine", lambda p: not p.startswith("clinical/")),
                      ("clinical", lambda p: p.startswith("clinical/"))):
        policies = [p for p in body if keep(p)]
        stats = {}
        for col, short in COLUMNS:
            k = header.index(col)
            vals, below, above = [], 0, 0
            for p in policies:
                m = CELL.match(body[p][k])
                if not m:
                    continue  # "-": no interval (a resample's random F1 was 0)
                v, lo, hi = float(m.group(1)), float(m.group(2)), float(m.group(3))
                vals.append(v)
                below += hi < 0
                above += lo > 0
            stats[short] = {
                "n": len(vals),
                "below": sum(v < 0 for v in vals),
                "median": statistics.median(vals) if vals else float("nan"),
                "ci_below": below,
                "ci_above": above,
            }
        out[fam] = (len(policies), stats)
    return out


def summary_block() -> str:
    lines = [
        "**Judged by [the judge](judge.md) as well as by the rules.** The tables carry judge-F1 "
        "columns (`sdr select-eval --judge-f1`): the same corpus-level F1 with labels from the "
        "classifier trained on IU X-ray's human coding (SPEC §8a). Against random over the "
        "well-formed candidates, per cost family: policies below random / median change / "
        "policies whose 95 % interval lies below 0 / above 0 (of the policies with an interval).",
        "",
        "| section | studies | family | " + " | ".join(short for _, short in COLUMNS) + " |",
        "|---|---|---|" + "---|" * len(COLUMNS),
    ]
    verdicts, changes = [], []
    for sec in ("findings", "impression"):
        for suffix, who in (("", "all"), ("_abnormal", "abnormal")):
            path = DIR / f"{sec}_vs_random_wf{suffix}.md"
            if not path.exists():
                continue
            for fam, (n, stats) in family_stats(path).items():
                cells = []
                for _, short in COLUMNS:
                    s = stats[short]
                    cells.append(f"{s['below']} / {s['median']:+.1f} % / {s['ci_below']} / {s['ci_above']} (of {s['n']})")
                lines.append(f"| {sec} | {who} | {fam} ({n}) | " + " | ".join(cells) + " |")
                if who == "all":
                    r, j = stats["rules macro-14"], stats["judge macro-14"]
                    verdicts.append(
                        f"{sec}, {fam} cost: {r['ci_below']} policies significantly below random by the rules, "
                        f"{j['ci_below']} by the judge ({r['ci_above']} and {j['ci_above']} significantly above)")
                    # A conclusion changes when the median's sign flips, or when significant losses
                    # against random appear or vanish.
                    if (r["median"] > 0) != (j["median"] > 0) or (r["ci_below"] == 0) != (j["ci_below"] == 0):
                        changes.append(
                            f"on {sec.capitalize()}, the {fam} family's macro-14 median is {r['median']:+.1f} % against "
                            f"random by the rules but {j['median']:+.1f} % by the judge, with {j['ci_below']} of {n} policies "
                            f"significantly below random (rules: {r['ci_below']})")
    lines.append("")
    lines.append("Macro-14, all studies: " + "; ".join(verdicts) + ".")
    lines.append("")
    if changes:
        lines.append("**What changes under the judge:** " + "; ".join(changes) + ". Elsewhere both "
                     "labelers agree that selecting for closeness to the corpus loses findings against random.")
    else:
        lines.append("**No conclusion changes under the judge.**")
    return "\n".join(lines)


BLOCKS = {("main-job.md", "judge-summary"): summary_block}
