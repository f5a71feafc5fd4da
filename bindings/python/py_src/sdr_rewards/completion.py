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
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Union

Completion = Union[str, Dict[str, Any], Sequence[Dict[str, Any]]]

# Field names under which response parsers put the text between <think> and </think>.
REASONING_KEYS = ("reasoning_content", "reasoning", "thinking")
# Content-part types holding reasoning (Anthropic-style "thinking" blocks, reasoning parts).
_REASONING_PARTS = ("thinking", "reasoning", "reasoning_content")


def _shape(value: Any) -> str:
    """A short description of `value`'s shape for error messages."""
    if isinstance(value, dict):
        return "dict with keys " + repr(sorted(str(k) for k in value)[:8])
    if isinstance(value, (list, tuple)):
        inner = sorted({type(v).__name__ for v in value})
        return f"{type(value).__name__} of {', '.join(inner) or 'nothing'}"
    return type(value).__name__


def _text_of(value: Any, where: str) -> str:
    if isinstance(value, str):
        return value
    raise TypeError(f"{where} must be a string, got {_shape(value)}")


def _content_parts(content: Sequence[Any]) -> "tuple[List[str], List[str]]":
    """(reasoning parts, text parts) of a content list."""
    reasoning: List[str] = []
    text: List[str] = []
    for k, part in enumerate(content):
        if isinstance(part, str):
            text.append(part)
            continue
        if not isinstance(part, dict):
            raise TypeError(f"content part {k} must be a string or a dict, got {_shape(part)}")
        kind = part.get("type", "text")
        if kind in _REASONING_PARTS:
            key = next((key for key in ("thinking", "reasoning", "reasoning_content", "text") if key in part), None)
            if key is None:
                raise TypeError(f"content part {k} of type {kind!r} has no text ({_shape(part)})")
            reasoning.append(_text_of(part[key], f"content part {k} {key!r}"))
        elif kind == "text" and "text" in part:
            text.append(_text_of(part["text"], f"content part {k} 'text'"))
        else:
            raise TypeError(
                f"content part {k} is not text or reasoning ({_shape(part)}, type {kind!r}); "
                "a report completion has only text"
            )
    return reasoning, text


def message_text(message: Dict[str, Any]) -> str:
    """The report in one assistant message: ``<think>reasoning</think>content``
    when the message carries its reasoning apart, else its content."""
    reasoning_keys = [k for k in REASONING_KEYS if message.get(k) is not None]
    if "content" not in message and not reasoning_keys:
        raise TypeError(
            "a chat message must be a dict with a 'content' key (or a reasoning field: "
            f"{', '.join(REASONING_KEYS)}), got a {_shape(message)}"
        )
    content = message.get("content")
    reasoning: List[str] = []
    if len(reasoning_keys) > 1:
        # Two fields with different text: which is the model's is a guess.
        texts = {k: message[k] for k in reasoning_keys}
        if len({repr(v) for v in texts.values()}) > 1:
            raise TypeError(f"a chat message has different reasoning in {reasoning_keys}: cannot tell which to score")
    if reasoning_keys:
        reasoning.append(_text_of(message[reasoning_keys[0]], f"message {reasoning_keys[0]!r}"))
    if content is None:
        body = ""
    elif isinstance(content, str):
        body = content
    elif isinstance(content, (list, tuple)):
        parts_reasoning, parts_text = _content_parts(content)
        if reasoning and parts_reasoning:
            raise TypeError("a chat message has reasoning both in a field and in its content parts")
        reasoning.extend(parts_reasoning)
        body = "".join(parts_text)
    else:
        raise TypeError(f"message content must be a string or a list of parts, got {_shape(content)}")
    if not reasoning:
        return body
    return "<think>" + "".join(reasoning) + "</think>" + body


def completion_text(completion: Completion) -> str:
    """The report a completion holds.

    - a string: as is;
    - a message dict, or a list of chat messages: the last assistant message
      (the last message when none has that role), rebuilt by
      :func:`message_text` (reasoning fields become ``<think>...</think>``,
      content parts are concatenated);
    - anything else: ``TypeError`` naming the shape.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if not isinstance(completion, (list, tuple)) or not completion:
        raise TypeError(
            "a completion must be a string, a chat message dict or a non-empty list of chat messages, "
            f"got {_shape(completion) if not isinstance(completion, (list, tuple)) else 'an empty ' + type(completion).__name__}"
        )
    if not all(isinstance(m, dict) for m in completion):
        raise TypeError(f"a list completion must hold chat message dicts, got a {_shape(completion)}")
    messages = [m for m in completion if m.get("role") == "assistant"]
    message = messages[-1] if messages else completion[-1]
    return message_text(message)
