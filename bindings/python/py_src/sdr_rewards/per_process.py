"""Objects built once per process and configuration, on first use.

Trainers load reward files in ways that copy a module's globals: verl loads
``sdr_rewards/verl.py`` by path under a name no other process can import, so Ray's
cloudpickle sends ``compute_score`` *by value*, with every global it reads; a
``threading.Lock`` among them cannot be pickled (verl's ``remote`` reward
manager then dies with ``cannot pickle '_thread.lock' object``). Keeping the
state here, in a module that is always importable as ``sdr_rewards.per_process``,
makes such functions pickle by reference to this module: each process that
unpickles them finds its own, empty registry and builds its own objects.

A forked child finds the parent's registry and lock in an unknown state
(another thread may have held the lock at the fork): the process id is
checked on every call and the registry started afresh in a new process.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any, Callable, Dict, Hashable, TypeVar

T = TypeVar("T")

_pid = os.getpid()
_lock = threading.Lock()
_objects: Dict[Hashable, Any] = {}
_warned: set = set()


def _check_process() -> None:
    global _pid, _lock, _objects, _warned
    if _pid != os.getpid():
        _pid = os.getpid()
        _lock = threading.Lock()
        _objects = {}
        _warned = set()


def get(key: Hashable, factory: Callable[[], T]) -> T:
    """The object of this process stored under `key`, built by `factory()` the
    first time (once, however many threads ask at the same moment)."""
    _check_process()
    obj = _objects.get(key)
    if obj is None:
        with _lock:
            obj = _objects.get(key)
            if obj is None:
                obj = factory()
                _objects[key] = obj
    return obj


def warn_once(key: Hashable, message: str, category: type = UserWarning, stacklevel: int = 3) -> None:
    """``warnings.warn(message)`` the first time this process sees `key`."""
    _check_process()
    with _lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, category, stacklevel=stacklevel)


def items() -> "list[tuple[Hashable, Any]]":
    """(key, object) pairs of this process."""
    _check_process()
    with _lock:
        return list(_objects.items())


def clear() -> None:
    """Forget every object of this process (tests; a changed environment)."""
    _check_process()
    with _lock:
        _objects.clear()
        _warned.clear()
