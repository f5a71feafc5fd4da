"""The judge as a row of the faithfulness benchmark (docs/results/faithfulness.md).

Blocks rendered from `docs/results/faithfulness/judge.json`, which
`python3 bench/faithfulness/judge_row.py` writes (with the per-case scores beside it,
`judge-cases.jsonl.gz`) from one `sdr score --whole --judge-f1` run over
`bench/faithfulness/cases.jsonl`:

- `judge-row`, the section "The judge as a row": what the judge F1 row is, what it shows
  next to the CheXpert-rule F1 row, and the two rows' mean drop per kind of edit and goal
  ratios (all cases and test reports alone), and how often the rephrasing outranks each
  error, each with its 95 % bootstrap interval over studies;
- `judge-verdict`, under the page's title: whether the judge changes what the page
  concludes a CheXpert-label F1 sees and misses.

Wording rule (as `scripts/results.py`'s `verdict`): "higher"/"lower" (or "sees") only when
the 95 % interval of the paired difference excludes 0, else "inconclusive". Every number
comes from judge.json. Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = "docs/results/faithfulness/judge.json"
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
EDITS = ERRORS[:-1]  # the errors made by editing the report (not `unrelated`)
NAMES = {
    "absent_to_present": "a finding stated where the reference denies it",
    "present_to_absent": "a denied finding",
    "left_right": "a side swap",
    "omission": "an omission",
    "hallucination": "a hallucinated finding",
    "severity": "a severity change",
    "unrelated": "an unrelated report",
}
RATIOS = [
    ("reversed/unrelated", "reversed / unrelated"),
    ("left_right/unrelated", "left-right / unrelated"),
    ("rephrase/reversed", "rephrase / reversed"),
]
ROWS = [("rules", "CheXpert-rule F1"), ("judge", "judge F1")]
JUDGE_LINK = "[the judge](judge.md)"


def load() -> dict:
    return json.loads((ROOT / SRC).read_text())


def f3(x: float) -> str:
    return f"{x:.3f}"


def cell(c: dict) -> str:
    return f"{f3(c['value'])} [{f3(c['low'])}, {f3(c['high'])}]"


def signed(c: dict) -> str:
    return f"{c['value']:+.3f} [{c['low']:+.3f}, {c['high']:+.3f}]"


def zero(c: dict) -> bool:
    """A paired difference that is 0 in every resample (both sides equal everywhere)."""
    return c["value"] == c["low"] == c["high"] == 0


def direction(c: dict) -> int:
    """+1 / -1 when the interval excludes 0 above / below, else 0."""
    return 1 if c["low"] > 0 else -1 if c["high"] < 0 else 0


def and_list(xs: list[str]) -> str:
    if len(xs) <= 1:
        return "".join(xs)
    return ", ".join(xs[:-1]) + " and " + xs[-1]


def seen(split: dict, lab: str, kind: str) -> str:
    """How labeler `lab` reacts to an error kind: 'sees' (its drop exceeds the rephrasing's,
    paired interval above 0), 'never' (no case's score changes) or 'inconclusive'."""
    if split[lab]["changed"][kind] == 0:
        return "never"
    return "sees" if direction(split[lab]["sees"][kind]) > 0 else "inconclusive"


def goal_word(c: dict, op: str, bound: float) -> str:
    ok_low, ok_high = (c["low"] >= bound, c["high"] >= bound) if op == ">=" else (c["high"] <= bound, c["low"] <= bound)
    if ok_low and ok_high:
        return "meets"
    if not ok_low and not ok_high:
        return "misses"
    return "is inconclusive against"


def drop_table(split: dict) -> list[str]:
    counts = split["counts"]
    head = ("| row | " + " | ".join(f"{k} ({counts[k]})" for k in KINDS) + " | "
            + " | ".join(name for _, name in RATIOS) + " |")
    lines = [head, "|---|" + "---:|" * (len(KINDS) + len(RATIOS))]
    for key, name in ROWS:
        g = split[key]
        lines.append(f"| {name} | " + " | ".join(cell(g["drop"][k]) for k in KINDS) + " | "
                     + " | ".join(cell(g["ratio"][r]) for r, _ in RATIOS) + " |")
    d = split["judge_minus_rules"]
    lines.append("| judge - rules (paired) | " + " | ".join(signed(d["drop"][k]) for k in KINDS) + " | "
                 + " | ".join(signed(d["ratio"][r]) for r, _ in RATIOS) + " |")
    return lines


def outrank_table(split: dict) -> list[str]:
    lines = ["| row | " + " | ".join(ERRORS) + " |", "|---|" + "---:|" * len(ERRORS)]
    for key, name in ROWS:
        lines.append(f"| {name} | " + " | ".join(cell(split[key]["outranks"][e]) for e in ERRORS) + " |")
    d = split["judge_minus_rules"]["outranks"]
    lines.append("| judge - rules (paired) | " + " | ".join(signed(d[e]) for e in ERRORS) + " |")
    return lines


def shows(d: dict) -> str:
    """What the judge row shows next to the rule row, worded from the intervals."""
    a = d["all"]
    n = a["studies"]
    # What each labeler sees.
    both_see = [k for k in EDITS if seen(a, "rules", k) == seen(a, "judge", k) == "sees"]
    neither = [k for k in EDITS if seen(a, "rules", k) != "sees" and seen(a, "judge", k) != "sees"]
    differ = [k for k in EDITS if (seen(a, "rules", k) == "sees") != (seen(a, "judge", k) == "sees")]
    parts = []
    if both_see:
        parts.append("Both labelers see " + and_list([NAMES[k] for k in both_see]) +
                     " (each drop above the rephrasing's, paired interval excluding 0)")
    if neither:
        descr = []
        for k in neither:
            per = []
            for lab, name in ROWS:
                s = seen(a, lab, k)
                if s == "never":
                    per.append(f"{name} changes in none of the {a['counts'][k]} cases")
                else:
                    per.append(f"{name} changes in {a[lab]['changed'][k]} of {a['counts'][k]}, drop "
                               f"{cell(a[lab]['drop'][k])}, inconclusive on {n} studies")
            descr.append(f"{NAMES[k]} ({'; '.join(per)})")
        parts.append("neither sees " + " nor ".join([", ".join(descr[:-1]), descr[-1]] if len(descr) > 1 else descr))
    s1 = "; ".join(parts) + "."
    if differ:
        s1 += " They differ on " + and_list(
            [f"{NAMES[k]} (CheXpert-rule F1 {seen(a, 'rules', k)}, judge F1 {seen(a, 'judge', k)}: "
             f"{cell(a['rules']['drop'][k])} against {cell(a['judge']['drop'][k])})" for k in differ]) + "."
    # Judge against rules, paired.
    dm = a["judge_minus_rules"]["drop"]
    moved = [k for k in ERRORS if a["rules"]["changed"][k] or a["judge"]["changed"][k]]
    lower = [k for k in moved if direction(dm[k]) < 0]
    higher = [k for k in moved if direction(dm[k]) > 0]
    flat = [k for k in moved if direction(dm[k]) == 0]
    bits = []
    if lower:
        bits.append("lower than the rules' for " + and_list([f"{NAMES[k]} ({signed(dm[k])})" for k in lower]))
    if higher:
        bits.append("higher for " + and_list([f"{NAMES[k]} ({signed(dm[k])})" for k in higher]))
    if flat:
        bits.append(f"inconclusive on {n} studies for " + and_list([f"{NAMES[k]} ({signed(dm[k])})" for k in flat]))
    s2 = "The judge's drop (paired difference, judge - rules) is " + "; ".join(bits) + "."
    # Goals.
    goals = d["goals"]
    gparts = []
    for r, name in RATIOS:
        op, bound = goals[r]
        words = {lab: goal_word(a[lab]["ratio"][r], op, bound) for lab, _ in ROWS}
        dr = a["judge_minus_rules"]["ratio"][r]
        diff = "identical" if zero(dr) else {1: "higher", -1: "lower", 0: "inconclusive"}[direction(dr)]
        if words["rules"] == words["judge"]:
            plural = {"meets": "meet", "misses": "miss", "is inconclusive against": "are inconclusive against"}
            who = f"both {plural[words['rules']]} the goal ({op} {bound})"
        else:
            who = (f"CheXpert-rule F1 {words['rules']} the goal ({op} {bound}), judge F1 "
                   f"{words['judge']} it")
        gparts.append(f"{name}: {who}, judge - rules {diff} ({signed(dr)})")
    s3 = "Goal ratios: " + "; ".join(gparts) + "."
    t = d["test"]
    tdiff = t["judge_minus_rules"]["drop"]
    tl = [k for k in ERRORS if direction(tdiff[k]) < 0]
    th = [k for k in ERRORS if direction(tdiff[k]) > 0]
    same = all((seen(t, "rules", k) == "sees") == (seen(t, "judge", k) == "sees") for k in EDITS)
    tseen = [k for k in EDITS if seen(t, "rules", k) == "sees" and seen(t, "judge", k) == "sees"]
    s4 = (f"On the test reports alone ({t['cases']:,} cases, {t['studies']} studies) "
          + ("the two labelers see the same kinds of edit (" + and_list([NAMES[k] for k in tseen]) + ")"
             if same else "the labelers see different kinds of edit (table below)")
          + "; the judge's drop is "
          + (("lower for " + and_list([f"{NAMES[k]} ({signed(tdiff[k])})" for k in tl])) if tl else "")
          + ("; higher for " + and_list([f"{NAMES[k]} ({signed(tdiff[k])})" for k in th]) if th else "")
          + (", inconclusive elsewhere" if (tl or th) else f"inconclusive on {t['studies']} studies for every kind")
          + ".")
    return " ".join([s1, s2, s3, s4])


def judge_row() -> str:
    d = load()
    a, t, b = d["all"], d["test"], d["bootstrap"]
    lead = (
        f"**judge F1** is the CheXpert-rule F1 row with the labels of {JUDGE_LINK} (SPEC §8a: "
        f"CheXpert-14 labels from all-MiniLM-L6-v2 + LoRA trained on IU X-ray's human MeSH coding) in "
        f"place of the rules': the example-level F1 of the whole edited report's labels against the "
        f"whole reference's, drop = self - candidate, on the same {a['cases']:,} cases from "
        f"{a['studies']} reports. A label F1 can only see an edit that changes one of the 14 labels "
        f"of the report; the judge, unlike the rules, learnt its labels from human coders rather "
        f"than from the phrases that also shape the clinical cost. Intervals: 95 % bootstrap over "
        f"studies ({b['resamples']} resamples, seed {b['seed']}); \"judge - rules\" is paired (both "
        f"labelers on the same resamples).\n"
    )
    lines = [lead, shows(d) + "\n"]
    lines.append(f"**All cases** ({a['cases']:,} cases, {a['studies']} studies), mean drop per kind of edit "
                 f"and the goal ratios (goals: reversed / unrelated >= 0.5, left-right / unrelated >= 0.5, "
                 f"rephrase / reversed <= 0.25; reversed = both directions pooled):\n")
    lines += drop_table(a)
    lines.append("")
    lines.append(f"**Test reports alone** (uid % 10 == 0; {t['cases']:,} cases, {t['studies']} studies):\n")
    lines += drop_table(t)
    lines.append("")
    lines.append(f"**How often the rephrasing outranks each error** (all cases; ties count half, "
                 f"0.50 is a coin):\n")
    lines += outrank_table(a)
    lines.append("")
    lines.append(f"Data: `{SRC}` (aggregates) and `{d['cases_file']}` (per case: both labelers' self "
                 f"and candidate scores), written by `{d['command']}`.")
    return "\n".join(lines) + "\n"


def judge_verdict() -> str:
    d = load()
    a = d["all"]
    n = a["studies"]
    differ = [k for k in EDITS if (seen(a, "rules", k) == "sees") != (seen(a, "judge", k) == "sees")]
    sees = [k for k in EDITS if seen(a, "judge", k) == "sees"]
    blind = [k for k in EDITS if seen(a, "judge", k) != "sees"]
    dm = a["judge_minus_rules"]["drop"]
    lower = [k for k in EDITS if direction(dm[k]) < 0]
    higher = [k for k in EDITS if direction(dm[k]) > 0]
    link = f"**Judged by {JUDGE_LINK}** ([the judge as a row](#the-judge-as-a-row))"
    if not differ:
        weaker = ""
        if lower:
            weaker += ("; its drops are lower than the rules' for "
                       + and_list([f"{NAMES[k]} ({signed(dm[k])})" for k in lower]))
        if higher:
            weaker += ("; higher for " + and_list([f"{NAMES[k]} ({signed(dm[k])})" for k in higher]))
        missed = [f"{NAMES[k]} ({cell(a['judge']['drop'][k])})" for k in blind]
        why = (", as CheXpert's 14 labels name neither side nor severity"
               if set(blind) <= {"left_right", "severity"} else "")
        return (f"{link}, no conclusion about CheXpert-rule F1 changes: on the {n} studies a label F1 "
                f"from the judge, trained on human coding, sees the same kinds of edit ("
                + and_list([NAMES[k] for k in sees]) + ")"
                + ((" and " + ("neither " + " nor ".join(missed) if len(missed) > 1 else "not " + missed[0]))
                   if missed else "")
                + why + weaker + ".\n")
    parts = []
    for k in differ:
        r, j = seen(a, "rules", k), seen(a, "judge", k)
        parts.append(f"{NAMES[k]} is {'seen' if j == 'sees' else 'not seen'} by the judge "
                     f"({cell(a['judge']['drop'][k])}) but {'seen' if r == 'sees' else 'not seen'} by "
                     f"the rules ({cell(a['rules']['drop'][k])})")
    return (f"{link}, what this page says a CheXpert-label F1 sees changes on {n} studies: "
            + "; ".join(parts) + ".\n")


BLOCKS = {
    ("faithfulness.md", "judge-row"): judge_row,
    ("faithfulness.md", "judge-verdict"): judge_verdict,
}
