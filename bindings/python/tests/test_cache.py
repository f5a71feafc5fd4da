"""The reward's sentence cache: every sentence cached, bounded, persisted, refused
when written by another encoder or damaged, visible in stats and TRL logs."""

import pickle

import numpy as np
import pytest

import sdr_rewards
from conftest import GOOD, OTHER, REF

VOCAB = ["heart", "normal", "lungs", "clear", "effusion", "acute", "disease", "cardiomegaly", "pleural", "right"]


class Counting:
    """A deterministic stand-in encoder that records what it embeds."""

    __name__ = "counting"

    def __init__(self):
        self.seen = []

    def __call__(self, sentences):
        self.seen.extend(sentences)
        rows = []
        for s in sentences:
            words = [w.strip(".,").lower() for w in s.split()]
            rows.append([float(words.count(v)) for v in VOCAB] + [0.1])
        return np.asarray(rows, dtype=np.float32)


def test_completion_sentences_are_embedded_once_per_run():
    enc = Counting()
    r = sdr_rewards.SDRReward(encoder=enc)
    r.cache_info()  # builds the scorer: one probe call learns the dimension
    probe = len(enc.seen)
    first = r.score([GOOD, OTHER] * 4, references=[REF] * 8)
    s = r.last_stats()
    assert s["embedded"] == s["distinct"] == 10 and s["hit_rate"] == 0.0
    assert len(enc.seen) - probe == 10
    again = r.score([OTHER, GOOD], references=[REF, REF])
    assert again["reward"] == [first["reward"][1], first["reward"][0]]
    s = r.last_stats()
    assert s["embedded"] == 0 and s["hit_rate"] == 1.0
    assert len(enc.seen) - probe == 10
    info = r.cache_info()
    assert info["entries"] == 10 and info["identity"] == "callable:counting"
    assert 0 < info["bytes"] <= info["max_bytes"]


def test_cache_off_embeds_again():
    enc = Counting()
    r = sdr_rewards.SDRReward(encoder=enc, cache_mib=0)
    r.score([GOOD], references=[REF])
    r.score([GOOD], references=[REF])
    assert r.last_stats()["embedded"] == 7
    assert r.cache_info()["entries"] == 0


def test_persisted_cache_starts_warm_and_other_encoders_are_refused(tmp_path):
    path = tmp_path / "cache.bin"
    r = sdr_rewards.SDRReward(encoder=Counting(), cache_path=path, encoder_id="counting-v1", cache_save_interval=0)
    first = r.score([GOOD, OTHER], references=[REF, REF])
    # Interval 0: saved after the batch.
    assert path.exists()
    assert r.save_cache() == 0  # nothing changed since

    warm_enc = Counting()
    warm = sdr_rewards.SDRReward(encoder=warm_enc, cache_path=path, encoder_id="counting-v1")
    assert warm.cache_info()["load"].endswith("loaded 10 sentences")
    assert warm.score([GOOD, OTHER], references=[REF, REF]) == first
    assert warm.last_stats()["embedded"] == 0

    before = path.read_bytes()
    with pytest.warns(RuntimeWarning, match="counting-v1"):
        other = sdr_rewards.SDRReward(encoder=Counting(), cache_path=path, encoder_id="counting-v2")
        other.cache_info()
    other.score([GOOD], references=[REF])
    assert other.last_stats()["embedded"] == 7  # started empty
    assert other.save_cache() == 0 and path.read_bytes() == before  # never overwritten
    assert other.cache_info()["writable"] is False


def test_damaged_cache_is_refused_then_replaced(tmp_path):
    path = tmp_path / "cache.bin"
    path.write_bytes(b"SDRC2" + b"\x00" * 100)
    with pytest.warns(RuntimeWarning, match="unusable sentence cache"):
        r = sdr_rewards.SDRReward(encoder=Counting(), cache_path=path, encoder_id="c")
        r.cache_info()
    r.score([GOOD], references=[REF])
    assert r.save_cache() == 7
    again = sdr_rewards.SDRReward(encoder=Counting(), cache_path=path, encoder_id="c")
    assert again.cache_info()["refused"] is False


def test_another_kind_of_file_is_refused_and_kept(tmp_path):
    path = tmp_path / "corpus.safetensors"
    path.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    before = path.read_bytes()
    r = sdr_rewards.SDRReward(encoder=Counting(), cache_path=path, encoder_id="c", cache_save_interval=0)
    with pytest.raises(ValueError, match="not an SDR sentence-cache file"):
        r.score([GOOD], references=[REF])
    assert path.read_bytes() == before


def test_bad_cache_options():
    with pytest.raises(ValueError, match="encoder_id"):
        sdr_rewards.SDRReward(encoder=Counting(), cache_path="x.bin").score([GOOD], references=[REF])
    with pytest.raises(ValueError, match="cache_mib"):
        sdr_rewards.SDRReward(cache_mib=-1)
    with pytest.raises(ValueError, match="cache_save_interval"):
        sdr_rewards.SDRReward(cache_save_interval=float("nan"))


def test_cache_options_pickle():
    r = sdr_rewards.SDRReward(encoder_id="x", cache_mib=12.5, cache_path="/tmp/x.bin")
    r2 = pickle.loads(pickle.dumps(r))
    assert (r2.cache_mib, r2.cache_path, r2.encoder_id) == (12.5, "/tmp/x.bin", "x")
    assert "cache_mib=12.5" in repr(r2)


def test_trl_logs_carry_the_cache_counters():
    logged = {}
    r = sdr_rewards.SDRReward(encoder=Counting())
    for _ in range(2):
        r(
            prompts=["p"] * 2,
            completions=[GOOD, OTHER],
            solution=[REF, REF],
            log_metric=lambda k, v: logged.__setitem__(k, v),
            log_extra=lambda k, v: None,
        )
    assert logged["sdr_chamfer/cache_hit_rate"] == 1.0
    assert logged["sdr_chamfer/embedded"] == 0.0
    assert logged["sdr_chamfer/encode_seconds"] == 0.0
