"""Bring your own encoder: SDRReward(encoder=callable), the verl and OpenRLHF adapters."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import sdr_rewards
import sdr_rewards.verl
from conftest import GOOD, MALFORMED, OTHER, REF

VOCAB = ["heart", "normal", "lungs", "clear", "effusion", "acute", "disease", "cardiomegaly", "pleural", "right"]


class BagOfWords:
    """A deterministic stand-in encoder: word counts over a small vocabulary plus
    a constant column (so no row is zero). Records what it was asked."""

    def __init__(self, kind="numpy"):
        self.calls = []
        self.kind = kind

    def __call__(self, sentences):
        self.calls.append(list(sentences))
        rows = []
        for s in sentences:
            words = [w.strip(".,").lower() for w in s.split()]
            rows.append([float(words.count(v)) for v in VOCAB] + [0.1])
        arr = np.asarray(rows, dtype=np.float64)
        if self.kind == "list":
            return arr.tolist()
        return arr


def expected_chamfer(a_sents, b_sents, enc):
    a, b = np.asarray(enc(a_sents)), np.asarray(enc(b_sents))
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    m = (1 - a @ b.T) / 2
    return (m.min(1).mean() + m.min(0).mean()) / 2


def test_reward_uses_the_callable():
    enc = BagOfWords()
    r = sdr_rewards.SDRReward(encoder=enc)
    out = r.score([GOOD, OTHER, MALFORMED[1]], references=[REF] * 3)
    assert len(enc.calls) == 2  # the probe, then one call for the batch
    ref = sdr_rewards.parse_report(REF)
    for k, comp in enumerate([GOOD, OTHER]):
        p = sdr_rewards.parse_report(comp)
        f = 1 - expected_chamfer(p["findings"], ref["findings"], BagOfWords())
        i = 1 - expected_chamfer(p["impression"], ref["impression"], BagOfWords())
        assert out["findings"][k] == pytest.approx(f, abs=1e-6)
        assert out["impression"][k] == pytest.approx(i, abs=1e-6)
        assert out["reward"][k] == pytest.approx(1 + f + i, abs=1e-6)
    assert out["reward"][2] == 0.0
    # Distinct sentences only, once each; every sentence is cached across calls.
    batch = enc.calls[1]
    assert len(batch) == len(set(batch))
    calls = len(enc.calls)
    r.score([GOOD], references=[REF])
    assert len(enc.calls) == calls  # nothing new to embed


def test_lists_and_torch_like_results():
    class TensorLike:
        def __init__(self, arr):
            self.arr = arr

        def detach(self):
            return self

        def cpu(self):
            return self

        def float(self):
            return self

        def __array__(self, dtype=None, copy=None):
            return self.arr if dtype is None else self.arr.astype(dtype)

    base = BagOfWords()
    a = sdr_rewards.SDRReward(encoder=BagOfWords("list")).score([GOOD], references=[REF])
    b = sdr_rewards.SDRReward(encoder=lambda s: TensorLike(base(s))).score([GOOD], references=[REF])
    c = sdr_rewards.SDRReward(encoder=BagOfWords()).score([GOOD], references=[REF])
    assert a["reward"] == pytest.approx(c["reward"], abs=1e-6)
    assert b["reward"] == pytest.approx(c["reward"], abs=1e-6)


def unaligned(arr):
    """`arr` as float32 in a buffer at an odd offset: C-contiguous, not aligned."""
    arr = np.ascontiguousarray(arr, dtype=np.float32)
    raw = np.zeros(arr.nbytes + 1, dtype=np.uint8)
    raw[1:] = np.frombuffer(arr.tobytes(), dtype=np.uint8)
    out = np.frombuffer(raw.data, dtype=np.float32, count=arr.size, offset=1).reshape(arr.shape)
    assert out.flags.c_contiguous and not out.flags.aligned
    return out


@pytest.mark.parametrize(
    "layout",
    [
        unaligned,
        lambda a: np.asfortranarray(a),
        lambda a: np.repeat(a, 2, axis=1)[:, ::2],  # a strided view
        lambda a: a.astype(np.float32),
        lambda a: a[::-1][::-1],  # negative strides
    ],
    ids=["unaligned", "fortran", "strided", "float32", "reversed"],
)
def test_any_array_layout_gives_the_layout_free_rewards(layout):
    base = BagOfWords()
    want = sdr_rewards.SDRReward(encoder=base).score([GOOD, OTHER], references=[REF, REF])
    got = sdr_rewards.SDRReward(encoder=lambda s: layout(BagOfWords()(s))).score([GOOD, OTHER], references=[REF, REF])
    assert got["reward"] == want["reward"]


def test_bad_encoders_give_clear_errors():
    with pytest.raises(TypeError, match="callable"):
        sdr_rewards.SDRReward(encoder=42)
    with pytest.raises(ValueError, match=r"returned shape \[2\]|returned shape \(2"):
        sdr_rewards.SDRReward(encoder=lambda s: np.ones(len(s) * 2)).score([GOOD], references=[REF])
    with pytest.raises(ValueError, match="non-finite"):
        sdr_rewards.SDRReward(encoder=lambda s: np.full((len(s), 3), np.nan)).score([GOOD], references=[REF])
    with pytest.raises(ValueError, match="not a float array"):
        sdr_rewards.SDRReward(encoder=lambda s: np.array([["x"] * 3] * len(s))).score([GOOD], references=[REF])

    # Complex and boolean outputs cast to float32 silently in numpy (the
    # imaginary part dropped, True read as 1): refused, here and in explain.
    for bad in (lambda s: np.ones((len(s), 3)) * (1 + 1j), lambda s: np.ones((len(s), 3), dtype=bool)):
        with pytest.raises(ValueError, match="dtype (complex128|bool), not a float array"):
            sdr_rewards.SDRReward(encoder=bad).score([GOOD], references=[REF])
        with pytest.raises(ValueError, match="dtype (complex128|bool), not a float array"):
            sdr_rewards.explain(GOOD, REF, encoder=bad)
    with pytest.raises(ValueError, match="returned None"):
        sdr_rewards.SDRReward(encoder=lambda s: None).score([GOOD], references=[REF])

    state = {"n": 0}

    def flaky(sentences):
        state["n"] += 1
        if state["n"] > 1:
            raise RuntimeError("GPU fell over")
        return np.ones((len(sentences), 4))

    with pytest.raises(RuntimeError, match="GPU fell over"):
        sdr_rewards.SDRReward(encoder=flaky).score([GOOD], references=[REF])


def test_encoder_exceptions_keep_their_cause_and_interrupts_pass_through():
    state = {"n": 0, "raise": None}

    def enc(sentences):
        state["n"] += 1
        if state["raise"] is not None:
            raise state["raise"]
        return np.ones((len(sentences), 4)) + np.arange(len(sentences))[:, None]

    # On the probe call and on a later one alike.
    for later in (False, True):
        r = sdr_rewards.SDRReward(encoder=enc)
        if later:
            r.score([GOOD], references=[REF])
        state["raise"] = MemoryError("CUDA out of memory")
        with pytest.raises(RuntimeError, match="encoder enc: raised .*CUDA out of memory") as e:
            r.score([OTHER], references=[REF])
        assert isinstance(e.value.__cause__, MemoryError)
        for interrupt in (KeyboardInterrupt(), SystemExit(3)):
            state["raise"] = interrupt
            with pytest.raises(type(interrupt)):
                r.score(["<think>A new sentence.</think><answer>And another.</answer>"], references=[REF])
        state["raise"] = None
    # Unusable results are ValueErrors on the first call and later ones.
    with pytest.raises(ValueError, match="non-finite"):
        sdr_rewards.SDRReward(encoder=lambda s: np.full((len(s), 3), np.nan)).score([GOOD], references=[REF])
    flip = {"n": 0}

    def nan_later(sentences):
        flip["n"] += 1
        return np.full((len(sentences), 3), np.nan if flip["n"] > 1 else 1.0)

    with pytest.raises(ValueError, match="non-finite"):
        sdr_rewards.SDRReward(encoder=nan_later).score([GOOD], references=[REF])


def test_a_zero_vector_names_the_sentence_and_is_not_cached():
    broken = {"on": True}

    def enc(sentences):
        x = np.random.default_rng(0).random((len(sentences), 8)) + 0.1
        for k, s in enumerate(sentences):
            if s == "Zzz." and broken["on"]:
                x[k] = 0.0
        return x

    r = sdr_rewards.SDRReward(encoder=enc)
    c = "<think>Heart size is normal. Zzz.</think><answer>No acute disease.</answer>"
    with pytest.raises(ValueError, match=r"encoder enc gave sentence \"Zzz.\" the zero vector"):
        r.score([c], references=[REF])
    broken["on"] = False
    assert r.score([c], references=[REF])["reward"][0] > 1.0


def test_module_attribute_strings(tmp_path, monkeypatch):
    (tmp_path / "my_encoders.py").write_text(
        "import numpy as np\n"
        "def enc(sentences):\n"
        "    return np.array([[len(s), 1.0 + s.count('e')] for s in sentences])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    r = sdr_rewards.SDRReward(encoder="my_encoders:enc")
    assert r.score([GOOD], references=[REF])["reward"][0] > 1.0
    with pytest.raises(ValueError, match="cannot import"):
        sdr_rewards.SDRReward(encoder="no_such_module_xyz:enc")
    # verl: reward_kwargs from a config file hold the string form.
    out = sdr_rewards.verl.compute_score(None, GOOD, REF, encoder="my_encoders:enc")
    assert out["score"] == pytest.approx(r.score([GOOD], references=[REF])["reward"][0], abs=1e-6)
    # A callable works too (verl called from Python).
    enc = BagOfWords()
    out = sdr_rewards.verl.compute_score(None, GOOD, REF, encoder=enc)
    assert enc.calls


def test_openrlhf_file_takes_an_encoder():
    path = Path(sdr_rewards.__file__).with_name("openrlhf_reward.py")
    spec = importlib.util.spec_from_file_location("reward_func", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    enc = BagOfWords()
    mod.set_encoder(enc)
    out = mod.reward_func([GOOD], [""], [REF])
    expected = sdr_rewards.SDRReward(encoder=BagOfWords()).score([GOOD], references=[REF])["reward"][0]
    assert float(out["rewards"][0]) == pytest.approx(expected, abs=1e-5)
    assert enc.calls
