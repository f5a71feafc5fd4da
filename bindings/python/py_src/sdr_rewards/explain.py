"""``sdr_rewards.explain``: why a report got its reward (SPEC §9).

Per section: the distance and its reward term; for every candidate sentence
its partner under the metric (nearest neighbour for Chamfer/Hausdorff, the
assignment for Hung-*, the sentence receiving most of its mass for OT,
Sinkhorn, UOT, partial OT and GW) with the pair's cosine cost, and the same for
every reference sentence; the reference sentences the candidate misses and the
candidate sentences nothing in the reference supports (nearest-neighbour cost
above the threshold). The same structure as ``sdr explain``'s output lines;
the computation is ``sdr_core::explain`` in Rust.

``SDRReward(..., explain=True)`` calls :func:`log_worst` after each batch: the
worst well-formed completions' missing and unsupported sentences go to TRL's
completions table through ``log_extra`` (or to the ``sdr_rewards`` logger when the
trainer gives no ``log_extra``).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _sdr
from .completion import completion_text
from .encoder_spec import resolve_encoder

_log = logging.getLogger("sdr_rewards")

#: How many completions ``SDRReward(explain=True)`` explains per batch.
DEFAULT_WORST = 4

# SDR's own encoder per model folder, loaded on first use in each process.
_ENCODERS: Dict[Any, Any] = {}
_LOCK = threading.Lock()


def _own_encoder(model_dir: Optional[str], device: str, precision: str) -> Any:
    key = (os.getpid(), model_dir, device, precision)
    with _LOCK:
        enc = _ENCODERS.get(key)
        if enc is None:
            enc = _ENCODERS[key] = _sdr.Encoder(model_dir, device=device, precision=precision)
        return enc


def _embedder(encoder: Any, model_dir: Any, device: str = "cpu", precision: str = "f32") -> Callable[[List[str]], Any]:
    """A function ``list[str] -> (n, d)`` array from what the caller gave; what
    it returns is checked in Rust as ``SDRReward(encoder=...)`` checks it."""
    if encoder is None:
        own = _own_encoder(None if model_dir is None else os.fspath(model_dir), device, precision)
        return own.embed
    if isinstance(encoder, _sdr.Encoder):
        return encoder.embed
    if isinstance(encoder, str):
        encoder = resolve_encoder(encoder)
    if not callable(encoder):
        raise TypeError(f"encoder must be a callable list[str] -> (n, d) array, got {type(encoder).__name__}")
    return encoder


def explain(
    candidate: str,
    reference: Union[str, Mapping[str, str]],
    metric: str = "chamfer",
    threshold: Optional[float] = None,
    *,
    encoder: Any = None,
    model_dir: Optional[Union[str, "os.PathLike[str]"]] = None,
    device: str = "cpu",
    precision: str = "f32",
    cost: str = "cosine",
) -> Dict[str, Any]:
    """Explain the reward of `candidate` against `reference`.

    Both are report texts: the ``<think>F</think><answer>I</answer>`` template
    or ``Findings:`` / ``Impression:`` text, parsed as the reward parses them;
    `reference` may also be a dict ``{"findings": ..., "impression": ...}``, its
    sections taken as they are (as ``SDRReward.score`` takes one).
    `metric` is a spec of ``sdr_rewards.METRICS``; `threshold` is tau, the
    nearest-neighbour cosine cost above which a sentence counts as missing or
    unsupported (``None``: the default derived on IU X-ray, SPEC §9).
    `encoder`: SDR's all-mpnet-base-v2 when ``None`` (from `model_dir`, else
    ``$SDR_MODEL``, else the default cache), an ``sdr_rewards.Encoder``, or any callable
    ``list[str] -> (n, d)`` array as for ``SDRReward``. `device` and `precision`
    set up SDR's own encoder as for ``sdr_rewards.Encoder`` (``SDRReward(explain=...)``
    passes its own); they are not used with an `encoder`.

    Returns ``{"metric", "threshold", "format_valid", "reward", "sections"}``
    with ``sections = {"findings": S, "impression": S}`` (``None`` for a
    malformed candidate, whose reward is 0) and
    ``S = {"distance", "converged", "reward", "candidate", "reference",
    "missing", "unsupported"}``: ``candidate`` and ``reference`` list
    ``{"sentence", "match", "cost", "nearest", "nearest_cost"}`` per sentence
    (plus ``"mass"`` for plan-based metrics), ``match`` being an index into the
    other list or ``None``; ``missing`` holds reference indices and
    ``unsupported`` candidate indices.

    `cost` is the sentence cost: ``"cosine"`` (the paper's) or ``"clinical"``
    (``"clinical:lambda=L"``; SPEC §10): distances and rewards are then the
    clinical cost's, ``cost`` and ``missing`` / ``unsupported`` stay cosine, and a
    sentence that a finding of the other section contradicts or lacks carries
    ``"conflict"``, in words (``"side: present Atelectasis (left) vs present
    Atelectasis (right) in sentence 0"``); the result then has ``"cost"``.

    A bad metric or cost, a threshold outside [0, 1] or a reference without both
    sections raises ``ValueError``; a non-string text ``TypeError``.
    """
    if not isinstance(candidate, str):
        raise TypeError(f"candidate must be a string, got {type(candidate).__name__}")
    if isinstance(reference, Mapping):
        # Its two sections as they are: not rebuilt as text and parsed again.
        sections = {}
        for key in ("findings", "impression"):
            if not isinstance(reference.get(key), str):
                raise TypeError(
                    f"reference: a dict needs 'findings' and 'impression' strings, "
                    f"got {type(reference.get(key)).__name__} for {key!r}"
                )
            sections[key] = reference[key]
        reference = sections
    elif not isinstance(reference, str):
        raise TypeError(
            f"reference must be a string (a report) or a dict {{'findings', 'impression'}}, "
            f"got {type(reference).__name__}"
        )
    if not isinstance(metric, str):
        raise TypeError(f"metric must be a string, got {type(metric).__name__}")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))):
        raise TypeError(f"threshold must be a number or None, got {type(threshold).__name__}")
    embed = _embedder(encoder, model_dir, device, precision)
    tau = None if threshold is None else float(threshold)
    if not isinstance(cost, str):
        raise TypeError(f"cost must be a string ('cosine' or 'clinical'), got {type(cost).__name__}")
    return json.loads(_sdr._explain_json(candidate, reference, embed, metric, tau, cost))


def check_worst(explain: Union[bool, int]) -> int:
    """``SDRReward``'s `explain` option as a count: False/0 off, True the
    default (:data:`DEFAULT_WORST`), an int that many completions per batch."""
    if isinstance(explain, bool):
        return DEFAULT_WORST if explain else 0
    if isinstance(explain, int) and explain >= 0:
        return explain
    raise TypeError(f"explain must be a bool or an int >= 0, got {explain!r}")


def _flagged(e: Dict[str, Any], key: str, side: str) -> Dict[str, List[str]]:
    sections = e.get("sections") or {}
    return {name: [s[side][i]["sentence"] for i in s[key]] for name, s in sections.items() if s[key]}


def compact(by_section: Dict[str, List[str]], width: int = 300) -> str:
    """``{"findings": [a, b], "impression": [c]}`` as ``"F: a; b | I: c"``, cut at `width`."""
    text = " | ".join(f"{name[0].upper()}: " + "; ".join(sents) for name, sents in by_section.items())
    return text if len(text) <= width else text[: width - 1] + "…"


# How the Rust side says that a reference lacks a section (`sdr_reward::missing`).
_EMPTY_SECTION = "is empty"


def _reference(reward: Any, columns: Dict[str, Any], i: int) -> Union[str, Dict[str, str]]:
    """Reference `i` of the batch as the reward scored it: a report string, or
    its sections (``reference_columns``, a section dict), never rebuilt as text."""
    if reward.reference_columns is not None:
        fcol, icol = reward.reference_columns
        return {"findings": columns[fcol][i], "impression": columns[icol][i]}
    return columns[reward.reference_column][i]


def log_worst(
    reward: Any,
    completions: Sequence[Any],
    columns: Dict[str, Any],
    out: Dict[str, List[float]],
    log_extra: Optional[Callable[[str, List[Any]], None]] = None,
) -> List[Dict[str, Any]]:
    """Explain the ``reward.explain`` lowest-reward well-formed completions of a
    batch that `reward` (an ``SDRReward``) just scored into `out`, with its
    metric and encoder. Logs two columns of TRL's completions table,
    ``<name>/missing`` and ``<name>/unsupported``: one string per completion,
    ``"F: ... | I: ..."`` for the explained ones and ``""`` for the others.
    Without ``log_extra`` the table goes to the ``sdr_rewards`` logger (INFO).
    Returns the rows: ``{"index", "reward", "missing", "unsupported"}``.

    A row that cannot be explained is kept with empty ``missing`` and
    ``unsupported`` and a ``"note"`` saying why (its ``<name>/missing`` cell
    shows the note): a reference without Findings or Impression under
    ``missing_section="score"`` (logged at INFO), anything else at WARNING.
    Nothing here raises into the reward call."""
    n = len(completions)
    rewards, valid = out["reward"], out["format"]
    order = sorted((i for i in range(n) if valid[i] > 0), key=lambda i: (rewards[i], i))
    rows = []
    for i in order[: reward.explain]:
        # Explaining is logging: a row that cannot be explained is skipped with a
        # note (in `rows`, the columns and the log), never raised from the reward.
        try:
            e = explain(
                completion_text(completions[i]),
                _reference(reward, columns, i),
                reward.metric,
                encoder=reward.encoder,
                model_dir=reward.model_dir,
                device=reward.device,
                precision=reward.precision,
                cost=getattr(reward, "cost", "cosine"),
            )
        except Exception as exc:  # noqa: BLE001 - see above
            note = f"not explained: {exc}"
            if getattr(reward, "missing_section", "error") == "score" and _EMPTY_SECTION in str(exc):
                # The reward scored this reference under its policy; nothing went wrong.
                _log.info("%s: completion %d %s", reward.__name__, i, note)
            else:
                _log.warning("%s: completion %d %s", reward.__name__, i, note)
            rows.append({"index": i, "reward": rewards[i], "missing": {}, "unsupported": {}, "note": note})
            continue
        rows.append(
            {
                "index": i,
                "reward": rewards[i],
                "missing": _flagged(e, "missing", "reference"),
                "unsupported": _flagged(e, "unsupported", "candidate"),
            }
        )
    if callable(log_extra):
        missing, unsupported = [""] * n, [""] * n
        for r in rows:
            missing[r["index"]] = r["note"][:300] if "note" in r else compact(r["missing"])
            unsupported[r["index"]] = compact(r["unsupported"])
        log_extra(f"{reward.__name__}/missing", missing)
        log_extra(f"{reward.__name__}/unsupported", unsupported)
    elif rows:
        _log.info("%s: worst completions of the batch\n%s", reward.__name__, format_table(rows))
    return rows


def format_table(rows: Sequence[Dict[str, Any]]) -> str:
    """The rows of :func:`log_worst` as a plain-text table."""
    lines = [f"{'#':>4}  {'reward':>6}  missing  //  unsupported"]
    for r in rows:
        lines.append(
            f"{r['index']:>4}  {r['reward']:>6.3f}  {r.get('note') or compact(r['missing']) or '-'}  //  {compact(r['unsupported']) or '-'}"
        )
    return "\n".join(lines)
