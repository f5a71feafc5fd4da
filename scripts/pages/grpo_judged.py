"""The GRPO pages re-judged: CheXpert F1 by the rules and by the judge (SPEC §8a).

Blocks of `docs/results/grpo-impression.md` and `docs/results/grpo.md`, rendered from the
`judged.json` files that `recipes/rejudge.py` writes from the committed generations:

- `judge-verdict`, under each page's title: which of the page's clinical conclusions hold and
  which change when the policies are judged by the judge trained on human coding;
- `judge-table`, the section "Judged by the independent judge": per attempt (or section),
  each policy's F1 under both labelers, its change against the page's baseline, and the
  policy-versus-policy comparisons behind the page's rankings, with 95 % paired-bootstrap
  intervals.

Wording rule (as `scripts/results.py`'s `verdict`): "higher"/"lower" only when the 95 %
interval excludes 0, else "inconclusive on N studies" with the interval. Every number comes
from the JSON files. Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMPRESSION_JSON = "docs/results/grpo-impression/judged.json"
REPORT_JSON = "docs/results/grpo/judged.json"
LABELERS = ("rules", "judge")
JUDGE_LINK = "[the judge](judge.md) (CheXpert labels learnt from IU X-ray's human coding, SPEC §8a)"


def load(rel: str) -> dict:
    return json.loads((ROOT / rel).read_text())


def f3(x: float) -> str:
    return f"{x:.3f}"


def direction(c: dict):
    """+1 / -1 when the interval excludes 0 above / below, 0 when it includes 0, None
    when there is no interval."""
    iv = c["interval_pct"]
    if iv is None:
        return None
    if iv[0] > 0:
        return 1
    if iv[1] < 0:
        return -1
    return 0


def change_cell(c: dict) -> str:
    """`+35.9% [-15.4, +146.8]` (`*` where the interval excludes 0), as the pages' tables."""
    if c["change_pct"] is None:
        return "n/a"
    ch = f"{c['change_pct']:+.1f}%"
    if c["interval_pct"] is None:
        return f"{ch} [n/a]"
    lo, hi = c["interval_pct"]
    star = "*" if direction(c) else ""
    return f"{ch} [{lo:+.1f}, {hi:+.1f}]{star}"


def worded(c: dict, n: int) -> str:
    """The wording rule: a direction only when the interval excludes 0."""
    d = direction(c)
    if c["change_pct"] is None:
        return "not comparable (baseline F1 0)"
    ch = f"{c['change_pct']:+.1f} %"
    if d is None:
        return f"{ch} without an interval (a resample's baseline F1 is 0)"
    lo, hi = c["interval_pct"]
    ci = f"{ch} [{lo:+.1f}, {hi:+.1f}]"
    if d > 0:
        return f"higher ({ci})"
    if d < 0:
        return f"lower ({ci})"
    return f"inconclusive on {n} studies ({ci})"


def status(c: dict) -> str:
    """How a rules conclusion fares under the judge (macro-14)."""
    r, j = direction(c["rules"]["macro_f1_14"]), direction(c["judge"]["macro_f1_14"])
    if r == j:
        return "holds"
    if r and j == 0:
        return "is not confirmed"
    if r == 0 and j:
        return "becomes significant"
    return "is reversed"


def both(c: dict) -> str:
    """Both labelers' macro-14 verdicts of comparison `c`, in one phrase."""
    n = c["studies"]
    r, j = c["rules"]["macro_f1_14"], c["judge"]["macro_f1_14"]
    if direction(r) == direction(j) and direction(r) is not None:
        word = worded(r, n).split(" (")[0]
        return f"{word} by both labelers (rules {ci_text(r)}; judge {ci_text(j)})"
    return f"{worded(r, n)} by the rules but {worded(j, n)} by the judge"


def ci_text(c: dict) -> str:
    if c["change_pct"] is None:
        return "n/a"
    if c["interval_pct"] is None:
        return f"{c['change_pct']:+.1f} %"
    lo, hi = c["interval_pct"]
    return f"{c['change_pct']:+.1f} % [{lo:+.1f}, {hi:+.1f}]"


def find(comparisons, policy: str, against: str) -> dict:
    for c in comparisons:
        if c["policy"] == policy and c["against"] == against:
            return c
    raise KeyError(f"no comparison {policy} vs {against}")


def disagreements(groups) -> list:
    """(label, comparison) of every comparison whose macro-14 verdict differs between the
    labelers; `groups` is [(label prefix, comparisons)]."""
    out = []
    for label, comps in groups:
        for c in comps:
            if direction(c["rules"]["macro_f1_14"]) != direction(c["judge"]["macro_f1_14"]):
                out.append((label, c))
    return out


def policy_of(group: dict, name: str) -> dict:
    return next(p for p in group["policies"] if p["name"] == name)


# --- Findings -> Impression -------------------------------------------------------------


def impression_verdict() -> str:
    d = load(IMPRESSION_JSON)
    atts = {a["key"]: a for a in d["attempts"]}
    third = atts["third"]
    gain = find(third["comparisons"], "GRPO(cosine + F1 term)", third["baseline"])
    clin = [(a, find(a["comparisons"], "GRPO(clinical cost)", a["baseline"])) for a in d["attempts"]
            if any(p["name"] == "GRPO(clinical cost)" for p in a["policies"])]
    if all(status(c) == "holds" for _, c in clin) and len({direction(c["judge"]["macro_f1_14"]) for _, c in clin}) == 1:
        word = worded(clin[0][1]["judge"]["macro_f1_14"], d["studies"]).split(" (")[0]
        clin_text = (f"GRPO(clinical cost) is {word} than the baseline in all {len(clin)} attempts by both "
                     f"labelers (judge: " + "; ".join(f"{ci_text(c['judge']['macro_f1_14'])} against "
                                                      f"{a['baseline']}" for a, c in clin) + ")")
    else:
        clin_text = "; ".join(f"GRPO(clinical cost) against {a['baseline']} in the {a['key']} attempt: {both(c)}"
                              for a, c in clin)
    if "recall" in atts:
        r = atts["recall"]
        rp = next(p["name"] for p in r["policies"] if p["name"].startswith("GRPO("))
        clin_text += (f"; with an omitted finding priced four times an added one (fourth attempt), {rp} "
                      f"against {r['baseline']} is {both(find(r['comparisons'], rp, r['baseline']))}")
    sft = policy_of(atts["first"], "SFT")
    nf, refs = sft["name_a_finding"], d["references_name_a_finding"]
    same = "as do the rules" if nf["judge"] == nf["rules"] else f"the rules {nf['rules']}"
    s1 = (f"**Judged by {JUDGE_LINK}** on the same {d['studies']} studies, GRPO(cosine + F1 term) against "
          f"{third['baseline']} in the third attempt is {both(gain)} on macro-14 F1, and {clin_text}; the "
          f"judge labels {nf['judge']} of SFT's {d['studies']} impressions with a finding ({same}; the "
          f"reference impressions: {refs['judge']}).")
    dis = disagreements([(f"{a['key']} attempt", a["comparisons"]) for a in d["attempts"]])
    if dis:
        s2 = (f"{len(dis)} macro-14 verdict{'s change' if len(dis) > 1 else ' changes'} under the judge: "
              + "; ".join(f"{c['policy']} against {c['against']} ({label}) is {both(c)}" for label, c in dis)
              + ".")
    else:
        s2 = "No macro-14 verdict changes under the judge."
    return s1 + " " + s2 + "\n"


def group_tables(group: dict, n: int, what: str, ref_label: str) -> list:
    base = group["baseline"]
    lines = [
        f"| policy | rule F1 macro-14 | judge F1 macro-14 | rule F1 micro-5 | judge F1 micro-5 | "
        f"{what} naming a finding (of {n}), rules / judge | macro-14 vs {base}, rules | macro-14 vs {base}, judge | "
        f"micro-5 vs {base}, rules | micro-5 vs {base}, judge |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for p in group["policies"]:
        f = p["f1"]
        cells = [p["name"], f3(f["rules"]["macro_f1_14"]), f3(f["judge"]["macro_f1_14"]),
                 f3(f["rules"]["micro_f1_5"]), f3(f["judge"]["micro_f1_5"]),
                 f"{p['name_a_finding']['rules']} / {p['name_a_finding']['judge']}"]
        if p["name"] == base:
            cells += ["-"] * 4
        else:
            c = find(group["comparisons"], p["name"], base)
            cells += [change_cell(c["rules"]["macro_f1_14"]), change_cell(c["judge"]["macro_f1_14"]),
                      change_cell(c["rules"]["micro_f1_5"]), change_cell(c["judge"]["micro_f1_5"])]
        lines.append("| " + " | ".join(cells) + " |")
    refs = group.get("references_name_a_finding")
    lines.append(f"| {ref_label} | 1.000 | 1.000 | 1.000 | 1.000 | {refs['rules']} / {refs['judge']} | - | - | - | - |")
    pairs = [c for c in group["comparisons"] if c["kind"] == "policy"]
    if pairs:
        lines += [
            "",
            "| comparison | macro-14, rules | macro-14, judge | micro-5, rules | micro-5, judge | macro-14 verdict under the judge |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for c in pairs:
            lines.append(
                f"| {c['policy']} vs {c['against']} | {change_cell(c['rules']['macro_f1_14'])} | "
                f"{change_cell(c['judge']['macro_f1_14'])} | {change_cell(c['rules']['micro_f1_5'])} | "
                f"{change_cell(c['judge']['micro_f1_5'])} | {status(c)} |")
    return lines


def method_note(d: dict, n: int) -> str:
    b = d["bootstrap"]
    return (f"Relative change in % with its {round(100 * b['level'])} % paired-bootstrap interval over the "
            f"{n} studies ({b['resamples']} resamples, seed {b['seed']}; `*`: excludes 0; `[n/a]`: some "
            f"resample's baseline F1 is 0, so no interval, as in the tables above). Rule F1 counts uncertain "
            f"as present, as every table; the judge has no uncertain label. \"Naming a finding\": an "
            f"observation other than No Finding and Support Devices present. \"Verdict under the judge\": "
            f"whether the rules' macro-14 verdict (higher, lower or inconclusive) is the judge's too. "
            f"Data: `{{src}}`, written by `.venv-trainers/bin/python recipes/rejudge.py` from the committed "
            f"generations (the rule figures reproduce the tables).")


LEAD = ("The clinical columns of the tables above, rescored from the committed generations by two "
        "labelers on the same studies against the same references: the rules (SPEC §8, the tables' "
        "CheXpert-rule F1) and [the judge](judge.md) (SPEC §8a: CheXpert labels learnt from IU X-ray's human "
        "coding; a labeler, not the BERTScore model of the semantic columns).\n")


def impression_table() -> str:
    d = load(IMPRESSION_JSON)
    n = d["studies"]
    lines = [LEAD]
    for a in d["attempts"]:
        lines.append(f"**{a['title']}**, against {a['baseline']}:\n")
        lines += group_tables({**a, "references_name_a_finding": d["references_name_a_finding"]}, n,
                              "impressions", "reference impressions")
        lines.append("")
    lines.append(method_note(d, n).replace("{src}", IMPRESSION_JSON))
    return "\n".join(lines) + "\n"


# --- Full reports -----------------------------------------------------------------------


def report_verdict() -> str:
    d = load(REPORT_JSON)
    n = d["studies"]
    secs = d["sections"]
    base_dirs = [(s, c) for s in secs for c in s["comparisons"] if c["kind"] == "baseline"]
    moved = [(s, c) for s, c in base_dirs if direction(c["judge"]["macro_f1_14"])]
    if moved:
        flat = ("the judge finds these macro-14 F1 changes against SFT: "
                + "; ".join(f"{c['policy']} ({s['section']}) {worded(c['judge']['macro_f1_14'], n)}"
                            for s, c in moved))
    else:
        flat = (f"no GRPO policy's macro-14 F1 differs from SFT's on either section under the judge "
                f"(every interval includes 0)")
    most = {s["section"]: max(p["name_a_finding"]["judge"] for p in s["policies"]) for s in secs}
    refs = {s["section"]: s["references_name_a_finding"]["judge"] for s in secs}
    s1 = (f"**Judged by {JUDGE_LINK}** on the same {n} studies, {flat}: the judge labels at most "
          + " and ".join(f"{most[s['section']]} of a policy's {n} {s['section'].capitalize()} sections"
                         for s in secs)
          + " with a finding (the references: "
          + " and ".join(f"{refs[s['section']]}" for s in secs)
          + "), so the page's flat CheXpert F1 holds.")
    dis = disagreements([(s["section"].capitalize(), s["comparisons"]) for s in secs])
    if dis:
        parts = []
        for label, c in dis:
            sec = next(s for s in secs if s["section"].capitalize() == label)
            p = policy_of(sec, c["policy"])
            parts.append(f"{c['policy']} against {c['against']} ({label}) is {both(c)}; the rules "
                         f"label {p['name_a_finding']['rules']} of its {n} {label} sections with a finding, "
                         f"the judge {p['name_a_finding']['judge']}")
        s2 = (f"{len(parts)} macro-14 verdict{'s change' if len(parts) > 1 else ' changes'} under the judge: "
              + "; ".join(parts) + ".")
    else:
        s2 = "No macro-14 verdict changes under the judge."
    return s1 + " " + s2 + "\n"


def report_table() -> str:
    d = load(REPORT_JSON)
    n = d["studies"]
    lines = [LEAD]
    for s in d["sections"]:
        lines.append(f"**{s['section'].capitalize()}** ({n} studies), against {s['baseline']}:\n")
        lines += group_tables(s, n, "sections", f"reference {s['section'].capitalize()}")
        lines.append("")
    lines.append(method_note(d, n).replace("{src}", REPORT_JSON))
    return "\n".join(lines) + "\n"


BLOCKS = {
    ("grpo-impression.md", "judge-verdict"): impression_verdict,
    ("grpo-impression.md", "judge-table"): impression_table,
    ("grpo.md", "judge-verdict"): report_verdict,
    ("grpo.md", "judge-table"): report_table,
}
