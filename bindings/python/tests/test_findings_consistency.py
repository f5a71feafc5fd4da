"""sdr_rewards.findings_consistency and sdr_rewards.select_by_findings: an Impression checked
against its own Findings, and the best of K Impressions by it (SPEC §10a; mirrors
sdr_clinical::consistency's and sdr_corpus::findings' tests). Findings and Impression of IU X-ray
uid 267."""

import json
import subprocess

import pytest

import sdr_rewards

FINDINGS = (
    "Endotracheal tube and NG tube have been removed. Mild patchy bilateral airspace disease. "
    "There are small bilateral pleural effusions. No pneumothorax. Heart and mediastinum are "
    "stable with normal size heart. Degenerative changes in the spine."
)
REFERENCE = (
    "Small bilateral pleural effusions with a few scattered areas of patchy bilateral airspace disease."
)
CONTRADICTING = "No pleural effusion. Patchy bilateral airspace disease."


def test_a_contradiction_is_named_with_its_sentences():
    c = sdr_rewards.findings_consistency(CONTRADICTING, FINDINGS)
    assert [(x["finding"], x["kind"]) for x in c["contradictions"]] == [("Pleural Effusion", "polarity")]
    x = c["contradictions"][0]
    assert x["impression"] == {"sentence": 0, "text": "No pleural effusion.", "fact": "absent Pleural Effusion"}
    assert x["findings"]["sentence"] == 2
    assert x["findings"]["text"] == "There are small bilateral pleural effusions."
    assert c["contradiction"] == 1.0
    faithful = sdr_rewards.findings_consistency(REFERENCE, FINDINGS)
    assert faithful["contradictions"] == [] and faithful["unsupported_findings"] == []
    # It leaves out only the spine, which radiologists' Impressions rarely name.
    assert [x["finding"] for x in faithful["omissions"]] == ["Degenerative spine"]
    assert faithful["omissions"][0]["impression"] is None
    assert 0 < faithful["score"] < 0.05
    assert c["score"] > faithful["score"]
    assert (c["impression_sentences"], c["findings_sentences"]) == (2, 6)


def test_normal_findings_expect_nothing_and_unsupported_findings_cost():
    normal = "The lungs are clear. No pneumothorax or pleural effusion. Heart size is normal."
    r = sdr_rewards.findings_consistency("No acute cardiopulmonary abnormality.", normal)
    assert r["score"] == 0.0
    r = sdr_rewards.findings_consistency("Small hiatal hernia.", normal)
    assert [x["finding"] for x in r["unsupported_findings"]] == ["Hiatal hernia"]
    assert r["unsupported"] == 1.0 and r["score"] == 0.5
    # An omitted effusion costs more than an omitted device.
    effusion = sdr_rewards.findings_consistency("No acute disease.", "Small right pleural effusion.")
    device = sdr_rewards.findings_consistency("No acute disease.", "Pacemaker in place.")
    assert effusion["score"] > 4 * device["score"] > 0


def test_select_by_findings_picks_the_consistent_impression():
    cands = [CONTRADICTING, "No acute cardiopulmonary abnormality.", REFERENCE, ""]
    s = sdr_rewards.select_by_findings(cands, FINDINGS, encoder="hash-16")
    assert s["chosen"] == 2 and not s["all_malformed"]
    assert s["scores"][3] is None and s["checks"][3] is None and s["semantic"][3] is None
    assert s["scores"][0] > s["scores"][2] and s["scores"][1] > s["scores"][2]
    assert s["checks"][0]["contradictions"][0]["finding"] == "Pleural Effusion"
    # Ties on the score go to the Impression closer to the Findings.
    tie = sdr_rewards.select_by_findings(["Normal chest.", "No pneumothorax."], FINDINGS, encoder="hash-16")
    assert tie["scores"][0] == tie["scores"][1]
    assert tie["chosen"] == 1 and tie["semantic"][1] == 0.0
    assert sdr_rewards.select_by_findings(["", " "], FINDINGS, encoder="hash-16")["all_malformed"]


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="no candidate"):
        sdr_rewards.select_by_findings([], FINDINGS, encoder="hash-16")
    with pytest.raises(ValueError, match="findings"):
        sdr_rewards.select_by_findings(["A."], "  ", encoder="hash-16")
    with pytest.raises(ValueError):
        sdr_rewards.select_by_findings(["A."], FINDINGS, encoder="nope")


def test_the_cli_picks_and_scores_the_same(sdr_bin, tmp_path):
    cands = [CONTRADICTING, "No acute cardiopulmonary abnormality.", REFERENCE]
    p = tmp_path / "in.jsonl"
    p.write_text(json.dumps({"id": 1, "candidates": cands, "findings": FINDINGS}) + "\n")
    out = subprocess.run(
        [sdr_bin, "select", "--findings-consistency", "--encoder", "hash-16", "--quiet", str(p)],
        check=True, capture_output=True, text=True,
    ).stdout
    cli = json.loads(out)
    py = sdr_rewards.select_by_findings(cands, FINDINGS, encoder="hash-16")
    assert cli["chosen"] == py["chosen"]
    assert cli["scores"] == py["scores"]
    assert [b["semantic"] for b in cli["breakdown"]] == pytest.approx(py["semantic"], abs=1e-12)
