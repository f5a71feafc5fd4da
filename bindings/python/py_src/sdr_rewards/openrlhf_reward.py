"""OpenRLHF reward-function file: the in-process alternative to ``sdr serve``.

OpenRLHF loads a Python file given where a reward-model URL would go and
calls its ``reward_func(queries, prompts, labels)``::

    --reward.remote_url /path/to/site-packages/sdr_rewards/openrlhf_reward.py --data.label_key solution
    # (OpenRLHF 0.11 flags; before 0.10.2: --remote_rm_url, --label_key)

OpenRLHF 0.11's ``SingleTurnAgentExecutor`` calls ``reward_func`` once per
sample, from many threads at once (``asyncio.to_thread``): the calls are
coalesced into one batched call of the scorer over a short window
(``sdr_rewards.coalesce``; ``SDR_COALESCE_MS``, default 2; 0 scores each call alone),
with the same rewards as one batched call.

A label without Findings or Impression: OpenRLHF logs a reward function's
exception at INFO level and trains on with reward ``None``, losing the sample
without a word. So this file's default policy is ``SDR_MISSING_SECTION=score``:
the section that is there is scored, the missing one's term is 0, and
``extra_logs["missing_sections"]`` counts it (OpenRLHF logs it);
``SDR_MISSING_SECTION=error`` raises instead. ``sdr check-data`` finds such
labels before the run.

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
the default, or ``bf16``: about 2x faster on CPUs with AVX-512 BF16 or AMX),
``SDR_COST`` (``cosine``, the default, or ``clinical``: the clinically aware
sentence cost of SPEC §10), ``SDR_CLINICAL_WEIGHT`` (default 0), ``SDR_EXACT`` and
``SDR_DISTINCT_SENTENCES`` (``1`` / ``0``): every option of ``SDRReward`` has its
variable, listed in ``sdr_rewards.config.OPTIONS``; an unset or empty one keeps the
default. ``set_encoder(fn)`` sets the encoder from Python before the first call.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

from sdr_rewards import SDRReward, config
from sdr_rewards._sdr import openrlhf_completion
from sdr_rewards.coalesce import Coalescer

_reward: Optional[SDRReward] = None
_coalescer: Optional[Coalescer] = None
_encoder: Any = None


def set_encoder(encoder: Any) -> None:
    """Use `encoder` (a callable ``list[str] -> (n, d)`` array) from the next call on."""
    global _encoder, _reward, _coalescer
    _encoder = encoder
    _reward = None
    _coalescer = None


def _get() -> SDRReward:
    global _reward, _coalescer
    if _reward is None:
        ms = float(os.environ.get("SDR_COALESCE_MS", "2"))
        if not (0 <= ms < float("inf")):
            raise ValueError(f"SDR_COALESCE_MS must be a finite number >= 0, got {ms!r}")
        # Every option from its SDR_* variable (sdr_rewards.config); this file's
        # own default: score what can be scored (see the module docs).
        options = config.from_env(os.environ, defaults={"missing_section": "score"})
        if _encoder is not None:
            options["encoder"] = _encoder
        reward = SDRReward(name="sdr", **options)
        _coalescer = (
            Coalescer(lambda c, r: reward.score(c, references=r), window_s=ms / 1000.0) if ms > 0 else None
        )
        _reward = reward
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
    if len(labels) != len(queries):
        raise ValueError(f"{len(queries)} queries but {len(labels)} labels")
    completions = [completion_from_query(q, p) for q, p in zip(queries, prompts)]
    reward = _get()
    coalescer = _coalescer
    if coalescer is not None:
        out = coalescer.score(completions, list(labels))
    else:
        out = reward.score(completions, references=list(labels))
    logged = ("format", "findings", "impression") + (("missing_sections",) if "missing_sections" in out else ())
    result: Dict[str, Any] = {
        "rewards": out["reward"],
        "scores": out["reward"],
        "extra_logs": {k: out[k] for k in logged},
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
