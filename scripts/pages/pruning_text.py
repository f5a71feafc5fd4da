"""docs/results/pruning.md's conclusions, and the figures other pages quote from it, in words.

Reads pruning.md's own tables (written by `sdr eval` through scripts/pruning-results.sh): the
per-policy tables ("Random vs standard best-of-K vs pruning", "Format-keeping stand-ins") and
each "Change against the compared run" table (relative change of each pruning run against
standard best-of-K under the same policy, with its 95 % paired-bootstrap interval over the
studies). Blocks:

- pruning.md `intervals`: per run, the changes whose interval excludes 0 (losses and gains),
  how many are inconclusive and how wide, and which carry no interval;
- pruning-gap.md `current-run`: the quantities that page discusses (share of standard's
  Findings BERTScore-F1 kept, tokens saved, well-formed picks) in the current run.

Every figure comes from one function, `policy_value` or `changes`, so a page quoting a figure
of pruning.md quotes the same one. Wording rule (as `scripts/results.py`'s `verdict`): a
direction only when the interval excludes 0, else "inconclusive" with the interval.
Standard library only.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs/results/pruning.md"
CELL = re.compile(r"^(-?\d+(?:\.\d+)?) \[([+-]\d+(?:\.\d+)?), ([+-]\d+(?:\.\d+)?)\]\*?$")
OWN = ("intervals",)


def page_text() -> str:
    """pruning.md without this module's own blocks (they are not an input)."""
    text = PAGE.read_text()
    for name in OWN:
        a, b = text.find(f"<!-- results:{name}:begin -->"), text.find(f"<!-- results:{name}:end -->")
        if a >= 0 and b > a:
            text = text[:a] + text[b:]
    return text


def tables(text: str | None = None):
    """(heading, header cells, rows of cells) of every table under a `### ` heading."""
    lines = (text if text is not None else page_text()).splitlines()
    out = []
    for i, line in enumerate(lines):
        if not line.startswith("### "):
            continue
        rows = []
        for l in lines[i + 1:]:
            if l.startswith("### ") or l.startswith("## "):
                break
            if l.startswith("|---"):
                continue
            if l.startswith("| "):
                rows.append([c.strip() for c in l.strip().strip("|").split("|")])
            elif rows:
                break
        if rows:
            out.append((line.removeprefix("### "), rows[0], rows[1:]))
    return out


def studies(heading: str) -> int:
    m = re.search(r"(\d+) studies", heading)
    return int(m.group(1)) if m else 0


def policy_tables():
    return [t for t in tables() if t[1][0] == "policy"]


def change_tables():
    return [t for t in tables() if t[1][0] == "comparison"]


def policy_value(run: str, column: str, which: int = 0) -> float:
    """`column` of policy `run` in the `which`-th per-policy table (0: the Gemma 3 candidates,
    1: the stand-ins)."""
    _, header, rows = policy_tables()[which]
    for r in rows:
        if r[0] == run:
            return float(r[header.index(column)])
    raise SystemExit(f"results: docs/results/pruning.md has no row `{run}` in table {which}")


def changes(which: int = 0):
    """[(run, column, value, low, high)] of the `which`-th change table; low/high None where the
    cell has no interval."""
    _, header, rows = change_tables()[which]
    out = []
    for r in rows:
        run = r[0].split(" vs ")[0]
        for col, cell in zip(header[1:], r[1:]):
            m = CELL.match(cell)
            if m:
                out.append((run, col, float(m.group(1)), float(m.group(2)), float(m.group(3))))
            elif cell not in ("", "-"):
                out.append((run, col, float(cell), None, None))
    return out


def ci(v: float, lo: float, hi: float) -> str:
    return f"{v:+.1f} % [{lo:+.1f}, {hi:+.1f}]"


def table_summary(which: int) -> str:
    heading = change_tables()[which][0]
    n = studies(heading)
    cs = changes(which)
    runs = list(dict.fromkeys(c[0] for c in cs))
    parts = []
    for run in runs:
        mine = [c for c in cs if c[0] == run and c[3] is not None]
        lower = [f"{c[1]} {ci(*c[2:])}" for c in mine if c[4] < 0]
        higher = [f"{c[1]} {ci(*c[2:])}" for c in mine if c[3] > 0]
        incon = len(mine) - len(lower) - len(higher)
        s = f"{run}: " + ("lower on " + ", ".join(lower) if lower else "lower on nothing")
        s += ("; higher on " + ", ".join(higher)) if higher else ""
        s += f"; inconclusive on the other {incon} of {len(mine)}"
        parts.append(s)
    with_iv = [c for c in cs if c[3] is not None]
    lexical = [c for c in with_iv if re.search(r"BLEU|ROUGE", c[1]) and c[3] <= 0 <= c[4]]
    wide = max(lexical, key=lambda c: c[4] - c[3]) if lexical else None
    none = [c for c in cs if c[3] is None]
    source = policy_tables()[which][0]
    name = "Format-keeping stand-ins" if source.startswith("Format-keeping") else "Gemma 3 270M candidates"
    out = [f"*{name} ({n} studies).* " + ". ".join(parts) + "."]
    if wide:
        out.append(
            f"Inconclusive does not mean kept: {len(lexical)} BLEU-4 / ROUGE-L changes include 0, "
            f"with intervals as wide as [{wide[3]:+.1f}, {wide[4]:+.1f}] ({wide[0]}, {wide[1]}), so these "
            f"{n} studies cannot tell a loss from a gain of that size.")
    if none:
        cols = sorted({c[1] for c in none})
        out.append(f"{len(none)} changes carry no interval ({', '.join(cols)}): some resample's "
                   f"standard F1 is 0, so the relative change is undefined there; read them as unsupported.")
    return " ".join(out)


def intervals_block() -> str:
    out = ["**What the intervals say** (each pruning run against standard best-of-K under the same "
           "policy, from the \"Change against the compared run\" tables below: relative change in % with "
           "its 95 % paired-bootstrap interval over the studies; lower or higher only where the interval "
           "excludes 0). F = Findings, I = Impression.", ""]
    for i in range(len(change_tables())):
        out.append("- " + table_summary(i))
    return "\n".join(out)


def keep_share(run: str, standard: str, which: int = 0) -> float:
    return 100.0 * policy_value(run, "F BERTScore-F1", which) / policy_value(standard, "F BERTScore-F1", which)


def current_run_block() -> str:
    heading = policy_tables()[0][0]
    n = studies(heading)
    metrics = ("chamfer", "hausdorff", "hung-nn")

    def cell(m: str, label: str) -> str:
        run, std = f"{m}@min pruning {label}", f"{m}@min standard"
        return (f"{m} {keep_share(run, std):.1f} % at {policy_value(run, 'tokens saved %'):.1f} % saved, "
                f"{round(policy_value(run, 'well-formed %') * n / 100)} of {n} picks well-formed")

    std_wf = sorted({round(policy_value(f"{m}@min standard", "well-formed %") * n / 100) for m in metrics})
    return (f"**The same quantities in the current run** ([`pruning.md`](pruning.md)'s first table, {n} "
            f"studies, today's `sdr`; share of standard best-of-K's Findings BERTScore-F1 kept, tokens "
            f"saved, well-formed picks): one survivor (wu1) "
            + "; ".join(cell(m, "wu1") for m in metrics)
            + "; two survivors (wu1 s2) " + "; ".join(cell(m, "wu1 s2") for m in metrics)
            + f". Standard best-of-K's picks are well-formed in {'/'.join(map(str, std_wf))} of {n}. "
            "Whether these differences are significant: pruning.md's change tables and its \"What the "
            "intervals say\".")


BLOCKS = {
    ("pruning.md", "intervals"): intervals_block,
    ("pruning-gap.md", "current-run"): current_run_block,
}
