"""sdr_rewards.label / sdr_rewards.chexpert_f1 / sdr_rewards.metrics.chexpert_f1_bootstrap with labeler="judge": the
classifier trained on IU X-ray's human coding (SPEC §8a). Needs all-MiniLM-L6-v2 in the cache
(scripts/fetch-minilm.sh, which scripts/test.sh runs)."""

import pytest

import sdr_rewards
from sdr_rewards import metrics


def test_label_with_the_judge():
    l = sdr_rewards.label("Findings: Large right pleural effusion. No pneumothorax.\nImpression: Effusion.", labeler="judge")
    assert l["Pleural Effusion"] == 1
    assert l["Pneumothorax"] == 0
    assert l["No Finding"] is None
    normal = sdr_rewards.label("No pneumothorax. The heart is normal in size. The lungs are clear.", labeler="judge")
    assert normal["No Finding"] == 1
    assert all(v is None for v in sdr_rewards.label("", labeler="judge").values())
    # The rules stay the default, with their own values (uncertain = -1).
    assert sdr_rewards.label("Possible pneumonia.")["Pneumonia"] == -1


def test_f1_and_bootstrap_with_the_judge():
    refs = ["The heart is enlarged.", "Small left pleural effusion.", "The lungs are clear."]
    same = sdr_rewards.chexpert_f1(refs, refs, labeler="judge")
    assert same["micro_f1_14"] == 1.0
    worse = ["The lungs are clear."] * 3
    cis = metrics.chexpert_f1_bootstrap(worse, refs, refs, labeler="judge")
    assert set(cis) == {"macro_f1_14", "micro_f1_14", "macro_f1_5", "micro_f1_5"}


def test_bad_labeler_and_base_are_errors():
    with pytest.raises(ValueError, match="rules.*judge"):
        sdr_rewards.label("No effusion.", labeler="chexbert")
    with pytest.raises(FileNotFoundError, match="config.json missing"):
        sdr_rewards.label("No effusion.", labeler="judge", judge_base="/nonexistent-judge-base")
