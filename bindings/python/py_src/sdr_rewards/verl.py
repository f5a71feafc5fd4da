"""verl adapter: ``compute_score`` for ``reward.custom_reward_function``.

verl 0.9's reward loop (managers ``naive``, ``dapo``, ``gdpo``,
``rate_limited``, ``remote``; ``reward.reward_manager.name``) calls the
function once per sample, concurrently::

    reward:
      reward_manager:
        name: naive               # or dapo, gdpo, rate_limited, remote
      custom_reward_function:
        path: /path/to/site-packages/sdr_rewards/verl.py   # python -c "import sdr_rewards.verl as m; print(m.__file__)"
        name: compute_score       # or compute_score_async (not with `remote`)
        reward_kwargs:            # optional, passed as keyword arguments
          metric: chamfer
          format_weight: 1.0
          semantic_weight: 1.0
          # encoder: my_project.encoders:st_encoder   # your own encoder
          # device: cuda          # where SDR's own encoder runs (default cpu)
          # precision: bf16       # f32 (default) or bf16
          # clinical_weight: 0.5  # beyond the paper: + weight x CheXpert-rule F1
          # cost: clinical        # beyond the paper: the clinically aware sentence cost (SPEC §10)
          # missing_section: score  # a label without Impression: score Findings, count it
          # serve_url: http://127.0.0.1:8000  # every worker scores through one `sdr serve`

``compute_score_async`` is the coroutine form: managers other than ``remote``
await it on their event loop, so every sample of a step is in flight at once
instead of as many as verl's thread pool holds.

Concurrent calls in a process (threads or coroutines) are coalesced into one
batched call of the scorer over a short window (``sdr_rewards.coalesce``;
``coalesce_ms``, default 2; 0 scores each call alone); the rewards are
bit-identical to one batched call of the same samples.

``ground_truth`` is the reference report (template or ``Findings:`` /
``Impression:`` text) or a dict ``{"findings": ..., "impression": ...}``.
``solution_str`` is the decoded response, or a chat message (list) as
``SDRReward`` takes it (``reasoning_content`` becomes ``<think>...</think>``).
The returned dict has ``score`` and the components ``format``, ``findings``,
``impression``, ``unconverged`` and ``failed`` (sections scored with an
unconverged solver's last iterate, or with no finite distance; SPEC §4) on
every sample (verl logs the extra keys), ``clinical`` with a
``clinical_weight``, and ``missing_sections`` with ``missing_section: score``.

``compute_score_batch`` scores a whole batch in one call, for code of your own
(verl 0.9's trainer has no batch reward manager).

The functions keep no state in this file: verl loads it by path under a name
other processes cannot import, so Ray's cloudpickle sends them by value, with
the globals they read (the ``remote`` manager, and Ray workers in general).
Rewards and coalescers live in ``sdr_rewards.per_process``, one per configuration and
process, built on first use in each process (and again after a fork).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

# Absolute imports: verl loads this file by path (spec_from_file_location), as a
# module outside the package, where a relative import fails.
from sdr_rewards import config, per_process
from sdr_rewards.coalesce import Coalescer
from sdr_rewards.completion import completion_text
from sdr_rewards.reward import SDRReward
from sdr_rewards.serve_client import ServeClient

# The reward's options, from the one record of them (sdr_rewards.config).
_CONFIG_KEYS = config.NAMES
# Options of this adapter, not of SDRReward.
_ADAPTER_KEYS = ("coalesce_ms", "serve_url")
# Keywords verl itself may pass besides reward_kwargs: not the reward's options.
_VERL_KEYS = frozenset(
    ("data_source", "solution_str", "ground_truth", "extra_info", "data_sources", "solution_strs",
     "ground_truths", "extra_infos", "return_dict", "sandbox_fusion_url", "concurrent_semaphore",
     "memory_limit_mb", "reward_router_address", "reward_model_tokenizer")
)


def _key_of(config: Dict[str, Any]) -> tuple:
    # A callable encoder is keyed by identity, a "module:attr" string by its text.
    return tuple(sorted((k, f"id:{id(v)}" if callable(v) else str(v)) for k, v in config.items()))


def _build(config: Dict[str, Any], adapter: Dict[str, Any]) -> Dict[str, Any]:
    """The scorer of one configuration in this process: an SDRReward (or a
    client of `sdr serve`) and the coalescer in front of it."""
    serve_url = adapter.get("serve_url")
    if serve_url:
        others = sorted(set(config) - {"metric"})
        if others:
            raise ValueError(
                f"sdr_rewards.verl: with serve_url the reward's options are the server's "
                f"(sdr serve --format-weight ...); remove {others} from reward_kwargs"
            )
        client = ServeClient(serve_url, metric=config.get("metric"))
        score_fn = client.score
        reward: Optional[SDRReward] = None
    else:
        reward = SDRReward(name="sdr", **config)
        score_fn = lambda c, r: reward.score(c, references=r)  # noqa: E731
    ms = adapter.get("coalesce_ms", 2.0)
    if isinstance(ms, bool) or not isinstance(ms, (int, float)) or not (0 <= ms < float("inf")):
        raise ValueError(f"coalesce_ms must be a finite number >= 0, got {ms!r}")
    coalescer = Coalescer(score_fn, window_s=ms / 1000.0) if ms > 0 else None
    return {"reward": reward, "score": score_fn, "coalescer": coalescer}


def _scorer(kwargs: Dict[str, Any]) -> Dict[str, Any]:
    config = {k: kwargs[k] for k in _CONFIG_KEYS if k in kwargs}
    adapter = {k: kwargs[k] for k in _ADAPTER_KEYS if k in kwargs}
    unknown = sorted(set(kwargs) - set(_CONFIG_KEYS) - set(_ADAPTER_KEYS) - _VERL_KEYS)
    if unknown:
        # A misspelt option would otherwise train silently with the default reward.
        per_process.warn_once(
            ("sdr_rewards.verl", tuple(unknown)),
            f"sdr_rewards.verl: ignoring unknown keyword(s) {unknown}; the reward's options are "
            f"{list(_CONFIG_KEYS) + list(_ADAPTER_KEYS)}",
            stacklevel=4,
        )
    key = ("sdr_rewards.verl", os.getpid(), _key_of(config), _key_of(adapter))
    return per_process.get(key, lambda: _build(config, adapter))


def _reward(kwargs: Dict[str, Any]) -> Optional[SDRReward]:
    """The SDRReward that `kwargs` select in this process (None with serve_url)."""
    return _scorer(kwargs)["reward"]


def __getattr__(name: str) -> Any:
    # ``_rewards``: this process's rewards by configuration (read by tests and
    # by code that inspects the reward; computed, so that no state lives here).
    if name == "_rewards":
        return {
            key: obj["reward"]
            for key, obj in per_process.items()
            if isinstance(key, tuple) and key[:1] == ("sdr_rewards.verl",) and obj["reward"] is not None
        }
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _inputs(solutions: Sequence[Any], truths: Sequence[Any]) -> "tuple[List[str], List[Any]]":
    texts = []
    for k, s in enumerate(solutions):
        try:
            texts.append(completion_text(s))
        except TypeError as e:
            raise TypeError(f"solution_str of sample {k}: {e}") from None
    for k, t in enumerate(truths):
        if not isinstance(t, (str, Mapping)):
            raise TypeError(
                f"ground_truth of sample {k} must be the reference report (a string) or a dict "
                f"{{'findings': ..., 'impression': ...}}, got {type(t).__name__}"
            )
    return texts, [dict(t) if isinstance(t, Mapping) else t for t in truths]


def _dicts(res: Dict[str, List[Any]], n: int) -> List[Dict[str, float]]:
    # Every key is a number on every sample of a configuration: verl collects the
    # extra keys into per-key lists (reward_extra_info) and logs their means.
    keys = [("score", "reward"), ("format", "format"), ("findings", "findings"), ("impression", "impression")]
    if "clinical" in res:
        keys.append(("clinical", "clinical"))
    if "missing_sections" in res:
        keys.append(("missing_sections", "missing_sections"))
    out = [{ours: res[theirs][k] for ours, theirs in keys} for k in range(n)]
    for key in ("unconverged", "failed"):
        # Sections scored with an unconverged solver's last iterate, or with no
        # finite distance (term 0; SPEC §4), per sample; warned once per process.
        values = res.get(key) or [0] * n
        for k in range(n):
            out[k][key] = float(values[k])
        total = int(sum(values[:n]))
        if total:
            per_process.warn_once(
                ("sdr_rewards.verl", key),
                f"sdr_rewards.verl: {total} section(s) {key} (see SPEC §4: last iterate used / "
                f"term 0); returned as {key!r} with each sample's score (warned once per process)",
                RuntimeWarning,
                stacklevel=4,
            )
    return out


def compute_score(
    data_source: Optional[str] = None,
    solution_str: Optional[Any] = None,
    ground_truth: Any = None,
    extra_info: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Union[Dict[str, float], List[Dict[str, float]]]:
    """SDR reward of one sample: ``{"score", "format", "findings", "impression"}``;
    called with ``solution_strs=``, ``ground_truths=`` (and ``data_sources=``,
    ``extra_infos=``), one such dict per sample, in order (see
    :func:`compute_score_batch`).

    Keyword arguments ``metric``, ``format_weight``, ``semantic_weight``,
    ``exact``, ``model_dir``, ``encoder`` (a callable ``list[str] -> (n, d)``
    array, or ``"module:attribute"`` naming one), ``cache_mib``, ``cache_path``,
    ``cache_save_interval``, ``encoder_id``, ``device``, ``precision``
    (``"f32"`` or ``"bf16"``), ``distinct_sentences``, ``clinical_weight``,
    ``cost`` (``"cosine"`` or ``"clinical"``) and
    ``missing_section`` (``"error"`` or ``"score"``) select the reward (verl's
    ``reward_kwargs``), as in ``SDRReward``; ``coalesce_ms`` (default 2) is the
    coalescing window and ``serve_url`` sends the samples to ``sdr serve``.
    Other keywords are ignored, with a warning (once per set of names) unless
    verl itself passes them. A malformed ``solution_str`` scores 0; a
    ``ground_truth`` with an empty section raises ValueError (with
    ``missing_section: score``: that section's term is 0 and counted).
    """
    if "solution_strs" in kwargs:
        return compute_score_batch(**kwargs)
    if solution_str is None:
        raise TypeError("compute_score needs solution_str (one sample) or solution_strs= (a batch)")
    scorer = _scorer(kwargs)
    texts, truths = _inputs([solution_str], [ground_truth])
    coalescer = scorer["coalescer"]
    res = coalescer.score(texts, truths) if coalescer is not None else scorer["score"](texts, truths)
    return _dicts(res, 1)[0]


async def compute_score_async(
    data_source: Optional[str] = None,
    solution_str: Optional[Any] = None,
    ground_truth: Any = None,
    extra_info: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, float]:
    """:func:`compute_score` as a coroutine, for verl's reward loop (managers
    ``naive``, ``dapo``, ``gdpo``, ``rate_limited``; ``remote`` takes only the
    plain function). The sample joins the coalescer's next batch and the
    event loop runs on while it is scored."""
    if solution_str is None:
        raise TypeError("compute_score_async needs solution_str")
    scorer = _scorer(kwargs)
    texts, truths = _inputs([solution_str], [ground_truth])
    coalescer = scorer["coalescer"]
    if coalescer is None:
        import asyncio

        res = await asyncio.to_thread(scorer["score"], texts, truths)
    else:
        res = await coalescer.score_async(texts, truths)
    return _dicts(res, 1)[0]


def compute_score_batch(
    data_sources: Optional[Sequence[Any]] = None,
    solution_strs: Sequence[Any] = (),
    ground_truths: Sequence[Any] = (),
    extra_infos: Optional[Sequence[Any]] = None,
    **kwargs: Any,
) -> List[Dict[str, float]]:
    """SDR rewards of a batch: one ``{"score", "format", "findings",
    "impression"}`` per sample, in order. The sequences may be lists or numpy
    object arrays; the keyword arguments are :func:`compute_score`'s. One
    call embeds the batch's new sentences once."""
    solutions, truths = list(solution_strs), list(ground_truths)
    if len(solutions) != len(truths):
        raise ValueError(
            f"solution_strs has {len(solutions)} samples but ground_truths has {len(truths)}"
        )
    if not solutions:
        return []
    scorer = _scorer(kwargs)
    texts, refs = _inputs(solutions, truths)
    return _dicts(scorer["score"](texts, refs), len(solutions))
