"""Sentence costs written in Python: ``register_cost``.

A set distance reads a cost matrix between the sentences of two sets; the
paper's is the cosine cost ``(1 - cos) / 2`` and ``cost="clinical"`` adds
SPEC §10's penalties to it. ``register_cost`` makes a cost of your own known
by name to this process, so that every place that takes a cost spec opens it
like a built-in one: ``SDRReward(cost="negation:weight=0.5")``, the verl and
OpenRLHF adapters (``cost`` / ``SDR_COST``) and ``sdr_rewards.explain``.

The factory is called with the spec's parameters as keyword strings
(``"negation:weight=0.5"`` -> ``factory(weight="0.5")``) and returns an object
with

- ``apply(cost, a, b)`` (required): ``cost`` is the pair's cosine cost, a
  float64 numpy array of shape ``(n, m)`` (rows: the first set's sentences,
  the completion's; columns: the second's, the reference's), ``a`` and ``b``
  the sentences' annotations; returns the cost the distance reads, an
  ``(n, m)`` array of finite values >= 0;
- ``annotate(sentence)`` (optional): what the cost needs to know of one
  sentence, called once per distinct sentence of a call (keep a cache of your
  own, e.g. ``functools.lru_cache``, if it is slow); without it a sentence's
  annotation is its text.

A factory that raises for a spec makes the spec invalid: ``SDRReward`` raises
``ValueError`` naming it. An exception inside ``annotate`` or ``apply`` stops
the call with a ``RuntimeError`` chained to it; a result of the wrong shape,
NaN or a negative value raises ``ValueError``. GW's intra-set costs stay
cosine.

The costs live in the process that registered them: register yours at import
time of a module that every reward worker imports (verl's
``custom_reward_function`` file, OpenRLHF's reward file, your TRL script),
since a pickled ``SDRReward`` carries its cost's spec, not its code.
``sdr serve`` and the ``sdr`` command line know only the built-in costs.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from . import _sdr

__all__ = ["register_cost"]


def register_cost(name: str, factory: Optional[Callable[..., Any]] = None, *, params: str = ""):
    """Register ``factory`` as the sentence cost ``name`` (see the module docs).

    ``name`` is lower-case letters, digits, ``-`` and ``_``, starting with a
    letter, and not ``cosine`` or ``clinical``; registering a name again
    replaces its factory. ``params`` describes the parameters for help and
    error texts, e.g. ``"weight=W"``. Used without ``factory`` it is a class
    decorator::

        @sdr_rewards.register_cost("negation", params="weight=W")
        class Negation:
            def __init__(self, weight="1"):
                self.weight = float(weight)

            def annotate(self, sentence):
                return " no " in f" {sentence.lower()} "

            def apply(self, cost, a, b):
                differ = np.not_equal.outer(np.array(a), np.array(b))
                return cost + self.weight * differ

        reward = sdr_rewards.SDRReward(cost="negation:weight=0.5")

    Raises ``ValueError`` for a name that is built in or not a cost name, and
    ``TypeError`` for a factory that is not callable.
    """
    if not isinstance(name, str):
        raise TypeError(f"register_cost: name must be a string, got {type(name).__name__}")
    if not isinstance(params, str):
        raise TypeError(f"register_cost: params must be a string, got {type(params).__name__}")
    if factory is None:

        def decorate(f):
            _sdr._register_cost(name, f, params)
            return f

        return decorate
    _sdr._register_cost(name, factory, params)
    return factory
