"""Sample K Impressions per held-out test study from a Findings -> Impression policy
(temperature 1, as GRPO samples its groups), for reward accuracy on real outputs
(recipes/reward_accuracy.py --reference impression) and Findings-consistency selection
(recipes/findings_selection.py).

    .venv-trainers/bin/python recipes/sample_impressions.py --policy recipes/out/f2i-sft/final \\
        --out recipes/out/ra/sft-impressions.jsonl

Writes JSON Lines ``{"id": uid, "candidates": [K texts], "findings": "..."}`` for every test
study with both sections (``common.studies("test")``, uid order), appending chunk by chunk:
a stopped run resumes after the last complete line. Each chunk of studies is seeded from
``--seed`` and its first study's position, so a resumed run writes what an uninterrupted one
would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import common


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", type=Path, required=True, help="checkpoint folder of a Findings -> Impression policy")
    ap.add_argument("--out", type=Path, required=True, help="JSON Lines to write (appended; resumes)")
    ap.add_argument("--samples", type=int, default=8, help="K impressions per study")
    ap.add_argument("--studies", type=int, default=0, help="first N test studies (0: all)")
    ap.add_argument("--chunk", type=int, default=4, help="studies per generate call")
    ap.add_argument("--max-new-tokens", type=int, default=48, help="GRPO's max completion length")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if not (args.policy / "config.json").exists():
        sys.exit(f"{args.policy}: no config.json (not a checkpoint folder)")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    common.set_threads()
    rows = common.studies("test")
    if args.studies:
        rows = rows[: args.studies]
    done = 0
    if args.out.exists():
        lines = args.out.read_text(encoding="utf-8").splitlines()
        for n, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break  # a line cut by a stop: rewritten below
            if str(rec.get("id")) != str(rows[n]["uid"]) or len(rec.get("candidates", [])) != args.samples:
                sys.exit(f"{args.out}:{n + 1}: not study {rows[n]['uid']} with {args.samples} candidates; remove the file")
            done = n + 1
        if done < len(lines):
            tmp = args.out.with_suffix(".tmp")
            tmp.write_text("".join(l + "\n" for l in lines[:done]), encoding="utf-8")
            os.replace(tmp, args.out)
    if done % args.chunk:
        sys.exit(f"{args.out}: {done} studies, not a multiple of --chunk {args.chunk}")
    args.out.parent.mkdir(parents=True, exist_ok=True)

    tok = AutoTokenizer.from_pretrained(args.policy)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(args.policy, dtype=torch.float32).eval()
    with open(args.out, "a", encoding="utf-8") as fh:
        for s in range(done, len(rows), args.chunk):
            chunk = rows[s : s + args.chunk]
            torch.manual_seed(args.seed * 1_000_003 + s)
            texts = [
                tok.apply_chat_template(common.impression_prompt_messages(r), tokenize=False, add_generation_prompt=True)
                for r in chunk
            ]
            enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
            with torch.no_grad():
                gen = model.generate(
                    **enc,
                    max_new_tokens=args.max_new_tokens,
                    do_sample=True,
                    temperature=1.0,
                    top_p=1.0,
                    top_k=0,
                    num_return_sequences=args.samples,
                    pad_token_id=tok.pad_token_id,
                )
            new = gen[:, enc["input_ids"].shape[1] :]
            for i, r in enumerate(chunk):
                cands = [
                    tok.decode(ids, skip_special_tokens=True).strip()
                    for ids in new[i * args.samples : (i + 1) * args.samples]
                ]
                rec = {"id": int(r["uid"]), "candidates": cands, "findings": " ".join(r["findings"].split())}
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
            fh.flush()
            print(f"{args.policy}: {min(s + args.chunk, len(rows))}/{len(rows)} studies", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
