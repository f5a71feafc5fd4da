"""An encoder named in a trainer's configuration: a callable, or ``"module:attribute"``."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

__all__ = ["resolve_encoder"]


def resolve_encoder(spec: Any) -> Optional[Callable[[List[str]], Any]]:
    """An encoder given as a callable, or as ``"package.module:attribute"`` (the
    form a trainer's config file or an environment variable can hold), resolved
    by importing the module. ``None`` and ``""`` mean SDR's own encoder."""
    if spec is None or spec == "":
        return None
    if callable(spec):
        return spec
    if isinstance(spec, str) and ":" in spec:
        import importlib

        module, _, attr = spec.partition(":")
        try:
            obj: Any = importlib.import_module(module)
        except ImportError as e:
            raise ValueError(f"encoder {spec!r}: cannot import {module!r}: {e}") from None
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise ValueError(f"encoder {spec!r}: {module!r} has no attribute {attr!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise ValueError(f"encoder {spec!r} is not callable")
        return obj
    raise ValueError(f"encoder must be a callable or 'module:attribute', got {spec!r}")
