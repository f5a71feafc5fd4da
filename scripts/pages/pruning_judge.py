"""docs/results/pruning.md: what the judge says about pruning against standard best-of-K.

Reads the page's own comparison tables (written by `sdr eval --judge-f1` through
scripts/pruning-results.sh): for each comparison, the 95 % paired-bootstrap interval of the
relative change of macro-14 and micro-14 F1 under the rule labeler and under the judge, and whether
the verdict (higher / lower / inconclusive) is the same.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs/results/pruning.md"
CELL = re.compile(r"^(-?\d+(?:\.\d+)?) \[([+-]\d+(?:\.\d+)?), ([+-]\d+(?:\.\d+)?)\]\*?$")
PAIRS = [("CheXpert-rule F1 macro-14", "judge F1 macro-14", "macro-14"),
         ("CheXpert-rule F1 micro-14", "judge F1 micro-14", "micro-14")]


def verdict(cell: str) -> str:
    m = CELL.match(cell.strip())
    if not m:
        return "no interval"
    lo, hi = float(m.group(2)), float(m.group(3))
    return "higher" if lo > 0 else "lower" if hi < 0 else "inconclusive"


def comparison_tables(text: str):
    """(title, header, rows) of each "Change against the compared run" table."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not line.startswith("### Change against the compared run"):
            continue
        rows = []
        for l in lines[i + 1:]:
            if l.startswith("|---"):
                continue
            if l.startswith("| "):
                rows.append([c.strip() for c in l.strip().strip("|").split("|")])
            elif rows:
                break
        yield line.removeprefix("### "), rows[0], rows[1:]


def block() -> str:
    text = PAGE.read_text()
    # The block's own text is not an input.
    a, b = text.find("<!-- results:judge-verdict:begin -->"), text.find("<!-- results:judge-verdict:end -->")
    if a >= 0 and b > a:
        text = text[:a] + text[b:]
    out = ["**Judged by [the judge](judge.md) as well as by the rules** (`sdr eval --judge-f1`; "
           "labels learnt from IU X-ray's human coding, SPEC §8a): the verdict of each comparison's "
           "95 % paired-bootstrap interval on macro-14 and micro-14 F1 under each labeler.", "",
           "| comparison | rules macro-14 | judge macro-14 | rules micro-14 | judge micro-14 |",
           "|---|---|---|---|---|"]
    changes, total = [], 0
    for title, header, rows in comparison_tables(text):
        n = re.search(r"\((\d+) studies", title)
        where = f"{n.group(1)} studies" if n else title
        for r in rows:
            cells = []
            for rule_col, judge_col, short in PAIRS:
                if rule_col not in header or judge_col not in header:
                    continue
                rv, jv = verdict(r[header.index(rule_col)]), verdict(r[header.index(judge_col)])
                cells += [f"{r[header.index(rule_col)]} ({rv})", f"{r[header.index(judge_col)]} ({jv})"]
                total += 1
                if rv != jv and "no interval" not in (rv, jv):
                    changes.append(f"{r[0]} ({where}, {short}): {rv} by the rules, {jv} by the judge")
            if cells:
                out.append(f"| {r[0]} ({where}) | " + " | ".join(cells) + " |")
    out.append("")
    if changes:
        out.append(f"**{len(changes)} of {total} verdicts change under the judge:** " + "; ".join(changes) + ".")
    else:
        out.append(f"**No verdict changes under the judge** ({total} compared).")
    return "\n".join(out)


BLOCKS = {("pruning.md", "judge-verdict"): block}
