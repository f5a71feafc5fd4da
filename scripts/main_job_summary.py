#!/usr/bin/env python3
"""The main job's closing summary: what was selected and pruned, the few figures that matter with
their intervals, and where the full tables are; at most about 15 lines.

    python3 scripts/main_job_summary.py [--out results/main-job] [--pruning results/pruning]
        [--pruning-set gemma3] [--seconds N]

Reads the CSV tables that `sdr select-eval` and `sdr eval` wrote (standard library only).
"""

from __future__ import annotations

import argparse
import csv
import statistics
from pathlib import Path

COLS = [("ROUGE-L", "ROUGE-L"), ("BERTScore-F1", "BERTScore"),
        ("CheXpert-rule F1 macro-14", "rule F1"), ("judge F1 macro-14", "judge F1")]


def rows(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def col(header: list[str], name: str) -> str | None:
    return next((h for h in header if h == name or h.startswith(name + " [")), None)


def family_line(table: list[dict], clinical: bool) -> str:
    fam = [r for r in table if r["policy"].startswith("clinical/") == clinical]
    header = list(table[0])
    cells = []
    for name, short in COLS:
        c = col(header, name)
        if c is None:
            continue
        vals = [float(r[c]) for r in fam if r[c] not in ("", "nan")]
        lo = [float(r[f"{c} 95% low"]) for r in fam if r.get(f"{c} 95% low") not in (None, "", "nan")]
        hi = [float(r[f"{c} 95% high"]) for r in fam if r.get(f"{c} 95% high") not in (None, "", "nan")]
        up, down = sum(x > 0 for x in lo), sum(x < 0 for x in hi)
        cells.append(f"{short} {statistics.median(vals):+.1f} % ({up} up, {down} down)")
    return f"    {'clinical' if clinical else 'cosine  '} ({len(fam)}): " + ", ".join(cells)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("results/main-job"))
    ap.add_argument("--pruning", type=Path, default=Path("results/pruning"))
    ap.add_argument("--pruning-set", default="gemma3",
                    help="candidate set of the pruning tables (<set>-table.csv; default gemma3)")
    ap.add_argument("--seconds", type=int, default=None)
    a = ap.parse_args()
    took = f" in {a.seconds // 60} min {a.seconds % 60} s" if a.seconds is not None else ""
    f = rows(a.out / "findings_vs_random_wf.csv")
    n_pol = len(f)
    studies = sum(1 for _ in (a.out / "selections.jsonl").open()) if (a.out / "selections.jsonl").exists() else "?"
    print(f"== SDR main job done{took}: best-of-K on {studies} IU X-ray test studies, {n_pol} policies "
          f"(cosine cost and clinical cost)")
    for sec in ("findings", "impression"):
        t = rows(a.out / f"{sec}_vs_random_wf.csv")
        print(f"  {sec.capitalize()}, change against random picks (median over policies; policies whose 95 % "
              f"interval is above / below 0):")
        print(family_line(t, False))
        print(family_line(t, True))
    # scripts/pruning-results.sh names its tables by candidate set: gemma3 is the main job's.
    table = a.pruning / f"{a.pruning_set}-table.csv"
    p = {r["policy"]: r for r in rows(table)} if table.exists() else {}
    std, pr = p.get("chamfer@min standard"), p.get("chamfer@min pruning wu1")
    if std and pr:
        print(f"  Pruning (chamfer@min, warm-up 1): {float(pr['tokens saved %']):.1f} % of tokens saved; "
              f"Findings ROUGE-L {float(pr['F ROUGE-L']):.3f} against {float(std['F ROUGE-L']):.3f} for "
              f"standard best-of-K, well-formed {float(pr['well-formed %']):.0f} % against "
              f"{float(std['well-formed %']):.0f} % (intervals: {table.with_suffix('.md')})")
    else:
        print(f"  Pruning: no chamfer@min standard / pruning wu1 rows in {table} "
              f"({'missing' if not table.exists() else 'rows missing'})")
    print("  Clinical caveat: the candidates come from a text-only generator that never sees the study, and "
          "closeness to a corpus favours normal-sounding reports; rule F1 and judge F1 (labels learnt from "
          "human coding, docs/results/judge.md) say how often findings are lost.")
    print(f"  Full tables and heatmaps: {a.out}/ (*_vs_random_wf.md, *_strata.md, heatmap_*.png), "
          f"{table.with_suffix('.md')}; pages: docs/results/main-job.md, docs/results/pruning.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
