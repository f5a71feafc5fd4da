"""Score your own reports: every metric of ``sdr score``, from Python.

``score(hyps, refs)`` returns one dict per pair, the same keys and values as
``sdr score``'s output lines (without ``id``): ``format_valid`` and, per
section (``findings``, ``impression``; ``whole`` with ``sections=False``),
BLEU-1..4, ROUGE-1/2/L, METEOR, chrF++, BERTScore P/R/F1 and the
CheXpert-rule example F1. ``corpus(hyps, refs)`` returns the corpus summary
(``sdr score --summary``): per-section means, corpus BLEU-1..4 and
CheXpert-rule F1 macro/micro over 14 and 5 observations. ``evaluate`` returns
both from one pass. Both run the Rust code that ``sdr score`` runs, so the
numbers are the same.

Both texts of a pair are parsed as reports (the ``<think>/<answer>``
template or ``Findings:`` / ``Impression:`` headers); a hypothesis section
that is missing scores 0; a reference without both sections raises
``ValueError`` naming the pair.

Model-based clinical metrics (optional, never installed by default):
``metrics=[..., "chexbert_f1", "radgraph_f1"]`` runs the ``f1chexbert`` /
``radgraph`` packages through ``sdr.clinical`` on the same section texts.
RadGraph F1 is per pair (key ``radgraph_f1`` in each section, 0 for a missing
hypothesis section) and in the summary (``radgraph``); CheXbert F1 is
corpus-level only (summary key ``chexbert``). A missing package or missing
weights raise ``RuntimeError`` saying what to install.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _sdr
from . import clinical as _clinical

__all__ = ["METRICS", "SDR_SCORE_METRICS", "corpus", "evaluate", "score"]

TEXT_METRICS: Tuple[str, ...] = (
    "BLEU-1",
    "BLEU-2",
    "BLEU-3",
    "BLEU-4",
    "ROUGE-1",
    "ROUGE-2",
    "ROUGE-L",
    "METEOR",
    "chrF++",
)
BERT_METRICS: Tuple[str, ...] = ("BERTScore-P", "BERTScore-R", "BERTScore-F1")
#: What ``sdr score`` computes, and the default of ``metrics``.
SDR_SCORE_METRICS: Tuple[str, ...] = TEXT_METRICS + BERT_METRICS + ("CheXpert-rule F1",)
#: The model-based metrics of the optional packages.
MODEL_METRICS: Tuple[str, ...] = ("chexbert_f1", "radgraph_f1")
#: Every name ``metrics`` accepts.
METRICS: Tuple[str, ...] = SDR_SCORE_METRICS + MODEL_METRICS

PathLike = Union[str, "os.PathLike[str]"]


def _texts(values: Any, name: str) -> List[str]:
    if isinstance(values, str) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list of strings, got {type(values).__name__}")
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise TypeError(f"{name} item {i} must be a string, got {type(v).__name__}")
    return list(values)


def _metric_list(metrics: Optional[Sequence[str]]) -> List[str]:
    if metrics is None:
        return list(SDR_SCORE_METRICS)
    if isinstance(metrics, str):
        metrics = [metrics]
    out = []
    for m in metrics:
        if m not in METRICS:
            raise ValueError(f"unknown metric {m!r}; known: {', '.join(METRICS)}")
        if m not in out:
            out.append(m)
    if not out:
        raise ValueError("metrics is empty; leave it out for every metric of `sdr score`")
    return out


def _units(hyps: List[str], refs: List[str], sections: bool) -> List[List[Tuple[str, str]]]:
    """Per unit (section), the (hypothesis, reference) texts, as the Rust side splits them."""
    if not sections:
        return [list(zip(hyps, refs))]
    out: List[List[Tuple[str, str]]] = [[], []]
    for h, r in zip(hyps, refs):
        ph, pr = _sdr.parse_report(h), _sdr.parse_report(r)
        for k, key in enumerate(("findings", "impression")):
            out[k].append((" ".join(ph[key]), " ".join(pr[key])))
    return out


def evaluate(
    hyps: Sequence[str],
    refs: Sequence[str],
    metrics: Optional[Sequence[str]] = None,
    sections: bool = True,
    model_dir: Optional[PathLike] = None,
    wordnet_dir: Optional[PathLike] = None,
    uncertain_negative: bool = False,
) -> Tuple[List[Dict[str, Any]], Dict[str, Any]]:
    """Per-pair scores and the corpus summary in one pass: ``(score(...), corpus(...))``.

    Parameters
    ----------
    hyps, refs : list of str
        Generated and reference reports, paired by position.
    metrics : list of str, optional
        Names from ``METRICS``; default: every metric of ``sdr score``
        (``SDR_SCORE_METRICS``). BERTScore (needs the model) runs only when a
        ``BERTScore-*`` name is asked for; the rest are cheap and always run,
        and only the names asked for are returned.
    sections : bool
        Score Findings and Impression apart (``sdr score``); False scores the
        whole texts (``sdr score --whole``, key ``whole``).
    model_dir : path, optional
        all-mpnet-base-v2 folder for BERTScore (default ``$SDR_MODEL``, then
        ``~/.cache/sdr/models/all-mpnet-base-v2``); ``sdr score --model``.
    wordnet_dir : path, optional
        WordNet for METEOR's synonyms (default ``$SDR_WORDNET_DIR``, then
        ``/usr/share/wordnet``; without one, exact words and stems only).
    uncertain_negative : bool
        Count uncertain CheXpert-rule labels as absent (``--uncertain-negative``).
    """
    hyps = _texts(hyps, "hyps")
    refs = _texts(refs, "refs")
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hyps but {len(refs)} refs: they are paired by position")
    wanted = _metric_list(metrics)
    bertscore = any(m in BERT_METRICS for m in wanted)
    raw_lines, raw_summary = _sdr.score_reports(
        hyps,
        refs,
        whole=not sections,
        bertscore=bertscore,
        model_dir=None if model_dir is None else os.fspath(model_dir),
        wordnet_dir=None if wordnet_dir is None else os.fspath(wordnet_dir),
        uncertain_negative=bool(uncertain_negative),
    )
    lines: List[Dict[str, Any]] = [json.loads(x) for x in raw_lines]
    summary: Dict[str, Any] = json.loads(raw_summary)
    names = ("findings", "impression") if sections else ("whole",)
    keep = set(wanted)
    for line in lines:
        for name in names:
            line[name] = {k: v for k, v in line[name].items() if k in keep}
    for name in names:
        unit = summary[name]
        unit["mean"] = {k: v for k, v in unit["mean"].items() if k in keep}
        if not any(m.startswith("BLEU-") for m in wanted):
            del unit["corpus_bleu"]
        if "CheXpert-rule F1" not in keep:
            del unit["chexpert_rule"]
    if any(m in MODEL_METRICS for m in wanted) and hyps:
        units = _units(hyps, refs, sections)
        for name, pairs in zip(names, units):
            h = [p[0] for p in pairs]
            r = [p[1] for p in pairs]
            if "chexbert_f1" in keep:
                summary[name]["chexbert"] = _clinical.chexbert_f1(h, r)
            if "radgraph_f1" in keep:
                # A missing hypothesis section scores 0, as on every other metric.
                present = [i for i, x in enumerate(h) if x.strip()]
                per = [0.0] * len(h)
                if present:
                    rg = _clinical.radgraph_f1([h[i] for i in present], [r[i] for i in present])
                    for i, v in zip(present, rg["per_report"]):
                        per[i] = v
                for line, v in zip(lines, per):
                    line[name]["radgraph_f1"] = v
                summary[name]["radgraph"] = {"f1": sum(per) / len(per), "reward_level": "partial"}
    return lines, summary


def score(
    hyps: Sequence[str],
    refs: Sequence[str],
    metrics: Optional[Sequence[str]] = None,
    sections: bool = True,
    model_dir: Optional[PathLike] = None,
    wordnet_dir: Optional[PathLike] = None,
    uncertain_negative: bool = False,
) -> List[Dict[str, Any]]:
    """One dict per pair, as ``sdr score``'s lines (see ``evaluate``)."""
    return evaluate(hyps, refs, metrics, sections, model_dir, wordnet_dir, uncertain_negative)[0]


def corpus(
    hyps: Sequence[str],
    refs: Sequence[str],
    metrics: Optional[Sequence[str]] = None,
    sections: bool = True,
    model_dir: Optional[PathLike] = None,
    wordnet_dir: Optional[PathLike] = None,
    uncertain_negative: bool = False,
) -> Dict[str, Any]:
    """The corpus summary, as ``sdr score --summary`` writes it (see ``evaluate``)."""
    return evaluate(hyps, refs, metrics, sections, model_dir, wordnet_dir, uncertain_negative)[1]
