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

``section_texts(texts)`` gives the Findings and Impression texts that these
metrics compare, for scores computed on the sections elsewhere.

Model-based clinical metrics (optional, never installed by default):
``metrics=[..., "chexbert_f1", "radgraph_f1"]`` runs the ``f1chexbert`` /
``radgraph`` packages through ``sdr_rewards.clinical`` on the same section texts.
RadGraph F1 is per pair (key ``radgraph_f1`` in each section, 0 for a missing
hypothesis section) and in the summary (``radgraph``); CheXbert F1 is
corpus-level only (summary key ``chexbert``). A missing package or missing
weights raise ``RuntimeError`` saying what to install.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _sdr
from . import clinical as _clinical

__all__ = [
    "METRICS",
    "SDR_SCORE_METRICS",
    "chexpert_f1_bootstrap",
    "corpus",
    "evaluate",
    "paired_bootstrap",
    "score",
    "section_texts",
]

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


def section_texts(texts: Sequence[str]) -> Dict[str, List[str]]:
    """The Findings and the Impression of each report as ``score`` compares them:
    ``{"findings": [...], "impression": [...]}``, one text per report, the section's
    sentences as ``sdr_rewards.parse_report`` splits them joined by one space, ``""``
    for a section that is missing.

    The rule is Rust's (``sdr_eval::evaluation::section_texts``), for scores computed
    on the sections outside ``score`` (the model-based metrics here, CheXpert F1 by
    either labeler in ``recipes/``)."""
    findings, impression = _sdr.section_texts(_texts(texts, "texts"))
    return {"findings": findings, "impression": impression}


def _units(hyps: List[str], refs: List[str], sections: bool) -> List[List[Tuple[str, str]]]:
    """Per unit (section), the (hypothesis, reference) texts, as the Rust side splits them."""
    if not sections:
        return [list(zip(hyps, refs))]
    h, r = section_texts(hyps), section_texts(refs)
    return [list(zip(h[key], r[key])) for key in ("findings", "impression")]


def evaluate(
    hyps: Sequence[str],
    refs: Sequence[str],
    metrics: Optional[Sequence[str]] = None,
    sections: bool = True,
    model_dir: Optional[PathLike] = None,
    wordnet_dir: Optional[PathLike] = None,
    uncertain_negative: bool = False,
    bertscore_model: Optional[PathLike] = None,
    bertscore_layer: Optional[int] = None,
    rescale_baseline: Optional[PathLike] = None,
    idf: bool = False,
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
        ``~/.cache/sdr/models/all-mpnet-base-v2``); ``sdr score --model``. This is the
        reward's own encoder; ``bertscore_model`` gives an independent judge.
    wordnet_dir : path, optional
        WordNet for METEOR's synonyms (default ``$SDR_WORDNET_DIR``, then
        ``/usr/share/wordnet``; without one, exact words and stems only).
    uncertain_negative : bool
        Count uncertain CheXpert-rule labels as absent (``--uncertain-negative``).
    bertscore_model : path, optional
        A Hugging Face RoBERTa or BERT folder for BERTScore, as bert-score's
        ``model_type`` (``sdr score --bertscore-model``): a local roberta-large for
        the literature's BERTScore, ``~/.cache/sdr/models/all-MiniLM-L6-v2`` for
        SDR's tables. The summary's ``bertscore_model`` names the judge.
    bertscore_layer : int, optional
        Its layer (bert-score's ``num_layers``; default: bert-score's layer for the
        folder's name, e.g. roberta-large 17, else the last layer).
    rescale_baseline : path, optional
        bert-score baseline file (``rescale_baseline/en/roberta-large.tsv`` in its
        wheel): P, R and F1 become ``(x - b) / (1 - b)`` (``rescale_with_baseline``).
    idf : bool
        Weight tokens by idf over the references of each section (bert-score ``idf``).
    """
    hyps = _texts(hyps, "hyps")
    refs = _texts(refs, "refs")
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hyps but {len(refs)} refs: they are paired by position")
    wanted = _metric_list(metrics)
    bertscore = any(m in BERT_METRICS for m in wanted)
    if bertscore_layer is not None and (
        isinstance(bertscore_layer, bool) or not isinstance(bertscore_layer, int)
    ):
        raise TypeError(f"bertscore_layer must be an int, got {type(bertscore_layer).__name__}")
    if bertscore_layer is not None and bertscore_layer < 0:
        raise ValueError(f"bertscore_layer must be 0 or more, got {bertscore_layer}")
    raw_lines, raw_summary = _sdr.score_reports(
        hyps,
        refs,
        whole=not sections,
        bertscore=bertscore,
        model_dir=None if model_dir is None else os.fspath(model_dir),
        wordnet_dir=None if wordnet_dir is None else os.fspath(wordnet_dir),
        uncertain_negative=bool(uncertain_negative),
        bertscore_model=None if bertscore_model is None else os.fspath(bertscore_model),
        bertscore_layer=bertscore_layer,
        rescale_baseline=None if rescale_baseline is None else os.fspath(rescale_baseline),
        idf=bool(idf),
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
                # A missing hypothesis section scores 0, as on every other metric (the
                # rule of sdr_eval's table; RadGraph runs here, so it is applied here).
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
    bertscore_model: Optional[PathLike] = None,
    bertscore_layer: Optional[int] = None,
    rescale_baseline: Optional[PathLike] = None,
    idf: bool = False,
) -> List[Dict[str, Any]]:
    """One dict per pair, as ``sdr score``'s lines (see ``evaluate``)."""
    return evaluate(
        hyps, refs, metrics, sections, model_dir, wordnet_dir, uncertain_negative,
        bertscore_model, bertscore_layer, rescale_baseline, idf,
    )[0]


def corpus(
    hyps: Sequence[str],
    refs: Sequence[str],
    metrics: Optional[Sequence[str]] = None,
    sections: bool = True,
    model_dir: Optional[PathLike] = None,
    wordnet_dir: Optional[PathLike] = None,
    uncertain_negative: bool = False,
    bertscore_model: Optional[PathLike] = None,
    bertscore_layer: Optional[int] = None,
    rescale_baseline: Optional[PathLike] = None,
    idf: bool = False,
) -> Dict[str, Any]:
    """The corpus summary, as ``sdr score --summary`` writes it (see ``evaluate``)."""
    return evaluate(
        hyps, refs, metrics, sections, model_dir, wordnet_dir, uncertain_negative,
        bertscore_model, bertscore_layer, rescale_baseline, idf,
    )[1]


def _floats(values: Any, name: str) -> List[float]:
    """A list of finite numbers from a list, a tuple or a 1-D NumPy array; a bad
    item is named by `name` and its index."""
    if type(values).__module__ == "numpy" and getattr(values, "ndim", None) == 1:
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list (or 1-D array) of numbers, got {type(values).__name__}")
    out = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name} item {i} must be a number, got {type(v).__name__}")
        x = float(v)
        if not math.isfinite(x):
            raise ValueError(f"{name}[{i}] is not finite ({x})")
        out.append(x)
    return out


def paired_bootstrap(policy: Sequence[float], baseline: Sequence[float]) -> Optional[Tuple[float, float]]:
    """95 % paired-bootstrap interval of the relative change (in %) of the mean of
    ``policy`` against the mean of ``baseline``: one value per study on each side, paired
    by position; 1,000 resamples of the studies with a fixed seed, percentile interval
    (the same code as the intervals of ``sdr select-eval`` and ``sdr eval --compare``).
    ``None`` when some resample's baseline mean is 0."""
    a = _floats(policy, "policy")
    b = _floats(baseline, "baseline")
    if len(a) != len(b):
        raise ValueError(f"{len(a)} policy values but {len(b)} baseline values: they are paired by study")
    return _sdr.paired_bootstrap(a, b)


def chexpert_f1_bootstrap(
    hyps: Sequence[str],
    base_hyps: Sequence[str],
    refs: Sequence[str],
    uncertain_negative: bool = False,
    labeler: str = "rules",
    judge_base: Optional[str] = None,
) -> Dict[str, Optional[Tuple[float, float]]]:
    """95 % paired-bootstrap intervals of the relative change (in %) of corpus-level
    CheXpert-rule F1 of ``hyps`` against ``base_hyps`` (both scored against ``refs``,
    paired by position), keyed as ``sdr_rewards.chexpert_f1``'s ``macro_f1_14``, ``micro_f1_14``,
    ``macro_f1_5`` and ``micro_f1_5``; each resample recomputes both F1s on the same
    studies. ``labeler="judge"`` labels with the judge trained on human labels (see
    ``sdr_rewards.label``)."""
    h = _texts(hyps, "hyps")
    b = _texts(base_hyps, "base_hyps")
    r = _texts(refs, "refs")
    cis = _sdr.chexpert_f1_bootstrap(
        h, b, r, uncertain_negative=bool(uncertain_negative), labeler=labeler, judge_base=judge_base
    )
    return dict(zip(("macro_f1_14", "micro_f1_14", "macro_f1_5", "micro_f1_5"), cis))
