"""Non-convergence is reported, never folded silently into a number (SPEC §3, §4)."""

import math
import warnings

import numpy as np

import sdr_rewards

GOOD = "<think>The lungs are clear.</think><answer>No acute disease.</answer>"
REF = "Findings: The lungs are clear. Heart size is normal. Impression: No acute disease."


def test_converged_distances_raise_no_warning():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(5, 32)), rng.normal(size=(7, 32))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = sdr_rewards.distances(a, b)
        one = sdr_rewards.distance(a, b, "sinkhorn:eps=0.01")
    assert all(math.isfinite(v) for v in out.values())
    assert one == out["sinkhorn:eps=0.01"]


def test_reward_results_carry_the_counts():
    r = sdr_rewards.SDRReward(metric="gw:eps=0.1")
    out = r.score([GOOD, "no tags at all"], references=[REF, REF])
    assert out["unconverged"] == [0, 0] and out["failed"] == [0, 0]
    s = r.last_stats()
    assert s["unconverged"] == 0 and s["failed"] == 0
