"""The reward's options, as the Rust record ``sdr_reward::config`` lists them.

Every interface configures the same reward: ``SDRReward(**options)`` (TRL),
verl's ``reward_kwargs`` (``sdr_rewards.verl``), the OpenRLHF reward file's
``SDR_*`` environment (``sdr_rewards.openrlhf_reward``) and ``sdr serve``'s
flags. None of them lists the options again: they read :data:`OPTIONS`.
A new trainer adapter takes :data:`NAMES` (the keywords) or :func:`from_env`.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Mapping, Optional, Tuple

from . import _sdr

#: One dict per option: ``name``, ``env``, ``kind`` (text, number, flag, path),
#: ``default`` (text, or None when unset) and ``flag`` (``sdr serve``'s, or None).
OPTIONS: Tuple[Dict[str, Any], ...] = tuple(dict(o) for o in _sdr.REWARD_OPTIONS)
#: The keywords of ``SDRReward`` that configure the reward, in its order.
NAMES: Tuple[str, ...] = tuple(o["name"] for o in OPTIONS)

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _parse(option: Dict[str, Any], text: str) -> Any:
    kind, env = option["kind"], option["env"]
    if kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{env}={text!r}: expected a number") from None
        if not math.isfinite(value):
            raise ValueError(f"{env}={text!r}: expected a finite number")
        return value
    if kind == "flag":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise ValueError(f"{env}={text!r}: expected 1/true/yes or 0/false/no")
    return text


def from_env(environ: Mapping[str, str], defaults: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The ``SDRReward`` keywords that the ``SDR_*`` variables of `environ` set.

    An unset or empty variable leaves the option at `defaults` (an adapter's own
    default, such as OpenRLHF's ``missing_section="score"``) or at
    ``SDRReward``'s. A value that does not parse raises ``ValueError`` naming
    the variable."""
    out: Dict[str, Any] = dict(defaults or {})
    for option in OPTIONS:
        text = environ.get(option["env"])
        if text:
            out[option["name"]] = _parse(option, text)
    return out
