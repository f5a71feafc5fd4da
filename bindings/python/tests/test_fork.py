"""Forked children (TRL / verl workers) build their own state and do not deadlock."""

import multiprocessing as mp
import os

import pytest

import sdr_rewards
import sdr_rewards.verl
from conftest import GOOD, OTHER, REF


def _child(queue, reward):
    try:
        out = {
            "parallel": sdr_rewards.get_parallelism(),
            "reward": reward(completions=[GOOD, OTHER] * 8, solution=[REF] * 16),
            "verl": sdr_rewards.verl.compute_score(None, GOOD, REF)["score"],
            "rebuilt_in_child": reward._pid == os.getpid(),
        }
        queue.put(out)
    except BaseException as e:  # report, do not hang the parent
        queue.put({"error": repr(e)})


def _in_fork(target, args, timeout, what):
    """Run `target(queue, *args)` in a forked child; its report, or a failure if it hangs."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=target, args=(queue, *args))
    proc.start()
    proc.join(timeout=timeout)
    if proc.is_alive():
        proc.kill()
        pytest.fail(f"the forked child hung{what} (deadlock)")
    out = queue.get(timeout=5)
    assert "error" not in out, out
    return out


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_scores_after_parent_used_the_pool():
    reward = sdr_rewards.SDRReward()
    # The parent starts its pool threads and the encoder first.
    parent = reward(completions=[GOOD, OTHER] * 8, solution=[REF] * 16)
    parent_verl = sdr_rewards.verl.compute_score(None, GOOD, REF)["score"]
    assert sdr_rewards.get_parallelism()
    out = _in_fork(_child, (reward,), 180, "")
    assert out["parallel"] is False  # the at-fork hook ran
    assert out["rebuilt_in_child"] is True
    assert out["reward"] == pytest.approx(parent, abs=1e-6)
    assert out["verl"] == pytest.approx(parent_verl, abs=1e-6)
    assert sdr_rewards.get_parallelism()  # the parent is unaffected


def _batch_child(queue, pairs):
    try:
        queue.put({"values": sdr_rewards.distance_batch(pairs, "hung-pen:alpha=0.1").tolist()})
    except BaseException as e:
        queue.put({"error": repr(e)})


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_runs_a_distance_batch():
    import numpy as np

    rng = np.random.default_rng(8)
    pairs = [(rng.normal(size=(3 + k % 5, 24)).astype(np.float32),
              rng.normal(size=(2 + k % 7, 24)).astype(np.float32)) for k in range(64)]
    parent = sdr_rewards.distance_batch(pairs, "hung-pen:alpha=0.1").tolist()  # the parent's pool runs
    out = _in_fork(_batch_child, (pairs,), 60, " in sdr_rewards.distance_batch")
    assert out["values"] == parent
