"""A reference with a missing section: 'error' raises naming it; 'score' scores
the section that is there, counts the missing one, and never drops the sample."""

import csv
import importlib.util
from pathlib import Path

import pytest

import sdr_rewards
import sdr_rewards.verl
from conftest import GOOD, MALFORMED, OTHER, REF

F = "Heart size is normal. The lungs are clear. No pleural effusion."
I = "No acute cardiopulmonary abnormality."
NO_IMPRESSION = f"<think>{F}</think><answer></answer>"
NO_FINDINGS = f"FINDINGS:\n\nIMPRESSION: {I}"


def test_error_is_the_default_and_names_the_reference(reward):
    with pytest.raises(ValueError, match=r"^reference 1: section `impression` is empty"):
        reward.score([GOOD, GOOD], references=[REF, NO_IMPRESSION])
    with pytest.raises(ValueError, match="missing_section 'skip': expected 'error' or 'score'"):
        sdr_rewards.SDRReward(missing_section="skip")


def test_score_keeps_the_present_section_and_counts_the_missing_one(reward):
    policy = sdr_rewards.SDRReward(missing_section="score")
    refs = [REF, NO_IMPRESSION, NO_FINDINGS, {"findings": F, "impression": " "}, "no sections at all"]
    comps = [GOOD, GOOD, GOOD, OTHER, GOOD]
    out = policy.score(comps, references=refs)
    full = reward.score(comps, references=[REF] * len(comps))
    assert out["missing_sections"] == [0, 1, 1, 1, 2]
    # The complete reference is untouched, bit for bit.
    assert out["reward"][0] == full["reward"][0]
    # The present section's term is the one against the full reference; the missing one is 0.
    assert out["findings"][1] == full["findings"][1] and out["impression"][1] == 0.0
    assert out["reward"][1] == 1.0 + full["findings"][1]
    assert out["impression"][2] == full["impression"][2] and out["findings"][2] == 0.0
    assert out["reward"][2] == 1.0 + full["impression"][2]
    assert out["findings"][3] == full["findings"][3] and out["impression"][3] == 0.0
    # Nothing to compare: only the format term.
    assert out["reward"][4] == 1.0 and out["findings"][4] == out["impression"][4] == 0.0
    # A malformed completion still scores 0.
    assert policy.score([MALFORMED[1]], references=[NO_IMPRESSION])["reward"] == [0.0]


def test_score_policy_with_section_columns_and_logs():
    policy = sdr_rewards.SDRReward(missing_section="score", reference_columns=("f", "i"))
    logged = {}
    with pytest.warns(RuntimeWarning, match="1 reference section"):
        rewards = policy(
            completions=[GOOD, GOOD], f=[F, F], i=[I, ""], log_metric=lambda k, v: logged.__setitem__(k, v)
        )
    assert rewards[0] > rewards[1] > 1.0
    assert logged["sdr_chamfer/missing_sections"] == 1.0


def test_rejoined_sections_split_back_into_the_same_sentences():
    # The policy fills a missing section with the other one's sentences joined as
    # paragraphs; for every IU X-ray report they split back unchanged (joined by one
    # newline, a numbered impression without full stops merges into one sentence).
    path = Path(__file__).resolve().parents[3] / "data" / "iu-xray" / "indiana_reports.csv"
    n = 0
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for text in (row["findings"], row["impression"]):
                sentences = sdr_rewards.split_sentences(text)
                assert sdr_rewards.split_sentences("\n\n".join(sentences)) == sentences, text
                n += 1
    assert n > 7000


def test_verl_and_openrlhf_do_not_lose_the_sample(monkeypatch):
    out = sdr_rewards.verl.compute_score(None, GOOD, NO_IMPRESSION, missing_section="score")
    assert out["missing_sections"] == 1 and out["score"] > 1.0
    with pytest.raises(ValueError, match="section `impression` is empty"):
        sdr_rewards.verl.compute_score(None, GOOD, NO_IMPRESSION)
    # OpenRLHF turns an exception into reward None: its file scores by default.
    path = Path(sdr_rewards.__file__).with_name("openrlhf_reward.py")
    spec = importlib.util.spec_from_file_location("reward_func", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    got = mod.reward_func([GOOD, GOOD], ["", ""], [REF, NO_IMPRESSION])
    assert [float(x) for x in got["extra_logs"]["missing_sections"]] == [0.0, 1.0]
    assert float(got["rewards"][1]) > 1.0
    monkeypatch.setenv("SDR_MISSING_SECTION", "error")
    mod.set_encoder(None)
    with pytest.raises(ValueError, match="section `impression` is empty"):
        mod.reward_func([GOOD], [""], [NO_IMPRESSION])
