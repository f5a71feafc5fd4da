"""Evaluate the Findings -> Impression policies on held-out IU X-ray test studies.

Each policy writes the Impression of the first ``--studies`` test studies (``uid % 10 ==
0``, both sections present) greedily from their Findings. Against the reference
Impression:

- **CheXpert-rule F1** (macro over 14 observations, micro over 5) of the generated against
  the reference Impression (``sdr_rewards.chexpert_f1``, the rule-based labeler);
- **contradicts own Findings**: the share of generated impressions with a sentence whose
  finding the study's own Findings state with the opposite polarity (present against
  absent), found by the clinical cost's sentence facts (``sdr_rewards.clinical_conflicts``, SPEC
  §10); the reference impressions' own share is given as a row of the table;
- **BERTScore-F1** judged by all-MiniLM-L6-v2 (independent of the reward's
  all-mpnet-base-v2) and **ROUGE-L**, on the whole Impression (``sdr_rewards.metrics.score``).

Every relative change against the first policy (SFT) carries its 95 % paired-bootstrap
interval over the studies (1,000 resamples, fixed seed; ``*`` where it excludes 0).
Writes ``<out>/generations/*.jsonl``, ``<out>/summary.json``, each study's values under
every policy (``<out>/per_study.jsonl.gz``, for policy-against-policy intervals), the reward curves
(``<out>/reward_curves.png``) and the Markdown table ``<table>.generated``.

    python recipes/evaluate_impression.py --studies 200 \\
        --policy SFT=recipes/out/f2i-sft/final \\
        --policy "GRPO(cosine)=recipes/out/f2i-grpo-cos/final" ...
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import evaluate  # noqa: E402


def contradicts(impression: str, findings: str) -> bool:
    """Whether a sentence of `impression` states a finding its own `findings` state with
    the opposite polarity (present against absent)."""
    import sdr_rewards

    a, b = sdr_rewards.split_sentences(impression), sdr_rewards.split_sentences(findings)
    if not a or not b:
        return False
    c = sdr_rewards.clinical_conflicts(a, b)
    return any(x is not None and x["kind"] == "polarity" for x in c["a"])


def scores(hyps, rows, judge: Path):
    """Per-study values and corpus-level CheXpert-rule F1 of impressions `hyps`."""
    import sdr_rewards
    from sdr_rewards import metrics

    refs = [common.impression_target(r) for r in rows]
    per = metrics.score(hyps, refs, metrics=["ROUGE-L", "BERTScore-F1"], sections=False, bertscore_model=judge)
    f1 = sdr_rewards.chexpert_f1(hyps, refs)
    return {
        "per_study": {
            "contradicts own Findings %": [
                100.0 * contradicts(h, " ".join(r["findings"].split())) for h, r in zip(hyps, rows)
            ],
            "BERTScore-F1 (MiniLM)": [p["whole"]["BERTScore-F1"] for p in per],
            "ROUGE-L": [p["whole"]["ROUGE-L"] for p in per],
            "mean words": [float(len(h.split())) for h in hyps],
        },
        "CheXpert-rule F1 (14, macro)": f1["macro_f1_14"],
        "CheXpert-rule F1 (5, micro)": f1["micro_f1_5"],
    }


def summary(s) -> dict:
    out = {k: s[k] for k in ("CheXpert-rule F1 (14, macro)", "CheXpert-rule F1 (5, micro)")}
    for k, v in s["per_study"].items():
        out[k] = sum(v) / len(v)
    return out


def write_per_study(path: Path, rows, results: dict) -> None:
    """Each study's per-study values under every policy (one JSON line per study, gzip
    with no timestamp, written atomically), so that two policies can be compared with a
    paired bootstrap without generating again (scripts/pages reads it)."""
    import gzip
    import os

    lines = []
    for i, r in enumerate(rows):
        lines.append(json.dumps({
            "id": int(r["uid"]),
            "values": {n: {k: v[i] for k, v in res["per_study"].items()} for n, res in results.items()},
        }, sort_keys=True))
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.write(gzip.compress(("\n".join(lines) + "\n").encode(), mtime=0))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", required=True, help="NAME=CHECKPOINT_DIR (first is the baseline)")
    ap.add_argument("--studies", type=int, default=200, help="first N test studies with both sections")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--logs", action="append", default=[], help="NAME=log_history.jsonl for the curves")
    ap.add_argument("--out", default=str(common.ROOT / "docs/results/grpo-impression"))
    ap.add_argument("--table", default=str(common.ROOT / "docs/results/grpo-impression.md"))
    ap.add_argument("--bertscore-model", default=str(evaluate.MINILM), help="BERTScore judge (all-MiniLM-L6-v2)")
    args = ap.parse_args()

    from sdr_rewards import metrics

    common.set_threads()
    out = Path(args.out)
    rows = common.studies("test")[: args.studies]
    refs = [common.impression_target(r) for r in rows]
    judge = Path(args.bertscore_model)
    results, hyps_of, timings = {}, {}, {}
    # The reference impressions themselves: how often radiologists' own impressions
    # contradict their Findings by these rules (the floor a policy can reach).
    ref_contra = [100.0 * contradicts(h, " ".join(r["findings"].split())) for h, r in zip(refs, rows)]
    for spec in args.policy:
        name, _, path = spec.partition("=")
        slug = "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()
        gen_file = out / "generations" / f"{slug}.jsonl"
        have = len(gen_file.read_text().splitlines()) if gen_file.exists() else 0
        if have != len(rows):
            print(f"generating {name} from {path}", flush=True)
            timings[name] = round(
                evaluate.generate(
                    Path(path), rows, gen_file, args.batch, args.max_new_tokens, common.impression_prompt_messages
                ),
                1,
            )
        gens = {g["id"]: g["text"] for g in map(json.loads, gen_file.read_text().splitlines())}
        hyps = [" ".join(gens[int(r["uid"])].split()) for r in rows]
        hyps_of[name] = hyps
        results[name] = scores(hyps, rows, judge)
    names = list(results)
    base = names[0]
    summaries = {n: summary(results[n]) for n in names}
    cis = {}
    for n in names[1:]:
        ci = {}
        for k in results[n]["per_study"]:
            ci[k] = metrics.paired_bootstrap(results[n]["per_study"][k], results[base]["per_study"][k])
        cx = metrics.chexpert_f1_bootstrap(hyps_of[n], hyps_of[base], refs)
        ci["CheXpert-rule F1 (14, macro)"] = cx["macro_f1_14"]
        ci["CheXpert-rule F1 (5, micro)"] = cx["micro_f1_5"]
        cis[n] = ci
    out.mkdir(parents=True, exist_ok=True)
    old = out / "summary.json"
    if old.exists():
        timings = {**json.loads(old.read_text()).get("generation_seconds", {}), **timings}
    result = {
        "studies": len(rows),
        "summaries": summaries,
        "intervals_vs_first": cis,
        "reference_contradicts_pct": sum(ref_contra) / len(ref_contra),
        "reference_mean_words": sum(len(r.split()) for r in refs) / len(refs),
        "bertscore_model": judge.name,
        "generation_seconds": timings,
    }
    (out / "summary.json").write_text(json.dumps(result, indent=1) + "\n")
    # The table as grpo-impression.md prints it (scripts/pages/grpo_impression_text.py).
    md = (f"Impression of {len(rows)} held-out test studies, generated greedily from their Findings; "
          f"relative change against {base} with its 95 % paired-bootstrap interval (`*`: excludes 0).\n\n"
          + evaluate._page_module("grpo_impression_text").summary_table_of(result) + "\n")
    print(md)
    write_per_study(out / "per_study.jsonl.gz", rows, results)
    if args.logs:
        runs = {
            n: evaluate.read_log(Path(p)) for n, p in (s.split("=", 1) for s in args.logs) if Path(p).exists()
        }
        evaluate.curves(runs, out / "reward_curves.png")
        train = evaluate.training_table(runs)
        print(train)
        md += "\n" + train
    Path(args.table + ".generated").write_text(md)


if __name__ == "__main__":
    main()
