"""sdr_rewards.parse_report / sdr_rewards.split_sentences (mirrors sdr-core report/)."""

import sdr_rewards
from conftest import REF, REF_PLAIN


def test_template_and_plain_give_the_same_sections():
    t = sdr_rewards.parse_report(REF)
    p = sdr_rewards.parse_report(REF_PLAIN)
    assert t == {
        "format_valid": True,
        "findings": ["Heart size is normal.", "The lungs are clear.", "No pleural effusion."],
        "impression": ["No acute cardiopulmonary abnormality."],
    }
    assert p == t


def test_malformed_template():
    r = sdr_rewards.parse_report("<think>Heart normal.</think>")
    assert r["format_valid"] is False


def test_split_sentences_keeps_decimals_and_drops_enumerators():
    assert sdr_rewards.split_sentences("1. Nodule of 1.5 cm. 2. No effusion.") == ["Nodule of 1.5 cm.", "No effusion."]
    assert sdr_rewards.split_sentences("   ") == []
