"""How often a Findings -> Impression policy names the right finding when it names one, the
quantity that decides whether the clinical cost teaches it to name findings or to stay silent
(recipes/impression_break_even.py: naming findings pays under the clinical cost only when at
least 27 % of the named findings are right; docs/results/grpo-impression.md).

Two sources of completions:

- ``--policy NAME=CHECKPOINT``: sample ``--samples`` completions per prompt (temperature 1, as
  GRPO does) for the first ``--prompts`` abnormal train studies of impression_break_even.py;
- ``--completions NAME=FILE``: a GRPO run's ``completions.jsonl`` (``recipes/grpo.py
  --log-completions``), split into the first and the last 20 % of its steps.

A completion *names a finding* when the CheXpert rules label one of the 13 findings present in
it; it is *right* when every finding it names is present in the reference Impression, *partly
right* when at least one is.

    python recipes/impression_sampling.py --policy SFT=recipes/out/f2i-sft/final \\
        --completions "GRPO(clinical cost)=recipes/out/f2i-sft2-grpo-clin/completions.jsonl"
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402


def named(text: str) -> set:
    import sdr_rewards

    labels = sdr_rewards.label(" ".join(text.split()))
    return {k for k, v in labels.items() if v == 1 and k != "No Finding"}


def category(completion: str, reference: str) -> str:
    got = named(completion)
    if not got:
        return "names no finding"
    want = named(reference)
    if got <= want:
        return "right finding"
    return "partly right" if got & want else "wrong finding"


CATEGORIES = ("names no finding", "right finding", "partly right", "wrong finding")


def shares(pairs) -> dict:
    """pairs: (completion, reference) -> the shares of the module doc, in %."""
    from collections import Counter

    k = Counter(category(c, r) for c, r in pairs)
    n = sum(k.values())
    naming = n - k["names no finding"]
    pct = lambda a, b: round(100.0 * a / b, 1) if b else None  # noqa: E731
    return {
        "completions": n,
        "names a finding %": pct(naming, n),
        "right, of those naming %": pct(k["right finding"], naming),
        # at least one named finding in the reference: the right ones and the partly right ones
        "partly right, of those naming %": pct(k["right finding"] + k["partly right"], naming),
    }


def advantages(recs, reward_kinds, per_completion=None) -> list:
    """GRPO's group-normalised advantage, ``(r - mean) / (std + 1e-4)`` over the completions of
    one prompt at one step, averaged per source and category of completion, for each reward:
    which kind of impression each reward pushes the policy towards on these very groups."""
    from collections import defaultdict
    from statistics import mean, pstdev

    from grpo import make_impression_reward

    groups = defaultdict(list)
    for r in recs:
        groups[(r["source"], r["step"], r["reference"])].append(r["completion"])
    group_id = {key: k for k, key in enumerate(groups)}
    rows = []
    sources = list(dict.fromkeys(r["source"] for r in recs))
    for kind in reward_kinds:
        rw = make_impression_reward(kind)
        by_cat = defaultdict(list)
        for (src, _, ref), comps in groups.items():
            if len(comps) < 2:
                continue
            scores = rw(prompts=None, completions=comps, impression=[ref] * len(comps))
            m, sd = mean(scores), pstdev(scores)
            for c, x in zip(comps, scores):
                cat, adv = category(c, ref), (x - m) / (sd + 1e-4)
                by_cat[(src, cat)].append(adv)
                if per_completion is not None:
                    per_completion.append({"source": src, "reward": kind, "group": group_id[(src, _, ref)],
                                           "category": cat, "reward_value": x, "advantage": adv})
        for src in sources:
            row = {"source": src, "reward": kind}
            for c in CATEGORIES:
                v = by_cat[(src, c)]
                row[c] = round(mean(v), 3) if v else None
                row[f"n {c}"] = len(v)
            rows.append(row)
    return rows


def abnormal_rows(k: int):
    from grpo import is_abnormal

    rows = [r for r in common.studies("train") if is_abnormal(r)]
    random.Random(0).shuffle(rows)  # impression_break_even.py's order
    return rows[:k]


def sample(policy: Path, rows, per_prompt: int, max_new_tokens: int, seed: int):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(policy)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(policy, dtype=torch.float32).eval()
    out = []
    for s in range(0, len(rows), 4):
        chunk = rows[s : s + 4]
        texts = [
            tok.apply_chat_template(common.impression_prompt_messages(r), tokenize=False, add_generation_prompt=True)
            for r in chunk
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(
                **enc,
                max_new_tokens=max_new_tokens,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                num_return_sequences=per_prompt,
                pad_token_id=tok.pad_token_id,
            )
        new = gen[:, enc["input_ids"].shape[1] :]
        for i, ids in enumerate(new):
            r = chunk[i // per_prompt]
            out.append((tok.decode(ids, skip_special_tokens=True).strip(), common.impression_target(r)))
        print(f"  {policy}: {min(s + 4, len(rows))}/{len(rows)} prompts", file=sys.stderr, flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", default=[], help="NAME=CHECKPOINT_DIR to sample from")
    ap.add_argument("--completions", action="append", default=[], help="NAME=completions.jsonl of a GRPO run")
    ap.add_argument("--prompts", type=int, default=40, help="abnormal train studies sampled")
    ap.add_argument("--samples", type=int, default=8, help="completions per prompt (GRPO's group size)")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--advantages",
        default=None,
        help="comma-separated rewards of recipes/grpo.py (e.g. cos,cos-f1,clin,clin-f1): also print each "
        "reward's mean GRPO advantage per kind of completion, over the --policy samples and the first "
        "20 %% of steps of the --completions files, abnormal references only",
    )
    ap.add_argument("--json", default=None, help="also write the rows here")
    ap.add_argument("--rescore", default=None, metavar="JSON",
                    help="take the shares and the completions of an earlier --json file instead of sampling "
                         "(to compute --advantages again, for other rewards, without new samples)")
    ap.add_argument("--per-completion", default=None, metavar="FILE.jsonl.gz",
                    help="with --advantages: write every completion's reward, category and advantage (gzip "
                         "JSON Lines), the values a page's intervals over the groups are computed from")
    args = ap.parse_args()
    if not args.policy and not args.completions and not args.rescore:
        raise SystemExit("give at least one --policy, --completions or --rescore")
    common.set_threads()
    rows_out, first_steps = [], []
    if args.rescore:
        try:
            earlier = json.loads(Path(args.rescore).read_text())
            rows_out, first_steps = list(earlier["shares"]), list(earlier["completions"])
        except (OSError, json.JSONDecodeError, KeyError) as e:
            raise SystemExit(f"--rescore {args.rescore}: {e}")
    if args.policy:
        rows = abnormal_rows(args.prompts)
        for spec in args.policy:
            name, _, path = spec.partition("=")
            if not (Path(path) / "config.json").is_file():
                raise SystemExit(f"--policy {spec}: no checkpoint at {path}")
            pairs = sample(Path(path), rows, args.samples, args.max_new_tokens, args.seed)
            # One GRPO-like group per prompt (its `samples` completions share the reference).
            first_steps += [{"source": name, "step": 0, "completion": c, "reference": r} for c, r in pairs]
            s = shares(pairs)
            rows_out.append({"source": f"{name}, sampled on {len(rows)} abnormal train studies", **s})
    for spec in args.completions:
        name, _, path = spec.partition("=")
        try:
            recs = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        except (OSError, json.JSONDecodeError) as e:
            raise SystemExit(f"--completions {path}: {e}")
        steps = sorted({r["step"] for r in recs if r.get("step") is not None})
        if not steps:
            raise SystemExit(f"--completions {path}: no step numbers in it")
        k = max(1, len(steps) // 5)
        first_steps += [{**r, "source": name} for r in recs if r["step"] in set(steps[:k])]
        for label, keep in (("first 20 % of steps", set(steps[:k])), ("last 20 % of steps", set(steps[-k:]))):
            pairs = [(r["completion"], r["reference"]) for r in recs if r["step"] in keep]
            rows_out.append({"source": f"{name}, training, {label}", **shares(pairs)})
    cols = [k for k in rows_out[0] if k != "source"]
    print("| completions of | " + " | ".join(cols) + " |")
    print("|---|" + "---:|" * len(cols))
    for r in rows_out:
        print(f"| {r['source']} | " + " | ".join("-" if r[c] is None else str(r[c]) for c in cols) + " |")
    adv = []
    if args.advantages:
        if not first_steps:
            raise SystemExit("--advantages needs --policy or --completions")
        from grpo import is_abnormal

        recs = [r for r in first_steps if is_abnormal({"impression": r["reference"]})]
        per = [] if args.per_completion else None
        adv = advantages(recs, [k.strip() for k in args.advantages.split(",") if k.strip()], per)
        if per is not None:
            import gzip
            import os

            tmp = Path(args.per_completion + ".tmp")
            tmp.write_bytes(gzip.compress(("".join(json.dumps(r, sort_keys=True) + "\n" for r in per)).encode(),
                                          mtime=0))
            os.replace(tmp, args.per_completion)
        print("\nMean GRPO advantage per kind of completion (completions of abnormal studies; n: how many):")
        print("| completions of | reward | " + " | ".join(CATEGORIES) + " |")
        print("|---|---|" + "---:|" * len(CATEGORIES))
        for r in adv:
            cells = ["-" if r[c] is None else f"{r[c]:+.3f} (n={r['n ' + c]})" for c in CATEGORIES]
            print(f"| {r['source']} | {r['reward']} | " + " | ".join(cells) + " |")
    if args.json:
        import os

        tmp = Path(args.json + ".tmp")
        tmp.write_text(json.dumps({"shares": rows_out, "advantages": adv, "completions": first_steps}, indent=1) + "\n")
        os.replace(tmp, args.json)


if __name__ == "__main__":
    main()
