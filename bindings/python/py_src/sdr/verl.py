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
from typing import Any, Dict, Optional, Tuple

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
)
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


def compute_score(
    data_source: Optional[str],
    solution_str: str,
    ground_truth: Any,
    extra_info: Optional[Dict[str, Any]] = None,
    **kwargs: Any,
) -> Dict[str, float]:
    """SDR reward of one sample: ``{"score", "format", "findings", "impression"}``.

    Keyword arguments ``metric``, ``format_weight``, ``semantic_weight``,
    ``exact``, ``model_dir``, ``encoder`` (a callable ``list[str] -> (n, d)``
    array, or ``"module:attribute"`` naming one), ``cache_mib``, ``cache_path``,
    ``cache_save_interval``, ``encoder_id``, ``device`` and ``precision``
    (``"f32"`` or ``"bf16"``) select the reward (verl's ``reward_kwargs``);
    other keywords are ignored. A malformed ``solution_str`` scores 0; a
    ``ground_truth`` with an empty section raises ValueError.
    """
    reward = _reward(kwargs)
    if isinstance(ground_truth, dict):
        try:
            f, i = ground_truth["findings"], ground_truth["impression"]
        except KeyError as e:
            raise ValueError(f"ground_truth dict needs 'findings' and 'impression' keys, missing {e}") from None
        out = reward.score([solution_str], findings=[f], impression=[i])
    else:
        out = reward.score([solution_str], references=[ground_truth])
    return {
        "score": out["reward"][0],
        "format": out["format"][0],
        "findings": out["findings"][0],
        "impression": out["impression"][0],
    }
