"""The report a model wrote, from whatever shape a trainer hands the reward.

Trainers pass a completion as plain text, as chat messages, or as a message
that a *response parser* has already taken apart. TRL 1.x parses each
completion with ``tokenizer.parse_response`` whenever the tokenizer carries a
response schema (the qwen3 family used by Qwen2.5 / Qwen3 / Qwen3-VL, glm4moe,
lfm2_5, nemotron_3, deepseek_r1_distill; always in ``AsyncGRPOTrainer``, and in
``GRPOTrainer`` with ``tools=``)::

    [{"role": "assistant", "reasoning_content": "Heart normal.",
      "content": "<answer>No acute disease.</answer>"}]

The schema's regular expression has cut ``<think>`` and ``</think>`` away, so
the content alone breaks the template and would score 0. The report is rebuilt
as the model wrote it::

    "<think>" + reasoning + "</think>" + content

where the reasoning is the message's ``reasoning_content`` (Qwen, DeepSeek,
GLM), ``reasoning`` (vLLM / OpenAI-compatible servers) or ``thinking``
(LFM2.5), or content parts of type ``"thinking"`` / ``"reasoning"``. A shape
that is none of these raises ``TypeError`` naming it: a reward of 0 for a
completion the reward could not read would look like a bad model.

The rules are the Rust crate's (``sdr_reward::completion``), the same that
``sdr serve`` applies to a JSON request: this module only names them.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Sequence, Union

from ._sdr import REASONING_KEYS, completion_text

Completion = Union[str, Dict[str, Any], Sequence[Dict[str, Any]]]

__all__ = ["Completion", "REASONING_KEYS", "completion_text"]


def message_text(message: Dict[str, Any]) -> str:
    """Deprecated since 0.2.0, removed in 0.3.0: ``completion_text(message)``
    reads one message the same way."""
    warnings.warn(
        "sdr_rewards.completion.message_text is deprecated (removed in 0.3.0): "
        "use sdr_rewards.completion_text(message)",
        DeprecationWarning,
        stacklevel=2,
    )
    return completion_text(message)
