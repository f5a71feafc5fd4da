"""docs/results/grpo.md: what the GRPO policies write and how each compares with SFT, in words.

Blocks rendered from the page's own files:

- `haus-vs-sft`: GRPO(R_haus) against SFT, metric by metric on each section, from
  `docs/results/grpo/summary.json` (the tables' values and their 95 % paired-bootstrap
  intervals over the 100 test studies, written by `recipes/evaluate.py`);
- `baselines`: the paper's baselines GRPO(R_exact) and GRPO(R_fmt): the share of their
  training steps whose group had zero reward variance (TRL's `frac_reward_zero_std` in
  `docs/results/grpo/grpo-*.log_history.jsonl`), the Impressions their greedy outputs give
  (`docs/results/grpo/generations/*.jsonl`) and how often the train studies' references give
  the same text (`data/iu-xray/indiana_reports.csv`, the studies SFT and GRPO drew from);
- `cham-impressions`: the Impressions of the R_cham policies' greedy outputs, and which rows'
  CheXpert-rule F1 (14, macro) differs from SFT's (`summary.json`'s intervals).

Wording rule (as `scripts/results.py`'s `verdict`): "higher"/"lower" only when the 95 %
interval excludes 0, else "inconclusive on N studies" with the interval. Standard library only.
"""

from __future__ import annotations

import collections
import csv
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIR = "docs/results/grpo"
SUMMARY = f"{DIR}/summary.json"
REPORTS = "data/iu-xray/indiana_reports.csv"
GENERATIONS = {
    "SFT": "sft",
    "GRPO(R_exact)": "grpo_r_exact",
    "GRPO(R_fmt)": "grpo_r_fmt",
    "GRPO(R_cham)": "grpo_r_cham",
    "GRPO(R_haus)": "grpo_r_haus",
    "GRPO(R_cham, distinct)": "grpo_r_cham__distinct",
    "GRPO(R_cham, KL 0.04)": "grpo_r_cham__kl_0_04",
    "GRPO(R_cham, KL 0.2)": "grpo_r_cham__kl_0_2",
}
LOGS = {"GRPO(R_exact)": "grpo-exact", "GRPO(R_fmt)": "grpo-fmt"}
METRICS = ("BLEU-4", "ROUGE-L", "METEOR", "BERTScore-F1", "BERTScore-F1 (reward's own encoder)",
           "CheXpert-rule F1 (14, macro)", "CheXpert-rule F1 (5, micro)")
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def summary() -> dict:
    return json.loads((ROOT / SUMMARY).read_text())


def bound(x: float) -> str:
    """An interval bound in %, one decimal; two where one would show a non-zero bound as 0.0."""
    return f"{x:+.2f}" if x != 0 and abs(x) < 0.05 else f"{x:+.1f}"


def compare(policy: str, base: str, key: str, label: str, s: dict | None = None) -> tuple[str, str]:
    """(direction, phrase) of `policy` against `base` on summary column `key`: direction is
    "higher", "lower", "inconclusive", "unchanged" (equal, and 0 in every resample) or "no
    interval" (a baseline of 0: no relative change)."""
    s = s or summary()
    v, b = s["summaries"][policy][key], s["summaries"][base][key]
    iv = s["intervals_vs_first"][policy][key] if base == next(iter(s["summaries"])) else None
    n = s["summaries"][policy]["studies"]
    fmt = (lambda x: f"{x:.1f} %") if key == "well_formed" else (lambda x: f"{x:.3f}")
    values = f"{fmt(b)} -> {fmt(v)}"
    if iv is None or b == 0:
        return "no interval", f"{label} {values} (no relative change: the baseline is 0)"
    ch = 100.0 * (v - b) / b
    ci = f"{ch:+.1f} % [{bound(iv[0])}, {bound(iv[1])}]"
    if v == b and iv[0] == iv[1] == 0:
        return "unchanged", f"{label} {values} ({ci}: the same in every resample)"
    if iv[0] > 0:
        return "higher", f"{label} {values} ({ci})"
    if iv[1] < 0:
        return "lower", f"{label} {values} ({ci})"
    return "inconclusive", f"{label} {values} (inconclusive on {n} studies, {ci})"


def against(policy: str, base: str, section: str, s: dict) -> str:
    """One sentence: each metric of `section` grouped by its verdict."""
    groups: dict[str, list[str]] = collections.defaultdict(list)
    keys = [(f"{section}/{m}", m) for m in METRICS]
    if section == "findings":
        keys.append(("well_formed", "well-formed share"))
    for key, label in keys:
        d, phrase = compare(policy, base, key, label, s)
        groups[d].append(phrase)
    parts = []
    for d, head in (("higher", "higher on"), ("lower", "lower on"), ("unchanged", "unchanged on"),
                    ("inconclusive", "inconclusive on"), ("no interval", "no comparison on")):
        if groups[d]:
            items = groups[d]
            if d == "inconclusive":
                items = [p.replace(" (inconclusive on ", " (", 1) for p in items]
            parts.append(f"{head} {', '.join(items)}")
    return "; ".join(parts)


def answers(policy: str) -> collections.Counter:
    """Impression (the `<answer>` text) of each greedy output of `policy`; None where the
    output has no answer."""
    c: collections.Counter = collections.Counter()
    for line in (ROOT / DIR / "generations" / f"{GENERATIONS[policy]}.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        m = ANSWER.search(json.loads(line)["text"])
        c[" ".join(m.group(1).split()) if m else None] += 1
    return c


def train_impressions() -> collections.Counter:
    """Impressions of the train studies with both sections (recipes/common.py's `studies`)."""
    c: collections.Counter = collections.Counter()
    with open(ROOT / REPORTS, newline="") as fh:
        for row in csv.DictReader(fh):
            if int(row["uid"]) % 10 < 2 or not row["findings"].strip() or not row["impression"].strip():
                continue
            c[" ".join(row["impression"].split())] += 1
    return c


def zero_variance_steps(policy: str) -> tuple[int, int]:
    """(steps whose group had zero reward variance, steps): one group per step."""
    rows = [json.loads(l) for l in (ROOT / DIR / f"{LOGS[policy]}.log_history.jsonl").read_text().splitlines()
            if l.strip()]
    z = [r["frac_reward_zero_std"] for r in rows if "frac_reward_zero_std" in r]
    return sum(1 for v in z if v > 0), len(z)


def answer_list(c: collections.Counter, n: int) -> str:
    parts = []
    for text, k in c.most_common():
        parts.append(f"no answer ({k})" if text is None else f'"{text}" ({k} of {n})')
    return ", ".join(parts)


def haus_block() -> str:
    s = summary()
    n = s["summaries"]["GRPO(R_haus)"]["studies"]
    return (f"- **GRPO(R_haus) against SFT** ({n} test studies; 95 % paired-bootstrap intervals of "
            f"the relative change). Findings: {against('GRPO(R_haus)', 'SFT', 'findings', s)}. "
            f"Impression: {against('GRPO(R_haus)', 'SFT', 'impression', s)}.")


def baselines_block() -> str:
    s = summary()
    train = train_impressions()
    ranked = train.most_common()
    rank = {text: 1 + sum(1 for _, k in ranked if k > c) for text, c in ranked}
    out = ["- **GRPO(R_exact) and GRPO(R_fmt)** (the paper's baselines) against SFT:"]
    tallies = []
    for p in ("GRPO(R_exact)", "GRPO(R_fmt)"):
        d = collections.Counter(compare(p, "SFT", f"{sec}/{m}", m, s)[0] for sec in ("findings", "impression")
                                for m in METRICS)
        tallies.append(f"{p} lower on {d['lower']}, higher on {d['higher']}, inconclusive or unchanged on "
                       f"{d['inconclusive'] + d['unchanged']} of the {sum(d.values()) - d['no interval']} "
                       f"section-metric pairs with an interval")
    out.append("; ".join(tallies) + " (tables above).")
    for p in ("GRPO(R_exact)", "GRPO(R_fmt)"):
        z, steps = zero_variance_steps(p)
        out.append(f"{z} of {steps} training steps of {p} ({100.0 * z / steps:.0f} %) had a group with zero "
                   f"reward variance (no gradient).")
    out.append("The remaining signal rewards short outputs:")
    for p in ("GRPO(R_fmt)", "GRPO(R_exact)"):
        c = answers(p)
        n = sum(c.values())
        top, k = c.most_common(1)[0]
        d, rouge = compare(p, "SFT", "impression/ROUGE-L", "Impression ROUGE-L", s)
        rouge = rouge.removeprefix("Impression ROUGE-L ")
        where = []
        for text, _ in c.most_common():
            if text is None:
                continue
            t = train.get(text, 0)
            where.append(f'"{text}" {t} (rank {rank[text]})' if t else f'"{text}" 0')
        out.append(f"{p}'s greedy Impressions are {answer_list(c, n)}; its Impression ROUGE-L is {d}, "
                   f"{rouge}. (Train studies with that Impression, of the {sum(train.values()):,} with "
                   f"both sections, and its rank among their Impressions: {', '.join(where)}.)")
    out.append("This is the paper's argument for a continuous set-distance reward, seen on a small model.")
    return " ".join(out)


def cham_block() -> str:
    parts = []
    cham = ("GRPO(R_cham)", "GRPO(R_cham, distinct)", "GRPO(R_cham, KL 0.04)", "GRPO(R_cham, KL 0.2)")
    for p in cham:
        c = answers(p)
        n = sum(c.values())
        parts.append(f"{p} {answer_list(c, n)}")
    sft = answers("SFT")
    s = summary()
    # Which rows' CheXpert-rule F1 (14, macro) differs from SFT's (an interval excluding 0).
    moved = [f"{p} ({sec.capitalize()})" for p in list(s["summaries"])[1:] for sec in ("findings", "impression")
             if compare(p, "SFT", f"{sec}/CheXpert-rule F1 (14, macro)", "", s)[0] in ("higher", "lower")]
    flat = [p for p in cham if not any(m.startswith(p + " (") for m in moved)]
    note = (f"which also explains why the CheXpert-rule F1 (14, macro) of "
            f"{'these four policies' if len(flat) == len(cham) else ', '.join(flat)} does not differ from "
            f"SFT's on either section (of all rows, only {', '.join(moved) or 'none'} differ"
            f"{'s' if len(moved) == 1 else ''})")
    return ("  - *What a text-only 135M model can learn from 60 prompts.* The Impressions of the "
            f"greedy test outputs: {'; '.join(parts)} (SFT: {answer_list(sft, sum(sft.values()))}). "
            f"Without the image, the reward-maximising report is the generic normal one, {note}. "
            "The paper's models see the image and are 15-30x larger.")


BLOCKS = {
    ("grpo.md", "haus-vs-sft"): haus_block,
    ("grpo.md", "baselines"): baselines_block,
    ("grpo.md", "cham-impressions"): cham_block,
}
