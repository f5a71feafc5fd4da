"""SDRReward(cost="clinical"), sdr_rewards.explain(cost=...), sdr_rewards.clinical_conflicts and the
adapters' cost option (mirrors sdr_reward's clinical-cost tests; SPEC §10)."""

import pickle

import pytest

import sdr_rewards

REFERENCE = (
    "<think>The heart is normal in size. Left basilar atelectasis. No pneumothorax.</think>"
    "<answer>No acute disease.</answer>"
)
SIDE = REFERENCE.replace("Left basilar", "Right basilar")
REVERSED = REFERENCE.replace("No pneumothorax.", "There is a pneumothorax.")
REPHRASED = REFERENCE.replace("No pneumothorax.", "Pneumothorax is not seen.")


def test_the_clinical_cost_separates_errors_from_a_rephrasing():
    cosine = sdr_rewards.SDRReward()
    clinical = sdr_rewards.SDRReward(cost="clinical")
    comps = [REFERENCE, REPHRASED, REVERSED, SIDE]
    refs = [REFERENCE] * 4
    c = cosine.score(comps, references=refs)
    k = clinical.score(comps, references=refs)
    # Identical sections: no conflict, the cosine reward exactly.
    assert k["reward"][0] == c["reward"][0] == 3.0
    # A rephrasing states the same facts: the cosine reward, bit for bit.
    assert k["reward"][1] == c["reward"][1]
    # A reversed finding and a wrong side: at least lambda / 2 under Chamfer.
    lam = float(clinical.cost.split("=")[1])
    for i in (2, 3):
        assert k["findings"][i] <= c["findings"][i] - lam / 2 + 1e-9, (i, k, c)
        assert k["reward"][i] < k["reward"][1]
    # The cosine reward barely sees the side swap: the rephrasing costs more.
    assert c["reward"][3] > c["reward"][1]
    assert clinical.last_stats()["conflicts"] == 2


def test_cost_is_part_of_the_configuration():
    r = sdr_rewards.SDRReward(cost="clinical:lambda=1")
    assert r.cost == "clinical:lambda=1"
    assert "cost='clinical:lambda=1'" in repr(r)
    assert "cost" not in repr(sdr_rewards.SDRReward())
    clone = pickle.loads(pickle.dumps(r))
    assert clone.cost == r.cost
    assert clone.score([SIDE], references=[REFERENCE]) == r.score([SIDE], references=[REFERENCE])
    assert sdr_rewards.SDRReward(cost="clinical").cost.startswith("clinical:lambda=")
    for bad, msg in [("euclid", "unknown cost"), ("clinical:lambda=-1", "lambda"), ("clinical:rho=1", "rho")]:
        with pytest.raises(ValueError, match=msg):
            sdr_rewards.SDRReward(cost=bad)
    with pytest.raises(TypeError, match="cost must be a string"):
        sdr_rewards.SDRReward(cost=1)


def test_logs_the_sections_with_a_conflict():
    r = sdr_rewards.SDRReward(cost="clinical", name="clin")
    logged = {}
    r(completions=[REVERSED, REFERENCE], solution=[REFERENCE] * 2, log_metric=logged.__setitem__)
    assert logged["clin/conflicts"] == 1.0
    plain = {}
    sdr_rewards.SDRReward(name="cos")(completions=[REVERSED], solution=[REFERENCE], log_metric=plain.__setitem__)
    assert "cos/conflicts" not in plain


def test_explain_names_the_conflict():
    e = sdr_rewards.explain(SIDE, REFERENCE, cost="clinical")
    assert e["cost"].startswith("clinical:lambda=")
    cand = e["sections"]["findings"]["candidate"]
    assert cand[1]["conflict"] == (
        "side: present Atelectasis (right) vs present Atelectasis (left) in sentence 1"
    )
    assert "conflict" not in cand[0]
    # Costs stay cosine (the nearest sentence and its cost are the cosine explanation's);
    # the partner is the metric's on the clinical cost: the side swap is no longer
    # paired with its mirror sentence, whose column carries a penalty too.
    plain = sdr_rewards.explain(SIDE, REFERENCE)
    assert "cost" not in plain
    p1 = plain["sections"]["findings"]["candidate"][1]
    assert (cand[1]["nearest"], cand[1]["nearest_cost"]) == (p1["nearest"], p1["nearest_cost"])
    assert p1["match"] == 1 and cand[1]["match"] != 1
    assert cand[1]["cost"] > p1["cost"]
    assert e["sections"]["findings"]["distance"] > plain["sections"]["findings"]["distance"] + 0.1
    reward = sdr_rewards.SDRReward(cost="clinical").score([SIDE], references=[REFERENCE])
    assert e["reward"] == pytest.approx(reward["reward"][0], abs=1e-9)
    with pytest.raises(ValueError, match="unknown cost"):
        sdr_rewards.explain(SIDE, REFERENCE, cost="nope")


def test_clinical_conflicts():
    c = sdr_rewards.clinical_conflicts(
        ["There is a pneumothorax.", "The heart is normal."], ["No pneumothorax.", "Small right effusion."]
    )
    assert c["a"][0]["kind"] == "polarity" and c["a"][0]["other"] == 0
    assert c["a"][1] is None
    assert c["b"][1]["kind"] == "unmatched" and c["b"][1]["other"] is None
    assert "Pleural Effusion" in c["b"][1]["text"]


def test_adapters_take_the_cost():
    from sdr_rewards import verl

    plain = verl.compute_score("iu", SIDE, REFERENCE)
    clin = verl.compute_score("iu", SIDE, REFERENCE, cost="clinical")
    assert clin["score"] < plain["score"] - 0.1
    assert clin["score"] == pytest.approx(sdr_rewards.SDRReward(cost="clinical").score([SIDE], references=[REFERENCE])["reward"][0])
