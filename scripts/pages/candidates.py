"""How well a generator keeps the report format: one function, `format_stats`, for every page that
states it (docs/results/generators.md, pruning.md, pruning-smollm2.md).

Reads a candidates file of `sdr generate` (`data/candidates/*.jsonl`: texts, token counts, finish
reasons) and its parse by `sdr parse --layout plain` (`docs/results/candidates/parse.json`,
written by `python3 tools/candidate_stats.py --parse-json ...`, which scripts/pruning-results.sh
runs; it holds each candidate's well-formed flag and sentence counts, the candidates file's
sha256 and the `sdr` version). A page that states a share over the first N studies of a file
says so in the row's label: the same file over 50 and over 100 studies are two quantities.
Generation times come from the `seconds` each study's record carries (wall-clock, all K
candidates), tokens from its `tokens`. Standard library only.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PARSE = "docs/results/candidates/parse.json"
GEMMA = "data/candidates/iu-test-gemma3-270m-k8-p2-prefill-rp1.2.jsonl"
SMOL = "data/candidates/iu-test-smollm2-k8-p2-prefill-rp1.2.jsonl"
SMOL_OLD = "data/candidates/iu-test-smollm2-k8-p2.jsonl"
HEAD = ("| {first} | studies | candidates | well-formed % | at token limit % | starts with Findings % | "
        "studies with a well-formed candidate % | mean tokens |\n|---|---:|---:|---:|---:|---:|---:|---:|")


def parse_data() -> dict:
    return json.loads((ROOT / PARSE).read_text())


def format_stats(path: str, studies: int | None = None) -> dict:
    """Format statistics of the candidates file `path` (its first `studies` studies, or all),
    with the well-formed flags of `sdr parse --layout plain` from parse.json."""
    raw = (ROOT / path).read_bytes()
    entry = parse_data()["files"].get(path)
    if entry is None or entry["sha256"] != hashlib.sha256(raw).hexdigest():
        raise SystemExit(f"results: {PARSE} has no parse of the current {path}; run "
                         f"python3 tools/candidate_stats.py --parse-json {PARSE} {path}")
    records = [json.loads(l) for l in raw.decode().splitlines() if l.strip()]
    parsed = entry["studies"]
    if studies is not None:
        records, parsed = records[:studies], parsed[:studies]
    assert [str(r["id"]) for r in records] == [str(p["id"]) for p in parsed], path
    texts = [c for r in records for c in r["candidates"]]
    finish = [f for r in records for f in r["finish"]]
    tokens = [t for r in records for t in r["tokens"]]
    valid = [v for p in parsed for v in p["format_valid"]]
    fs = [n for p in parsed for n, v in zip(p["findings_sentences"], p["format_valid"]) if v]
    im = [n for p in parsed for n, v in zip(p["impression_sentences"], p["format_valid"]) if v]
    n = len(texts)
    return {
        "file": path,
        "studies": len(records),
        "candidates": n,
        "well_formed": sum(valid),
        "token_limit": sum(f == "length" for f in finish),
        "starts_with_findings": sum(t.lstrip().lower().startswith("findings") for t in texts),
        "studies_with_a_well_formed": sum(any(p["format_valid"]) for p in parsed),
        "mean_tokens": sum(tokens) / n,
        "well_formed_more_than_3_impression": sum(k > 3 for k in im),
        "mean_findings_sentences": sum(fs) / len(fs),
        "mean_impression_sentences": sum(im) / len(im),
    }


def pct(a: int, b: int) -> str:
    return f"{100.0 * a / b:.1f}"


def row(label: str, s: dict) -> str:
    return (f"| {label} | {s['studies']} | {s['candidates']} | {pct(s['well_formed'], s['candidates'])} | "
            f"{pct(s['token_limit'], s['candidates'])} | {pct(s['starts_with_findings'], s['candidates'])} | "
            f"{pct(s['studies_with_a_well_formed'], s['studies'])} | {s['mean_tokens']:.1f} |")


def label(path: str, s: dict, total: int) -> str:
    return f"`{path}`" + (f", first {s['studies']} of {total} studies" if s["studies"] < total else "")


def file_table(files) -> str:
    """The `tools/candidate_stats.py` table: one row per (file, studies or None)."""
    out = [HEAD.format(first="candidates file")]
    for path, k in files:
        total = format_stats(path)["studies"]
        s = format_stats(path, k)
        out.append(row(label(path, s, total), s))
    return "\n".join(out)


def pruning_block() -> str:
    return file_table([(GEMMA, None), (SMOL, None), (SMOL_OLD, None)]) + "\n\n" + parser_note()


def smollm2_block() -> str:
    return file_table([(SMOL, None), (SMOL_OLD, None)]) + "\n\n" + parser_note()


def parser_note() -> str:
    return f"Well-formed: both sections parse (`sdr parse --layout plain`, SPEC §1; `{PARSE}`)."


def generators_block() -> str:
    g_total = format_stats(GEMMA)["studies"]
    sm = format_stats(SMOL)
    g = format_stats(GEMMA, sm["studies"])
    out = [HEAD.format(first="model"),
           row("SmolLM2-135M-Instruct", sm),
           row(f"Gemma 3 270M (first {g['studies']} of the file's {g_total} studies)", g)]
    stops = lambda s: s["candidates"] - s["token_limit"]  # noqa: E731
    out.append("")
    out.append(
        f"Gemma keeps the format better and stops far more often ({stops(g)} of {g['candidates']} candidates "
        f"end by the report-end rules or an end token, against {stops(sm)} of {sm['candidates']} for SmolLM2). "
        "Its failure mode differs: being a pretrained model, it often goes on after the report with prose "
        "(\"Note that the report is only for this scenario…\", \"Output: …\"), which the plain-header parser "
        "keeps as Impression sentences unless a header ends it. Of the well-formed candidates, "
        f"{pct(g['well_formed_more_than_3_impression'], g['well_formed'])} % have more than three Impression "
        f"sentences against {pct(sm['well_formed_more_than_3_impression'], sm['well_formed'])} % for SmolLM2 "
        f"({g['mean_findings_sentences']:.2f} Findings and {g['mean_impression_sentences']:.2f} Impression "
        f"sentences on average, against {sm['mean_findings_sentences']:.2f} and "
        f"{sm['mean_impression_sentences']:.2f}). " + parser_note())
    return "\n".join(out)


SETTINGS_HEAD = ("| {first} | studies | candidates | well-formed % | at token limit % | starts with Findings % | "
                 "mean tokens |\n|---|---:|---:|---:|---:|---:|---:|")


def generators_settings_block(studies: int = 20) -> str:
    """The kept files' first `studies` studies, one row per setting."""
    rows = [
        (f"Gemma 3 270M, prefill `Findings:`, repetition penalty 1.2 (`{GEMMA}`)", GEMMA),
        (f"SmolLM2, prefill `Findings:`, repetition penalty 1.2 (`{SMOL}`)", SMOL),
        (f"SmolLM2, no prefill, no repetition penalty (`{SMOL_OLD}`)", SMOL_OLD),
    ]
    out = [SETTINGS_HEAD.format(first=f"setting (first {studies} studies of the file)")]
    for name, path in rows:
        s = format_stats(path, studies)
        out.append(f"| {name} | {s['studies']} | {s['candidates']} | {pct(s['well_formed'], s['candidates'])} | "
                   f"{pct(s['token_limit'], s['candidates'])} | {pct(s['starts_with_findings'], s['candidates'])} | "
                   f"{s['mean_tokens']:.1f} |")
    out.append("")
    out.append(parser_note())
    return "\n".join(out)


def timing(path: str, first: int = 0, last: int | None = None) -> dict:
    """Wall-clock seconds and generated tokens of studies [first, last) of a candidates file, from
    the `seconds` (per study, all K candidates) and `tokens` (per candidate) it records."""
    raw = (ROOT / path).read_text()
    records = [json.loads(l) for l in raw.splitlines() if l.strip()][first:last]
    secs = [r["seconds"] for r in records]
    tokens = sum(sum(r["tokens"]) for r in records)
    srt = sorted(secs)
    mid = len(srt) // 2
    median = srt[mid] if len(srt) % 2 else (srt[mid - 1] + srt[mid]) / 2
    return {"studies": len(records), "first": first + 1, "last": first + len(records), "tokens": tokens,
            "seconds": sum(secs), "median": median, "min": srt[0], "max": srt[-1]}


def speed_block() -> str:
    g_total = format_stats(GEMMA)["studies"]
    half = format_stats(SMOL)["studies"]
    rows = [
        ("Gemma 3 270M", GEMMA, 0, half),
        ("Gemma 3 270M", GEMMA, half, g_total),
        ("SmolLM2-135M-Instruct, prefill and penalty", SMOL, 0, None),
        ("SmolLM2-135M-Instruct, no prefill, no penalty", SMOL_OLD, 0, None),
    ]
    out = ["| model | file | studies | tokens | seconds | tokens/s | seconds per study: median (min-max) |",
           "|---|---|---:|---:|---:|---:|---:|"]
    for name, path, a, b in rows:
        t = timing(path, a, b)
        out.append(f"| {name} | `{path}` | {t['first']}-{t['last']} | {t['tokens']} | {t['seconds']:.1f} | "
                   f"{t['tokens'] / t['seconds']:.1f} | {t['median']:.1f} ({t['min']:.1f}-{t['max']:.1f}) |")
    return "\n".join(out)


BLOCKS = {
    ("generators.md", "models"): generators_block,
    ("generators.md", "settings"): generators_settings_block,
    ("generators.md", "speed"): speed_block,
    ("pruning-smollm2.md", "candidate-stats"): smollm2_block,
    ("pruning.md", "candidate-stats"): pruning_block,
}
