"""OpenRLHF reward-function file: the in-process alternative to ``sdr serve``.

OpenRLHF loads a Python file given where a reward-model URL would go and
calls its ``reward_func(queries, prompts, labels)``::

    --remote_rm_url /path/to/site-packages/sdr/openrlhf_reward.py --label_key solution
    # (OpenRLHF 0.10.2+: --reward.remote_url with the same value)

``queries`` are prompt + completion strings, decoded with their special
tokens; the completion is what follows the matching prompt (the whole query
is parsed when it does not start with its prompt), without the
end-of-sequence tokens at its end (``<|im_end|>``, ``<|eot_id|>``, ``</s>``,
``<end_of_turn>``, ...). ``labels`` are the reference reports. Environment variables
``SDR_METRIC`` (default ``chamfer``), ``SDR_FORMAT_WEIGHT``,
``SDR_SEMANTIC_WEIGHT`` (default 1), ``SDR_MODEL`` and ``SDR_ENCODER``
(``"module:attribute"`` naming a callable ``list[str] -> (n, d)`` array, to use
your own sentence encoder) configure the reward, as do ``SDR_CACHE_MIB``
(the sentence cache's memory bound, default 1024), ``SDR_CACHE_PATH`` (persist
the cache there: loaded at start, saved every ``SDR_CACHE_SAVE_INTERVAL``
seconds, default 300, and at exit) and ``SDR_ENCODER_ID`` (names a custom
encoder's vectors; needed with ``SDR_CACHE_PATH``), ``SDR_DEVICE`` (``cpu``,
``cuda``, ``cuda:N``: where SDR's own encoder runs), ``SDR_PRECISION`` (``f32``,
the default, or ``bf16``: about 2x faster on CPUs with AVX-512 BF16 or AMX);
``set_encoder(fn)`` sets the encoder from Python before the first call.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

from sdr import SDRReward
from sdr._sdr import openrlhf_completion

_reward: Optional[SDRReward] = None
_encoder: Any = None


def set_encoder(encoder: Any) -> None:
    """Use `encoder` (a callable ``list[str] -> (n, d)`` array) from the next call on."""
    global _encoder, _reward
    _encoder = encoder
    _reward = None


def _get() -> SDRReward:
    global _reward
    if _reward is None:
        _reward = SDRReward(
            metric=os.environ.get("SDR_METRIC", "chamfer"),
            format_weight=float(os.environ.get("SDR_FORMAT_WEIGHT", "1")),
            semantic_weight=float(os.environ.get("SDR_SEMANTIC_WEIGHT", "1")),
            name="sdr",
            encoder=_encoder if _encoder is not None else os.environ.get("SDR_ENCODER") or None,
            cache_mib=float(os.environ.get("SDR_CACHE_MIB", "1024")),
            cache_path=os.environ.get("SDR_CACHE_PATH") or None,
            cache_save_interval=float(os.environ.get("SDR_CACHE_SAVE_INTERVAL", "300")),
            encoder_id=os.environ.get("SDR_ENCODER_ID") or None,
            device=os.environ.get("SDR_DEVICE", "cpu"),
            precision=os.environ.get("SDR_PRECISION") or "f32",
        )
    return _reward


def completion_from_query(query: str, prompt: Optional[str]) -> str:
    """The completion inside an OpenRLHF query (prompt + completion).

    OpenRLHF decodes queries with their special tokens: a beginning-of-sequence
    token the prompt lacks is set aside, and the end-of-sequence tokens
    (``<|im_end|>``, ``</s>``, ...) are removed, as ``sdr serve`` does; the
    template allows only whitespace outside its tags."""
    return openrlhf_completion(query, prompt)


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str]) -> Dict[str, Any]:
    """``{"rewards", "scores", "extra_logs": {"format", "findings", "impression"}}``;
    torch tensors when torch is importable (as OpenRLHF expects), else lists."""
    if len(prompts) != len(queries):
        raise ValueError(f"{len(queries)} queries but {len(prompts)} prompts")
    completions = [completion_from_query(q, p) for q, p in zip(queries, prompts)]
    out = _get().score(completions, references=list(labels))
    result: Dict[str, Any] = {
        "rewards": out["reward"],
        "scores": out["reward"],
        "extra_logs": {k: out[k] for k in ("format", "findings", "impression")},
    }
    try:
        import torch
    except ImportError:
        return result
    return {
        "rewards": torch.tensor(result["rewards"], dtype=torch.float32),
        "scores": torch.tensor(result["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in result["extra_logs"].items()},
    }
