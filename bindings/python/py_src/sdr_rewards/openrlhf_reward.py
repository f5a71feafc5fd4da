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
tokens; the completion is what follows the matching prompt, without the
end-of-sequence tokens at its end (``<|im_end|>``, ``<|eot_id|>``, ``</s>``,
``<end_of_turn>``, ...). A query that does not start with its prompt
(OpenRLHF 0.11 cuts a prompt longer than ``max_prompt_length`` tokens from the
left but passes the whole prompt string; a tokenizer may not decode a prompt to
the same string) is cut after the longest end of the prompt found in it (its
chat template's assistant header; 16 bytes at least), else parsed whole: a
``RuntimeWarning`` says so once per process and ``extra_logs["prompt_mismatch"]``
counts such samples. ``labels`` are the reference reports. Environment variables
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
default. ``SDR_SERVE_URL`` (``http://127.0.0.1:8000``) scores through one
``sdr serve`` instead (``sdr_rewards.serve_client``: one encoder for every worker;
the reward's options are then the server's: only ``SDR_METRIC`` is read
beside it, the others are ignored with a warning). A variable that looks like a misspelt one (``SDR_METRICS``) is
named in a warning; a value that does not parse raises ``ValueError`` naming
its variable. ``set_encoder(fn)`` sets the encoder from Python before the first
call.

``extra_logs`` (OpenRLHF logs their means) hold per sample ``format``,
``findings``, ``impression``, ``unconverged`` and ``failed`` (sections scored
with an unconverged solver's last iterate, or with no finite distance; SPEC §4;
warned once), ``prompt_mismatch``, ``clinical`` with ``SDR_CLINICAL_WEIGHT`` and
``missing_sections`` under the default policy.
"""

from __future__ import annotations

import difflib
import os
import threading
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence

from sdr_rewards import SDRReward, config
from sdr_rewards._sdr import openrlhf_completion
from sdr_rewards.coalesce import Coalescer
from sdr_rewards.serve_client import ServeClient

_reward: Optional[SDRReward] = None
_coalescer: Optional[Coalescer] = None
_score: Optional[Callable[[List[Any], List[Any]], Dict[str, List[Any]]]] = None
_encoder: Any = None
# First-call construction: OpenRLHF calls reward_func from many threads at once.
_lock = threading.Lock()
_warn_lock = threading.Lock()
_warned: set = set()

# This file's own variables, besides the reward's (sdr_rewards.config.OPTIONS).
_OWN_ENV = ("SDR_COALESCE_MS", "SDR_SERVE_URL")


def set_encoder(encoder: Any) -> None:
    """Use `encoder` (a callable ``list[str] -> (n, d)`` array) from the next call on."""
    global _encoder, _reward, _coalescer, _score
    with _lock:
        _encoder = encoder
        _reward = None
        _coalescer = None
        _score = None


def _warn_once(key: Any, message: str, stacklevel: int = 3) -> None:
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)


def _check_env(environ: Any) -> None:
    """Warn about ``SDR_*`` variables that look like a misspelt one of this file's
    (``SDR_METRICS`` for ``SDR_METRIC``): they would be ignored, and the run would
    train on the default. Other ``SDR_*`` variables (``SDR_HOME``, ...) belong to
    other tools and are left alone."""
    known = [o["env"] for o in config.OPTIONS] + list(_OWN_ENV)
    for name in sorted(environ):
        if not name.startswith("SDR_") or name in known:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:
            _warn_once(
                ("env", name),
                f"sdr_rewards.openrlhf_reward: ignoring {name}={environ[name]!r}: not a variable of "
                f"this file (did you mean {close[0]}?); its variables are {sorted(known)}",
                stacklevel=5,
            )


def _build() -> None:
    global _reward, _coalescer, _score
    _check_env(os.environ)
    text = os.environ.get("SDR_COALESCE_MS") or "2"
    try:
        ms = float(text)
    except ValueError:
        raise ValueError(f"SDR_COALESCE_MS={text!r}: expected a finite number >= 0 (milliseconds)") from None
    if not (0 <= ms < float("inf")):
        raise ValueError(f"SDR_COALESCE_MS={text!r}: expected a finite number >= 0 (milliseconds)")
    serve_url = os.environ.get("SDR_SERVE_URL")
    reward: Optional[SDRReward] = None
    if serve_url:
        # Every worker scores through one `sdr serve` (sdr_rewards.serve_client):
        # the reward's options are the server's.
        options = config.from_env(os.environ)
        others = sorted(config.OPTIONS[config.NAMES.index(k)]["env"] for k in options if k != "metric")
        if _encoder is not None:
            others.append("set_encoder()")
        if others:
            # Not an error: SDR_MODEL or SDR_DEVICE may be set machine-wide, for the server.
            _warn_once(
                ("serve", tuple(others)),
                f"sdr_rewards.openrlhf_reward: with SDR_SERVE_URL={serve_url!r} the reward's options "
                f"are the server's (sdr serve --format-weight ...): ignoring {others}",
                stacklevel=5,
            )
        score: Callable[[List[Any], List[Any]], Dict[str, List[Any]]] = ServeClient(
            serve_url, metric=options.get("metric")
        ).score
    else:
        # Every option from its SDR_* variable (sdr_rewards.config); this file's
        # own default: score what can be scored (see the module docs).
        options = config.from_env(os.environ, defaults={"missing_section": "score"})
        if _encoder is not None:
            options["encoder"] = _encoder
        reward = SDRReward(name="sdr", **options)
        score = lambda c, r: reward.score(c, references=r)  # noqa: E731
    _coalescer = Coalescer(score, window_s=ms / 1000.0) if ms > 0 else None
    _score = score
    _reward = reward


def _ensure() -> Callable[[List[Any], List[Any]], Dict[str, List[Any]]]:
    """This process's scoring function, built by the first call (once, however
    many threads make it at the same moment)."""
    score = _score
    if score is None:
        with _lock:
            if _score is None:
                _build()
            score = _score
    assert score is not None
    return score


def _get() -> Optional[SDRReward]:
    """This process's reward (None with ``SDR_SERVE_URL``), built on first use."""
    _ensure()
    return _reward


def _lead(text: str) -> str:
    # `text` without the special tokens at its start, as completion_of sets them
    # aside (a character after it keeps the end of `text` as it is).
    return openrlhf_completion(text + "\x01")[:-1]


def _starts_with_prompt(query: str, prompt: Optional[str]) -> bool:
    """Whether the completion was found as completion_of's exact rule finds it."""
    if not prompt or query.startswith(prompt):
        return True
    return _lead(query).startswith(_lead(prompt))


def completion_from_query(query: str, prompt: Optional[str]) -> str:
    """The completion inside an OpenRLHF query (prompt + completion).

    OpenRLHF decodes queries with their special tokens: a beginning-of-sequence
    token the prompt lacks is set aside, and the end-of-sequence tokens
    (``<|im_end|>``, ``</s>``, ...) are removed, as ``sdr serve`` does; the
    template allows only whitespace outside its tags. A query that does not
    start with its prompt (cut from the left) is cut after the longest end of
    the prompt found in it (16 bytes at least), else parsed whole."""
    return openrlhf_completion(query, prompt)


def reward_func(queries: Sequence[str], prompts: Sequence[str], labels: Sequence[str]) -> Dict[str, Any]:
    """``{"rewards", "scores", "extra_logs"}``, ``extra_logs`` holding ``format``,
    ``findings``, ``impression``, ``unconverged``, ``failed``, ``prompt_mismatch``
    (1 where the query did not start with its prompt), ``clinical`` with
    ``SDR_CLINICAL_WEIGHT`` and ``missing_sections`` with the default policy;
    torch tensors when torch is importable (as OpenRLHF expects), else lists."""
    if len(prompts) != len(queries):
        raise ValueError(f"{len(queries)} queries but {len(prompts)} prompts")
    if len(labels) != len(queries):
        raise ValueError(f"{len(queries)} queries but {len(labels)} labels")
    completions = []
    mismatch: List[float] = []
    for q, p in zip(queries, prompts):
        c = completion_from_query(q, p)
        completions.append(c)
        exact = _starts_with_prompt(q, p)
        mismatch.append(0.0 if exact else 1.0)
        if not exact:
            found = c != openrlhf_completion(q)
            _warn_once(
                ("prompt", found),
                "sdr_rewards.openrlhf_reward: a query does not start with its prompt (OpenRLHF cut a "
                "prompt longer than max_prompt_length from the left, or the tokenizer does not decode "
                "the prompt to the same string); "
                + (
                    "the completion was taken after the longest end of the prompt found in the query"
                    if found
                    else "no end of the prompt was found in it, so the whole query was scored"
                )
                + " (counted in extra_logs['prompt_mismatch']; warned once per process)",
            )
    score = _ensure()
    coalescer = _coalescer
    if coalescer is not None:
        out = coalescer.score(completions, list(labels))
    else:
        out = score(completions, list(labels))
    n = len(completions)
    extra: Dict[str, List[float]] = {k: [float(x) for x in out[k]] for k in ("format", "findings", "impression")}
    if "clinical" in out:
        extra["clinical"] = [float(x) for x in out["clinical"]]
    for key in ("unconverged", "failed"):
        # Sections scored with an unconverged solver's last iterate, or with no
        # finite distance (term 0; SPEC §4), per sample.
        extra[key] = [float(x) for x in out.get(key, [0] * n)]
    if "missing_sections" in out:
        extra["missing_sections"] = [float(x) for x in out["missing_sections"]]
    extra["prompt_mismatch"] = mismatch
    for key in ("unconverged", "failed"):
        total = sum(extra[key])
        if total:
            _warn_once(
                ("solver", key),
                f"sdr_rewards.openrlhf_reward: {int(total)} section(s) {key} (see SPEC §4: last "
                f"iterate used / term 0); counted in extra_logs[{key!r}] (warned once per process)",
            )
    result: Dict[str, Any] = {"rewards": out["reward"], "scores": out["reward"], "extra_logs": extra}
    try:
        import torch
    except ImportError:
        return result
    return {
        "rewards": torch.tensor(result["rewards"], dtype=torch.float32),
        "scores": torch.tensor(result["scores"], dtype=torch.float32),
        "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in result["extra_logs"].items()},
    }
