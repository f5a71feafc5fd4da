"""The main job's page (docs/results/main-job.md): its set-up, what the tables show, and what
the judge says beside the rules.

Reads the improvement-over-random tables that `sdr select-eval --judge-f1` wrote
(docs/results/main-job/{findings,impression}_vs_random_wf[_abnormal].md, copied from
results/main-job/ by scripts/main-job.sh's caller: each cell is the change against random in %
with its 95 % paired-bootstrap interval) and counts, per cost family (the paper's cosine cost;
`clinical/...`), how many of the 60 policies fall below random and how many do so with an
interval that excludes 0, under the rule labeler and under the judge. Every number of the page
comes from those tables (blocks `setup`, `findings-summary`, `judge-summary`).
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


def title(path: Path) -> str:
    return path.read_text().splitlines()[0]


def n_studies(path: Path) -> int:
    """The studies of a select-eval table, from its title ("..., 100 studies: ...")."""
    m = re.search(r", (\d+) studies:", title(path))
    if not m:
        raise SystemExit(f"results: {path.relative_to(ROOT)}: no study count in its title")
    return int(m.group(1))


def footer(path: Path, pattern: str) -> re.Match:
    m = re.search(pattern, path.read_text())
    if not m:
        raise SystemExit(f"results: {path.relative_to(ROOT)}: no line matching {pattern!r}")
    return m


def read_table(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    rows = [l for l in path.read_text().splitlines() if l.startswith("| ")]
    header = [c.strip() for c in rows[0].strip("|").split("|")]
    body = {}
    for line in rows[1:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        body[cells[0]] = cells
    return header, body


def family_stats(path: Path, columns=COLUMNS) -> dict:
    header, body = read_table(path)
    out = {}
    for fam, keep in (("cosine", lambda p: not p.startswith("clinical/")),
                      ("clinical", lambda p: p.startswith("clinical/"))):
        policies = [p for p in body if keep(p)]
        stats = {}
        for col, short in columns:
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


MORE = [
    ("CheXpert-rule F1 macro-14", "rules macro-14"),
    ("CheXpert-rule F1 micro-14", "rules micro-14"),
    ("ROUGE-L", "ROUGE-L"),
    ("BERTScore-F1 [all-MiniLM-L6-v2 L6 (no idf, not rescaled)]", "BERTScore-F1"),
]


def cell(path: Path, policy: str, column: str) -> tuple[float, float, float]:
    header, body = read_table(path)
    m = CELL.match(body[policy][header.index(column)])
    if not m:
        raise SystemExit(f"results: {path.relative_to(ROOT)}: {policy} / {column} has no interval")
    return float(m.group(1)), float(m.group(2)), float(m.group(3))


def setup_block() -> str:
    wf = DIR / "findings_vs_random_wf.md"
    header, body = read_table(wf)
    n, n_ab = n_studies(wf), n_studies(DIR / "findings_vs_random_wf_abnormal.md")
    boot = footer(wf, r"95 % paired bootstrap interval over studies \((\d+) resamples, seed (\d+)\)")
    gen = footer(wf, r"K = (\d+): (sdr generate [^\n]*)")
    clinical = sum(p.startswith("clinical/") for p in body)
    return (
        f"`bash scripts/main-job.sh`: best-of-K selection among the K = {gen.group(1)} Gemma 3 270M "
        f"candidates of the first {n} test studies (`data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl`, "
        f"`{gen.group(2)}`), {len(body)} policies: {len(body) - clinical} under the paper's cosine cost "
        f"(the 15 distances x `min` / `avg` / `knn:k=5` plus 15 consensus policies) and the same "
        f"{clinical} under the clinical cost (`clinical/...`, SPEC §10 at its defaults). Every relative "
        f"change is against random picks, with its 95 % paired-bootstrap interval over the studies "
        f"({boot.group(1)} resamples, seed {boot.group(2)}; `*` where it excludes 0). BERTScore-F1 is "
        f"judged by all-MiniLM-L6-v2 (layer 6, no idf, not rescaled), not by the reward's encoder. "
        f"CheXpert-rule F1 is SDR's rule labeler (SPEC §8, uncertain counted as present), corpus-level; "
        f"its interval resamples the studies. The tables below are copied from `results/main-job/`, "
        f"where the job also writes heatmaps and CSV files; `_abnormal`: the {n_ab} studies whose "
        f"`Problems` is not `normal`."
    )


def signed(x: float) -> str:
    return f"{x:+.1f} %"


def inconclusive(value: float, low: float, high: float, n: int) -> str:
    """A single-policy change in the verdict's words (the tables round cells to 0.1)."""
    ci = f"{value:+.1f} % [{low:+.1f}, {high:+.1f}]"
    if low > 0:
        return f"higher: {ci}"
    if high < 0:
        return f"lower: {ci}"
    return f"inconclusive on {n} studies, {ci}"


def findings_block() -> str:
    wf = DIR / "findings_vs_random_wf.md"
    n = n_studies(wf)
    fam = family_stats(wf, MORE)
    ab = family_stats(DIR / "findings_vs_random_wf_abnormal.md", MORE)
    im = family_stats(DIR / "impression_vs_random_wf.md", MORE)
    n_ab = n_studies(DIR / "findings_vs_random_wf_abnormal.md")
    lines = [
        "| family (policies) | CheXpert-rule F1 macro-14: below random / median / interval below 0 | "
        "micro-14: below / median / below 0 / above 0 | ROUGE-L: median / interval above 0 | "
        "BERTScore-F1: median / interval above 0 |",
        "|---|---|---|---|---|",
    ]
    names = {"cosine": "cosine cost (the paper's)", "clinical": "clinical cost"}
    for f in ("cosine", "clinical"):
        k, st = fam[f]
        ma, mi, rl, bs = st["rules macro-14"], st["rules micro-14"], st["ROUGE-L"], st["BERTScore-F1"]
        lines.append(
            f"| {names[f]} ({k}) | {ma['below']} / {signed(ma['median'])} / {ma['ci_below']} | "
            f"{mi['below']} / {signed(mi['median'])} / {mi['ci_below']} / {mi['ci_above']} | "
            f"{signed(rl['median'])} / {rl['ci_above']} | {signed(bs['median'])} / {bs['ci_above']} |")
    (kc, c), (kk, k_) = fam["cosine"], fam["clinical"]
    cm, km = c["rules macro-14"], k_["rules macro-14"]
    ci, ki = c["rules micro-14"], k_["rules micro-14"]
    lines.append("")
    lines.append(
        f"- **Selecting for closeness to the corpus selects normal-sounding reports**: under the "
        f"cosine cost {cm['ci_below']} of {kc} policies lose CheXpert-rule F1 (macro-14) against random "
        f"with an interval that lies below 0, while {c['ROUGE-L']['ci_above']} gain ROUGE-L and "
        f"{c['BERTScore-F1']['ci_above']} gain BERTScore-F1 with an interval above 0.")
    fewer = ("fewer policies lose significantly" if km["ci_below"] < cm["ci_below"]
             else "no fewer policies lose significantly")
    removed = "but some still do" if km["ci_below"] else "and none does"
    lines.append(
        f"- **Under the clinical cost {fewer}, {removed}** "
        f"(medians over policies, no interval between families). Macro-14: {km['below']} of {kk} "
        f"below random (median {signed(km['median'])} against {signed(cm['median'])} under the cosine "
        f"cost), {km['ci_below']} with an interval below 0 (cosine: {cm['ci_below']}); micro-14: "
        f"{ki['below']} below (median {signed(ki['median'])} against {signed(ci['median'])}) and "
        f"{ki['ci_above']} policies with an interval above 0 ({ci['ci_above']} under the cosine cost). "
        f"On the {n_ab} abnormal studies: macro-14 median "
        f"{signed(ab['clinical'][1]['rules macro-14']['median'])} against "
        f"{signed(ab['cosine'][1]['rules macro-14']['median'])}, micro-14 "
        f"{signed(ab['clinical'][1]['rules micro-14']['median'])} against "
        f"{signed(ab['cosine'][1]['rules micro-14']['median'])}. ROUGE-L median "
        f"{signed(k_['ROUGE-L']['median'])} against {signed(c['ROUGE-L']['median'])}, with "
        f"{k_['ROUGE-L']['ci_above']} policies above random against {c['ROUGE-L']['ci_above']}.")
    ic, ik = im["cosine"][1], im["clinical"][1]
    lines.append(
        f"- **Impression** (clinical against cosine family): macro-14 median "
        f"{signed(ik['rules macro-14']['median'])} against {signed(ic['rules macro-14']['median'])} "
        f"({ik['rules macro-14']['ci_below']} and {ic['rules macro-14']['ci_below']} policies with an "
        f"interval below 0); micro-14 median {signed(ik['rules micro-14']['median'])} against "
        f"{signed(ic['rules micro-14']['median'])} ({ik['rules micro-14']['ci_above']} and "
        f"{ic['rules micro-14']['ci_above']} policies with an interval above 0); ROUGE-L median "
        f"{signed(ik['ROUGE-L']['median'])} against {signed(ic['ROUGE-L']['median'])}.")
    v = cell(wf, "chamfer@min", "BLEU-1")
    lines.append(
        f"- **One policy's figure is not a finding** without its interval: e.g. chamfer@min's Findings "
        f"BLEU-1 against random is {inconclusive(*v, n)}.")
    return "\n".join(lines)


BLOCKS = {
    ("main-job.md", "judge-summary"): summary_block,
    ("main-job.md", "setup"): setup_block,
    ("main-job.md", "findings-summary"): findings_block,
}
