"""The model folder the benchmarks load, by the rule `sdr` itself follows
(`sdr_embed::resolve_model_dir`): `$SDR_MODEL`, else
`${SDR_HOME:-~/.cache/sdr}/models/all-mpnet-base-v2`; empty variables count as unset."""

import os


def default_model_dir() -> str:
    explicit = os.environ.get("SDR_MODEL")
    if explicit:
        return explicit
    home = os.environ.get("SDR_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "sdr")
    return os.path.join(home, "models", "all-mpnet-base-v2")
