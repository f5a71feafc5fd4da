#!/usr/bin/env python3
"""Yardstick: an independent Python implementation of best-of-K selection by
chamfer@avg (docs/SPEC.md §1, §3, §5), compared with `sdr select`.

What is independent here and what is shared with sdr:
  * parsing (SPEC §1: sections and sentences) is written in this file from the
    SPEC text; `sdr parse` is never used for selection or scoring (only, when
    asked with --sdr-parse-diff, to show where the two parsers differ);
  * set distances and the corpus aggregation are numpy code in this file
    (d(u,v) = (1 - cos)/2, Chamfer, mean over the corpus reports that have the
    section, D = D_F + D_I, argmin with ties to the lowest index, malformed
    candidates +inf, all malformed -> the first);
  * the encoder is shared: the distinct candidate sentences are embedded with
    `sdr embed` (all-mpnet-base-v2, f32), and the corpus sentence embeddings
    are read from the corpus .safetensors file;
  * scoring: nltk sentence BLEU-4 (method1 smoothing) and rouge-score ROUGE-L F1
    of the pick's Findings + Impression text (as this file's parser extracts
    it) against the reference's findings + impression (IU X-ray CSV).

Output: a Markdown table (agreement with `sdr select`, BLEU-4 / ROUGE-L of the
random-among-well-formed expectation, the yardstick's pick and sdr's pick, and
gains in %), a disagreement breakdown, and optionally a JSON dump (--keep), a
per-study gzip JSON Lines file (--per-study: every candidate's scores under both
implementations, well-formed flags, BLEU-4 / ROUGE-L and, with --sdr-parse-diff,
where sdr's parse differs) and a JSON record of the run (--run-json: files,
settings, versions, machine, load, timings, agreement counts, score
differences); docs/results/yardstick.md is generated from those two files.

Dependencies: tools/requirements-yardstick.txt (numpy, safetensors, nltk,
rouge-score). `python3 tools/yardstick.py --help` needs none of them.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import hashlib
import json
import os
import re
import subprocess
import sys
import platform
import resource
import tempfile
import time

# ---------------------------------------------------------------------------
# SPEC §1: plain-text reports
# ---------------------------------------------------------------------------

# `Findings:` / `Impression:` headers, any case, anywhere on a line (the
# one-line form "Findings: ... Impression: ..." is common), at a word start.
FI_HEADER = re.compile(r"\b(findings|impression)[ \t]*:", re.IGNORECASE)

# Other headed sections, "recognised and ignored" (SPEC §1 names INDICATION,
# COMPARISON, TECHNIQUE, ...). Project choice of this file: these names, any
# case, at the start of a line after markdown decoration, followed by a colon.
OTHER_SECTION_NAMES = [
    "indications?", "comparisons?", "technique", "history", "clinical history",
    "clinical information", "clinical indication", "examination", "exam",
    "reason for exam(?:ination)?", "procedure", "recommendations?",
    "notification", "addendum", "wet read", "final report",
]
OTHER_HEADER = re.compile(
    r"^[ \t#*_>\-]*(?:" + "|".join(OTHER_SECTION_NAMES) + r")[ \t*_]*:",
    re.IGNORECASE | re.MULTILINE,
)

# SPEC §1 project choice: after markdown decoration (#, *, _, -, >), one of the
# words example/report/case/sample in any case, optional spaces or '#', a digit.
EXAMPLE_LINE = re.compile(
    r"^[ \t#*_>\-]*(?:example|report|case|sample)[ #]*\d",
    re.IGNORECASE | re.MULTILINE,
)

# Only with --bare-headers (not in the SPEC's wording, which names `Findings:` and
# `Impression:`): a line holding nothing but the header word, markdown decoration
# allowed, counts as a header. `sdr generate` stops a candidate as soon as its
# report has ended, which can cut a repeated header before its colon
# ("...\nImpression"), so this reading matters for generated candidates.
BARE_HEADER = re.compile(
    r"^[ \t#*_>\-]*(findings|impression)[ \t*_]*$", re.IGNORECASE | re.MULTILINE
)
OPTIONS = {"bare_headers": False}
EMBED_CACHED = [0]  # rows reused from --keep by the last embed()

TEMPLATE_TAGS = ("<think>", "</think>", "<answer>", "</answer>")


def parse_report(text: str) -> dict:
    """Findings / Impression sentence lists and validity of one report."""
    if any(t in text for t in TEMPLATE_TAGS):
        return _parse_template(text)
    return _parse_plain(text)


def _parse_template(text: str) -> dict:
    counts = [text.count(t) for t in TEMPLATE_TAGS]
    pos = [text.find(t) for t in TEMPLATE_TAGS]
    structural = all(c == 1 for c in counts) and pos == sorted(pos)
    f_text = i_text = ""
    m = re.search(r"<think>(.*?)</think>", text, re.DOTALL)
    if m:
        f_text = m.group(1)
    m = re.search(r"<answer>(.*?)</answer>", text, re.DOTALL)
    if m:
        i_text = m.group(1)
    if structural:
        outside = (text[: pos[0]] + text[pos[1] + 8 : pos[2]] + text[pos[3] + 9 :])
        structural = outside.strip() == ""
    findings, impression = split_sentences(f_text), split_sentences(i_text)
    return {
        "findings": findings,
        "impression": impression,
        "valid": bool(structural and findings and impression),
    }


def _parse_plain(text: str) -> dict:
    # Events in text order: (start, end, kind)
    events = []
    for m in FI_HEADER.finditer(text):
        events.append((m.start(), m.end(), m.group(1).lower()[0]))  # 'f' / 'i'
    if OPTIONS["bare_headers"]:
        for m in BARE_HEADER.finditer(text):
            events.append((m.start(), m.end(), m.group(1).lower()[0]))
    for m in OTHER_HEADER.finditer(text):
        events.append((m.start(), m.end(), "other"))
    for m in EXAMPLE_LINE.finditer(text):
        events.append((m.start(), m.start(), "example"))
    # At one position an example line or other header comes before an F/I
    # header found inside it (e.g. "Example 2: Findings: ...").
    order = {"example": 0, "other": 1, "f": 2, "i": 2}
    events.sort(key=lambda e: (e[0], order[e[2]]))

    sections = {"f": None, "i": None, "pre_i": None}
    have_f = have_i = seen_fi = False
    cur, cur_start = None, 0
    end = len(text)
    for start, stop, kind in events:
        if start < cur_start:  # inside a header already consumed
            continue
        if cur is not None and sections[cur] is None:
            sections[cur] = text[cur_start:start]
        if kind == "example":
            if seen_fi:
                end = start
                cur = None
                break
            cur = None
            continue
        if kind == "other":
            cur, cur_start = None, stop
            continue
        seen_fi = True
        if kind == "f":
            if have_f:  # a second Findings header ends the report
                cur = None
                break
            have_f = True
            cur, cur_start = "f", stop
        else:  # impression header
            if not have_f:
                if sections["pre_i"] is None and cur != "pre_i":
                    cur, cur_start = "pre_i", stop
                else:  # a second Impression (no Findings yet) ends the report
                    cur = None
                    break
            elif not have_i:
                have_i = True
                cur, cur_start = "i", stop
            else:  # a second Impression header ends the report
                cur = None
                break
    if cur is not None and sections[cur] is None:
        sections[cur] = text[cur_start:end]

    if have_f:
        f_text, i_text = sections["f"] or "", sections["i"] or ""
    else:  # no Findings header: keep the first Impression (never valid)
        f_text, i_text = "", sections["pre_i"] or ""
    findings, impression = split_sentences(f_text), split_sentences(i_text)
    return {
        "findings": findings,
        "impression": impression,
        "valid": bool(have_f and have_i and findings and impression),
    }


# SPEC §1 sentence segmentation -------------------------------------------------

ABBREVIATIONS = {"e.g.", "i.e.", "approx.", "dr.", "vs.", "st."}
VERTEBRA = re.compile(r"^[ctls]\d{1,2}\.$", re.IGNORECASE)
ENUMERATOR = re.compile(r"^(?:\d{1,2}[.)]|[-*\u2022\u00b7\u25aa\u2023\u25e6\u2013]+)(?=\s|$)\s*")
# a run of terminators, with any closing quotes/brackets right after it
BOUNDARY = re.compile(r"([.!?]+)[\"'\u201d\u2019)\]]*(?=\s|$)")
HAS_ALNUM = re.compile(r"\w")


def split_sentences(text: str) -> list[str]:
    """Rule-based segmentation of one section's text (SPEC §1).

    Choices of this file (the SPEC leaves them open): a blank line ends a
    sentence, a single newline is a line wrap (a space), a line that starts with
    a list enumerator starts a new sentence; a sentence ends at . ! ? followed
    by whitespace or the end, except after the SPEC's abbreviations, and after a
    vertebral level (T9.) unless the next word starts with a capital letter;
    enumerators at a sentence start are removed; a sentence without a letter or
    digit (stray markdown such as '**') is dropped.
    """
    chunks, cur = [], []
    for line in text.split("\n"):
        s = line.strip()
        if not s:
            if cur:
                chunks.append(" ".join(cur))
                cur = []
            continue
        if ENUMERATOR.match(s) and cur:
            chunks.append(" ".join(cur))
            cur = []
        cur.append(s)
    if cur:
        chunks.append(" ".join(cur))

    out = []
    for chunk in chunks:
        start = 0
        for m in BOUNDARY.finditer(chunk):
            stop = m.end()
            if m.group(1) == "." and m.end(1) == stop:
                tok = chunk[:stop].split()[-1].lstrip("([{\"'").lower()
                if tok in ABBREVIATIONS:
                    continue
                if VERTEBRA.match(tok):
                    rest = chunk[stop:].lstrip()
                    if rest and not rest[0].isupper():
                        continue
            out.append(chunk[start:stop])
            start = stop
        out.append(chunk[start:])
    sentences = []
    for s in out:
        s = s.strip()
        while True:  # enumerators (and stray bullets) at the start are removed
            t = ENUMERATOR.sub("", s, count=1).strip()
            if t == s:
                break
            s = t
        s = re.sub(r"\s+", " ", s)
        if s and HAS_ALNUM.search(s):
            sentences.append(s)
    return sentences


# ---------------------------------------------------------------------------
# Corpus, embeddings, Chamfer (SPEC §3) and avg aggregation (SPEC §5)
# ---------------------------------------------------------------------------


def load_corpus(path: str):
    import numpy as np
    from safetensors.numpy import load_file

    t = load_file(path)
    E = t["embeddings"].astype(np.float64)
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    sections = {}
    for name in ("findings", "impression"):
        off, idx = t[f"{name}.offsets"], t[f"{name}.indices"]
        lens = off[1:] - off[:-1]
        keep = lens > 0  # reports missing the section are left out of it
        seg_lens = lens[keep]
        cols = np.concatenate([idx[a:b] for a, b in zip(off[:-1][keep], off[1:][keep])]).astype(np.int64)
        starts = np.concatenate([[0], np.cumsum(seg_lens)[:-1]]).astype(np.int64)
        sections[name] = {"cols": cols, "starts": starts, "lens": seg_lens.astype(np.float64),
                          "n_reports": int(keep.sum())}
    return E, sections, int(len(t["findings.offsets"]) - 1)


def chamfer_avg(A, E, sec) -> float:
    """Mean over the section's corpus reports of Chamfer(A, report), d = (1-cos)/2."""
    import numpy as np

    G = A @ E[sec["cols"]].T  # (n, L) cosines against every corpus sentence occurrence
    M = (1.0 - G) / 2.0
    row_min = np.minimum.reduceat(M, sec["starts"], axis=1)  # (n, R): min_j per report
    term_a = row_min.mean(axis=0)  # mean_i min_j
    col_min = M.min(axis=0)  # (L,): min_i per corpus sentence
    term_b = np.add.reduceat(col_min, sec["starts"]) / sec["lens"]  # mean_j min_i
    return float(((term_a + term_b) / 2.0).mean())


def embed(sentences: list[str], sdr: str, workdir: str):
    """Rows of `sdr embed` for `sentences`; rows of an earlier run's --keep folder are reused
    for the sentences it holds, the others are embedded now. Returns (X, reused count)."""
    import numpy as np

    txt = os.path.join(workdir, "sentences.txt")
    npy = os.path.join(workdir, "sentences.npy")
    cache = {}
    if os.path.exists(txt) and os.path.exists(npy):  # --keep folder of an earlier run
        with open(txt, encoding="utf-8") as f:
            old = f.read().split("\n")[:-1]
        old_x = np.load(npy)
        if old_x.shape[0] == len(old):
            cache = {s: old_x[i] for i, s in enumerate(old)}
    missing = [s for s in sentences if s not in cache]
    if missing:
        mtxt = os.path.join(workdir, "sentences.new.txt")
        mnpy = os.path.join(workdir, "sentences.new.npy")
        with open(mtxt, "w", encoding="utf-8") as f:
            f.write("".join(s + "\n" for s in missing))
        subprocess.run([sdr, "embed", "--format", "npy", "-o", mnpy, mtxt], check=True)
        new_x = np.load(mnpy)
        if new_x.shape[0] != len(missing):
            sys.exit(f"sdr embed returned {new_x.shape[0]} rows for {len(missing)} sentences")
        cache.update({s: new_x[i] for i, s in enumerate(missing)})
        os.remove(mtxt)
        os.remove(mnpy)
    EMBED_CACHED[0] = len(sentences) - len(missing)
    X32 = np.stack([cache[s] for s in sentences]) if sentences else np.zeros((0, 768), np.float32)
    with open(txt, "w", encoding="utf-8") as f:
        f.write("".join(s + "\n" for s in sentences))
    np.save(npy, X32)
    X = X32.astype(np.float64)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    return X


# ---------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------


def tokens(s: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", s.lower())


class Scorer:
    def __init__(self):
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
        from rouge_score import rouge_scorer

        self._bleu, self._smooth = sentence_bleu, SmoothingFunction().method1
        self._rouge = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)

    def __call__(self, hyp: str, ref: str) -> tuple[float, float]:
        h, r = tokens(hyp), tokens(ref)
        bleu = self._bleu([r], h, smoothing_function=self._smooth) if h else 0.0
        rouge = self._rouge.score(ref, hyp)["rougeL"].fmeasure
        return float(bleu), float(rouge)


def load_references(path: str) -> dict:
    refs = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            parts = [(row.get("findings") or "").strip(), (row.get("impression") or "").strip()]
            text = " ".join(p for p in parts if p)
            if text:
                refs[row["uid"]] = re.sub(r"\s+", " ", text)
    return refs


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def run_sdr_select(sdr, corpus, cand_file, out):
    t0 = time.time()
    subprocess.run([sdr, "select", "--corpus", corpus, "--metric", "chamfer", "--agg", "avg",
                    "--quiet", cand_file, "-o", out], check=True)
    return time.time() - t0


def sdr_parse(sdr, texts):
    """Only for --sdr-parse-diff (diagnostics): sdr's own parse of some texts."""
    inp = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    r = subprocess.run([sdr, "parse"], input=inp, capture_output=True, text=True, check=True)
    return [json.loads(l) for l in r.stdout.splitlines() if l.strip()]


def pct(a, b):
    return 100.0 * (a - b) / b if b else float("nan")


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Independent best-of-K selection by chamfer@avg (SPEC §1/§3/§5), "
        "compared with `sdr select --metric chamfer --agg avg`.",
        epilog="Example: python3 tools/yardstick.py --corpus iu-train.safetensors "
        "data/candidates/iu-test-smollm2-k8-p2-prefill-rp1.2.jsonl",
    )
    ap.add_argument("candidates", nargs="+", help="JSON Lines candidate files ({id, candidates})")
    ap.add_argument("--corpus", required=True, help="corpus .safetensors built by `sdr corpus build`")
    ap.add_argument("--references", default="data/iu-xray/indiana_reports.csv",
                    help="IU X-ray CSV (uid, findings, impression) [%(default)s]")
    ap.add_argument("--sdr", default=os.environ.get("SDR_BIN", "sdr"),
                    help="sdr binary (default: $SDR_BIN, else `sdr` on PATH)")
    ap.add_argument("--sdr-selections", nargs="*", default=None,
                    help="existing `sdr select` chamfer@avg outputs, one per candidate file "
                    "(default: run sdr select)")
    ap.add_argument("--keep", default=None, help="folder to keep sdr's selections and a JSON dump in")
    ap.add_argument("--show", type=int, default=5, help="disagreeing studies to print per file [%(default)s]")
    ap.add_argument("--tie-tol", type=float, default=1e-5,
                    help="score gap below which a disagreement counts as a near-tie [%(default)s]")
    ap.add_argument("--sdr-parse-diff", action="store_true",
                    help="diagnostics only: also run `sdr parse` on every candidate and count "
                    "where its sections differ from this file's parser")
    ap.add_argument("--bare-headers", action="store_true",
                    help="also read a line holding only `Findings` or `Impression` (no colon) as a "
                    "header (a reading beyond the SPEC's wording; see BARE_HEADER)")
    ap.add_argument("--per-study", default=None, metavar="FILE",
                    help="write one gzip JSON Lines record per study (both implementations' picks "
                    "and scores of every candidate, well-formed flags, BLEU-4 / ROUGE-L of every "
                    "candidate, of both picks and of the random well-formed expectation)")
    ap.add_argument("--run-json", default=None, metavar="FILE",
                    help="write a JSON record of the run (files, settings, versions, CPU model, "
                    "load, timings, peak RSS, agreement counts, largest score differences)")
    args = ap.parse_args(argv)
    OPTIONS["bare_headers"] = args.bare_headers

    import numpy as np

    t_start = time.time()
    load_start = os.getloadavg()
    workdir = args.keep or tempfile.mkdtemp(prefix="yardstick-")
    os.makedirs(workdir, exist_ok=True)

    refs = load_references(args.references)
    scorer = Scorer()

    files = []
    for path in args.candidates:
        studies = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
        for s in studies:
            s["parsed"] = [parse_report(c) for c in s["candidates"]]
        files.append((path, studies))

    # Embed every distinct candidate sentence once (whitespace already collapsed).
    distinct = sorted({x for _, st in files for s in st for p in s["parsed"] if p["valid"]
                       for x in p["findings"] + p["impression"]})
    t0 = time.time()
    X = embed(distinct, args.sdr, workdir)
    t_embed = time.time() - t0
    row = {s: i for i, s in enumerate(distinct)}

    t0 = time.time()
    E, secs, n_reports = load_corpus(args.corpus)
    t_load = time.time() - t0

    results, t_score, t_sdr, t_select, records = [], 0.0, 0.0, [], []
    for fi, (path, studies) in enumerate(files):
        t0 = time.time()
        for s in studies:
            scores = []
            for p in s["parsed"]:
                if not p["valid"]:
                    scores.append(float("inf"))
                    continue
                d = 0.0
                for name, key in (("findings", "findings"), ("impression", "impression")):
                    A = X[[row[x] for x in p[key]]]
                    d += chamfer_avg(A, E, secs[name])
                scores.append(d)
            s["y_scores"] = scores
            finite = [i for i, v in enumerate(scores) if np.isfinite(v)]
            s["y_pick"] = min(finite, key=lambda i: (scores[i], i)) if finite else 0
        t_score += time.time() - t0

        if args.sdr_selections:
            sel_path = args.sdr_selections[fi]
        else:
            sel_path = os.path.join(workdir, f"sdr-select-{fi}.jsonl")
            t_select.append(run_sdr_select(args.sdr, args.corpus, path, sel_path))
            t_sdr += t_select[-1]
        sel = {str(d["id"]): d for d in map(json.loads, open(sel_path, encoding="utf-8"))}

        parse_flags = {}  # (study id, k) -> "" or letters v/f/i where sdr's parse differs
        if args.sdr_parse_diff:
            texts = [c for s in studies for c in s["candidates"]]
            theirs = sdr_parse(args.sdr, texts)
            ours = [p for s in studies for p in s["parsed"]]
            pd = {"candidates": len(texts), "valid_differs": 0, "findings_differ": 0,
                  "impression_differ": 0, "examples": [], "same_parse_max_abs": 0.0,
                  "same_parse_scored": 0}
            sdr_sc = {str(d["id"]): d["scores"] for d in map(json.loads, open(sel_path))}
            y_sc = [(str(s["id"]), k, v) for s in studies for k, v in enumerate(s["y_scores"])]
            for t, a, b, (sid, k, yv) in zip(texts, ours, theirs, y_sc):
                sv = sdr_sc[sid][k]
                if (a["valid"] == b["format_valid"] and a["findings"] == b["findings"]
                        and a["impression"] == b["impression"] and sv is not None
                        and np.isfinite(yv)):
                    pd["same_parse_scored"] += 1
                    pd["same_parse_max_abs"] = max(pd["same_parse_max_abs"], abs(yv - sv))
                vd = a["valid"] != b["format_valid"]
                fd = a["findings"] != b["findings"]
                idf = a["impression"] != b["impression"]
                parse_flags[(sid, k)] = "v" * vd + "f" * fd + "i" * idf
                pd["valid_differs"] += vd
                pd["findings_differ"] += fd
                pd["impression_differ"] += idf
                if (vd or fd or idf) and len(pd["examples"]) < 8:
                    pd["examples"].append({"text": t, "yardstick": a, "sdr": b})
        else:
            pd = None

        agree = 0
        bleu = {"rand": [], "y": [], "sdr": []}
        rouge = {"rand": [], "y": [], "sdr": []}
        kinds = {"near-tie": 0, "well-formed flags differ": 0, "scores differ": 0, "other": 0}
        dis, wf_total, wf_differs, max_abs = [], 0, 0, 0.0
        n_scored = 0
        for s in studies:
            sid = str(s["id"])
            o = sel[sid]
            sp = int(o["chosen"])
            yp = s["y_pick"]
            sdr_scores = [float("inf") if v is None else float(v) for v in o["scores"]]
            sdr_wf = list(o["well_formed"])
            y_wf = [p["valid"] for p in s["parsed"]]
            wf_total += len(y_wf)
            wf_differs += sum(a != b for a, b in zip(y_wf, sdr_wf))
            for a, b in zip(s["y_scores"], sdr_scores):
                if np.isfinite(a) and np.isfinite(b):
                    max_abs = max(max_abs, abs(a - b))
            if sp == yp:
                agree += 1
            else:
                ys, ss = s["y_scores"], sdr_scores
                if y_wf[sp] != sdr_wf[sp] or y_wf[yp] != sdr_wf[yp]:
                    kind = "well-formed flags differ"
                elif abs(ys[sp] - ss[sp]) > args.tie_tol or abs(ys[yp] - ss[yp]) > args.tie_tol:
                    kind = "scores differ"
                elif abs(ys[sp] - ys[yp]) <= args.tie_tol and abs(ss[sp] - ss[yp]) <= args.tie_tol:
                    kind = "near-tie"
                else:
                    kind = "other"
                kinds[kind] += 1
                dis.append({"id": sid, "kind": kind, "yardstick_pick": yp, "sdr_pick": sp,
                            "yardstick_scores": [None if not np.isfinite(v) else v for v in ys],
                            "sdr_scores": o["scores"], "yardstick_wf": y_wf, "sdr_wf": sdr_wf})
            hyps = [" ".join(p["findings"] + p["impression"]) for p in s["parsed"]]
            rec = {
                "file": os.path.basename(path), "id": sid, "k": len(y_wf),
                "yardstick_pick": yp, "sdr_pick": sp,
                "kind": None if sp == yp else dis[-1]["kind"],
                "yardstick_scores": [float(v) if np.isfinite(v) else None for v in s["y_scores"]],
                "sdr_scores": [None if v is None else float(v) for v in o["scores"]],
                "yardstick_wf": y_wf, "sdr_wf": sdr_wf,
                "sentences": [[len(p["findings"]), len(p["impression"])] for p in s["parsed"]],
                "text_sha": [hashlib.sha256(h.encode()).hexdigest()[:12] for h in hyps],
                "sdr_parse_differs": ([parse_flags[(sid, k)] for k in range(len(y_wf))]
                                      if args.sdr_parse_diff else None),
                "scored": False,
            }
            records.append(rec)
            ref = refs.get(sid)
            if ref is None:
                continue
            n_scored += 1
            per = [scorer(h, ref) for h in hyps]
            pool = [i for i, v in enumerate(y_wf) if v] or list(range(len(y_wf)))
            bleu["rand"].append(np.mean([per[i][0] for i in pool]))
            rouge["rand"].append(np.mean([per[i][1] for i in pool]))
            bleu["y"].append(per[yp][0]); rouge["y"].append(per[yp][1])
            bleu["sdr"].append(per[sp][0]); rouge["sdr"].append(per[sp][1])
            rec.update({
                "scored": True,
                "bleu": [b for b, _ in per], "rouge": [r for _, r in per],
                "random_wf": {"bleu": float(bleu["rand"][-1]), "rouge": float(rouge["rand"][-1])},
                "yardstick": {"bleu": per[yp][0], "rouge": per[yp][1]},
                "sdr": {"bleu": per[sp][0], "rouge": per[sp][1]},
            })

        b = {k: float(np.mean(v)) for k, v in bleu.items()}
        r = {k: float(np.mean(v)) for k, v in rouge.items()}
        results.append({
            "file": path, "studies": len(studies), "scored": n_scored, "agree": agree,
            "bleu": b, "rouge": r, "kinds": kinds, "disagreements": dis,
            "wf_total": wf_total, "wf_differs": wf_differs,
            "wf_yardstick": sum(p["valid"] for s in studies for p in s["parsed"]),
            "max_abs_score_diff": max_abs, "parse_diff": pd,
        })

    # ---- report -------------------------------------------------------------
    out = []
    out.append("| file | studies | agreement | BLEU-4 random-wf | BLEU-4 yardstick | BLEU-4 sdr "
               "| ROUGE-L random-wf | ROUGE-L yardstick | ROUGE-L sdr | gain yardstick (B4 / RL) "
               "| gain sdr (B4 / RL) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for res in results:
        b, r = res["bleu"], res["rouge"]
        out.append(
            f"| `{os.path.basename(res['file'])}` | {res['studies']} | "
            f"{100.0 * res['agree'] / res['studies']:.0f} % ({res['agree']}/{res['studies']}) | "
            f"{b['rand']:.4f} | {b['y']:.4f} | {b['sdr']:.4f} | "
            f"{r['rand']:.4f} | {r['y']:.4f} | {r['sdr']:.4f} | "
            f"{pct(b['y'], b['rand']):+.1f} % / {pct(r['y'], r['rand']):+.1f} % | "
            f"{pct(b['sdr'], b['rand']):+.1f} % / {pct(r['sdr'], r['rand']):+.1f} % |")
    print("\n".join(out))
    print()
    for res in results:
        print(f"{res['file']}: well-formed (yardstick) {res['wf_yardstick']}/{res['wf_total']}; "
              f"well-formed flag differs from sdr on {res['wf_differs']} candidates; "
              f"max |score_yardstick - score_sdr| over candidates both score: "
              f"{res['max_abs_score_diff']:.3g}; disagreements: "
              + ", ".join(f"{k} {v}" for k, v in res["kinds"].items()))
        for d in res["disagreements"][: args.show]:
            ys, ss = d["yardstick_scores"], d["sdr_scores"]
            yp, sp = d["yardstick_pick"], d["sdr_pick"]
            print(f"  study {d['id']} ({d['kind']}): yardstick picks {yp} "
                  f"(y {_f(ys[yp])}, sdr {_f(ss[yp])}), sdr picks {sp} "
                  f"(y {_f(ys[sp])}, sdr {_f(ss[sp])})")
        if res["parse_diff"]:
            pd = res["parse_diff"]
            print(f"  sdr parse vs yardstick parser over {pd['candidates']} candidates: valid differs "
                  f"{pd['valid_differs']}, findings differ {pd['findings_differ']}, impression differ "
                  f"{pd['impression_differ']}; over the {pd['same_parse_scored']} well-formed candidates "
                  f"both parse alike, max |score_yardstick - score_sdr| = {pd['same_parse_max_abs']:.3g}")
    print(f"\ncorpus: {args.corpus} ({n_reports} reports; findings in "
          f"{secs['findings']['n_reports']}, impression in {secs['impression']['n_reports']})")
    print(f"scored: BLEU-4 = nltk sentence_bleu, weights 0.25 x 4, method1 smoothing, on lower-cased "
          f"[a-z0-9]+ tokens; ROUGE-L = rouge-score F1, no stemmer; hypothesis = the pick's Findings "
          f"+ Impression sentences (this file's parser) joined by spaces; reference = the CSV's "
          f"findings + ' ' + impression; random-wf = mean over studies of the mean over the "
          f"well-formed candidates (all candidates when none is).")
    t_total = time.time() - t_start
    reused = f" ({EMBED_CACHED[0]} reused from --keep)" if EMBED_CACHED[0] else ""
    print(f"time: total {t_total:.1f} s (sdr embed {t_embed:.1f} s for "
          f"{len(distinct)} sentences{reused}, corpus load {t_load:.1f} s, yardstick scoring "
          f"{t_score:.1f} s, sdr select {t_sdr:.1f} s)")
    if args.keep:
        with open(os.path.join(workdir, "yardstick.json"), "w") as f:
            json.dump(results, f, indent=1, default=str)
    if args.per_study:
        body = "".join(json.dumps(r, sort_keys=True) + "\n" for r in records)
        write_atomic(args.per_study, gzip.compress(body.encode(), mtime=0))
    if args.run_json:
        run = run_record(args, argv, results, n_reports, secs, E, distinct, load_start, {
            "total_s": t_total, "sdr_embed_s": t_embed, "corpus_load_s": t_load,
            "yardstick_scoring_s": t_score, "sdr_select_s": t_sdr,
            "sdr_select_per_file_s": t_select, "embed_reused_sentences": EMBED_CACHED[0],
        })
        write_atomic(args.run_json, (json.dumps(run, indent=1, sort_keys=True) + "\n").encode())
    return 0


def write_atomic(path: str, data: bytes) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def sha256_prefix(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:16]


def _cmd(argv: list) -> str | None:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def cpu_model() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def run_record(args, argv, results, n_reports, secs, E, distinct, load_start, timings) -> dict:
    """The --run-json record: everything docs/results/yardstick.md states about the run."""
    import importlib.metadata as md

    versions = {"python": platform.python_version()}
    for pkg in ("numpy", "safetensors", "nltk", "rouge-score"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            versions[pkg] = None
    here = os.path.dirname(os.path.abspath(__file__))
    files = []
    for res in results:
        r = {k: v for k, v in res.items() if k not in ("disagreements", "parse_diff")}
        r["file"] = res["file"]
        r["sha256"] = sha256_prefix(res["file"])
        if res["parse_diff"]:
            r["parse_diff"] = {k: v for k, v in res["parse_diff"].items() if k != "examples"}
        files.append(r)
    return {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": ["tools/yardstick.py"] + list(sys.argv[1:] if argv is None else argv),
        "options": {"bare_headers": args.bare_headers, "tie_tol": args.tie_tol,
                    "sdr_parse_diff": args.sdr_parse_diff,
                    "sdr_selections_given": bool(args.sdr_selections)},
        "sdr": {"path": args.sdr, "version": _cmd([args.sdr, "--version"]),
                "sha256": sha256_prefix(args.sdr) if os.path.exists(args.sdr) else None},
        "checkout": {"commit": _cmd(["git", "-C", here, "rev-parse", "--short", "HEAD"]),
                     "modified_under_crates": _cmd(["git", "-C", here, "status", "--porcelain",
                                                    "--untracked-files=no", "--", "../crates"])},
        "corpus": {"path": args.corpus, "sha256": sha256_prefix(args.corpus),
                   "reports": n_reports, "findings_reports": secs["findings"]["n_reports"],
                   "impression_reports": secs["impression"]["n_reports"],
                   "distinct_sentences": int(E.shape[0])},
        "references": args.references,
        "versions": versions,
        "machine": {"cpu_model": cpu_model(), "cpus": os.cpu_count(),
                    "loadavg_start": list(load_start), "loadavg_end": list(os.getloadavg()),
                    "peak_rss_gb_self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
                    "peak_rss_gb_children":
                        resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6},
        "distinct_candidate_sentences": len(distinct),
        "timings": timings,
        "files": files,
    }


def _f(v):
    return "inf" if v is None or v == float("inf") else f"{v:.6f}"


if __name__ == "__main__":
    sys.exit(main())
