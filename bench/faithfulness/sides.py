"""Side swaps in any finding (issue 57 item 4): does a left/right swap cost more than a
rephrasing, whatever the finding?

    # 1. the cases (adds `side_any`: left/right swapped in any sentence that states something
    #    on one side, whatever its finding) and the Chamfer rewards of every case
    python3 bench/faithfulness/make_cases.py
    cargo build --release -p sdr-bench --bin faithfulness
    target/release/faithfulness bench/faithfulness/cases.jsonl chamfer.jsonl \\
        --model ~/.cache/sdr/models/all-mpnet-base-v2 --metrics chamfer --no-bertscore
    # 2. whether the clinical cost's facts see the swap (the installed Python package's
    #    `clinical_conflicts`), run once per build to compare
    .venv-trainers/bin/python bench/faithfulness/sides.py conflicts --out docs/results/faithfulness/sides-conflicts.json
    # 3. the summary
    python3 bench/faithfulness/sides.py summary chamfer.jsonl --out docs/results/faithfulness/sides.json

`summary` writes, for `cosine/chamfer` and `clinical/chamfer` (the paper's reward and the
clinical cost at its defaults; drop = the reference's reward against itself minus the edited
copy's):

- the mean drop of `side_any`, `left_right`, the reversed findings (`absent_to_present` and
  `present_to_absent` pooled), `rephrase` and `unrelated`, and the side and reversed drops as
  multiples of the unrelated drop (the goal: at least 0.5x);
- **swap beats rephrasing**: over the studies that have both a `side_any` and a `rephrase`
  case, the share where the swapped copy's drop is strictly larger (the goal: at least 90 %),
  with a 95 % percentile bootstrap interval over those studies (1,000 resamples, seed 43);
- the same for every held-out study (test and validation) and the test studies alone
  (uid % 10 == 0), where no default was chosen.

It also writes the per-case drops it read (`--cases-out`, gzipped JSON Lines) so the page can
be recomputed. `conflicts` reads `side_any` cases and records, per case, whether the clinical
cost sees a conflict of kind `side` or `bilateral` between the edited sentence and the original
(`clinical_conflicts([after], [before])`), the package version it ran with and the share.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
CASES = ROOT / "bench" / "faithfulness" / "cases.jsonl"
CONFIGS = ["cosine/chamfer", "clinical/chamfer"]
KINDS = ["side_any", "left_right", "reversed", "rephrase", "unrelated"]


def write_atomic(path: Path, text: str, binary: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if binary:
        with gzip.open(tmp, "wt", encoding="utf-8", compresslevel=9) as fh:
            fh.write(text)
    else:
        tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def read_drops(path: Path) -> list[dict]:
    out = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            try:
                c = json.loads(line)
                drops = {k: c["self"][k] - c["candidate"][k] for k in CONFIGS}
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{n}: not a faithfulness result line with {CONFIGS} ({e})")
            out.append({"id": c["id"], "uid": int(c["uid"]), "kind": c["kind"], "drop": drops})
    return out


def share_interval(wins: list[float], resamples: int, seed: int) -> tuple[float, float, float]:
    rng = random.Random(seed)
    n = len(wins)
    boots = sorted(sum(wins[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    return sum(wins) / n, boots[int(0.025 * resamples)], boots[int(0.975 * resamples) - 1]


def summarize(rows: list[dict], resamples: int, seed: int) -> dict:
    by = defaultdict(list)
    per_study: dict[int, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        kind = "reversed" if r["kind"] in ("absent_to_present", "present_to_absent") else r["kind"]
        by[kind].append(r)
        per_study[r["uid"]][r["kind"]] = r
    out: dict = {}
    for cfg in CONFIGS:
        mean = {k: sum(r["drop"][cfg] for r in by[k]) / len(by[k]) for k in KINDS if by[k]}
        both = sorted(u for u, ks in per_study.items() if "side_any" in ks and "rephrase" in ks)
        wins = [
            1.0 if per_study[u]["side_any"]["drop"][cfg] > per_study[u]["rephrase"]["drop"][cfg] else 0.0
            for u in both
        ]
        share, lo, hi = share_interval(wins, resamples, seed)
        test = [w for u, w in zip(both, wins) if u % 10 == 0]
        tshare, tlo, thi = share_interval(test, resamples, seed)
        out[cfg] = {
            "mean_drop": {k: round(v, 6) for k, v in mean.items()},
            "cases": {k: len(by[k]) for k in KINDS},
            "side_any_over_unrelated": round(mean["side_any"] / mean["unrelated"], 6),
            "left_right_over_unrelated": round(mean["left_right"] / mean["unrelated"], 6),
            "reversed_over_unrelated": round(mean["reversed"] / mean["unrelated"], 6),
            "swap_beats_rephrase": {
                "studies": len(both),
                "share": round(share, 6),
                "ci95": [round(lo, 6), round(hi, 6)],
                "test_studies": len(test),
                "test_share": round(tshare, 6),
                "test_ci95": [round(tlo, 6), round(thi, 6)],
            },
        }
    return out


def conflicts(args) -> int:
    try:
        import sdr_rewards as pkg  # noqa: F401
    except ImportError:
        try:
            import sdr as pkg  # the import name before the rename (a build before this change)
        except ImportError:
            sys.exit("neither sdr_rewards nor sdr is importable: run with the trainers' venv")
    cases = [json.loads(l) for l in open(args.cases, encoding="utf-8")]
    side = [c for c in cases if c["kind"] == "side_any"]
    if not side:
        sys.exit(f"{args.cases}: no side_any case (run make_cases.py first)")
    per = []
    for c in side:
        conf = pkg.clinical_conflicts([c["after"]], [c["before"]])
        kinds = sorted({x["kind"] for x in conf["a"] + conf["b"] if x})
        per.append({"id": c["id"], "seen": any(k in ("side", "bilateral") for k in kinds), "kinds": kinds})
    seen = sum(p["seen"] for p in per)
    res = {
        "package": f"{pkg.__name__} {getattr(pkg, '__version__', '?')}",
        "cases": len(per),
        "side_conflict_seen": seen,
        "share": round(seen / len(per), 6),
        "unseen_examples": [c["before"] for c, p in zip(side, per) if not p["seen"]][:12],
        "per_case": per,
    }
    write_atomic(args.out, json.dumps(res, indent=1) + "\n")
    print(f"{pkg.__name__}: the facts see {seen} of {len(per)} side swaps ({100 * seen / len(per):.1f} %)")
    return 0


def summary(args) -> int:
    rows = read_drops(args.results)
    res = summarize(rows, args.resamples, args.seed)
    res["source"] = "target/release/faithfulness bench/faithfulness/cases.jsonl --metrics chamfer --no-bertscore"
    res["resamples"], res["seed"] = args.resamples, args.seed
    write_atomic(args.out, json.dumps(res, indent=1) + "\n")
    if args.cases_out:
        write_atomic(args.cases_out, "".join(json.dumps(r) + "\n" for r in rows), binary=True)
    for cfg in CONFIGS:
        r = res[cfg]
        s = r["swap_beats_rephrase"]
        print(
            f"{cfg}: side_any drop {r['mean_drop']['side_any']:.3f} ({r['side_any_over_unrelated']:.2f}x unrelated), "
            f"reversed {r['reversed_over_unrelated']:.2f}x; swap > rephrase in {100 * s['share']:.1f} % "
            f"[{100 * s['ci95'][0]:.1f}, {100 * s['ci95'][1]:.1f}] of {s['studies']} studies"
        )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="drops and shares from a faithfulness run")
    s.add_argument("results", type=Path, help="the faithfulness program's output (JSON Lines)")
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--cases-out", type=Path, default=None, help="per-case drops, .jsonl.gz")
    s.add_argument("--resamples", type=int, default=1000)
    s.add_argument("--seed", type=int, default=43)
    c = sub.add_parser("conflicts", help="whether the installed package's facts see each side swap")
    c.add_argument("--cases", type=Path, default=CASES)
    c.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    return summary(args) if args.cmd == "summary" else conflicts(args)


if __name__ == "__main__":
    sys.exit(main())
