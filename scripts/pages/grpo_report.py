"""docs/results/grpo.md: the tables, the training figures and the prose numbers of the page.

Blocks rendered from the page's own files (docs/results/grpo/):

- `main-tables`: the Findings and Impression tables, as `recipes/evaluate.py`'s `table` prints
  them, from `summary.json` (means per policy, `intervals_vs_first`: 95 % paired-bootstrap
  intervals of the relative change against SFT);
- `training-table`: the training-run table, as `recipes/evaluate.py`'s `training_table` prints
  it, from `grpo-*.log_history.jsonl` (TRL's log history: reward, step_time, `<name>/seconds`);
- `reward-and-encoders`, `kl-and-cham`, `kl-fix`, `reward-share`, `sft-run`, `grpo-run`: the
  page's sentences with figures, from the same files, the greedy test outputs
  (`generations/*.jsonl`), the per-study scores (`scores/*.jsonl`) and the run records
  (`*.run.json`).

Policy-against-policy intervals are not in `summary.json` (its intervals are against SFT). They
are computed here from the committed per-study scores with `sdr_eval::bootstrap`'s paired
bootstrap written out in Python (SplitMix64 seeded 43, 1,000 resamples of the studies,
percentile interval with linear interpolation): on the columns against SFT it reproduces
`summary.json`'s intervals (scripts/test_results.py checks it). CheXpert F1 is corpus-level and
needs the labeler, so its policy-vs-policy intervals come only from `judged.json` (the
judge-table block). The change of the training reward between the first and the last 20 % of
steps gets an interval from the same generator resampling the steps of each window.

Wording rule (as `scripts/results.py`'s `verdict`): "higher"/"lower" only when the 95 %
interval excludes 0, else "inconclusive on N studies" (or steps) with the interval.
Standard library only.
"""

from __future__ import annotations

import collections
import functools
import importlib.util
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DIR = ROOT / "docs/results/grpo"

_spec = importlib.util.spec_from_file_location("grpo_outputs_for_report", Path(__file__).with_name("grpo_outputs.py"))
outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(outputs)

SECTIONS = ("findings", "impression")
# Training runs: the table's name (evaluate.py's --logs NAME), its files' stem, its policy.
RUNS = {
    "R_exact": ("grpo-exact", "GRPO(R_exact)"),
    "R_fmt": ("grpo-fmt", "GRPO(R_fmt)"),
    "R_cham": ("grpo-cham", "GRPO(R_cham)"),
    "R_haus": ("grpo-haus", "GRPO(R_haus)"),
    "R_cham_distinct": ("grpo-cham-set", "GRPO(R_cham, distinct)"),
    "R_cham_kl0.04": ("grpo-cham-kl04", "GRPO(R_cham, KL 0.04)"),
    "R_cham_kl0.2": ("grpo-cham-kl2", "GRPO(R_cham, KL 0.2)"),
}
RUN_OF = {policy: name for name, (_, policy) in RUNS.items()}
REWARD_ENC = "BERTScore-F1 (reward's own encoder)"
THINK = re.compile(r"<think>(.*?)</think>", re.S)

# ---------------------------------------------------------------- bootstrap (sdr_eval::bootstrap)

_boot = importlib.util.spec_from_file_location("pages_bootstrap", Path(__file__).with_name("bootstrap.py"))
bootstrap = importlib.util.module_from_spec(_boot)
_boot.loader.exec_module(bootstrap)
splitmix, below, draws, percentile = bootstrap.splitmix, bootstrap.below, bootstrap.draws, bootstrap.percentile
RESAMPLES, SEED = bootstrap.RESAMPLES, bootstrap.SEED


def paired_change(a: list, b: list):
    """95 % interval of the relative change in % of mean(a) against mean(b), paired by study;
    None when some resample's baseline mean is 0 (`sdr_eval::bootstrap::paired_mean_change`)."""
    assert len(a) == len(b)
    vals = []
    for idx in draws(len(a)):
        x = sum(a[i] for i in idx) / len(idx)
        y = sum(b[i] for i in idx) / len(idx)
        if y == 0:
            return None
        vals.append(100.0 * (x - y) / y)
    vals.sort()
    return percentile(vals, 0.025), percentile(vals, 0.975)


def window_change(first: list, last: list) -> tuple[float, float]:
    """95 % interval of mean(last) - mean(first), each window's steps resampled with replacement
    (same generator and seed, the first window's draws then the last's, per resample)."""
    g = splitmix()
    k1, k2 = len(first), len(last)
    vals = []
    for _ in range(RESAMPLES):
        x = sum(first[below(g, k1)] for _ in range(k1)) / k1
        y = sum(last[below(g, k2)] for _ in range(k2)) / k2
        vals.append(y - x)
    vals.sort()
    return percentile(vals, 0.025), percentile(vals, 0.975)


# ---------------------------------------------------------------- data


@functools.lru_cache(maxsize=None)
def summary() -> dict:
    return json.loads((DIR / "summary.json").read_text())


@functools.lru_cache(maxsize=None)
def scores(policy: str, encoder: bool = False) -> tuple:
    slug = outputs.GENERATIONS[policy]
    f = DIR / "scores" / f"{slug}{'.reward-encoder' if encoder else ''}.jsonl"
    return tuple(json.loads(l) for l in f.read_text().splitlines() if l.strip())


@functools.lru_cache(maxsize=None)
def history(stem: str) -> tuple:
    return tuple(json.loads(l) for l in (DIR / f"{stem}.log_history.jsonl").read_text().splitlines() if l.strip())


def steps(run: str) -> list:
    """Logged training steps of a run (evaluate.py's `training_table`: those with reward and step_time)."""
    return [h for h in history(RUNS[run][0]) if "reward" in h and "step_time" in h]


@functools.lru_cache(maxsize=None)
def run_json(stem: str) -> dict:
    return json.loads((DIR / f"{stem}.run.json").read_text())


@functools.lru_cache(maxsize=None)
def generations(policy: str) -> tuple:
    f = DIR / "generations" / f"{outputs.GENERATIONS[policy]}.jsonl"
    return tuple(json.loads(l) for l in f.read_text().splitlines() if l.strip())


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


# ---------------------------------------------------------------- formatting


def bound(x: float) -> str:
    return outputs.bound(x)


def rel(v: float, b: float, ci) -> str:
    return f"{100.0 * (v - b) / b:+.1f} % [{bound(ci[0])}, {bound(ci[1])}]"


def word(ci, n: int, what: str = "studies") -> str:
    if ci[0] > 0:
        return "higher"
    if ci[1] < 0:
        return "lower"
    if ci[0] == ci[1] == 0:
        return "unchanged"
    return f"inconclusive on {n} {what}"


def sft_phrase(policy: str, key: str, label: str = "") -> str:
    """`label` of `policy` against SFT from summary.json: 'higher, 0.577 -> 0.628 (+8.9 % [...])'."""
    s = summary()
    v, b = s["summaries"][policy][key], s["summaries"]["SFT"][key]
    ci = s["intervals_vs_first"][policy][key]
    n = s["summaries"][policy]["studies"]
    head = f"{label} " if label else ""
    return f"{head}{word(ci, n)}, {b:.3f} -> {v:.3f} ({rel(v, b, ci)})"


def pair(p: str, q: str, sec: str, metric: str) -> tuple[str, str]:
    """(direction word, phrase) of `p` against `q` on a per-study column, bootstrapped here."""
    enc = metric == REWARD_ENC
    col = "BERTScore-F1" if enc else metric
    A, B = scores(p, enc), scores(q, enc)
    assert [r["id"] for r in A] == [r["id"] for r in B], (p, q)
    a, b = [r[sec][col] for r in A], [r[sec][col] for r in B]
    ci = paired_change(a, b)
    w = word(ci, len(a))
    return w, f"{w}, {rel(mean(a), mean(b), ci)}"


def short(policy: str) -> str:
    return policy.removeprefix("GRPO(").removesuffix(")")


def rng(xs, fmt: str) -> str:
    lo, hi = format(min(xs), fmt), format(max(xs), fmt)
    return lo if lo == hi else f"{lo}-{hi}"


# ---------------------------------------------------------------- blocks


def cell(v: float, b, pct: bool = False, ci=None) -> str:
    """`0.267 (+75.9% [+15.9, +209.0]*)`: a value, its change against the baseline `b` and the
    interval (`*` where it excludes 0), as `recipes/evaluate.py`'s `cell` prints it."""
    txt = f"{v:.1f}" if pct else f"{v:.3f}"
    if b is None:
        return txt
    if b == 0:
        return f"{txt} (n/a)"
    change = f"{100.0 * (v - b) / b:+.1f}%"
    if ci is None:
        return f"{txt} ({change})"
    lo, hi = ci
    mark = "*" if lo > 0 or hi < 0 else ""
    return f"{txt} ({change} [{lo:+.1f}, {hi:+.1f}]{mark})"


def tables_block() -> str:
    s = summary()
    return tables_of(s["summaries"], s["intervals_vs_first"])


def tables_of(summaries: dict, cis: dict) -> str:
    """The Findings and Impression tables of `recipes/evaluate.py` (which prints them through
    this function): each policy's means, with its change against the first policy and the
    interval."""
    names = list(summaries)
    base = summaries[names[0]]
    cols = [k for k in base if "/" in k]

    lines = []
    for sec in SECTIONS:
        sec_cols = [c for c in cols if c.startswith(sec + "/")]
        head = ["policy"] + [c.split("/", 1)[1] for c in sec_cols]
        if sec == "findings":
            head.append("well-formed %")
        lines.append(f"**{sec.capitalize()}** ({base['studies']} studies)\n")
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for name in names:
            row_s = summaries[name]
            b = None if name == names[0] else base
            ci = cis.get(name, {})
            row = [name] + [cell(row_s[c], None if b is None else b[c], ci=ci.get(c)) for c in sec_cols]
            if sec == "findings":
                row.append(cell(row_s["well_formed"], None if b is None else b["well_formed"], pct=True,
                                ci=ci.get("well_formed")))
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def training_stats(run: str) -> dict:
    st = steps(run)
    rewards = [h["reward"] for h in st]
    k = max(1, len(rewards) // 5)
    own = [v for h in st for key, v in h.items() if key.endswith("/seconds") and key.startswith("r_")]
    mon = [v for h in st for key, v in h.items() if key.endswith("/seconds") and key.startswith("monitor")]
    lengths = [h["completions/mean_length"] for h in st]
    return {
        "steps": len(st), "k": k, "first": mean(rewards[:k]), "last": mean(rewards[-k:]),
        "window_ci": window_change(rewards[:k], rewards[-k:]),
        "step_time": mean(h["step_time"] for h in st), "step_time_sum": sum(h["step_time"] for h in st),
        "own": mean(own) if own else 0.0, "monitor": mean(mon) if mon else None,
        "len_first": mean(lengths[:k]), "len_last": mean(lengths[-k:]),
        "reward_std": mean(h["reward_std"] for h in st),
        "zero_std_steps": sum(1 for h in st if h["frac_reward_zero_std"] > 0),
    }


def training_block() -> str:
    """evaluate.py's `training_table`, then its note."""
    lines = [
        "| run | steps | reward, first 20 % | reward, last 20 % | change | step time (s) | reward time (s) | reward share | monitor time (s) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    stats = {run: training_stats(run) for run in RUNS}
    for run, t in stats.items():
        mon = f"{t['monitor']:.2f}" if t["monitor"] is not None else "-"
        lines.append(
            f"| {run} | {t['steps']} | {t['first']:.3f} | {t['last']:.3f} | {t['last'] - t['first']:+.3f} | "
            f"{t['step_time']:.1f} | {t['own']:.2f} | {100 * t['own'] / t['step_time']:.1f} % | {mon} |")
    ks = {t["k"] for t in stats.values()}
    ns = {t["steps"] for t in stats.values()}
    k, n = (ks.pop(), ns.pop()) if len(ks) == len(ns) == 1 else ("k", "n")
    cheap = [r for r, t in stats.items() if t["own"] < 0.05]
    mons = [t["monitor"] for t in stats.values() if t["monitor"] is not None]
    no_mon = [r for r, t in stats.items() if t["monitor"] is None]
    lines.append("")
    lines.append(
        f"Reward change = mean total reward over the last {k} steps minus the first {k} (20 % of {n}); step "
        f"time is TRL's `step_time` (mean over the {n} steps); reward time is `SDRReward`'s `<name>/seconds` "
        f"(parse, embed on CPU, distances) for the training reward; the monitor is the weight-0 Chamfer "
        f"reward that the runs other than {', '.join(no_mon)} log, which puts those runs on one scale. "
        f"{' and '.join(cheap)} embed nothing: their own reward time is "
        f"{' and '.join(format(1000 * stats[r]['own'], '.1f') for r in cheap)} ms a step; the monitor's time "
        f"({rng(mons, '.2f')} s) is what an embedding reward costs on this CPU.")
    return "\n".join(lines)


def encoder_changes() -> list[tuple[str, str, str, str]]:
    """(policy, section, verdict under the page's BERTScore model, under the reward's encoder) where
    the two verdicts against SFT differ."""
    s = summary()
    out = []
    for sec in SECTIONS:
        for p in list(s["summaries"])[1:]:
            n = s["summaries"][p]["studies"]
            a = word(s["intervals_vs_first"][p][f"{sec}/BERTScore-F1"], n).split(" on ")[0]
            b = word(s["intervals_vs_first"][p][f"{sec}/{REWARD_ENC}"], n).split(" on ")[0]
            if a != b:
                out.append((p, sec, a, b))
    return out


def reward_and_encoders_block() -> str:
    s = summary()
    judge = s["bertscore_model"]
    # Training reward change, with its interval over the steps.
    parts = collections.defaultdict(list)
    for run, (_, policy) in RUNS.items():
        t = training_stats(run)
        ci = t["window_ci"]
        w = word(ci, t["k"], "steps")
        parts[w.split(" on ")[0]].append(
            f"{policy} {t['last'] - t['first']:+.3f} [{ci[0]:+.3f}, {ci[1]:+.3f}]")
    k = training_stats("R_cham")["k"]
    said = []
    for w in ("higher", "lower", "unchanged", "inconclusive"):
        if parts[w]:
            head = {"higher": "higher in", "lower": "lower in", "unchanged": "unchanged in",
                    "inconclusive": f"inconclusive on {k} steps a window in"}[w]
            said.append(f"{head} {', '.join(parts[w])}")
    rises = [p for p in parts["higher"]]
    lines = [
        f"- **The training reward, last 20 % of steps against the first 20 %** (mean total reward of "
        f"the last {k} steps minus the first {k}, the table's change, with a 95 % interval from "
        f"{RESAMPLES:,} resamples of the steps within each window): {'; '.join(said)}. It rises "
        f"beyond the step-to-step noise in {len(rises)} of the {len(RUNS)} runs. Each step is one prompt "
        f"(the same prompt at the same step in every run), so the two windows differ in their prompts "
        f"as well as in training. Per-step values are noisy (one prompt of "
        f"{run_json('grpo-cham')['completions_per_step']} completions per step): see the 9-step means in "
        f"`grpo/reward_curves.png`."]
    # What the independent BERTScore model changed.
    ch = encoder_changes()
    items = []
    for p, sec, a, b in ch:
        items.append(
            f"{p} ({sec.capitalize()}) {sft_phrase(p, f'{sec}/BERTScore-F1')}, where the reward's encoder "
            f"gives {sft_phrase(p, f'{sec}/{REWARD_ENC}')}")
    secs_same = [sec.capitalize() for sec in SECTIONS if not any(c[1] == sec for c in ch)]
    n_pol = len(s["summaries"]) - 1
    lines.append(
        f"- **What the independent BERTScore model changed.** Judged by {judge} instead of the reward's "
        f"own encoder, {len(ch)} verdicts of a policy against SFT on BERTScore-F1 change "
        f"(of {n_pol * len(SECTIONS)}, {n_pol} policies on two sections"
        f"{'; every ' + ' and '.join(secs_same) + ' verdict holds' if secs_same else ''}): "
        f"{'; '.join(items)}.")
    # The best policies on Findings BERTScore-F1 against each other.
    ranked = sorted(list(s["summaries"])[1:], key=lambda p: -s["summaries"][p]["findings/BERTScore-F1"])
    top = ranked[:3]
    pairs = [(top[i], top[j]) for i in range(len(top)) for j in range(i + 1, len(top))]
    said = []
    counts = {}
    dirs = {}
    enc_name = "the reward's encoder"
    for metric, name in (("BERTScore-F1", judge), (REWARD_ENC, enc_name)):
        ps = []
        for p, q in pairs:
            w, ph = pair(p, q, "findings", metric)
            dirs[name, p, q] = w
            ps.append(f"{short(p)} against {short(q)} {ph}")
        counts[name] = sum(1 for (n_, _, _), w in dirs.items() if n_ == name and w in ("higher", "lower"))
        said.append(f"under {name}: {'; '.join(ps)}")
    holds = all(dirs[judge, p, q] == dirs[enc_name, p, q] and dirs[judge, p, q] in ("higher", "lower")
                for p, q in pairs)
    lines[-1] += (
        f" The {len(top)} policies highest on Findings BERTScore-F1 under {judge} "
        f"({', '.join(p + ' ' + format(s['summaries'][p]['findings/BERTScore-F1'], '.3f') for p in top)}), against each "
        f"other (paired bootstrap over the per-study scores in `grpo/scores/`): {'; '.join(said)}. "
        f"So {counts[judge]} of the {len(pairs)} pairs differ under {judge} and "
        f"{counts[enc_name]} under the reward's encoder: "
        f"{'the same order under both' if holds else 'no order among all three holds under both'}.")
    return "\n".join(lines)


def repeats(policy: str) -> int:
    """Greedy outputs whose Findings (the `<think>` text) state a sentence twice, verbatim
    (sentences split after '.', '!' or '?')."""
    n = 0
    for g in generations(policy):
        m = THINK.search(g["text"])
        sents = [x.strip() for x in re.split(r"(?<=[.!?])\s+", m.group(1) if m else "") if x.strip()]
        n += len(sents) != len(set(sents))
    return n


def greedy_tokens(policy: str) -> float:
    return mean(g["tokens"] for g in generations(policy))


def kl_and_cham_block() -> str:
    s = summary()
    kl2, kl04, cham, dist, haus = ("GRPO(R_cham, KL 0.2)", "GRPO(R_cham, KL 0.04)", "GRPO(R_cham)",
                                   "GRPO(R_cham, distinct)", "GRPO(R_haus)")
    beta = {p: run_json(RUNS[RUN_OF[p]][0]).get("beta", 0) for p in (kl2, kl04, cham)}
    f = lambda p, m: sft_phrase(p, f"findings/{m}", m)  # noqa: E731
    i = lambda p, m: sft_phrase(p, f"impression/{m}", f"Impression {m}")  # noqa: E731
    lines = [
        f"- **GRPO(R_cham) with a KL penalty, against SFT and against GRPO(R_cham) without one** "
        f"(95 % paired-bootstrap intervals of the relative change over the {s['summaries']['SFT']['studies']} "
        f"test studies). Against SFT, "
        f"Findings: beta = {beta[kl2]}: {f(kl2, 'BERTScore-F1')}, {f(kl2, 'ROUGE-L')}, {f(kl2, 'BLEU-4')}, "
        f"{f(kl2, 'METEOR')}, {i(kl2, 'ROUGE-L')}; beta = {beta[kl04]}: {f(kl04, 'BERTScore-F1')}, "
        f"{f(kl04, 'ROUGE-L')}, {i(kl04, 'ROUGE-L')}. Without the penalty (beta = {beta[cham]}, TRL's "
        f"default, the first R_cham run): {f(cham, 'BERTScore-F1')}, {f(cham, 'ROUGE-L')}."]
    direct = []
    for p in (kl2, kl04):
        ps = [f"{lab} {pair(p, cham, sec, m)[1]}" for sec, m, lab in (
            ("findings", "BERTScore-F1", "Findings BERTScore-F1"), ("findings", "ROUGE-L", "Findings ROUGE-L"),
            ("impression", "ROUGE-L", "Impression ROUGE-L"))]
        direct.append(f"beta = {beta[p]} {', '.join(ps)}")
    between = [f"{lab} {pair(kl04, kl2, sec, m)[1]}" for sec, m, lab in (
        ("findings", "BERTScore-F1", "Findings BERTScore-F1"), ("findings", "ROUGE-L", "Findings ROUGE-L"),
        ("impression", "ROUGE-L", "Impression ROUGE-L"))]
    lines[-1] += (
        f" Against GRPO(R_cham) (per-study scores in `grpo/scores/`, same bootstrap): {'; '.join(direct)}. "
        f"Beta = {beta[kl04]} against beta = {beta[kl2]}: {', '.join(between)}. How we got there, from "
        f"the logs and the outputs:")
    tc, th, td = training_stats("R_cham"), training_stats("R_haus"), training_stats("R_cham_distinct")
    lines.append(
        f"  - *Length, not the reward's range or group variance.* The groups carry signal ("
        f"{'no step' if tc['zero_std_steps'] == 0 else str(tc['zero_std_steps']) + ' steps'} "
        f"of {tc['steps']} had a zero-variance group under R_cham; mean within-group reward std "
        f"{tc['reward_std']:.2f}, R_haus's {th['reward_std']:.2f}). But the mean completion length "
        f"during training was {tc['len_first']:.0f} tokens over the first 20 % of steps and "
        f"{tc['len_last']:.0f} over the last under R_cham, {td['len_first']:.0f} and {td['len_last']:.0f} "
        f"under the distinct-sentence variant, {th['len_first']:.0f} and {th['len_last']:.0f} under R_haus. "
        "Chamfer is a mean of nearest-neighbour costs in both directions: a generic normal sentence "
        "(\"No pneumothorax or large pleural space is seen.\") is close to some sentence of almost any IU "
        "reference, so it barely raises the generated-to-reference mean, and each additional one can cover "
        "another reference sentence, lowering the reference-to-generated mean. Longer lists of generic "
        "normal findings therefore score higher. ROUGE-L's F1 and BLEU's precision fall with length; "
        "METEOR (recall-weighted) and BERTScore rise. Hausdorff takes the worst sentence on either side, "
        "so an extra sentence is a risk rather than a gain"
        f" (mean greedy test output: SFT {greedy_tokens('SFT'):.0f} tokens, GRPO(R_haus) "
        f"{greedy_tokens(haus):.0f}).")
    n = len(generations(cham))
    rc, rs, rd = repeats(cham), repeats("SFT"), repeats(dist)
    hist = [h for h in history(RUNS["R_cham_distinct"][0]) if "rewards/r_cham_set/mean" in h]
    gap = max(abs(h["rewards/r_cham_set/mean"] - h["rewards/monitor_cham/mean"]) for h in hist)
    lines.append(
        f"  - *Exact repeats are a symptom under greedy decoding.* {'Every one' if rc == n else rc} of the "
        f"{n} greedy R_cham test outputs repeat{'s' if rc == n else ''} a sentence of its Findings verbatim "
        f"(SFT: {rs} of {len(generations('SFT'))}). The paper's equations keep repeats (multiset, SPEC §2), "
        "so each copy of a close sentence lowers the mean. We added `SDRReward(distinct_sentences=True)` "
        f"and trained a sixth run with it: during training its reward and the multiset Chamfer monitor "
        f"differ by at most {gap:.4f} at any of its {len(hist)} steps (sampled completions at temperature "
        f"{run_json('grpo-cham-set')['temperature']:g} rarely repeat a sentence verbatim; they "
        f"paraphrase), and {rd} of {len(generations(dist))} of its greedy test outputs still repeat a "
        f"sentence. Against SFT, Findings: {f(dist, 'BERTScore-F1')} (reward's encoder: "
        f"{sft_phrase(dist, f'findings/{REWARD_ENC}')}), {f(dist, 'BLEU-4')}, {f(dist, 'ROUGE-L')}; "
        f"against GRPO(R_cham), Findings BERTScore-F1 {pair(dist, cham, 'findings', 'BERTScore-F1')[1]} "
        f"(reward's encoder: {pair(dist, cham, 'findings', REWARD_ENC)[1]}).")
    return "\n".join(lines)


def flat(policies) -> str:
    """Whether CheXpert-rule F1 (14, macro) of `policies` differs from SFT's (summary.json)."""
    s = summary()
    moved = []
    for p in policies:
        for sec in SECTIONS:
            key = f"{sec}/CheXpert-rule F1 (14, macro)"
            w = word(s["intervals_vs_first"][p][key], s["summaries"][p]["studies"])
            if w in ("higher", "lower"):
                moved.append(f"{p} ({sec.capitalize()}) {sft_phrase(p, key)}")
    if not moved:
        return (f"the CheXpert-rule F1 (14, macro) of {', '.join(policies)} does not differ from SFT's on "
                "either section (unchanged or inconclusive, tables above)")
    return f"the CheXpert-rule F1 (14, macro) against SFT: {'; '.join(moved)}"


def sci(x: float) -> str:
    """1e-4 rather than 0.0001 or 1e-04."""
    m, e = f"{x:e}".split("e")
    return f"{float(m):g}e{int(e)}"


def kl_fix_block() -> str:
    kl04, kl2, cham, haus = "GRPO(R_cham, KL 0.04)", "GRPO(R_cham, KL 0.2)", "GRPO(R_cham)", "GRPO(R_haus)"
    t04, t2, tc = training_stats("R_cham_kl0.04"), training_stats("R_cham_kl0.2"), training_stats("R_cham")
    b04, b2 = run_json("grpo-cham-kl04")["beta"], run_json("grpo-cham-kl2")["beta"]
    ch = lambda t: f"{t['last'] - t['first']:+.3f} [{t['window_ci'][0]:+.3f}, {t['window_ci'][1]:+.3f}]"  # noqa: E731
    r04, r2, rc = repeats(kl04), repeats(kl2), repeats(cham)
    n = len(generations(cham))
    lines = [
        f"  - *The fix: a KL penalty against the SFT policy.* With `--beta {b04}` and `--beta {b2}` (same "
        f"seed, prompts and steps) the training reward's change is {ch(t04)} and {ch(t2)} (beta = 0: "
        f"{ch(tc)}; intervals over the steps, as above; no comparison between runs is claimed), the mean "
        f"completion length during training is {t04['len_first']:.0f} and {t04['len_last']:.0f} tokens "
        f"(first and last 20 % of steps) at beta = {b04}, {t2['len_first']:.0f} and {t2['len_last']:.0f} "
        f"at beta = {b2}, against {tc['len_first']:.0f} and {tc['len_last']:.0f} at beta = 0, and "
        f"{r04} and {r2} of {n} greedy test outputs repeat a sentence (beta = 0: {rc} of {n}). Mean "
        f"greedy output length: SFT {greedy_tokens('SFT'):.0f} tokens, R_cham {greedy_tokens(cham):.0f}, "
        f"KL {b04} {greedy_tokens(kl04):.0f}, KL {b2} {greedy_tokens(kl2):.0f}."]
    pols = (kl2, haus, kl04, "SFT")
    distinct = {p: collections.Counter(g["text"] for g in generations(p)) for p in pols}
    lines.append(
        "  - *What the gain is made of.* The KL policies, like GRPO(R_haus), write few distinct reports "
        f"over the {n} test studies: "
        + ", ".join(f"{p} {len(distinct[p])} (the most frequent one {distinct[p].most_common(1)[0][1]} times)"
                    for p in pols)
        + ". Most IU studies are normal, and without the image a well-phrased normal report is what the "
        "set distance rewards; the lexical and BERTScore gains are the policy settling on better normal "
        f"reports; {flat(pols[:3])}.")
    mins = [training_stats(r)["step_time_sum"] / 60 for r in RUNS]
    per = {run_json(RUNS[r][0])["completions_per_step"] for r in RUNS}
    lines.append(
        f"  - Not tried (each run took {min(mins):.0f}-{max(mins):.0f} min of training steps on this "
        f"machine, the sum of TRL's `step_time`): more prompts per step (the paper's effective batch is 64 "
        f"completions, ours {'/'.join(str(p) for p in sorted(per))}), more steps, another learning rate. "
        "The recipe takes `--prompts-per-step`, `--steps`, `--lr`, `--beta` for that.")
    return "\n".join(lines)


def reward_share_block() -> str:
    stats = {r: training_stats(r) for r in RUNS}
    beta = {r: run_json(RUNS[r][0]).get("beta", 0) for r in RUNS}
    first = [r for r in RUNS if stats[r]["own"] >= 0.05 and not beta[r]]
    kl = [r for r in RUNS if beta[r]]

    def span(rs):
        sh = [100 * stats[r]["own"] / stats[r]["step_time"] for r in rs]
        return (f"{rng(sh, '.1f')} % ({rng([stats[r]['own'] for r in rs], '.2f')} s of "
                f"{rng([stats[r]['step_time'] for r in rs], '.1f')} s)")

    return (f"- The training reward's share of a step on this CPU (training table) was {span(first)} in the "
            f"runs without a KL penalty that embed ({', '.join(first)}), with SDR's own all-mpnet-base-v2 "
            f"on CPU, and {span(kl)} in the {len(kl)} KL runs ({', '.join(kl)}), made after the encoder's "
            "CPU speed-up (bench/README.md: vectorised GELU, whole batches per core); generation, the "
            "reference model's forward pass and the backward pass take the rest.")


def sft_block() -> str:
    r = run_json("sft")
    h = [x for x in history("sft") if "loss" in x and "mean_token_accuracy" in x]
    end = next(x for x in history("sft") if "train_runtime" in x)
    train = sum(outputs.train_impressions().values())
    wf = summary()["summaries"]["SFT"]["well_formed"]
    secs = r["train_seconds_this_session"]
    return (
        f"- **SFT**: {r['samples']} of the {train:,} train studies with both sections (shuffled, seed 0), "
        f"{r['epochs']:g} epoch = {r['steps']} optimiser steps of {r['effective_batch']} (8 x 2 accumulation), "
        f"lr {sci(r['lr'])} (the paper's) cosine with 5 % warm-up, AdamW, "
        f"completion-only loss, max {r['max_length']} tokens; {secs:,.0f} s wall ({secs / 60:.1f} min) on "
        f"{r['torch_threads']} threads, sharing the machine with builds "
        f"({end['train_runtime'] / r['steps']:.1f} s per optimiser step: TRL's `train_runtime` over the "
        f"steps). Loss {h[0]['loss']:.2f} -> {h[-1]['loss']:.2f}, token accuracy "
        f"{h[0]['mean_token_accuracy']:.2f} -> {h[-1]['mean_token_accuracy']:.2f} (step {h[0]['step']} -> "
        f"step {h[-1]['step']}). The size was chosen to fit a session; the template is "
        f"learned ({wf:.1f} % of SFT's greedy test outputs are well-formed).")


def grpo_block() -> str:
    rj = {r: run_json(RUNS[r][0]) for r in RUNS}

    def same(key):
        vals = {json.dumps(v.get(key)) for v in rj.values()}
        assert len(vals) == 1, (key, vals)
        return next(iter(rj.values()))[key]

    kl = {r: v["beta"] for r, v in rj.items() if v.get("beta")}
    resumed = {r: v["resumed_from"] for r, v in rj.items() if v.get("resumed_from")}
    ck = {r: re.search(r"checkpoint-(\d+)", p).group(1) for r, p in resumed.items()}
    times = ", ".join(f"{r} {training_stats(r)['step_time_sum']:,.0f} s" for r in RUNS)
    return (
        f"- **GRPO**: TRL `GRPOTrainer`, G = {same('generations')} completions of {same('prompts_per_step')} "
        f"prompt per step, {same('steps')} steps, the same {same('steps')} train prompts in the same order "
        f"for every run (seed {same('seed')}), lr {sci(same('lr'))} (the paper's) constant, temperature "
        f"{same('temperature'):g}, at most {same('max_completion_length')} completion tokens, beta = 0 "
        f"(no KL, TRL's default) except {', '.join(f'{r} (beta = {b:g})' for r, b in kl.items())}, "
        f"group-scaled advantages, {'bf16' if same('bf16') else 'fp32'}, checkpoints every 10 steps. "
        f"Training time (sum of TRL's `step_time`): {times} (the KL runs shared the cores with each "
        "other, builds and a pruning job). Runs went two at a time with "
        f"{same('torch_threads')} torch thread each, sharing the 2 cores with each other and with builds, "
        f"and {' / '.join(resumed)} were stopped at steps {' / '.join(ck.values())} when a session ended "
        "and resumed from those checkpoints in the next one.")


BLOCKS = {
    ("grpo.md", "main-tables"): tables_block,
    ("grpo.md", "training-table"): training_block,
    ("grpo.md", "reward-and-encoders"): reward_and_encoders_block,
    ("grpo.md", "kl-and-cham"): kl_and_cham_block,
    ("grpo.md", "kl-fix"): kl_fix_block,
    ("grpo.md", "reward-share"): reward_share_block,
    ("grpo.md", "sft-run"): sft_block,
    ("grpo.md", "grpo-run"): grpo_block,
}
