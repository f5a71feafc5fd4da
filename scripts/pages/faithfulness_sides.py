"""Sides of any finding and a finding added or omitted weighed apart (issue 57 items 3 and 4),
a block of the faithfulness benchmark's page (docs/results/faithfulness.md).

Rendered from:

- `docs/results/faithfulness/sides.json` (`python3 bench/faithfulness/sides.py summary`, over a
  `faithfulness --metrics chamfer --no-bertscore` run; per-case drops beside it in
  `sides-cases.jsonl.gz`): the `side_any` cases' drops and how often a swap costs more than the
  study's rephrasing, with its 95 % bootstrap interval over studies;
- `sides-conflicts.json` and `sides-conflicts-before.json` (`cargo run -p sdr-clinical
  --example side_swaps`, on this tree and on the release before site facts): how many swaps
  the clinical cost's facts see;
- `added-omitted.jsonl.gz` (`faithfulness --lambda 1.5 --unmatched 0.5,0.25,0 --omitted 0.5,1
  --metrics chamfer --no-bertscore`, gzipped), summarised by `bench/faithfulness/summarize.py`'s
  own `summarize` per split.

Standard library only.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "docs/results/faithfulness"
SWEEP = "added-omitted.jsonl.gz"


def _summarize_module():
    spec = importlib.util.spec_from_file_location("summarize", ROOT / "bench/faithfulness/summarize.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def sides() -> str:
    s = json.loads((DIR / "sides.json").read_text())
    after = json.loads((DIR / "sides-conflicts.json").read_text())
    before = json.loads((DIR / "sides-conflicts-before.json").read_text())
    clin, cos = s["clinical/chamfer"], s["cosine/chamfer"]
    w, wc = clin["swap_beats_rephrase"], cos["swap_beats_rephrase"]
    goal = 0.9
    meets = "meets" if w["ci95"][0] >= goal else ("inconclusive against" if w["ci95"][1] >= goal else "misses")
    lines = [
        "### Sides of any finding (`side_any`)",
        "",
        f"`side_any` ({clin['cases']['side_any']} cases): one side word swapped in any held-out Findings "
        "sentence that states something on one side, whatever its finding (`left_right` is its part "
        "whose finding is in `make_cases.py`'s list of abnormal words). The clinical cost's facts see "
        f"the swap (a `side` conflict) in {after['side_conflict_seen']} of {after['cases']} cases "
        f"({pct(after['share'])}); before sites were added to the facts (SPEC §10), in "
        f"{before['side_conflict_seen']} ({pct(before['share'])}).",
        "",
        "| configuration | swap costs more than the rephrasing (studies) | test studies only | "
        "side_any drop | side_any / unrelated | reversed / unrelated |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in (("cosine (the paper's), Chamfer", cos), ("clinical:lambda=1.5 (the defaults), Chamfer", clin)):
        b = r["swap_beats_rephrase"]
        lines.append(
            f"| {name} | {pct(b['share'])} [{100 * b['ci95'][0]:.1f}, {100 * b['ci95'][1]:.1f}] ({b['studies']}) "
            f"| {pct(b['test_share'])} [{100 * b['test_ci95'][0]:.1f}, {100 * b['test_ci95'][1]:.1f}] ({b['test_studies']}) "
            f"| {r['mean_drop']['side_any']:.3f} | {r['side_any_over_unrelated']:.2f} | {r['reversed_over_unrelated']:.2f} |"
        )
    lines += [
        "",
        f"The clinical cost at its defaults {meets} the goal of a swap costing more than the "
        f"rephrasing in at least {100 * goal:.0f} % of studies ({pct(w['share'])}, 95 % interval "
        f"[{100 * w['ci95'][0]:.1f}, {100 * w['ci95'][1]:.1f}] over {w['studies']} studies), with the "
        f"side and reversed drops {clin['side_any_over_unrelated']:.2f}x and "
        f"{clin['reversed_over_unrelated']:.2f}x an unrelated report's (goal: at least 0.5x); the "
        f"paper's cosine cost, {pct(wc['share'])}. Swaps the facts still miss: "
        + "; ".join(f"\"{x}\"" for x in after["unseen_examples"][:3])
        + ".",
    ]
    return "\n".join(lines) + "\n"


def added_omitted() -> str:
    summ = _summarize_module()
    with gzip.open(DIR / SWEEP, "rt", encoding="utf-8") as fh:
        lines = [json.loads(l) for l in fh if l.strip()]
    out = [
        "### A finding added and one omitted weighed apart",
        "",
        "`clinical:added=A,omitted=O` (SPEC §10): `added` weighs a finding the candidate states that "
        "the reference never names, `omitted` one the reference states that the candidate never "
        "names (the defaults weigh both 0.5). Chamfer, lambda 1.5, mean drop per kind of edit and the "
        "goals (reversed, left/right and any-side drops at least 0.5x the unrelated drop, rephrasing "
        "at most 0.25x the reversed drop):",
        "",
        "| split | configuration | omission | hallucination | unrelated | reversed / unrelated | "
        "left-right / unrelated | any side / unrelated | rephrase / reversed | all met |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for split in ("validation", "test"):
        part = [l for l in lines if summ.in_split(l, split)]
        rows, _, _ = summ.summarize(part)
        for c, d, _, g, _ in rows:
            if not c.startswith("clinical") or not c.endswith("/chamfer"):
                continue
            ok = (
                g["reversed/unrelated"] >= 0.5
                and g["left_right/unrelated"] >= 0.5
                and g["side_any/unrelated"] >= 0.5
                and g["rephrase/reversed"] <= 0.25
            )
            label = ("`clinical:lambda=1.5` (the defaults: added = omitted = 0.5)" if c == "clinical/chamfer"
                     else "`clinical:lambda=" + c.split("@", 1)[1].split("/")[0] + "`")
            out.append(
                f"| {split} | {label} | {d['omission']:.3f} | {d['hallucination']:.3f} | {d['unrelated']:.3f} "
                f"| {g['reversed/unrelated']:.2f} | {g['left_right/unrelated']:.2f} | {g['side_any/unrelated']:.2f} "
                f"| {g['rephrase/reversed']:.2f} | {'yes' if ok else 'no'} |"
            )
    out += [
        "",
        "A heavier `omitted` raises what an omission costs and a lighter `added` lowers what a "
        "hallucinated finding costs. Per-split tables of every kind: `added-omitted-validation.md`, `added-omitted-test.md` "
        "(`summarize.py --split S --only chamfer`).",
    ]
    return "\n".join(out) + "\n"


def readme() -> str:
    """The README's sentence on sides of any finding, from the same files as the page's block."""
    s = json.loads((DIR / "sides.json").read_text())
    after = json.loads((DIR / "sides-conflicts.json").read_text())
    w = s["clinical/chamfer"]["swap_beats_rephrase"]
    return (
        "A side is read for any finding, not only those the labeler names: a side word that no named\n"
        "finding takes marks the anatomy it points at (\"the *right hemidiaphragm* remains elevated\",\n"
        "\"*left paratracheal* lymph nodes\"), so swapping it is a conflict; on held-out IU sentences the\n"
        f"cost sees {pct(after['share'])} of such swaps and a swap costs more than a rephrasing in "
        f"{pct(w['share'])} [{100 * w['ci95'][0]:.1f}, {100 * w['ci95'][1]:.1f}] of studies\n"
        "([faithfulness.md](docs/results/faithfulness.md#sides-of-any-finding-a-finding-added-and-one-omitted-weighed-apart-issue-57))."
    )


BLOCKS = {
    ("README.md", "sides"): readme,
    ("faithfulness.md", "sides"): sides,
    ("faithfulness.md", "added-omitted"): added_omitted,
}
