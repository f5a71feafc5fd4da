"""Evaluate SFT and GRPO policies on held-out IU X-ray test studies (``uid % 10 == 0``).

Each policy generates one report per study, greedily, for the same studies; the
reports are scored against the references on the Findings and on the Impression
section with ``sdr score`` (BLEU-4, ROUGE-L, METEOR, BERTScore-F1) and, when the
``sdr_rewards`` module has the labeler, CheXpert-rule F1. BERTScore-F1 is judged by
all-MiniLM-L6-v2 (``--bertscore-model``, fetched by ``scripts/fetch-minilm.sh``), a model
independent of the reward's all-mpnet-base-v2; a second column gives BERTScore under the
reward's own encoder, labelled so. Writes ``<out>/generations/*.jsonl``,
``<out>/scores/*.jsonl`` (``*.reward-encoder.jsonl`` for the second column),
``<out>/summary.json`` and the Markdown table ``--table`` (rows in the paper's order,
relative change against SFT in brackets with its 95 % paired-bootstrap interval over the
studies, ``*`` where it excludes 0), plus the reward curves of the GRPO runs
(``<out>/reward_curves.png``) from their TRL log histories.

    python recipes/evaluate.py --studies 100 \\
        --policy SFT=recipes/out/sft/final \\
        --policy "GRPO(R_exact)=recipes/out/grpo-exact/final" ...

Generation is resumable: a policy whose generations file already holds every study
is not generated again.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

SECTIONS = ("findings", "impression")
METRICS = ("BLEU-4", "ROUGE-L", "METEOR", "BERTScore-F1")
#: The column of BERTScore under the reward's own encoder (all-mpnet-base-v2).
REWARD_BERT = "BERTScore-F1 (reward's own encoder)"
MINILM = Path(os.environ.get("SDR_HOME", Path.home() / ".cache/sdr")) / "models/all-MiniLM-L6-v2"


def generate(policy_dir: Path, rows, out_file: Path, batch: int, max_new_tokens: int, prompt=None) -> float:
    """Greedy generations of `policy_dir` for `rows` (prompts from `prompt(row)`, default
    the report task's), written to `out_file`; returns the seconds taken."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(policy_dir)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(policy_dir, dtype=torch.float32).eval()
    t0 = time.time()
    done = []
    for s in range(0, len(rows), batch):
        chunk = rows[s : s + batch]
        texts = [
            tok.apply_chat_template((prompt or common.prompt_messages)(r), tokenize=False, add_generation_prompt=True)
            for r in chunk
        ]
        enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            gen = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=tok.pad_token_id
            )
        new = gen[:, enc["input_ids"].shape[1] :]
        for r, ids in zip(chunk, new):
            ids = ids.tolist()
            n = len(ids)
            while n and ids[n - 1] == tok.pad_token_id:
                n -= 1
            text = tok.decode(ids[:n], skip_special_tokens=True).strip()
            done.append({"id": int(r["uid"]), "text": text, "tokens": n})
        print(f"  {policy_dir}: {len(done)}/{len(rows)} studies", flush=True)
    common.write_jsonl_atomic(out_file, done)
    return time.time() - t0


def sdr_bin() -> str:
    for cand in (os.environ.get("SDR_BIN"), str(common.ROOT / "target/release/sdr")):
        if cand and Path(cand).is_file():
            return cand
    raise SystemExit("the sdr CLI is not built: bash scripts/setup.sh (or set SDR_BIN)")


def score(gen_file: Path, refs, out_file: Path, judge: Path) -> list:
    """``sdr score`` with the independent judge, plus the BERTScore-F1 of the reward's own
    encoder (``<out_file>.reward-encoder.jsonl``) as the REWARD_BERT key of each section."""
    pairs = out_file.with_suffix(".pairs.jsonl")
    by_id = {int(r["uid"]): r for r in refs}
    rows = [json.loads(l) for l in gen_file.read_text().splitlines() if l.strip()]
    common.write_jsonl_atomic(
        pairs, [{"id": g["id"], "hyp": g["text"], "ref": common.target(by_id[g["id"]])} for g in rows]
    )
    own = out_file.with_suffix(".reward-encoder.jsonl")
    subprocess.run([sdr_bin(), "score", str(pairs), "--bertscore-model", str(judge), "-o", str(out_file)], check=True)
    subprocess.run([sdr_bin(), "score", str(pairs), "-o", str(own)], check=True)
    pairs.unlink()
    scored = [json.loads(l) for l in out_file.read_text().splitlines() if l.strip()]
    reward = [json.loads(l) for l in own.read_text().splitlines() if l.strip()]
    for r, o in zip(scored, reward):
        for sec in SECTIONS:
            r[sec][REWARD_BERT] = o[sec]["BERTScore-F1"]
    return scored


def clinical(gen_file: Path, refs):
    """``(f1, texts)`` when ``sdr_rewards`` has the labeler, else None: per section, the
    CheXpert-rule F1 of ``sdr_rewards.chexpert_f1`` and the (generated, reference) texts it
    compares (the generated section as ``sdr score`` cuts it, ``sdr_rewards.metrics.section_texts``;
    the reference's with its whitespace collapsed), which the intervals resample."""
    try:
        import sdr_rewards

        f1 = sdr_rewards.chexpert_f1
    except (ImportError, AttributeError):
        return None
    from sdr_rewards import metrics

    by_id = {int(r["uid"]): r for r in refs}
    rows = [json.loads(l) for l in gen_file.read_text().splitlines() if l.strip()]
    hyps = metrics.section_texts([g["text"] for g in rows])
    texts = {sec: (hyps[sec], [" ".join(by_id[g["id"]][sec].split()) for g in rows]) for sec in SECTIONS}
    return {sec: f1(*texts[sec]) for sec in SECTIONS}, texts


def summarize(scored, clin) -> dict:
    n = len(scored)
    s = {"studies": n, "well_formed": 100.0 * sum(r["format_valid"] for r in scored) / n}
    for sec in SECTIONS:
        for m in METRICS + (REWARD_BERT,):
            s[f"{sec}/{m}"] = sum(r[sec][m] for r in scored) / n
        if clin:
            s[f"{sec}/CheXpert-rule F1 (14, macro)"] = clin[sec]["macro_f1_14"]
            s[f"{sec}/CheXpert-rule F1 (5, micro)"] = clin[sec]["micro_f1_5"]
    return s


def intervals(scored: dict, texts: dict, base_name: str) -> dict:
    """Per policy and column, the 95 % paired-bootstrap interval of the relative change
    against ``base_name`` over the studies (``sdr_rewards.metrics``: 1,000 resamples, fixed seed);
    CheXpert-rule F1 is recomputed on each resample."""
    from sdr_rewards import metrics

    out = {}
    base = scored[base_name]
    for name, rows in scored.items():
        if name == base_name:
            continue
        ci = {"well_formed": metrics.paired_bootstrap(
            [100.0 * r["format_valid"] for r in rows], [100.0 * r["format_valid"] for r in base])}
        for sec in SECTIONS:
            for m in METRICS + (REWARD_BERT,):
                ci[f"{sec}/{m}"] = metrics.paired_bootstrap([r[sec][m] for r in rows], [r[sec][m] for r in base])
            if texts:
                h, refs = texts[name][sec]
                hb, _ = texts[base_name][sec]
                cx = metrics.chexpert_f1_bootstrap(h, hb, refs)
                ci[f"{sec}/CheXpert-rule F1 (14, macro)"] = cx["macro_f1_14"]
                ci[f"{sec}/CheXpert-rule F1 (5, micro)"] = cx["micro_f1_5"]
        out[name] = ci
    return out


def _page_module(name: str):
    """A renderer of scripts/pages/ (standard library only): the recipes print their tables
    through the same functions that write the results pages, so the two cannot differ."""
    import importlib.util

    path = common.ROOT / "scripts" / "pages" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"pages_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def cell(v: float, base: float, pct: bool = False, ci=None) -> str:
    return _page_module("grpo_report").cell(v, base, pct, ci)


def table(summaries: dict, cis: dict) -> str:
    return _page_module("grpo_report").tables_of(summaries, cis)


def read_log(path: Path):
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def training_table(runs: dict) -> str:
    """Per GRPO run (name -> log history): steps, mean reward over the first and last 20 % of
    steps, step time and the training reward's share of it (TRL's step_time and SDRReward's
    <name>/seconds; the weight-0 monitor's time apart), as the results pages print it."""
    return _page_module("grpo_impression_text").training_table_of(runs) + "\n"


def curves(runs: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("reward", "total reward (training)"), ("format", "format"), ("findings", "findings term"),
            ("impression", "impression term"), ("monitor", "Chamfer monitor (1 - D_F) + (1 - D_I) + fmt")]
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6))
    for name, hist in runs.items():
        steps = [h for h in hist if "reward" in h and "step" in h]
        x = [h["step"] for h in steps]
        for ax, (k, title) in zip(axes, keys):
            if k == "reward":
                y = [h["reward"] for h in steps]
            elif k == "monitor":
                # The weight-0 monitor when the run logs one, else the run's own (multiset) Chamfer.
                names = [c for c in steps[0] if c.startswith("rewards/") and c.endswith("/mean")] if steps else []
                mk = next((c for c in names if "monitor_cham" in c or "monitor_cos" in c), None) or next(
                    (c for c in names if c in ("rewards/r_cham/mean", "rewards/r_cos/mean")), None)
                if mk is None:
                    continue
                y = [h[mk] for h in steps]
            else:
                mk = next((c for c in steps[0] if c.endswith(f"/{k}") and not c.startswith("rewards/monitor")
                           and "monitor" not in c), None) if steps else None
                if mk is None:
                    continue
                y = [h[mk] for h in steps]
            # Raw per-step values are dominated by the prompt drawn (one prompt per step):
            # draw them faint and a centred 9-step moving average on top.
            line, = ax.plot(x, y, lw=0.6, alpha=0.25)
            w = 4
            ma = [sum(y[max(0, i - w):i + w + 1]) / len(y[max(0, i - w):i + w + 1]) for i in range(len(y))]
            ax.plot(x, ma, label=name, lw=1.4, color=line.get_color())
            ax.set_title(title + " (9-step mean)", fontsize=9)
            ax.set_xlabel("step", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--policy", action="append", required=True, help="NAME=CHECKPOINT_DIR (first is the baseline)")
    ap.add_argument("--studies", type=int, default=100, help="first N test studies with both sections")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-new-tokens", type=int, default=192)
    ap.add_argument("--logs", action="append", default=[], help="NAME=log_history.jsonl for the curves")
    ap.add_argument("--out", default=str(common.ROOT / "docs/results/grpo"))
    ap.add_argument("--table", default=str(common.ROOT / "docs/results/grpo.md"))
    ap.add_argument("--bertscore-model", default=str(MINILM),
                    help="BERTScore judge, a RoBERTa/BERT folder (default: all-MiniLM-L6-v2 from scripts/fetch-minilm.sh)")
    args = ap.parse_args()

    common.set_threads()
    out = Path(args.out)
    refs = common.studies("test")[: args.studies]
    summaries, timings, scored_all, texts = {}, {}, {}, {}
    for spec in args.policy:
        name, _, path = spec.partition("=")
        slug = "".join(c if c.isalnum() else "_" for c in name).strip("_").lower()
        gen_file = out / "generations" / f"{slug}.jsonl"
        have = len(gen_file.read_text().splitlines()) if gen_file.exists() else 0
        if have != len(refs):
            print(f"generating {name} from {path}", flush=True)
            timings[name] = round(generate(Path(path), refs, gen_file, args.batch, args.max_new_tokens), 1)
        scored = score(gen_file, refs, out / "scores" / f"{slug}.jsonl", Path(args.bertscore_model))
        clin = clinical(gen_file, refs)
        summaries[name] = summarize(scored, clin and clin[0])
        scored_all[name] = scored
        if clin:
            texts[name] = clin[1]
    cis = intervals(scored_all, texts, next(iter(summaries)))
    # Rescoring committed generations keeps the generation times of the run that made them.
    old = out / "summary.json"
    if old.exists():
        timings = {**json.loads(old.read_text()).get("generation_seconds", {}), **timings}
    md = table(summaries, cis)
    print(md)
    (out / "summary.json").write_text(json.dumps(
        {"summaries": summaries, "intervals_vs_first": cis, "bertscore_model": Path(args.bertscore_model).name,
         "generation_seconds": timings}, indent=1) + "\n")
    if args.logs:
        runs = {n: read_log(Path(p)) for n, p in (s.split("=", 1) for s in args.logs) if Path(p).exists()}
        curves(runs, out / "reward_curves.png")
        train = training_table(runs)
        print(train)
        md += "\n" + train
    Path(args.table + ".generated").write_text(md + "\n")


if __name__ == "__main__":
    main()
