"""docs/results/grpo-impression.md: the page's statements about its policies, from its files.

Blocks, each rendered from files under `docs/results/grpo-impression/`:

- `standing` ("Where it stands"): the clinical-cost policy's F1 and named findings in each
  attempt, the cosine + F1 policy against every other policy and SFT / SFT2 (rules and judge,
  `judged.json`: 95 % paired-bootstrap intervals over the 200 studies), and what the advantage
  table below was measured on;
- `second-attempt`, `second-clin-f1`: the second attempt's policies, their greedy impressions
  (`generations/*.jsonl`), and their comparisons (`summary.json`, `judged.json`);
- `break-even`: the table of `recipes/impression_break_even.py --json` (`break-even.json`, all
  rows) and the sentences that read it;
- `third-attempt`: the third attempt's policies (`stronger-sft/`);
- `sampling-shares`, `advantages`, `advantages-why`: the starting policies' samples
  (`stronger-sft/sampling_sft.json`) and the training runs' logged completions
  (`stronger-sft/sampling_training.json`);
- `first-attempt`: the first attempt's greedy impressions (`first-attempt/generations/`).

Wording rule (as `scripts/results.py`'s `verdict`): "higher"/"lower" only when the 95 % interval
excludes 0, else "inconclusive on N studies" with the interval. Standard library only.
"""

from __future__ import annotations

import collections
import gzip
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# One cell format and one bootstrap (sdr_eval::bootstrap's, seed 43) for both GRPO pages.
_spec = importlib.util.spec_from_file_location("grpo_report_for_impression", Path(__file__).with_name("grpo_report.py"))
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)
DIR = "docs/results/grpo-impression"
PAGE = "grpo-impression.md"
CATS = ("names no finding", "right finding", "partly right", "wrong finding")
REWARDS = {"cos": "cosine", "cos-f1": "cosine + F1 term", "clin": "clinical cost",
           "clin-f1": "clinical cost + F1 term", "clin-recall": "clinical cost, added 0.25, omitted 1"}
SUMMARIES = {"first": f"{DIR}/first-attempt/summary.json", "second": f"{DIR}/summary.json",
             "third": f"{DIR}/stronger-sft/summary.json", "recall": f"{DIR}/recall/summary.json"}
ORDINAL = {"first": "first", "second": "second", "third": "third", "recall": "fourth"}
RECALL = "GRPO(clinical, added 0.25, omitted 1)"
RECALL_REWARD = "clinical cost, added=0.25, omitted=1"


def load(rel: str):
    return json.loads((ROOT / rel).read_text())


def attempt(key: str) -> dict:
    return next(a for a in load(f"{DIR}/judged.json")["attempts"] if a["key"] == key)


def policy(a: dict, name: str) -> dict:
    return next(p for p in a["policies"] if p["name"] == name)


def generations(a: dict, name: str) -> dict:
    """study id -> greedy impression (whitespace collapsed)."""
    out = {}
    for line in (ROOT / policy(a, name)["generations"]).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            out[r["id"]] = " ".join(r["text"].split())
    return out


def counts(a: dict, name: str) -> collections.Counter:
    return collections.Counter(generations(a, name).values())


def macro(a: dict, name: str, labeler: str = "rules") -> float:
    return policy(a, name)["f1"][labeler]["macro_f1_14"]


def comparison(a: dict, p: str, against: str):
    """(c, sign): the judged.json comparison of `p` against `against` (sign +1), or of
    `against` against `p` (sign -1, read the other way round), or (None, 0)."""
    for c in a["comparisons"]:
        if c["policy"] == p and c["against"] == against:
            return c, 1
        if c["policy"] == against and c["against"] == p:
            return c, -1
    return None, 0


def said(c: dict, n: int) -> str:
    """`higher (+77.6 % [+23.5, +221.6])` or `inconclusive on 200 studies (...)`."""
    ch, iv = c["change_pct"], c["interval_pct"]
    if ch is None:
        return "no relative change (a baseline of 0)"
    if iv is None:
        return f"{ch:+.1f} % (no interval: some resample's baseline F1 is 0)"
    ci = f"{ch:+.1f} % [{iv[0]:+.1f}, {iv[1]:+.1f}]"
    if iv[0] > 0:
        return f"higher ({ci})"
    if iv[1] < 0:
        return f"lower ({ci})"
    return f"inconclusive on {n} studies ({ci})"


def versus(a: dict, p: str, against: str, labelers=("rules", "judge")) -> str:
    """`p` against `against` on macro-14 F1 under each labeler, in words; only comparisons
    that judged.json holds in this direction are worded (a relative change is not symmetric)."""
    c, sign = comparison(a, p, against)
    if c is None:
        return f"against {against}: not compared in judged.json"
    if sign < 0:
        parts = [f"{lab} {said(c[lab]['macro_f1_14'], c['studies'])}" for lab in labelers]
        return f"{against} against it: " + ", ".join(parts)
    parts = [f"{lab} {said(c[lab]['macro_f1_14'], c['studies'])}" for lab in labelers]
    return f"against {against}: " + ", ".join(parts)


def summary_change(key: str, name: str, col: str) -> str:
    """`name` against the attempt's baseline on summary column `col`, in words."""
    s = load(SUMMARIES[key])
    base = next(iter(s["summaries"]))
    v, b = s["summaries"][name][col], s["summaries"][base][col]
    iv = s["intervals_vs_first"].get(name, {}).get(col)
    n = s["studies"]
    if col.endswith(" %"):
        col, fmt = col.removesuffix(" %"), (lambda x: f"{x:.1f} %")
    else:
        fmt = (lambda x: f"{x:.2f}") if col == "mean words" else (lambda x: f"{x:.3f}")
    head = f"{col} {fmt(v)} against {base}'s {fmt(b)}"
    if iv is None or b == 0:
        return f"{head} (no interval)"
    ch = 100.0 * (v - b) / b
    ci = f"{ch:+.1f} % [{iv[0]:+.1f}, {iv[1]:+.1f}]"
    if iv[0] > 0:
        return f"{head}, higher ({ci})"
    if iv[1] < 0:
        return f"{head}, lower ({ci})"
    return f"{head}, inconclusive on {n} studies ({ci})"


def texts(c: collections.Counter, n: int, top: int = 0) -> str:
    items = c.most_common(top or None)
    s = ", ".join(f'"{t}" {k}' for t, k in items)
    rest = n - sum(k for _, k in items)
    return s + (f", {len(c) - len(items)} other texts {rest}" if rest else "")


def majority_share(a: dict, name: str, text: str) -> int:
    return counts(a, name).get(text, 0)


# ---------------------------------------------------------------------------------------------
# Starting policies' samples and the break-even shares

def sampling() -> dict:
    return load(f"{DIR}/stronger-sft/sampling_sft.json")


def naming(row: dict) -> tuple[float, float | None, int]:
    """(mean advantage of naming a finding, the share right at which naming starts to beat
    naming nothing, holding the partly-right share; None: at any share; n naming)."""
    n = {c: row[f"n {c}"] for c in CATS}
    k = n["right finding"] + n["partly right"] + n["wrong finding"]
    r, p, w, z = (row[c] for c in CATS[1:]), None, None, None
    r, p, w = row["right finding"], row["partly right"], row["wrong finding"]
    z = row["names no finding"]
    mean = (r * n["right finding"] + p * n["partly right"] + w * n["wrong finding"]) / k
    q = n["partly right"] / k
    s = (z - q * p - (1 - q) * w) / (r - w)
    return mean, (s if s > 0 else None), k


def shares_row(src: str) -> dict:
    return next(r for r in sampling()["shares"] if r["source"].startswith(f"{src},"))


ADVANTAGES = f"{DIR}/stronger-sft/advantages.jsonl.gz"


def naming_gap(source: str, reward: str) -> tuple[float, tuple | None]:
    """Mean advantage of the completions that name a finding minus that of those that name none,
    on one source's samples under one reward, with its 95 % bootstrap interval over the prompts
    (each prompt's group resampled whole; sdr_eval::bootstrap's generator, seed 43)."""
    rows = [json.loads(x) for x in gzip.decompress((ROOT / ADVANTAGES).read_bytes()).decode().splitlines() if x]
    groups: dict = {}
    for r in rows:
        if r["source"] == source and r["reward"] == reward:
            groups.setdefault(r["group"], []).append((r["category"] != CATS[0], r["advantage"]))
    keys = sorted(groups)

    def gap(sample) -> float | None:
        named = [a for g in sample for n, a in groups[g] if n]
        none = [a for g in sample for n, a in groups[g] if not n]
        return sum(named) / len(named) - sum(none) / len(none) if named and none else None

    value = gap(keys)
    vals = [gap([keys[i] for i in idx]) for idx in report.draws(len(keys))]
    if any(v is None for v in vals):
        return value, None
    vals.sort()
    return value, (report.percentile(vals, 0.025), report.percentile(vals, 0.975))


def advantages_block() -> str:
    d = sampling()
    out = ["| completions of | reward | names no finding | right finding | partly right | wrong finding | "
           "naming a finding, mean | naming minus naming nothing [95 % interval over prompts] | "
           "naming beats naming nothing from (share right) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = sorted(d["advantages"], key=lambda r: (list(REWARDS).index(r["reward"]), r["source"] != "SFT"))
    shown = set()
    for r in rows:
        mean, s, _ = naming(r)
        first = r["source"] not in shown
        shown.add(r["source"])
        cells = [f"{r[c]:+.3f}" + (f" (n={r['n ' + c]})" if first else "") for c in CATS]
        bold = r["reward"] == "clin"
        b = (lambda x: f"**{x}**") if bold else (lambda x: x)
        cells[0] = b(cells[0])
        g, iv = naming_gap(r["source"], r["reward"])
        gap = f"{g:+.3f} " + ("[n/a]" if iv is None else f"[{iv[0]:+.3f}, {iv[1]:+.3f}]") + (
            "*" if iv and (iv[0] > 0 or iv[1] < 0) else "")
        out.append(f"| {r['source']} | {REWARDS[r['reward']]} | " + " | ".join(cells) +
                   f" | {b(f'{mean:+.3f}')} | {b(gap)} | {b('always' if s is None else f'{100 * s:.0f} %')} |")
    sources = list(dict.fromkeys(r["source"] for r in d["advantages"]))
    prompts, _ = prompts_and_group()
    out.append("")
    out.append(f"(n is the same for every reward of a source: completions of abnormal studies among the "
               f"samples of {' and '.join(sources)} on {prompts} abnormal train studies. Means over these samples; "
               f"the gap between naming and naming nothing carries a 95 % bootstrap interval over the prompts "
               f"(`*`: excludes 0), from each completion's advantage in `stronger-sft/advantages.jsonl.gz` "
               f"(`impression_sampling.py --rescore stronger-sft/sampling_sft.json --advantages "
               f"{','.join(REWARDS)} --per-completion ...`); the share at which naming starts to pay is a point "
               f"value.)")
    return "\n".join(out)


def shares_block() -> str:
    rows = sampling()["shares"] + load(f"{DIR}/stronger-sft/sampling_training.json")["shares"]
    out = ["| completions of | completions | names a finding % | right, of those naming % | "
           "partly right, of those naming % |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['source']} | {r['completions']} | {r['names a finding %']:.1f} | "
                   f"{r['right, of those naming %']:.1f} | {r['partly right, of those naming %']:.1f} |")
    return "\n".join(out)


def clin_threshold() -> dict:
    """source -> (share right of the named findings, break-even share under the clinical cost)."""
    out = {}
    for r in sampling()["advantages"]:
        if r["reward"] == "clin":
            out[r["source"]] = (shares_row(r["source"])["right, of those naming %"], naming(r)[1])
    return out


def prompts_and_group() -> tuple[int, int]:
    """(abnormal train studies sampled, completions per study) of the starting policies' samples,
    as `impression_sampling.py` names its rows ("SFT, sampled on 40 abnormal train studies")."""
    import re

    r = sampling()["shares"][0]
    prompts = int(re.search(r"sampled on (\d+) abnormal", r["source"]).group(1))
    return prompts, r["completions"] // prompts


def measured_on() -> str:
    d = sampling()
    sources = list(dict.fromkeys(r["source"] for r in d["advantages"]))
    prompts, k = prompts_and_group()
    return (f"measured on samples of the GRPO runs' starting policies ({' and '.join(sources)}: {k} "
            f"completions at temperature 1 for each of {prompts} abnormal train studies, one GRPO-like "
            f"group per study; `stronger-sft/sampling_sft.json`), not on the GRPO runs' own groups (the "
            f"runs' logged completions, `sampling_training.json`, carry no advantages); means, and the gap "
            f"between naming and naming nothing with its 95 % interval over the prompts")


def break_even() -> dict:
    return load(f"{DIR}/break-even.json")


def be_row(name: str) -> dict:
    return next(r for r in break_even()["rows"] if r["reward"] == name)


def be_pct(name: str) -> str:
    return f"{100 * be_row(name)['break_even_share_right']:.0f} %"


def break_even_block() -> str:
    d = break_even()
    out = ["- **Why the clinical cost teaches silence to a weak policy.** The clinical cost penalises a "
           "finding the other report does not share (`unmatched`, or `added` and `omitted` apart) and a "
           "contradiction (`lambda`), and a normal impression states nothing to penalise. On "
           f"{d['studies']} abnormal train studies (the kind of prompt that carries the signal), each "
           "reward of three impressions against the study's reference (`python "
           "recipes/impression_break_even.py --json`, `grpo-impression/break-even.json`):", "",
           "| reward | own impression (right finding) | normal impression | another abnormal study's "
           "impression (wrong finding) | right - normal | normal - wrong | break-even share right |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for r in d["rows"]:
        out.append(f"| {r['reward']} | {r['right']:.3f} | {r['normal']:.3f} | {r['wrong']:.3f} | "
                   f"{r['right'] - r['normal']:+.3f} | {r['normal'] - r['wrong']:+.3f} | "
                   f"{100 * r['break_even_share_right']:.0f} % |")
    clin, cos, cosf1 = be_row("clinical cost"), be_row("cosine"), be_row("cosine + F1 term")
    weighed = [r for r in d["rows"] if "added=" in r["reward"]]
    pays = [r["reward"].removeprefix("clinical cost, ") for r in weighed if r["break_even_share_right"] < 0]
    low = min(weighed, key=lambda r: r["break_even_share_right"])
    high = max(weighed, key=lambda r: r["break_even_share_right"])
    out.append("")
    out.append(
        f"  The normal impression is \"{d['normal_impression']}\". \"Break-even share right\" is how often a policy that names a finding must name the right one "
        f"for naming findings to beat the normal impression in expectation (`(normal - wrong) / (right - "
        f"wrong)`; negative: naming pays even when every named finding is wrong). Under the clinical cost "
        f"at SPEC §10's defaults a wrong finding scores {clin['normal'] - clin['wrong']:.3f} below saying "
        f"nothing, so a policy that names the right finding less than {be_pct('clinical cost')} of the time "
        f"gains by saying nothing; SFT names one in few studies and rarely the right one, so GRPO's groups "
        f"reward the normal impression. Under the cosine cost a wrong finding costs "
        f"{cos['normal'] - cos['wrong']:.3f} ({be_pct('cosine')}), and with the F1 term naming any finding "
        f"pays even when it is wrong ({be_pct('cosine + F1 term')}: the F1 term rewards shared CheXpert "
        f"labels, and the normal impression has none). Weighing added and omitted findings apart "
        f"(`clinical:added=A,omitted=O`, {len(weighed)} rows) moves the break-even share from "
        f"{100 * low['break_even_share_right']:.0f} % ({low['reward'].removeprefix('clinical cost, ')}) to "
        f"{100 * high['break_even_share_right']:.0f} % ({high['reward'].removeprefix('clinical cost, ')})"
        + (f"; naming pays even when wrong at {', '.join(pays)}" if pays else "")
        + ". The omitted weight sets what the normal impression loses for the finding it leaves out, the "
        "added weight what a wrong finding costs. The clinical cost is built to rank reports that state "
        "findings (faithfulness.md: reversed findings and wrong sides cost what an unrelated report "
        "costs); as the only RL reward for a policy that cannot yet find the finding, at the defaults it "
        "rewards abstaining.")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# The attempts

def standing_block() -> str:
    a = {k: attempt(k) for k in ("first", "second", "third")}
    clin = "GRPO(clinical cost)"
    cf = "GRPO(cosine + F1 term)"
    clin_f1 = ", ".join(f"{macro(a[k], clin):.3f}" for k in a)
    clin_named = ", ".join(str(policy(a[k], clin)["name_a_finding"]["rules"]) for k in a)
    thr = clin_threshold()
    lines = [
        f"**Where it stands (four attempts).** At the weights of the time the clinical-cost policy names a "
        f"finding in {clin_named} of its 200 greedy test impressions in the first, second and third attempt "
        f"(rules), with Impression CheXpert-rule F1 macro-14 {clin_f1}: alone, at those weights, the clinical "
        f"cost teaches a 135M policy to name no finding. {fourth_summary()}"]
    for k in ("second", "third"):
        at = a[k]
        others = [p["name"] for p in at["policies"] if p["name"] != cf]
        parts = [versus(at, cf, o) for o in others]
        best = max(at["policies"], key=lambda p: p["f1"]["rules"]["macro_f1_14"])["name"]
        rank = "the highest point estimate of the attempt" if best == cf else f"below {best}'s point estimate"
        lines.append(
            f"In the {k} attempt {cf} has macro-14 {macro(at, cf):.3f} (rules; judge "
            f"{macro(at, cf, 'judge'):.3f}), {rank}; "
            + "; ".join(parts) + ".")
    t = a["third"]
    lines.append(
        f"The third attempt's baseline SFT2 has macro-14 {macro(t, 'SFT2'):.3f} against SFT's "
        f"{macro(t, 'SFT'):.3f} (SFT {versus(t, 'SFT', 'SFT2', ('rules',))}), so a gain against SFT2 "
        f"is not a gain against SFT. Policy against policy, CheXpert F1 has its intervals in `judged.json` "
        f"(rescored from the committed generations) and the other columns theirs under each attempt's table "
        f"(from its `per_study.jsonl.gz`).")
    s = " and ".join(f"{100 * v[1]:.0f} % ({src})" for src, v in thr.items())
    r = " and ".join(f"{v[0]:.1f} %" for v in thr.values())
    lines.append(
        f"Why, {measured_on()} (third attempt, below): on an abnormal study the clinical cost gives a "
        f"normal impression a positive mean advantage and a wrong finding a large negative one, so naming "
        f"a finding beats naming nothing only when about half of the named findings are right ({s}); "
        f"the starting policies' named findings are right {r} of the time.")
    return " ".join(lines)


def second_block() -> str:
    a = attempt("second")
    n = 200
    clin, cf, cos = "GRPO(clinical cost)", "GRPO(cosine + F1 term)", "GRPO(cosine)"
    sft = counts(a, "SFT")
    top = sft.most_common(1)[0][0]
    cc = counts(a, clin)
    out = [
        f"- **The clinical-cost policy collapsed again; the goal is not met.** {clin} names a finding in "
        f"{policy(a, clin)['name_a_finding']['rules']} of the {n} test impressions (rules; judge "
        f"{policy(a, clin)['name_a_finding']['judge']}); its {len(cc)} distinct impressions: {texts(cc, n)}. "
        f"CheXpert-rule F1 macro-14 {macro(a, clin):.3f}, {versus(a, clin, 'SFT')}; "
        f"{summary_change('second', clin, 'ROUGE-L')}. Macro-14 "
        + "; ".join(versus(a, clin, o) for o in (cos, cf)) +
        ". So issue 45's GRPO goal (the clinical-cost policy above both and above SFT on Impression "
        "CheXpert-rule F1, with fewer self-contradictions) is **not met**.",
        f"- **The cosine + F1-term policy moved the other way**: it names a finding in "
        f"{policy(a, cf)['name_a_finding']['rules']} of {n} impressions (judge "
        f"{policy(a, cf)['name_a_finding']['judge']}) against SFT's {policy(a, 'SFT')['name_a_finding']['rules']} "
        f"(judge {policy(a, 'SFT')['name_a_finding']['judge']}), and writes SFT's most frequent impression "
        f"(\"{top}\") for {majority_share(a, cf, top)} of {n} studies against SFT's {sft[top]}; "
        f"{summary_change('second', cf, 'mean words')}. CheXpert-rule F1 macro-14 {macro(a, cf):.3f}: "
        + "; ".join(versus(a, cf, o) for o in ("SFT", cos, clin, "GRPO(clinical cost + F1 term)")) +
        f". {summary_change('second', cf, 'contradicts own Findings %')}. {cos} writes \"{top}\" for "
        f"{majority_share(a, cos, top)} of {n} studies; macro-14 {macro(a, cos):.3f}, {versus(a, cos, 'SFT')}.",
    ]
    return "\n".join(out)


def second_clin_f1_block() -> str:
    a = attempt("second")
    p = "GRPO(clinical cost + F1 term)"
    row = be_row("clinical cost + F1 term")
    return (f"- **The clinical cost plus the F1 term, tried next** (break-even "
            f"{be_pct('clinical cost + F1 term')} and right-vs-normal margin "
            f"{row['right'] - row['normal']:+.3f} in the table above): macro-14 {macro(a, p):.3f}; "
            + "; ".join(versus(a, p, o) for o in ("SFT", "GRPO(clinical cost)", "GRPO(cosine + F1 term)"))
            + f"; {summary_change('second', p, 'ROUGE-L')}; {summary_change('second', p, 'mean words')}. "
            "The break-even share describes the reward's incentives against the study's own reference "
            "impression, not what a 135M policy learns in 60 steps.")


def third_block() -> str:
    a = attempt("third")
    n = 200
    clin, cf, cos = "GRPO(clinical cost)", "GRPO(cosine + F1 term)", "GRPO(cosine)"
    cc = counts(a, clin)
    train = {r["source"]: r for r in load(f"{DIR}/stronger-sft/sampling_training.json")["shares"]}
    first, last = train[f"{clin}, training, first 20 % of steps"], train[f"{clin}, training, last 20 % of steps"]
    sft, sft2 = shares_row("SFT"), shares_row("SFT2")
    out = [
        f"- **The clinical-cost policy fell silent again, from the stronger start too; the goal is not "
        f"met.** {clin} names a finding in {policy(a, clin)['name_a_finding']['rules']} of the {n} test "
        f"impressions ({len(cc)} distinct texts, {texts(cc, n, 2)}): macro-14 {macro(a, clin):.3f}, "
        f"{versus(a, clin, 'SFT2')}; {summary_change('third', clin, 'mean words')}. During training the "
        f"share of its completions that name a finding went from {first['names a finding %']:.1f} % (first "
        f"20 % of steps) to {last['names a finding %']:.1f} % (last 20 %), and the right share of those "
        f"from {first['right, of those naming %']:.1f} % to {last['right, of those naming %']:.1f} % "
        f"({first['completions']} completions each).",
        f"- **GRPO(cosine + F1 term) has the attempt's highest CheXpert-rule F1 point estimate**: macro-14 "
        f"{macro(a, cf):.3f}; "
        + "; ".join(versus(a, cf, o) for o in ("SFT2", "SFT", cos, clin)) +
        f"; {summary_change('third', cf, 'mean words')}; {summary_change('third', cf, 'ROUGE-L')}; "
        f"{summary_change('third', cf, 'BERTScore-F1 (MiniLM)')}; "
        f"{summary_change('third', cf, 'contradicts own Findings %')} (the references: "
        f"{load(SUMMARIES['third'])['reference_contradicts_pct']:.1f} %). {cos}: macro-14 "
        f"{macro(a, cos):.3f}, {versus(a, cos, 'SFT2')}.",
        f"- **SFT2 against SFT.** SFT against SFT2: {summary_change('third', 'SFT', 'ROUGE-L')}; "
        f"{summary_change('third', 'SFT', 'BERTScore-F1 (MiniLM)')}; macro-14 "
        f"{versus(a, 'SFT', 'SFT2')}. Sampled on abnormal train studies, SFT2 names a finding in "
        f"{sft2['names a finding %']:.1f} % of its completions (SFT {sft['names a finding %']:.1f} %) and "
        f"the named findings are right in {sft2['right, of those naming %']:.1f} % "
        f"(SFT {sft['right, of those naming %']:.1f} %), over {sft2['completions']} completions each, "
        f"without intervals.",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------
# Tables of evaluate_impression.py, rendered from its summary.json and the runs' log histories

COLUMNS = ("CheXpert-rule F1 (14, macro)", "CheXpert-rule F1 (5, micro)", "contradicts own Findings %",
           "BERTScore-F1 (MiniLM)", "ROUGE-L", "mean words")


def summary_table(key: str) -> str:
    return summary_table_of(load(SUMMARIES[key]))


def summary_table_of(s: dict) -> str:
    """An attempt's evaluation table from its `summary.json` (`recipes/evaluate_impression.py`
    prints it through this function): each policy's means, its change against the first policy
    with the 95 % paired-bootstrap interval, and the reference impressions' row."""
    names = list(s["summaries"])
    base = s["summaries"][names[0]]
    out = ["| policy | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
    for n in names:
        cells = [report.cell(s["summaries"][n][k], None if n == names[0] else base[k],
                             k.endswith("%") or k == "mean words", s["intervals_vs_first"].get(n, {}).get(k))
                 for k in COLUMNS]
        out.append(f"| {n} | " + " | ".join(cells) + " |")
    out.append(f"| reference impressions | 1.000 | 1.000 | {s['reference_contradicts_pct']:.1f} | 1.000 | 1.000 | "
               f"{s['reference_mean_words']:.1f} |")
    return "\n".join(out)


def training_table(runs: dict) -> str:
    """Per GRPO run (name -> log_history.jsonl): steps, the mean reward over the first and
    the last 20 % of steps, step time and the reward's share of it (TRL's `step_time`, the
    reward's `<name>/seconds`; the weight-0 monitor apart), as `recipes/evaluate.py`."""
    return training_table_of({name: [json.loads(x) for x in (ROOT / rel).read_text().splitlines() if x.strip()]
                              for name, rel in runs.items()})


def training_table_of(histories: dict) -> str:
    """The training table of GRPO runs given as name -> TRL log history (`recipes/evaluate.py`
    prints it through this function); a run with no logged step is left out."""
    out = ["| run | steps | reward, first 20 % | reward, last 20 % | change | step time (s) | reward time (s) | "
           "reward share | monitor time (s) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, hist in histories.items():
        steps = [h for h in hist if "reward" in h and "step_time" in h]
        if not steps:
            continue
        rewards = [h["reward"] for h in steps]
        k = max(1, len(rewards) // 5)
        first, last = sum(rewards[:k]) / k, sum(rewards[-k:]) / k
        step_time = sum(h["step_time"] for h in steps) / len(steps)
        own = [v for h in steps for c, v in h.items() if c.endswith("/seconds") and c.startswith("r_")]
        mon = [v for h in steps for c, v in h.items() if c.endswith("/seconds") and c.startswith("monitor")]
        own_t = sum(own) / len(own) if own else 0.0
        mon_t = f"{sum(mon) / len(mon):.2f}" if mon else "-"
        out.append(f"| {name} | {len(steps)} | {first:.3f} | {last:.3f} | {last - first:+.3f} | {step_time:.1f} | "
                   f"{own_t:.2f} | {100 * own_t / step_time:.1f} % | {mon_t} |")
    return "\n".join(out)


def per_study(folder: str) -> dict:
    """policy -> column -> per-study values in study order, from `<folder>/per_study.jsonl.gz`."""
    rows = [json.loads(x) for x in gzip.decompress((ROOT / folder / "per_study.jsonl.gz").read_bytes())
            .decode().splitlines() if x.strip()]
    out: dict = {}
    for r in rows:
        for pol, vals in r["values"].items():
            for col, v in vals.items():
                out.setdefault(pol, {}).setdefault(col, []).append(v)
    return out


PAIR_COLUMNS = ("BERTScore-F1 (MiniLM)", "ROUGE-L", "mean words", "contradicts own Findings %")


def pairs_table(key: str) -> str:
    """The attempt's policy-against-policy comparisons (those of `judged.json`) on the per-study
    columns: relative change in % with its 95 % paired-bootstrap interval over the studies."""
    a = attempt(key)
    folder = str(Path(SUMMARIES[key]).parent)
    values = per_study(folder)
    for b in a.get("borrowed", []):
        values[b["name"]] = per_study(b["folder"])[b["as"]]
    out = ["| comparison | " + " | ".join(PAIR_COLUMNS) + " |", "|---|" + "---:|" * len(PAIR_COLUMNS)]
    for c in a["comparisons"]:
        if c["kind"] != "policy":
            continue
        x, y = values[c["policy"]], values[c["against"]]
        cells = []
        for col in PAIR_COLUMNS:
            mx, my = sum(x[col]) / len(x[col]), sum(y[col]) / len(y[col])
            if col.endswith("%"):  # a share of a few studies: the two shares, not a relative change
                cells.append(f"{mx:.1f} vs {my:.1f}")
                continue
            if my == 0:
                cells.append("n/a")
                continue
            ci = report.paired_change(x[col], y[col])
            ch = f"{100.0 * (mx - my) / my:+.1f}%"
            if ci is None:
                cells.append(f"{ch} [n/a]")
            else:
                cells.append(f"{ch} [{ci[0]:+.1f}, {ci[1]:+.1f}]" + ("*" if ci[0] > 0 or ci[1] < 0 else ""))
        out.append(f"| {c['policy']} vs {c['against']} | " + " | ".join(cells) + " |")
    return "\n".join(out)


TRAINING = {
    "first": {"cosine": "first-attempt/f2i-grpo-cos.log_history.jsonl",
              "cosine + F1 term": "first-attempt/f2i-grpo-cos-f1.log_history.jsonl",
              "clinical cost": "first-attempt/f2i-grpo-clin.log_history.jsonl"},
    "second": {"cosine": "f2i-grpo-cos.log_history.jsonl",
               "cosine + F1 term": "f2i-grpo-cos-f1.log_history.jsonl",
               "clinical cost": "f2i-grpo-clin.log_history.jsonl",
               "clinical cost + F1 term": "f2i-grpo-clin-f1.log_history.jsonl"},
    "third": {"cosine": "stronger-sft/f2i-sft2-grpo-cos.log_history.jsonl",
              "cosine + F1 term": "stronger-sft/f2i-sft2-grpo-cos-f1.log_history.jsonl",
              "clinical cost": "stronger-sft/f2i-sft2-grpo-clin.log_history.jsonl"},
    "recall": {"clinical, added 0.25, omitted 1": "recall/training/log_history.jsonl"},
}


def results_block(key: str, lead: str) -> str:
    """The attempt's evaluation table, its GRPO runs' training table and its policy-against-policy
    comparisons on the per-study columns."""
    s = load(SUMMARIES[key])
    base = next(iter(s["summaries"]))
    runs = {n: f"{DIR}/{rel}" for n, rel in TRAINING[key].items()}
    return "\n".join([
        lead.format(n=s["studies"], base=base), "",
        summary_table(key), "",
        training_table(runs), "",
        f"Policy against policy on the per-study columns (`{Path(SUMMARIES[key]).parent.name}/per_study.jsonl.gz`; "
        f"CheXpert F1 in [Judged by the independent judge](#judged-by-the-independent-judge)): relative change "
        f"in % with its 95 % paired-bootstrap interval over the {s['studies']} studies (1,000 resamples, seed "
        f"43; `*`: excludes 0; n/a where the baseline's mean is 0; the contradiction shares as they are):", "",
        pairs_table(key),
    ])


def reward_change(key: str) -> list:
    """Per GRPO run of the attempt: (name, change of the mean training reward from the first to
    the last 20 % of steps, its 95 % interval resampling the steps of each window, the KL to the
    starting policy at the last step)."""
    out = []
    for name, rel in TRAINING[key].items():
        hist = [json.loads(x) for x in (ROOT / DIR / rel).read_text().splitlines() if x.strip()]
        steps = [h for h in hist if "reward" in h and "step_time" in h]
        r = [h["reward"] for h in steps]
        k = max(1, len(r) // 5)
        out.append((name, sum(r[-k:]) / k - sum(r[:k]) / k, report.window_change(r[:k], r[-k:]),
                    steps[-1].get("kl")))
    return out


def rewards_words(key: str) -> str:
    """`cosine +0.066 [+0.010, +0.121] (rose), ...`: each run's change, worded by its interval."""
    parts = []
    for name, ch, (lo, hi), _ in reward_change(key):
        word = "rose" if lo > 0 else "fell" if hi < 0 else "no change beyond the steps' noise"
        parts.append(f"{name} {ch:+.3f} [{lo:+.3f}, {hi:+.3f}] ({word})")
    return "; ".join(parts)


def second_rewards_block() -> str:
    rc = reward_change("second")
    kl = sorted(((r[3], r[0]) for r in rc if r[3] is not None), reverse=True)
    return (f"- The training rewards, last minus first 20 % of steps (95 % interval resampling each window's "
            f"steps; the two windows see different prompts): {rewards_words('second')}. The KL to SFT at the "
            f"last step: " + ", ".join(f"{v:.2f} ({n})" for n, _, _, v in rc if v is not None)
            + f"; {kl[0][1]} moved furthest from SFT (one step's KL each, no interval).")


def first_notes_block() -> str:
    s = load(SUMMARIES["first"])
    contra = {n: v["contradicts own Findings %"] for n, v in s["summaries"].items()}
    n = s["studies"]
    zero = all(v == 0 for v in contra.values())
    head = ("No policy contradicts its own Findings, SFT included" if zero else
            "Contradictions of the policies' own Findings: " + ", ".join(f"{k} {v:.1f} %" for k, v in contra.items()))
    return (f"- **{head}** ({round(max(contra.values()) * n / 100)} of {n}{'' if zero else ' at most'}; the reference impressions "
            f"do in {s['reference_contradicts_pct']:.1f} % of studies by the same rules): the contradiction "
            f"metric cannot separate policies that never state a finding.\n"
            f"- **The clinical cost did not prevent the collapse** here, so the issue's goal (the clinical-cost "
            f"policy above the other two and SFT on Impression CheXpert-rule F1) is **not met**. The training "
            f"rewards, last minus first 20 % of steps: {rewards_words('first')}.")


RESULT_LEAD = ("**Result** (impressions of the same {n} test studies; intervals against {base}; CheXpert-rule "
               "F1 counts an uncertain mention as present):")
FIRST_LEAD = ("Impression of {n} held-out test studies, generated greedily from their Findings; relative "
              "change against {base} with its 95 % paired-bootstrap interval (`*`: excludes 0); CheXpert-rule "
              "F1 counts an uncertain mention as present.")


# ---------------------------------------------------------------------------------------------
# Fourth attempt: an omitted finding priced 4x an added one

def fourth_summary() -> str:
    a = attempt("recall")
    return (f"In the fourth attempt, with an omitted finding priced four times an added one "
            f"(`clinical:added=0.25,omitted=1`), the policy names a finding in "
            f"{policy(a, RECALL)['name_a_finding']['rules']} (macro-14 {macro(a, RECALL):.3f}, judge "
            f"{macro(a, RECALL, 'judge'):.3f}); " + "; ".join(
                versus(a, RECALL, o) for o in ("SFT2", "SFT", "GRPO(cosine + F1 term), third attempt")) + ".")


def headline(a: dict, p: str, against: str) -> str:
    """The fourth attempt's verdict on macro-14 F1 against `against`, by both labelers."""
    c, _ = comparison(a, p, against)
    dirs = set()
    for lab in ("rules", "judge"):
        iv = c[lab]["macro_f1_14"]["interval_pct"]
        dirs.add(None if iv is None else (1 if iv[0] > 0 else -1 if iv[1] < 0 else 0))
    if dirs == {1}:
        return (f"With an omission priced four times an addition, the clinical-cost policy is above {against} "
                f"on macro-14 F1 by both labelers.")
    if dirs == {-1}:
        return (f"With an omission priced four times an addition, the clinical-cost policy is still below "
                f"{against} on macro-14 F1 by both labelers.")
    return (f"With an omission priced four times an addition, the clinical-cost policy is not below {against} "
            f"on macro-14 F1 by either labeler; the labelers' verdicts differ or include no change.")


def fourth_block() -> str:
    a = attempt("recall")
    s = load(SUMMARIES["recall"])
    n = s["studies"]
    third = attempt("third")
    clin3 = "GRPO(clinical cost), third attempt"
    cf3 = "GRPO(cosine + F1 term), third attempt"
    rc = counts(a, RECALL)
    named = policy(a, RECALL)["name_a_finding"]
    train = {r["source"]: r for r in load(f"{DIR}/recall/sampling_training.json")["shares"]}
    first, last = train[f"{RECALL}, training, first 20 % of steps"], train[f"{RECALL}, training, last 20 % of steps"]
    sft2 = shares_row("SFT2")
    d_train = {r["source"]: r for r in load(f"{DIR}/stronger-sft/sampling_training.json")["shares"]}
    d_first = d_train["GRPO(clinical cost), training, first 20 % of steps"]
    d_last = d_train["GRPO(clinical cost), training, last 20 % of steps"]
    be, be_def = be_row(RECALL_REWARD), be_row("clinical cost")
    out = [
        results_block("recall", RESULT_LEAD), "",
        f"- **{headline(a, RECALL, 'SFT2')}** {RECALL} names a finding in {named['rules']} of the {n} test impressions by the rules "
        f"({named['judge']} by the judge; SFT2 {policy(a, 'SFT2')['name_a_finding']['rules']} / "
        f"{policy(a, 'SFT2')['name_a_finding']['judge']}, the default-weight policy of the third attempt "
        f"{policy(third, 'GRPO(clinical cost)')['name_a_finding']['rules']} / "
        f"{policy(third, 'GRPO(clinical cost)')['name_a_finding']['judge']}; {len(rc)} distinct texts, "
        f"{texts(rc, n, 2)}): macro-14 {macro(a, RECALL):.3f} (judge {macro(a, RECALL, 'judge'):.3f}); "
        + "; ".join(versus(a, RECALL, o) for o in ("SFT2", "SFT")) + ".",
        f"- **Against the same run at the default weights and against the best reward of the third attempt** "
        f"(same SFT2, settings, prompts and test studies; their generations in `stronger-sft/`): "
        + "; ".join(versus(a, RECALL, o) for o in (clin3, cf3)) + ". "
        f"{summary_change('recall', RECALL, 'contradicts own Findings %')} (the references: "
        f"{s['reference_contradicts_pct']:.1f} %); {summary_change('recall', RECALL, 'ROUGE-L')}; "
        f"{summary_change('recall', RECALL, 'BERTScore-F1 (MiniLM)')}; "
        f"{summary_change('recall', RECALL, 'mean words')}.",
        f"- **Why it differs from the defaults**: scoring the study's own reference impression as the right "
        f"finding (`break-even.json`), naming a finding beats the normal impression from "
        f"{100 * be['break_even_share_right']:.0f} % right findings at these weights against "
        f"{100 * be_def['break_even_share_right']:.0f} % at the defaults; SFT2's sampled findings are right "
        f"{sft2['right, of those naming %']:.1f} % of the time. During training the share of the run's "
        f"completions that name a finding went from {first['names a finding %']:.1f} % (first 20 % of steps) "
        f"to {last['names a finding %']:.1f} % (last 20 %), the right share of those from "
        f"{first['right, of those naming %']:.1f} % to {last['right, of those naming %']:.1f} % "
        f"({first['completions']} completions each; `recall/sampling_training.json`; the default-weight run "
        f"of the third attempt: {d_first['names a finding %']:.1f} % to {d_last['names a finding %']:.1f} %). "
        f"The training reward itself did not rise (the table: last minus first 20 % of steps).",
    ]
    return "\n".join(out)


def why_block() -> str:
    d = sampling()
    clin = {r["source"]: r for r in d["advantages"] if r["reward"] == "clin"}
    thr = clin_threshold()
    src = list(clin)

    def rng(c: str) -> str:
        v = sorted(clin[s][c] for s in src)
        return f"{v[0]:+.2f} to {v[-1]:+.2f}" if v[0] != v[-1] else f"{v[0]:+.2f}"

    nm = {s: naming(clin[s])[0] for s in src}
    recall = [r for r in d["advantages"] if r["reward"] == "clin-recall"]
    other = []
    for kind in ("cos", "cos-f1", "clin-f1"):
        ss = [naming(r)[1] for r in d["advantages"] if r["reward"] == kind]
        if all(s is None for s in ss):
            other.append(f"{REWARDS[kind]}: at any share")
        else:
            other.append(f"{REWARDS[kind]}: from " + " / ".join(
                "any share" if s is None else f"{100 * s:.0f} %" for s in ss) + " right")
    gap = [thr[s][1] * 100 - thr[s][0] for s in src]
    return (
        f"- **Why, {measured_on()}** (table above). On an abnormal study the clinical cost gives the "
        f"completions that name nothing a positive mean advantage ({rng('names no finding')}): a normal "
        f"impression is the safe middle of a group whose other members are penalised for wrong findings "
        f"({rng('wrong finding')}) and partly right ones ({rng('partly right')}). A right finding earns the "
        f"most ({rng('right finding')}), but the starting policies' named findings are right "
        + " and ".join(f"{thr[s][0]:.1f} % ({s})" for s in src) +
        " of the time, so naming a finding, as these policies do it, has a negative mean advantage ("
        + ", ".join(f"{nm[s]:+.3f} from {s}" for s in src) +
        "; naming minus naming nothing " + ", ".join(
            f"{g:+.3f} [{iv[0]:+.3f}, {iv[1]:+.3f}] from {s}" for s in src
            for g, iv in [naming_gap(s, "clin")]) +
        "). The cheapest way for GRPO to raise the reward is the policy-wide one, naming fewer findings, "
        "not the study-specific one, naming the right finding; on these samples the clinical cost would "
        "start to favour naming at "
        + " and ".join(f"{100 * thr[s][1]:.0f} % ({s})" for s in src) +
        " right findings, " + " and ".join(f"{g:.0f} points above {s}'s share" for g, s in zip(gap, src)) +
        ". Under the other three rewards naming beats naming nothing (" + "; ".join(other) +
        "), because they reward a right or partly right finding more than they punish a wrong one. This "
        f"threshold is measured on the policies' imperfect findings; `impression_break_even.py`'s "
        f"{be_pct('clinical cost')} scored the study's own reference impression as the right finding. "
        f"With an omitted finding priced four times an added one ({REWARDS['clin-recall']}, the fourth "
        f"attempt's reward) the completions that name nothing lose their edge (" + ", ".join(
            f"{r['names no finding']:+.3f} from {r['source']}" for r in recall) +
        ") and naming starts to pay at " + " and ".join(
            f"{100 * naming(r)[1]:.0f} % ({r['source']})" for r in recall) +
        " right findings, " + ("below both policies' shares" if all(
            100 * naming(r)[1] < thr[r["source"]][0] for r in recall) else "not below both policies' shares") +
        "; the gap between naming and naming nothing is then " +
        ", ".join(f"{g:+.3f} [{iv[0]:+.3f}, {iv[1]:+.3f}] from {r['source']}" for r in recall
                  for g, iv in [naming_gap(r["source"], "clin-recall")]) + ".")


def first_block() -> str:
    a = attempt("first")
    n = 200
    grpo = [p["name"] for p in a["policies"] if p["name"] != "SFT"]
    g = {p: generations(a, p) for p in grpo}
    top = collections.Counter(t for p in grpo for t in g[p].values()).most_common(1)[0][0]
    each = []
    for p in grpo:
        c = counts(a, p)
        rest = [f'"{t}" {k}' for t, k in c.most_common() if t != top]
        each.append(f"{p} {c[top]}" + (f" (else {', '.join(rest)})" if rest else ""))
    pairs = []
    for i in range(len(grpo)):
        for j in range(i + 1, len(grpo)):
            d = sum(g[grpo[i]][u] != g[grpo[j]][u] for u in g[grpo[i]])
            pairs.append(f"{grpo[i]} / {grpo[j]} {d}")
    sft = counts(a, "SFT")
    c = comparison(a, grpo[0], "SFT")[0]
    same = all(comparison(a, p, "SFT")[0]["rules"]["macro_f1_14"] == c["rules"]["macro_f1_14"] for p in grpo)
    return (
        f"- **Every GRPO policy collapsed to the majority impression.** After 50 steps the three policies "
        f"write \"{top}\" for almost every one of the {n} test studies: {'; '.join(each)}. Their greedy "
        f"outputs differ pairwise in {', '.join(pairs)} studies. No GRPO policy's impression names a "
        f"finding (rules and judge). SFT wrote \"{top}\" for {sft[top]} of {n} and named a finding in "
        f"{policy(a, 'SFT')['name_a_finding']['rules']} (rules; see the judge's verdict above); CheXpert-rule "
        f"F1 macro-14 {macro(a, 'SFT'):.3f}. The GRPO policies lose that: macro-14 "
        + (f"{macro(a, grpo[0]):.3f} for each, {versus(a, grpo[0], 'SFT')}" if same else
           "; ".join(f"{p} {macro(a, p):.3f}, {versus(a, p, 'SFT')}" for p in grpo))
        + ". " + "; ".join(f"{p}: {summary_change('first', p, 'BERTScore-F1 (MiniLM)')}, "
                           f"{summary_change('first', p, 'ROUGE-L')}" for p in grpo) + ".")


BLOCKS = {
    (PAGE, "standing"): standing_block,
    (PAGE, "second-attempt"): second_block,
    (PAGE, "break-even"): break_even_block,
    (PAGE, "second-clin-f1"): second_clin_f1_block,
    (PAGE, "third-attempt"): third_block,
    (PAGE, "sampling-shares"): shares_block,
    (PAGE, "advantages"): advantages_block,
    (PAGE, "advantages-why"): why_block,
    (PAGE, "first-attempt"): first_block,
    (PAGE, "fourth-attempt"): fourth_block,
    (PAGE, "second-rewards"): second_rewards_block,
    (PAGE, "first-notes"): first_notes_block,
    (PAGE, "first-results"): lambda: results_block("first", FIRST_LEAD),
    (PAGE, "second-results"): lambda: results_block("second", FIRST_LEAD),
    (PAGE, "third-results"): lambda: results_block("third", RESULT_LEAD),
}
