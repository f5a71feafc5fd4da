"""verl adapter: ``compute_score`` for ``reward.custom_reward_function``.

verl (0.9+) calls the function once per sample, from many threads and from
forked workers::

    reward:
      custom_reward_function:
        path: /path/to/site-packages/sdr/verl.py   # python -c "import sdr.verl as m; print(m.__file__)"
        name: compute_score
        reward_kwargs:            # optional, passed as keyword arguments
          metric: chamfer
          format_weight: 1.0
          semantic_weight: 1.0
          encoder: my_project.encoders:st_encoder   # optional: your own encoder
          # device: cuda       # where SDR's own encoder runs (default cpu)
          # precision: bf16    # f32 (default) or bf16
          # clinical_weight: 0.5   # beyond the paper: + weight x CheXpert-rule F1

With verl's batch reward manager (``reward_model.reward_manager=batch``)
the same function receives the whole batch as ``data_sources``, ``solution_strs``,
``ground_truths``, ``extra_infos`` and returns one dict per sample: one
encoder call for the batch's new sentences instead of one per sample.

``ground_truth`` is the reference report (template or ``Findings:`` /
``Impression:`` text) or a dict ``{"findings": ..., "impression": ...}``.
The returned dict has ``score`` and the components ``format``, ``findings``,
``impression`` on every sample (verl logs the extra keys).

One reward object per configuration is built lazily and shared by all
threads of a process (the Rust scorer is thread-safe and releases the GIL);
a fork drops the parent's objects so the child builds its own.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

# Absolute import: verl loads this file by path (spec_from_file_location), as a
# module outside the package, where a relative import fails.
from sdr.reward import SDRReward

_CONFIG_KEYS = (
    "metric",
    "format_weight",
    "semantic_weight",
    "exact",
    "model_dir",
    "encoder",
    "cache_mib",
    "cache_path",
    "cache_save_interval",
    "encoder_id",
    "device",
    "precision",
    "distinct_sentences",
    "clinical_weight",
)
# Keywords verl itself may pass besides reward_kwargs: not the reward's options.
_VERL_KEYS = frozenset(
    ("data_source", "solution_str", "ground_truth", "extra_info", "data_sources", "solution_strs",
     "ground_truths", "extra_infos", "return_dict", "sandbox_fusion_url", "concurrent_semaphore",
     "memory_limit_mb")
)
_warned: set = set()
_lock = threading.Lock()
_rewards: Dict[Tuple[Any, ...], SDRReward] = {}


def _reset_after_fork() -> None:
    global _lock, _rewards
    _lock = threading.Lock()
    _rewards = {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


def _reward(kwargs: Dict[str, Any]) -> SDRReward:
    config = {k: kwargs[k] for k in _CONFIG_KEYS if k in kwargs}
    unknown = sorted(set(kwargs) - set(_CONFIG_KEYS) - _VERL_KEYS)
    if unknown and tuple(unknown) not in _warned:
        # A misspelt option would otherwise train silently with the default reward.
        _warned.add(tuple(unknown))
        warnings.warn(
            f"sdr.verl: ignoring unknown keyword(s) {unknown}; the reward's options are "
            f"{list(_CONFIG_KEYS)}",
            stacklevel=3,
        )
    # A callable encoder is keyed by identity, a "module:attr" string by its text.
    key = tuple(sorted((k, f"id:{id(v)}" if callable(v) else str(v)) for k, v in config.items()))
    reward = _rewards.get(key)
    if reward is None:
        with _lock:
            reward = _rewards.get(key)
            if reward is None:
                reward = SDRReward(name="sdr", **config)
                _rewards[key] = reward
    return reward


def _score_many(reward: SDRReward, solutions: List[str], truths: List[Any]) -> List[Dict[str, float]]:
    """Scores `solutions[k]` against `truths[k]` (a report, or a section dict) in
    one call, so that an error names the sample."""
    for k, t in enumerate(truths):
        if not isinstance(t, (str, Mapping)):
            raise TypeError(
                f"ground_truth of sample {k} must be the reference report (a string) or a dict "
                f"{{'findings': ..., 'impression': ...}}, got {type(t).__name__}"
            )
    res = reward.score(solutions, references=truths)
    return [
        {
            "score": res["reward"][k],
            "format": res["format"][k],
            "findings": res["findings"][k],
            "impression": res["impression"][k],
        }
        for k in range(len(solutions))
    ]


def compute_score(
    data_source: Optional[str] = None,
    solution_str: Optional[str] = None,
    ground_truth: Any = None,
    extra_info: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Union[Dict[str, float], List[Dict[str, float]]]:
    """SDR reward of one sample: ``{"score", "format", "findings", "impression"}``;
    called as verl's batch reward manager calls it (``solution_strs=``,
    ``ground_truths=``, ``data_sources=``, ``extra_infos=``), one such dict per
    sample, in order (see :func:`compute_score_batch`).

    Keyword arguments ``metric``, ``format_weight``, ``semantic_weight``,
    ``exact``, ``model_dir``, ``encoder`` (a callable ``list[str] -> (n, d)``
    array, or ``"module:attribute"`` naming one), ``cache_mib``, ``cache_path``,
    ``cache_save_interval``, ``encoder_id``, ``device``, ``precision``
    (``"f32"`` or ``"bf16"``), ``distinct_sentences`` and ``clinical_weight``
    select the reward (verl's ``reward_kwargs``), as in ``SDRReward``; other
    keywords are ignored, with a warning (once per set of names) unless verl
    itself passes them. A malformed ``solution_str`` scores 0; a
    ``ground_truth`` with an empty section raises ValueError.
    """
    if "solution_strs" in kwargs:
        return compute_score_batch(**kwargs)
    if solution_str is None:
        raise TypeError("compute_score needs solution_str (one sample) or solution_strs= (verl's batch manager)")
    return _score_many(_reward(kwargs), [solution_str], [ground_truth])[0]


def compute_score_batch(
    data_sources: Optional[Sequence[Any]] = None,
    solution_strs: Sequence[str] = (),
    ground_truths: Sequence[Any] = (),
    extra_infos: Optional[Sequence[Any]] = None,
    **kwargs: Any,
) -> List[Dict[str, float]]:
    """SDR rewards of a batch, for verl's batch reward manager: one
    ``{"score", "format", "findings", "impression"}`` per sample, in order.
    The sequences may be lists or numpy object arrays; the keyword arguments
    are :func:`compute_score`'s. One call embeds the batch's new sentences
    once, which a per-sample function cannot."""
    solutions, truths = list(solution_strs), list(ground_truths)
    if len(solutions) != len(truths):
        raise ValueError(
            f"solution_strs has {len(solutions)} samples but ground_truths has {len(truths)}"
        )
    if not solutions:
        return []
    return _score_many(_reward(kwargs), solutions, truths)
