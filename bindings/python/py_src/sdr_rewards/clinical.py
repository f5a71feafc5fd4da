"""Clinical-correctness metrics for generated radiology reports.

- ``chexpert_f1`` / ``label`` (re-exported from the Rust core): CheXpert-rule
  F1 from SDR's phrase-rule labeler. No model weights, thousands of reports
  per second; see docs/SPEC.md section 8.
- ``chexbert_f1`` / ``radgraph_f1``: adapters to the model-based metrics of
  the optional ``f1chexbert`` and ``radgraph`` PyPI packages (install with
  ``pip install 'sdr-rewards[clinical-models]'``; the packages fetch their weights
  from the Hugging Face Hub on first use). Nothing here installs them. When a
  package or its weights are missing, the adapter raises ``RuntimeError``
  saying what to install.

The adapters only reshape the packages' outputs; SDR does not reproduce or
vouch for their numbers.
"""

import importlib
from typing import Any, Dict, List, Sequence, Tuple

from ._sdr import chexpert_f1, label

__all__ = ["chexbert_f1", "chexpert_f1", "label", "radgraph_f1"]

_INSTALL = "pip install 'sdr-rewards[clinical-models]' (or: pip install {package})"

# Loaded scorers, keyed by package and options: loading a model takes seconds.
_SCORERS: Dict[Tuple[Any, ...], Any] = {}


def _scorer(package: str, cls_name: str, **options: Any) -> Any:
    key = (package, cls_name) + tuple(sorted(options.items()))
    if key in _SCORERS:
        return _SCORERS[key]
    try:
        module = importlib.import_module(package)
    except ImportError as e:
        raise RuntimeError(
            f"this metric needs the optional `{package}` package, which is not installed: "
            + _INSTALL.format(package=package)
        ) from e
    try:
        scorer = getattr(module, cls_name)(**options)
    except Exception as e:  # the packages raise anything from OSError to HTTP errors
        raise RuntimeError(
            f"`{package}` is installed but `{cls_name}` could not load its model weights "
            f"(they are downloaded from the Hugging Face Hub on first use; run once with "
            f"network access or fill the Hub cache): {type(e).__name__}: {e}"
        ) from e
    _SCORERS[key] = scorer
    return scorer


def _pairs(hyps: Sequence[str], refs: Sequence[str]) -> Tuple[List[str], List[str]]:
    if isinstance(hyps, str) or isinstance(refs, str):
        raise TypeError("hyps and refs are sequences of report strings, not single strings")
    hyps, refs = list(hyps), list(refs)
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hyps but {len(refs)} refs: they are paired by position")
    return hyps, refs


def _f1(report: Dict[str, Any], avg: str) -> float:
    return float(report[avg]["f1-score"])


def chexbert_f1(hyps: Sequence[str], refs: Sequence[str], **options: Any) -> Dict[str, Any]:
    """CheXbert F1 from the optional ``f1chexbert`` package (``F1CheXbert``).

    Returns ``macro_f1_14``, ``micro_f1_14``, ``macro_f1_5``, ``micro_f1_5``
    and ``accuracy`` as the package computes them; ``options`` (e.g.
    ``device="cpu"``) go to ``F1CheXbert``. Raises ``RuntimeError`` when the
    package or its weights are missing. For the weight-free metric use
    ``chexpert_f1``.
    """
    hyps, refs = _pairs(hyps, refs)
    scorer = _scorer("f1chexbert", "F1CheXbert", **options)
    accuracy, _per_report, report_14, report_5 = scorer(hyps=hyps, refs=refs)
    return {
        "macro_f1_14": _f1(report_14, "macro avg"),
        "micro_f1_14": _f1(report_14, "micro avg"),
        "macro_f1_5": _f1(report_5, "macro avg"),
        "micro_f1_5": _f1(report_5, "micro avg"),
        "accuracy": float(accuracy),
    }


def radgraph_f1(
    hyps: Sequence[str], refs: Sequence[str], reward_level: str = "partial", **options: Any
) -> Dict[str, Any]:
    """RadGraph F1 from the optional ``radgraph`` package (``F1RadGraph``).

    ``reward_level`` is the package's ("simple", "partial" or "complete").
    Returns ``f1`` (the mean) and ``per_report`` (one score per pair).
    Raises ``RuntimeError`` when the package or its weights are missing.
    """
    if reward_level not in ("simple", "partial", "complete"):
        raise ValueError(f"reward_level must be simple, partial or complete, not {reward_level!r}")
    hyps, refs = _pairs(hyps, refs)
    scorer = _scorer("radgraph", "F1RadGraph", reward_level=reward_level, **options)
    mean, per_report, _hyp_graphs, _ref_graphs = scorer(hyps=hyps, refs=refs)
    return {"f1": float(mean), "per_report": [float(x) for x in per_report], "reward_level": reward_level}
