"""The project's paired bootstrap (`sdr_eval::bootstrap`) in standard-library Python, shared by
the page modules: SplitMix64 seeded 43, 1,000 resamples of the studies, rejection sampling of the
indices, linear-interpolation percentiles. Tests check it against the intervals the Rust and
Python packages wrote (scripts/test_results.py). Not a page: it has no PAGES or BLOCKS."""

from __future__ import annotations

import functools

MASK = (1 << 64) - 1
RESAMPLES, SEED = 1000, 43


def splitmix(seed: int = SEED):
    s = seed
    while True:
        s = (s + 0x9E3779B97F4A7C15) & MASK
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        yield z ^ (z >> 31)


def below(gen, n: int) -> int:
    zone = MASK - MASK % n
    while True:
        x = next(gen)
        if x < zone:
            return x % n


@functools.lru_cache(maxsize=None)
def draws(n: int) -> tuple:
    """`sdr_eval::bootstrap::resample_indices(n, 1000, 43)`."""
    g = splitmix()
    return tuple(tuple(below(g, n) for _ in range(n)) for _ in range(RESAMPLES))


def percentile(s: list, q: float) -> float:
    pos = q * (len(s) - 1)
    lo, hi = int(pos // 1), int(-(-pos // 1))
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


