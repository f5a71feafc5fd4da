"""Concurrent per-sample calls coalesce into batched calls with bit-identical rewards."""

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

import sdr_rewards
import sdr_rewards.verl
from sdr_rewards.coalesce import Coalescer
from conftest import GOOD, MALFORMED, OTHER, REF

F = "Heart size is normal. The lungs are clear. No pleural effusion."


def samples(n):
    """n distinct completions (so the encoder really runs), with their references."""
    comps, refs = [], []
    for k in range(n):
        base = [GOOD, OTHER, MALFORMED[2]][k % 3]
        comps.append(base.replace("</think>", f" Finding number {k}.</think>", 1))
        refs.append(REF if k % 2 else {"findings": f"{F} Item {k}.", "impression": "Normal."})
    return comps, refs


def test_threads_coalesce_bit_identical_to_one_batch():
    comps, refs = samples(96)
    batched = sdr_rewards.SDRReward(cache_mib=64).score(comps, references=refs)
    reward = sdr_rewards.SDRReward(cache_mib=64)
    calls = []

    def score(c, r):
        calls.append(len(c))
        return reward.score(c, references=r)

    co = Coalescer(score, window_s=0.02)
    barrier = threading.Barrier(32)

    def one(k):
        if k < 32:
            barrier.wait()
        return co.score([comps[k]], [refs[k]])

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(one, range(len(comps))))
    for key in ("reward", "format", "findings", "impression"):
        assert [r[key][0] for r in results] == batched[key], key
    assert sum(calls) == len(comps)
    assert len(calls) < len(comps) / 4 and max(calls) > 8, calls


def test_coroutines_coalesce_into_one_batch():
    comps, refs = samples(64)
    batched = sdr_rewards.SDRReward(cache_mib=64).score(comps, references=refs)
    reward = sdr_rewards.SDRReward(cache_mib=64)
    calls = []

    def score(c, r):
        calls.append(len(c))
        return reward.score(c, references=r)

    co = Coalescer(score, window_s=0.05)

    async def main():
        return await asyncio.gather(*(co.score_async([c], [r]) for c, r in zip(comps, refs)))

    results = asyncio.run(main())
    assert [r["reward"][0] for r in results] == batched["reward"]
    assert calls == [64]


def test_a_bad_sample_fails_only_its_own_call():
    reward = sdr_rewards.SDRReward()
    co = Coalescer(lambda c, r: reward.score(c, references=r), window_s=0.05)
    futures = [co.submit([GOOD], [REF]), co.submit([GOOD], ["<think>A.</think><answer></answer>"]), co.submit([OTHER], [REF])]
    assert futures[0].result()["reward"] == reward.score([GOOD], references=[REF])["reward"]
    with pytest.raises(ValueError, match="section `impression` is empty"):
        futures[1].result()
    assert futures[2].result()["reward"] == reward.score([OTHER], references=[REF])["reward"]
    with pytest.raises(ValueError, match="window_s must be a finite number"):
        Coalescer(lambda c, r: {}, window_s=-1)


def test_verl_async_and_sync_per_sample_calls_equal_the_batch():
    comps, refs = samples(48)
    batched = sdr_rewards.verl.compute_score_batch(solution_strs=comps, ground_truths=refs, cache_mib=32)

    async def main():
        return await asyncio.gather(
            *(sdr_rewards.verl.compute_score_async(None, c, r, None, cache_mib=16) for c, r in zip(comps, refs))
        )

    assert [d["score"] for d in asyncio.run(main())] == [d["score"] for d in batched]
    with ThreadPoolExecutor(16) as pool:
        sync = list(pool.map(lambda cr: sdr_rewards.verl.compute_score(None, cr[0], cr[1], cache_mib=8), zip(comps, refs)))
    assert sync == batched
    with pytest.raises(ValueError, match="coalesce_ms must be a finite number"):
        sdr_rewards.verl.compute_score(None, GOOD, REF, coalesce_ms=-1)
    # coalesce_ms=0: each call scored alone, the same numbers.
    assert sdr_rewards.verl.compute_score(None, comps[0], refs[0], cache_mib=32, coalesce_ms=0) == batched[0]
