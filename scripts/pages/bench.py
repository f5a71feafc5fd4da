"""The benchmarks' figures in the READMEs, rendered from the JSON files the benchmarks write.

- README.md `cost-table`: `bench/cost_table.py --out bench/results-cost-table.json` (ms per
  sample per interface and precision, medians of fresh processes with [min, max], the machine
  and its load before and after);
- bench/README.md `per-sample`: `bench/per_sample.py --out bench/results-per-sample.json`
  (per-sample calls as verl and OpenRLHF make them against one batched call);
- README.md and bench/README.md `encoder-speed`: `bench/embed.py --gemm-peak --out
  bench/results-embed.json` (the encoder against sentence-transformers and the CPU's peak);
- bench/README.md `encoder-profile`: `bench/embed.py --profile` (where the encoder's time goes,
  stage by stage, against the per-thread peak);
- README.md `rewards-speed`, `rewards-table`: `bench/rewards.py --json` (the reward against
  sentence-transformers + numpy, and besides encoding);
- README.md `worker-memory`: `bench/worker_memory.py --out bench/results-worker-memory.json`.

A ratio is worded by its per-round spread (bench/repeats.py): "within the goal" only when every
round is, "unsettled" when the spread is wider than the effect. Standard library only.
"""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COST = "bench/results-cost-table.json"
PER_SAMPLE = "bench/results-per-sample.json"
NAMES = {
    "python": "Python `SDRReward.score`",
    "trl": "TRL callable (chat messages, log callbacks)",
    "verl": "verl `RewardLoopWorker` (one call per sample)",
    "serve": "`sdr serve` (one POST per batch)",
}
MODES = {
    "batch": "batch (one `SDRReward.score` call)",
    "verl-sync": "verl-sync (`RewardLoopWorker`, `compute_score`)",
    "verl-async": "verl-async (`compute_score_async`)",
    "verl-nocoal": "verl-nocoal (`coalesce_ms=0`)",
    "openrlhf": "openrlhf (`SingleTurnAgentExecutor`, the reward file)",
    "openrlhf-nocoal": "openrlhf-nocoal (`SDR_COALESCE_MS=0`)",
}


def load(rel: str) -> dict:
    return json.loads((ROOT / rel).read_text())


def machine_text(m: dict) -> str:
    return (f"{m['date']}, {m['cpu']}, {m['logical_cores']} logical cores, load {m['load_before']:.2f} "
            f"before and {m['load_after']:.2f} after")


def spread_cell(s: dict, digits: int) -> str:
    return f"{s['median']:.{digits}f} [{s['min']:.{digits}f}, {s['max']:.{digits}f}]"


def ratio_words(r: dict, goal: float) -> str:
    """`0.97x (rounds 0.93-1.01): within 1.05x in every round`."""
    p = r["per_round"]
    head = f"{r['ratio']:.2f}x (rounds {p['min']:.2f}-{p['max']:.2f})"
    if p["max"] <= goal:
        return f"{head}: within {goal:.2f}x in every round" + (
            " (no difference beyond the rounds' spread)" if r["unsettled"] else "")
    if r["unsettled"]:
        return f"{head}: unsettled, the rounds' spread is wider than the effect"
    if p["min"] > goal:
        return f"{head}: over {goal:.2f}x in every round"
    return f"{head}: within {goal:.2f}x at the median, not in every round" if r["ratio"] <= goal else \
        f"{head}: over {goal:.2f}x at the median"


def cost_table() -> str:
    d = load(COST)
    out = [f"Measured {machine_text(d['machine'])}; batches of {d['batch']} samples; medians of {d['repeats']} "
           f"fresh processes per row, [min, max] over them; commit `{d['machine']['commit']}` "
           f"(`{COST}`):", "",
           "| interface | precision | load (s) | cold (ms/sample) | warm (ms/sample) | cached (ms/sample) | "
           "peak RSS (MiB) |", "|---|---|---:|---:|---:|---:|---:|"]
    for key, r in d["rows"].items():
        interface, precision = key.split("/")
        out.append(f"| {NAMES.get(interface, interface)} | {precision} | {spread_cell(r['load_s'], 2)} | "
                   f"{spread_cell(r['cold_ms'], 1)} | {spread_cell(r['warm_ms'], 1)} | "
                   f"{spread_cell(r['cached_ms'], 3)} | {r['peak_mib']:,.0f} |")
    out.append("")
    for p, v in d["python_vs_serve"].items():
        out.append(f"- In-process (`SDRReward.score`) against `sdr serve`, {p}, per sample: cold "
                   f"{ratio_words(v['cold_ms'], 1.05)}; warm {ratio_words(v['warm_ms'], 1.05)}.")
    return "\n".join(out)


def per_sample() -> str:
    d = load(PER_SAMPLE)
    out = [f"{machine_text(d['machine'])}; {d['samples']} samples, {d['device']}; {d['repeats']} rounds of fresh "
           f"processes, every mode once per round; commit `{d['machine']['commit']}` (`{PER_SAMPLE}`):", "",
           "| mode | seconds, median [min, max] | x batch (median; rounds) | rewards identical to batch |",
           "|---|---:|---:|:---:|"]
    for mode, r in d["results"].items():
        vs = r.get("vs_batch")
        x = "-" if mode == "batch" or vs is None else \
            f"{vs['ratio']:.2f} ({vs['per_round']['min']:.2f}-{vs['per_round']['max']:.2f})"
        same = "-" if mode == "batch" else ("yes" if r["identical_to_batch"] else "**no**")
        out.append(f"| {MODES.get(mode, mode)} | {spread_cell(r['seconds'], 2)} | {x} | {same} |")
    out.append("")
    coalesced = [m for m in d["results"] if m != "batch" and not m.endswith("nocoal")]
    out.append("Goal (issue 53): every coalesced mode within 1.1x of the batched call. " + "; ".join(
        f"{m}: {ratio_words(d['results'][m]['vs_batch'], 1.1)}" for m in coalesced) + ".")
    return "\n".join(out)


EMBED = "bench/results-embed.json"
WORKERS = "bench/results-worker-memory.json"
ANCHORS = {"f32": "sentence-transformers f32", "bf16": "sentence-transformers bf16 (oneDNN)"}
SDR_ROWS = {"f32": "sdr f32", "bf16": "sdr bf16 (`--precision bf16`)"}


def embed_rows() -> tuple[dict, dict]:
    d = load(EMBED)
    return d, {r["name"]: r for r in d["rows"]}


def encoder_speed() -> str:
    """The encoder against sentence-transformers and against the CPU's measured peak."""
    d, rows = embed_rows()
    pk = d["peaks"]
    peak = {"f32": pk["f32"], "bf16": pk["bf16"] or pk["f32"]}
    st32 = rows[ANCHORS["f32"]]["net_items_per_s"]
    out = [f"{d['sentences']:,} distinct IU X-ray sentences ({d['tokens']:,} tokens, {d['gflop']:,.0f} GFLOP of dense "
           f"GEMMs), measured {machine_text(d['machine'])}; medians of {d['rounds']} interleaved rounds, `sdr embed` "
           f"net of its start-up; torch {d['torch']} on {d['torch_threads']} threads (`{EMBED}`, "
           f"`bench/embed.py --gemm-peak`):", "",
           "| run | sentences/s | x sentence-transformers f32 | x sentence-transformers bf16 | dense GEMMs (GFLOP/s) "
           "| share of the CPU's peak | min cosine vs sentence-transformers f32 |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for prec in ("f32", "bf16"):
        for name in (ANCHORS[prec], SDR_ROWS[prec]):
            r = rows[name]
            x16 = r["net_items_per_s"] / rows[ANCHORS["bf16"]]["net_items_per_s"]
            cos = "" if r["min_cos_vs_st"] is None else f"{r['min_cos_vs_st']:.6f}"
            out.append(f"| {name} | {r['net_items_per_s']:.1f} | {r['net_items_per_s'] / st32:.2f} | {x16:.2f} | "
                       f"{r['gflop_per_s']:.0f} | {100 * r['gflop_per_s'] / peak[prec]:.0f} % of {peak[prec]:.0f} | "
                       f"{cos} |")
    st = {p: rows[ANCHORS[p]]["gflop_per_s"] / peak[p] for p in ("f32", "bf16")}
    out.append("")
    out.append(
        f"The peak is the CPU's own, measured by `gemm_peak` on {pk['threads']} threads (independent 512-bit FMAs: "
        f"{pk['f32']:.0f} GFLOP/s; `vdpbf16ps`: {pk['bf16']:.0f} GFLOP/s); SDR's GEMMs reach "
        + ", ".join(f"{v:.0f} ({k})" for k, v in pk["gemm"].items() if "avx512" in k)
        + " GFLOP/s at the feed-forward shape. Because sentence-transformers already runs its GEMMs at "
        f"{100 * st['f32']:.0f} % (f32) and {100 * st['bf16']:.0f} % (bf16) of this peak, no encoder doing the same "
        f"arithmetic can be more than {1 / st['f32']:.2f}x faster in f32 or {1 / st['bf16']:.2f}x in bf16 here.")
    return "\n".join(out)


def encoder_profile() -> str:
    """Where the encoder's time goes, stage by stage (`bench/embed.py --profile`)."""
    d = load(EMBED)
    prof, pk = d["profile"], d["peaks"]
    precs = [p for p in ("f32", "bf16") if p in prof]
    threads = prof[precs[0]]["threads"]
    per_thread = {"f32": pk["f32"] / threads, "bf16": (pk["bf16"] or pk["f32"]) / threads}
    timed = {p: sum(s["seconds"] for s in prof[p]["stages"]) for p in precs}
    out = [f"The same {prof[precs[0]]['sentences']:,} sentences, one run per precision after the timed rounds, "
           f"{threads} threads, batches of {prof[precs[0]]['batch_size']} ({machine_text(d['machine'])}; "
           f"`bench/embed.py --profile`, `{EMBED}`). A stage's seconds are those of the thread that ran it, "
           "summed over threads: batches run one per thread, so they are close to core-seconds; its rate is "
           f"set against one thread's share of the peak ({per_thread['f32']:.0f} GFLOP/s f32, "
           f"{per_thread['bf16']:.0f} GFLOP/s bf16):", "",
           "| stage | " + " | ".join(f"{p} share of time | {p} GFLOP/s (share of a thread's peak)" for p in precs) + " |",
           "|---|" + "---:|---:|" * len(precs)]

    def cells(p: str, secs: float, flops: int) -> str:
        rate = "" if not flops or not secs else \
            f"{flops / 1e9 / secs:.0f} ({100 * flops / 1e9 / secs / per_thread[p]:.0f} %)"
        return f"{100 * secs / timed[p]:.1f} % | {rate}"

    names = [s["stage"] for s in prof[precs[0]]["stages"]]
    for i, name in enumerate(names):
        out.append(f"| {name} | " + " | ".join(
            cells(p, prof[p]["stages"][i]["seconds"], prof[p]["stages"][i]["flops"]) for p in precs) + " |")
    gemm = {p: (sum(s["seconds"] for s in prof[p]["stages"] if s["gemm"]),
                sum(s["flops"] for s in prof[p]["stages"] if s["gemm"])) for p in precs}
    out.append("| **all dense GEMMs** | " + " | ".join(cells(p, *gemm[p]) for p in precs) + " |")
    rest = {p: max((s for s in prof[p]["stages"] if not s["gemm"]), key=lambda s: s["seconds"]) for p in precs}
    out.append("")
    out.append("The dense GEMMs take " + " and ".join(
        f"{100 * gemm[p][0] / timed[p]:.0f} % ({p})" for p in precs)
        + " of the time in the stages; the largest other stage is " + " and ".join(
        f"{rest[p]['stage']} ({100 * rest[p]['seconds'] / timed[p]:.1f} %, {p})" for p in precs)
        + ". Outside the stages (tokenizer, batching, threads waiting), per run: " + ", ".join(
        f"{max(0.0, 1 - timed[p] / (prof[p]['wall_s'] * threads)) * 100:.0f} % of "
        f"{threads} x the wall time ({p})" for p in precs) + ".")
    return "\n".join(out)


def worker_memory() -> str:
    d = load(WORKERS)
    one, own, srv = d["one_own_worker"]["pss"], d["own"], d["serve"]
    m = d["machine"]
    return (f"{d['workers']} worker processes that each load the encoder take {own['pss_sum']:,.0f} MiB together (proportional set size, "
            f"{own['pss_ratio_to_one']:.2f}x one\nworker's {one:,.0f} MiB: they map one file of packed weights, "
            f"below); routed to one `sdr serve` they take {srv['pss_sum']:,.0f} MiB with the server\n"
            f"({srv['pss_ratio_to_one']:.2f}x one worker; {m['date']}, {m['cpu']}, {m['logical_cores']} logical cores; "
            f"`bench/worker_memory.py`, `{WORKERS}`).")


REWARDS = {"f32": "bench/results-rewards.json", "bf16": "bench/results-rewards-bf16.json"}


def rewards_speed() -> str:
    """`SDRReward` against sentence-transformers + numpy on one GRPO batch (bench/rewards.py)."""
    parts, where = [], None
    for prec, rel in REWARDS.items():
        d = load(rel)
        where = (f"{d['date']}, {d['cpu']}, {d['cpus']} logical cores, load {d['load_before']:.2f} before and "
                 f"{d['load_after']:.2f} after")
        parts.append(f"{d['speedup_cold']:.1f}x cold and {d['speedup_warm']:.1f}x warm"
                     + ("" if prec == "f32" else " with `precision=\"bf16\"`")
                     + f" (max reward difference {d['max_abs_reward_diff']:.1e})")
    d = load(REWARDS["f32"])
    return (f"`SDRReward` scores a GRPO batch of {d['completions']} completions at " + ", and ".join(parts)
            + f" the speed of a sentence-transformers + numpy reward (best of {d['repeats']} for SDR; "
            f"{where}; `bench/rewards.py`, `{REWARDS['f32']}`, `{REWARDS['bf16']}`).")


TABLE = "bench/results-rewards-table.json"


def rewards_table() -> str:
    d = load(TABLE)
    return (f"besides encoding, a {d['completions']}-completion batch then costs the reward\nabout "
            f"{1000 * d['sdr_cold_seconds']:.0f} ms, {d['speedup_cold']:.1f}x less than numpy Chamfer on the same "
            f"vectors ({d['date']}, {d['cpu']}; `bench/rewards.py --encoder table`, `{TABLE}`).")


def worker_memory_detail() -> str:
    """bench/README.md's figures of the worker-memory run, RSS beside PSS."""
    d = load(WORKERS)
    one, own, srv, m = d["one_own_worker"], d["own"], d["serve"], d["machine"]
    return (f"{m['date']}, {m['cpu']}, {m['logical_cores']} logical cores, load {m['load_before']:.2f} at the start "
            f"(`{WORKERS}`): one worker with its own encoder {one['rss']:,.0f} MiB RSS / {one['pss']:,.0f} MiB PSS; "
            f"{d['workers']} such workers {own['rss_sum']:,.0f} MiB RSS ({own['rss_ratio_to_one']:.2f}x) / "
            f"{own['pss_sum']:,.0f} MiB PSS ({own['pss_ratio_to_one']:.2f}x); {d['workers']} workers routed to one "
            f"`sdr serve` {srv['rss_sum']:,.0f} MiB RSS ({srv['rss_ratio_to_one']:.2f}x) / {srv['pss_sum']:,.0f} MiB "
            f"PSS ({srv['pss_ratio_to_one']:.2f}x), server included.")


BLOCKS = {
    ("bench/README.md", "worker-memory"): worker_memory_detail,
    ("README.md", "encoder-speed"): encoder_speed,
    ("bench/README.md", "encoder-speed"): encoder_speed,
    ("bench/README.md", "encoder-profile"): encoder_profile,
    ("README.md", "rewards-speed"): rewards_speed,
    ("README.md", "rewards-table"): rewards_table,
    ("README.md", "worker-memory"): worker_memory,
    ("README.md", "cost-table"): cost_table,
    ("bench/README.md", "per-sample"): per_sample,
}
