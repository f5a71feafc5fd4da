"""sdr_rewards.register_cost: a sentence cost written in Python reaches the reward, the
adapters and explain through its spec, with the orientation, caching and errors of a
built-in cost (the Python side of crates/sdr-reward/tests/registered_cost.rs)."""

import numpy as np
import pytest

import sdr_rewards
import sdr_rewards.verl
from test_encoder_hook import BagOfWords

REFERENCE = (
    "<think>The heart is normal in size. There is a right pleural effusion. No pneumothorax.</think>"
    "<answer>Right pleural effusion.</answer>"
)
REVERSED = REFERENCE.replace("There is a right pleural effusion.", "No pleural effusion.")
OTHER = "<think>Lungs are clear. No effusion.</think><answer>No acute disease.</answer>"


def negated(sentence):
    return any(w in ("no", "not", "without") for w in sentence.lower().strip(".").split())


class OneWay:
    """Adds `weight` where the row's sentence is negated and the column's is not:
    asymmetric, so the test sees which set is rows."""

    def __init__(self, weight="1"):
        self.weight = float(weight)
        if self.weight < 0:
            raise ValueError(f"weight must be >= 0, got {weight}")
        self.annotated = []

    def annotate(self, sentence):
        self.annotated.append(sentence)
        return negated(sentence)

    def apply(self, cost, a, b):
        assert cost.shape == (len(a), len(b)) and cost.dtype == np.float64
        return cost + self.weight * np.outer(np.array(a, float), 1.0 - np.array(b, float))


sdr_rewards.register_cost("oneway", OneWay, params="weight=W")


def chamfer(m):
    return (m.min(1).mean() + m.min(0).mean()) / 2


def expected(comp, ref, weight):
    enc = BagOfWords()
    c, r = sdr_rewards.parse_report(comp), sdr_rewards.parse_report(ref)
    out = {}
    for sec in ("findings", "impression"):
        a, b = np.asarray(enc(c[sec])), np.asarray(enc(r[sec]))
        a = a / np.linalg.norm(a, axis=1, keepdims=True)
        b = b / np.linalg.norm(b, axis=1, keepdims=True)
        m = (1 - a @ b.T) / 2
        m = m + weight * np.outer([negated(s) for s in c[sec]], [not negated(s) for s in r[sec]])
        out[sec] = 1 - chamfer(m)
    return out


def test_a_python_cost_scores_rows_as_the_completion_and_columns_as_the_reference():
    r = sdr_rewards.SDRReward(encoder=BagOfWords(), cost="oneway : weight = 0.5")
    assert r.cost == "oneway:weight=0.5"
    comps = [REFERENCE, REVERSED, OTHER]
    out = r.score(comps, references=[REFERENCE] * 3)
    for k, comp in enumerate(comps):
        want = expected(comp, REFERENCE, 0.5)
        assert out["findings"][k] == pytest.approx(want["findings"], abs=1e-6), k
        assert out["impression"][k] == pytest.approx(want["impression"], abs=1e-6), k
    # Swapping the roles changes the reward: the cost is asymmetric.
    swapped = r.score([REFERENCE], references=[REVERSED])
    assert swapped["findings"][0] != pytest.approx(out["findings"][1], abs=1e-3)
    assert swapped["findings"][0] == pytest.approx(expected(REFERENCE, REVERSED, 0.5)["findings"], abs=1e-6)


def test_with_the_built_in_encoder_a_scaled_cost_doubles_the_distance():
    # The model runs on the reward's thread pool, the Python cost is called from its
    # threads: a batch large enough to use them all.
    @sdr_rewards.register_cost("doubled")
    class Doubled:
        def apply(self, cost, a, b):
            return 2 * cost

    assert isinstance(Doubled, type)  # the decorator returns the class
    comps = [REFERENCE, REVERSED, OTHER] * 8
    plain = sdr_rewards.SDRReward().score(comps, references=[REFERENCE] * len(comps))
    r = sdr_rewards.SDRReward(cost="doubled")
    twice = r.score(comps, references=[REFERENCE] * len(comps))
    for sec in ("findings", "impression"):
        for p, t in zip(plain[sec], twice[sec]):
            assert t == pytest.approx(1 - 2 * (1 - p), abs=1e-12)
    assert r.last_stats()["conflicts"] > 0


def test_an_unchanged_cost_is_the_cosine_reward_bit_for_bit_and_sees_sentences():
    seen = []

    class Same:
        def apply(self, cost, a, b):
            seen.append((list(a), list(b)))
            return cost.copy()

    sdr_rewards.register_cost("same", Same)
    enc = BagOfWords()
    comps = [REVERSED, OTHER]
    plain = sdr_rewards.SDRReward(encoder=enc).score(comps, references=[REFERENCE] * 2)
    r = sdr_rewards.SDRReward(encoder=enc, cost="same")
    assert r.score(comps, references=[REFERENCE] * 2) == {**plain}
    assert r.last_stats()["conflicts"] == 0
    # Without annotate, a sentence's annotation is its text.
    ref = sdr_rewards.parse_report(REFERENCE)
    assert (sdr_rewards.parse_report(OTHER)["findings"], ref["findings"]) in seen


def test_each_distinct_sentence_of_a_call_is_annotated_once():
    made = []

    def factory(weight="1"):
        made.append(OneWay(weight))
        return made[-1]

    sdr_rewards.register_cost("counted", factory)
    r = sdr_rewards.SDRReward(encoder=BagOfWords(), cost="counted")
    r.score([REVERSED, REVERSED, REFERENCE], references=[REFERENCE] * 3)
    annotated = made[-1].annotated
    ref, rev = sdr_rewards.parse_report(REFERENCE), sdr_rewards.parse_report(REVERSED)
    distinct = {s for p in (ref, rev) for sec in ("findings", "impression") for s in p[sec]}
    assert sorted(annotated) == sorted(distinct)


def test_explain_and_verl_open_the_cost_by_its_spec():
    e = sdr_rewards.explain(REVERSED, REFERENCE, encoder=BagOfWords(), cost="oneway:weight=2")
    assert e["cost"] == "oneway:weight=2"
    want = expected(REVERSED, REFERENCE, 2.0)
    assert e["sections"]["findings"]["distance"] == pytest.approx(1 - want["findings"], abs=1e-6)
    reward = sdr_rewards.SDRReward(cost="oneway:weight=2")
    via_verl = sdr_rewards.verl.compute_score("iu", REVERSED, REFERENCE, cost="oneway:weight=2")
    assert via_verl["score"] == pytest.approx(reward.score([REVERSED], references=[REFERENCE])["reward"][0])
    assert via_verl["score"] < sdr_rewards.verl.compute_score("iu", REVERSED, REFERENCE)["score"]


def test_bad_registrations_and_specs_are_refused():
    with pytest.raises(ValueError, match="unknown cost `unregistered`.*must be registered"):
        sdr_rewards.SDRReward(cost="unregistered")
    for name in ("clinical", "cosine", "Caps", "with space", ""):
        with pytest.raises(ValueError):
            sdr_rewards.register_cost(name, OneWay)
    with pytest.raises(TypeError, match="callable"):
        sdr_rewards.register_cost("notcallable", 3)
    # The factory's own checks make a spec invalid, named by the call that failed.
    with pytest.raises(ValueError, match=r"OneWay\(weight=\"-1\"\): ValueError: weight must be >= 0"):
        sdr_rewards.SDRReward(cost="oneway:weight=-1")
    with pytest.raises(ValueError, match="unexpected keyword argument"):
        sdr_rewards.SDRReward(cost="oneway:rho=1")

    class NoApply:
        pass

    sdr_rewards.register_cost("noapply", NoApply)
    with pytest.raises(ValueError, match="without a callable apply"):
        sdr_rewards.SDRReward(cost="noapply")


def returning(value):
    class Returns:
        def apply(self, cost, a, b):
            return value(cost)

    return Returns


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("shape", lambda c: c[:, :1] if c.shape[1] > 1 else np.zeros((c.shape[0], 2)), "shape"),
        ("nan", lambda c: c * np.nan, "finite and >= 0"),
        ("negative", lambda c: c - 1, "finite and >= 0"),
        ("none", lambda c: None, "returned None"),
        ("text", lambda c: np.full(c.shape, "x"), "not a float array"),
    ],
)
def test_an_unusable_result_raises_value_error(name, value, message):
    sdr_rewards.register_cost(f"bad-{name}", returning(value))
    r = sdr_rewards.SDRReward(encoder=BagOfWords(), cost=f"bad-{name}")
    with pytest.raises(ValueError, match=message):
        r.score([REVERSED], references=[REFERENCE])


def test_an_exception_in_the_cost_is_chained_and_the_reward_recovers():
    class Raises:
        def __init__(self, where="apply"):
            self.where = where

        def annotate(self, sentence):
            if self.where == "annotate" and "pneumothorax" in sentence:
                raise KeyError("no facts for this sentence")
            return sentence

        def apply(self, cost, a, b):
            if self.where == "apply":
                return 1 / 0
            return cost

    sdr_rewards.register_cost("raises", Raises)
    r = sdr_rewards.SDRReward(encoder=BagOfWords(), cost="raises")
    with pytest.raises(RuntimeError, match="apply raised ZeroDivisionError") as e:
        r.score([REVERSED], references=[REFERENCE])
    assert isinstance(e.value.__cause__, ZeroDivisionError)
    r = sdr_rewards.SDRReward(encoder=BagOfWords(), cost="raises:where=annotate")
    for _ in range(2):  # the failing sentence's note is cached: it fails again, as clearly
        with pytest.raises(RuntimeError, match=r"annotate\(\"No pneumothorax.\"\) raised KeyError") as e:
            r.score([REVERSED], references=[REFERENCE])
        assert isinstance(e.value.__cause__, KeyError)
    # Registering the name again replaces the factory: new rewards open the new one.
    sdr_rewards.register_cost("raises", returning(lambda c: c))
    ok = sdr_rewards.SDRReward(encoder=BagOfWords(), cost="raises")
    assert ok.score([REVERSED], references=[REFERENCE])["format"] == [1.0]


def test_a_keyboard_interrupt_in_the_cost_passes_through():
    class Interrupted:
        def apply(self, cost, a, b):
            raise KeyboardInterrupt

    sdr_rewards.register_cost("interrupted", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        sdr_rewards.SDRReward(cost="interrupted").score([REVERSED], references=[REFERENCE])
