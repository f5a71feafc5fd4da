"""sdr_rewards.explain and SDRReward(explain=...) (mirrors sdr_core::explain and `sdr explain`)."""

import importlib
import json
import logging
import pickle
import subprocess

import numpy as np
import pytest

import sdr_rewards
from conftest import GOOD, REF

FINDINGS = [
    "Borderline cardiomegaly.",
    "Midline sternotomy XXXX.",
    "Enlarged pulmonary arteries.",
    "Clear lungs.",
    "Inferior XXXX XXXX XXXX.",
]
IMPRESSION = "No acute pulmonary findings."
REFERENCE = "Findings: " + " ".join(FINDINGS) + "\nImpression: " + IMPRESSION


def template(findings, impression=IMPRESSION):
    return f"<think>{' '.join(findings)}</think><answer>{impression}</answer>"


def test_a_copy_is_all_matched_at_zero_cost():
    e = sdr_rewards.explain(template(FINDINGS), REFERENCE)
    assert set(e) == {"metric", "threshold", "format_valid", "reward", "sections"}
    assert e["metric"] == "chamfer" and e["format_valid"] is True
    assert e["reward"] == 3.0
    for name in ("findings", "impression"):
        s = e["sections"][name]
        assert s["missing"] == [] and s["unsupported"] == []
        for side in ("candidate", "reference"):
            for i, x in enumerate(s[side]):
                assert x["match"] == i and x["cost"] == 0.0 and x["nearest"] == i
    assert [x["sentence"] for x in e["sections"]["findings"]["reference"]] == FINDINGS


def test_dropped_and_added_findings():
    e = sdr_rewards.explain(template(FINDINGS[:1] + FINDINGS[2:]), REFERENCE)
    assert e["sections"]["findings"]["missing"] == [1]
    assert e["sections"]["findings"]["unsupported"] == []
    added = FINDINGS[:3] + ["There is a large left pleural effusion."] + FINDINGS[3:]
    e = sdr_rewards.explain(template(added), REFERENCE, metric="ot")
    f = e["sections"]["findings"]
    assert f["unsupported"] == [3] and f["missing"] == []
    assert all("mass" in x for x in f["candidate"])


def test_reward_and_distance_agree_with_the_reward_function():
    reward = sdr_rewards.SDRReward(metric="ot")
    e = sdr_rewards.explain(GOOD, REF, metric="ot")
    assert e["reward"] == pytest.approx(reward(completions=[GOOD], solution=[REF])[0], abs=1e-5)
    assert e["metric"] == "ot"


def test_malformed_candidate():
    e = sdr_rewards.explain("Heart size is normal.", REFERENCE)
    assert e["format_valid"] is False and e["reward"] == 0.0 and e["sections"] is None


def test_threshold_and_encoder_options(encoder):
    e = sdr_rewards.explain(template(FINDINGS[:1] + FINDINGS[2:]), REFERENCE, threshold=1.0)
    assert e["threshold"] == 1.0 and e["sections"]["findings"]["missing"] == []
    same = sdr_rewards.explain(GOOD, REF, encoder=encoder)
    assert same == sdr_rewards.explain(GOOD, REF)
    calls = []

    def bow(texts):
        # A bag-of-letters stand-in: the callable path, any (n, d) array.
        calls.append(len(texts))
        return [[t.lower().count(c) + 0.01 for c in "abcdefghijklmnopqrstuvwxyz"] for t in texts]

    e = sdr_rewards.explain(GOOD, REF, encoder=bow)
    assert calls and e["format_valid"] and len(e["sections"]["findings"]["candidate"]) == 2


def test_an_unaligned_embedding_array_is_read_as_numpy_reads_it(encoder):
    def embed(texts):
        arr = np.asarray(encoder.embed(texts), dtype=np.float32)
        raw = np.zeros(arr.nbytes + 1, dtype=np.uint8)
        raw[1:] = np.frombuffer(arr.tobytes(), dtype=np.uint8)
        out = np.frombuffer(raw.data, dtype=np.float32, count=arr.size, offset=1).reshape(arr.shape)
        assert not out.flags.aligned
        return out

    aligned = sdr_rewards.explain(GOOD, REF, encoder=lambda t: np.asarray(encoder.embed(t), dtype=np.float32))
    assert sdr_rewards.explain(GOOD, REF, encoder=embed) == aligned


def test_errors():
    with pytest.raises(ValueError, match="unknown metric"):
        sdr_rewards.explain(GOOD, REF, metric="chamfre")
    with pytest.raises(ValueError, match="threshold"):
        sdr_rewards.explain(GOOD, REF, threshold=1.5)
    with pytest.raises(ValueError, match="^reference: section `impression` is empty"):
        sdr_rewards.explain(GOOD, "Findings: Clear lungs.")
    with pytest.raises(ValueError, match="^reference: not a valid report: it uses the <think>/<answer> tags"):
        sdr_rewards.explain(GOOD, "<think>Clear lungs.</think><answer>Normal.</answer> trailing text.")
    with pytest.raises(TypeError):
        sdr_rewards.explain(GOOD, REF, threshold="0.2")
    with pytest.raises(TypeError):
        sdr_rewards.explain(None, REF)
    with pytest.raises(ValueError, match="shape"):
        sdr_rewards.explain(GOOD, REF, encoder=lambda texts: np.ones((1, 4), dtype=np.float32))


def test_encoder_failures_are_reported_as_sdr_reward_reports_them():
    def nan_last(texts):
        out = np.ones((len(texts), 4)) + np.arange(len(texts))[:, None]
        out[-1, 0] = np.nan
        return out

    # The encoder and the sentence named, not "set `b` row 0".
    with pytest.raises(ValueError, match=r"encoder nan_last: returned a non-finite value .* for text \d+ \(\"") as e:
        sdr_rewards.explain(GOOD, REF, encoder=nan_last)
    assert "set `" not in str(e.value)

    def broken(texts):
        raise KeyError("nope")

    with pytest.raises(RuntimeError, match="encoder broken: raised KeyError") as e:
        sdr_rewards.explain(GOOD, REF, encoder=broken)
    assert isinstance(e.value.__cause__, KeyError)
    with pytest.raises(ValueError, match=r"returned shape \[\d+\]"):
        sdr_rewards.explain(GOOD, REF, encoder=lambda texts: np.ones(len(texts)))
    # A list of rows, as SDRReward takes it.
    rows = lambda texts: (np.ones((len(texts), 4)) + np.arange(len(texts))[:, None]).tolist()
    assert sdr_rewards.explain(GOOD, REF, encoder=rows)["format_valid"] is True


def test_same_as_the_cli(sdr_bin):
    pairs = [(GOOD, REF), (template(FINDINGS[:2]), REFERENCE), ("junk", REF)]
    lines = "".join(json.dumps({"candidate": c, "reference": r}) + "\n" for c, r in pairs)
    for metric in ("chamfer", "pot:rho=0.5"):
        out = subprocess.run(
            [sdr_bin, "explain", "--metric", metric], input=lines, capture_output=True, text=True, check=True
        )
        cli = [json.loads(l) for l in out.stdout.splitlines()]
        py = [sdr_rewards.explain(c, r, metric=metric) for c, r in pairs]
        assert close(cli, py)


def close(a, b, tol=1e-6):
    """Equal structure and text; numbers within `tol` (the encoder is not
    batch-invariant in the last bits, and the CLI embeds a whole chunk at once)."""
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(close(a[k], b[k], tol) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(close(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, float) and not isinstance(a, bool):
        return isinstance(b, (int, float)) and abs(a - b) <= tol
    return a == b


def test_reward_logs_the_worst_completions():
    r = sdr_rewards.SDRReward(explain=2)
    assert r.explain == 2 and "explain=2" in repr(r)
    assert pickle.loads(pickle.dumps(r)).explain == 2
    comps = [template(FINDINGS), template(FINDINGS[:1] + FINDINGS[2:]), "junk", GOOD]
    refs = [REFERENCE, REFERENCE, REFERENCE, REF]
    extra = {}
    rewards = r(completions=comps, solution=refs, log_extra=lambda k, v: extra.__setitem__(k, v))
    assert set(extra) >= {"sdr_chamfer/missing", "sdr_chamfer/unsupported"}
    missing = extra["sdr_chamfer/missing"]
    assert len(missing) == len(comps)
    # The two lowest-reward well-formed completions are explained; the malformed one is not.
    worst = sorted((i for i in (0, 1, 3)), key=lambda i: rewards[i])[:2]
    assert [row["index"] for row in r.last_explanation] == worst
    assert missing[2] == "" and missing[0] == ""
    assert missing[1] == "F: Midline sternotomy XXXX."


def test_reward_explain_falls_back_to_logging(caplog):
    r = sdr_rewards.SDRReward(explain=True, reference_columns=("findings", "impression"))
    with caplog.at_level(logging.INFO, logger="sdr_rewards"):
        r(
            completions=[template(FINDINGS[:1] + FINDINGS[2:])],
            findings=[" ".join(FINDINGS)],
            impression=[IMPRESSION],
        )
    assert "Midline sternotomy XXXX." in caplog.text
    assert r.last_explanation[0]["missing"] == {"findings": ["Midline sternotomy XXXX."]}
    # A reference column of section dicts is explained as the report it stands for.
    r = sdr_rewards.SDRReward(explain=True)
    sections = {"findings": " ".join(FINDINGS), "impression": IMPRESSION}
    r(completions=[template(FINDINGS[:1] + FINDINGS[2:])], solution=[sections])
    assert r.last_explanation[0]["missing"] == {"findings": ["Midline sternotomy XXXX."]}
    assert sdr_rewards.SDRReward().explain == 0
    with pytest.raises(TypeError):
        sdr_rewards.SDRReward(explain="yes")


def test_explain_and_the_reward_use_the_reward_precision():
    # bf16 moves costs by ~1e-4 on CPUs with bf16 GEMMs; the structure stays.
    f32 = sdr_rewards.explain(template(FINDINGS[:1] + FINDINGS[2:]), REFERENCE)
    bf16 = sdr_rewards.explain(template(FINDINGS[:1] + FINDINGS[2:]), REFERENCE, precision="bf16")
    assert close(f32, bf16, tol=5e-3)
    assert sdr_rewards.explain.__kwdefaults__["precision"] == "f32"
    with pytest.raises(ValueError, match="precision"):
        sdr_rewards.explain(GOOD, REF, precision="fp8")
    # The reward's explanations come from an encoder at the reward's precision.
    explain_module = importlib.import_module("sdr_rewards.explain")
    explain_module._ENCODERS.clear()
    r = sdr_rewards.SDRReward(explain=1, precision="bf16")
    r(completions=[template(FINDINGS[:1] + FINDINGS[2:])], solution=[REFERENCE])
    assert r.last_explanation[0]["missing"] == {"findings": ["Midline sternotomy XXXX."]}
    keys = list(explain_module._ENCODERS)
    assert keys and all(k[2:] == ("cpu", "bf16") for k in keys), keys


# -- explain=True never fails the reward call (audit item 1) ---------------------

REF_NO_IMPRESSION = "<think>Heart size is normal. Small right pleural effusion.</think><answer></answer>"
GOOD_EFFUSION = "<think>Heart is normal. Small right effusion.</think><answer>Effusion.</answer>"


def test_explain_follows_the_missing_section_policy(caplog):
    plain = sdr_rewards.SDRReward(missing_section="score")
    r = sdr_rewards.SDRReward(missing_section="score", explain=True)
    columns = {}
    with caplog.at_level(logging.INFO, logger="sdr_rewards"):
        got = r(
            prompts=["p", "p"],
            completions=[GOOD_EFFUSION, GOOD],
            solution=[REF_NO_IMPRESSION, REF],
            log_extra=lambda k, v: columns.__setitem__(k, v),
        )
    assert got == plain(prompts=["p", "p"], completions=[GOOD_EFFUSION, GOOD], solution=[REF_NO_IMPRESSION, REF])
    rows = {row["index"]: row for row in r.last_explanation}
    assert "is empty" in rows[0]["note"] and rows[0]["missing"] == {} and rows[0]["unsupported"] == {}
    assert "note" not in rows[1]  # the other reference is explained as before
    assert columns["sdr_chamfer/missing"][0].startswith("not explained:")
    # Expected under the policy: not a warning.
    assert not [x for x in caplog.records if x.levelno >= logging.WARNING]


def test_explain_with_reference_columns_and_an_empty_value():
    r = sdr_rewards.SDRReward(missing_section="score", explain=True, reference_columns=("f", "i"))
    got = r(prompts=["p"], completions=[GOOD_EFFUSION], f=["Heart size is normal."], i=[""])
    assert len(got) == 1 and got[0] > 0
    assert "is empty" in r.last_explanation[0]["note"]


def test_a_failure_to_explain_is_a_warning_not_an_exception(monkeypatch, caplog):
    ex = importlib.import_module("sdr_rewards.explain")

    def broken(*a, **k):
        raise RuntimeError("encoder blew up")

    monkeypatch.setattr(ex, "explain", broken)
    r = sdr_rewards.SDRReward(explain=True)
    with caplog.at_level(logging.WARNING, logger="sdr_rewards"):
        got = r(prompts=["p"], completions=[GOOD], solution=[REF])
    assert got == sdr_rewards.SDRReward()(prompts=["p"], completions=[GOOD], solution=[REF])
    assert "encoder blew up" in r.last_explanation[0]["note"]
    assert any("encoder blew up" in x.getMessage() for x in caplog.records if x.levelno == logging.WARNING)

    # Even a failure outside the rows is only logged.
    monkeypatch.setattr(importlib.import_module("sdr_rewards.reward"), "log_worst", broken)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="sdr_rewards"):
        assert r(prompts=["p"], completions=[GOOD], solution=[REF]) == got
    assert r.last_explanation == []
    assert any("could not explain" in x.getMessage() for x in caplog.records)


def test_section_references_are_explained_as_scored_not_rebuilt_as_text():
    # A Findings text holding "Impression:" (MIMIC section splits do this) was rebuilt
    # as "Findings: ...\nImpression: ..." and split again at the wrong place.
    findings, impression = "Heart normal. Impression: see below.", "Small effusion."
    logged = {}
    r = sdr_rewards.SDRReward(explain=1, reference_columns=("f", "i"))
    r(prompts=["p"], completions=[GOOD_EFFUSION], f=[findings], i=[impression], log_extra=logged.__setitem__)
    e = sdr_rewards.explain(GOOD_EFFUSION, {"findings": findings, "impression": impression})
    assert [s["sentence"] for s in e["sections"]["impression"]["reference"]] == [impression]
    assert not any("see below" in x for x in r.last_explanation[0]["missing"].get("impression", []))
    assert set(r.last_explanation[0]["missing"].get("impression", [])) <= {impression}
    r2 = sdr_rewards.SDRReward(explain=1)
    r2(prompts=["p"], completions=[GOOD_EFFUSION], solution=[{"findings": findings, "impression": impression}])
    assert r2.last_explanation[0]["missing"] == r.last_explanation[0]["missing"]
    with pytest.raises(TypeError, match="'impression'"):
        sdr_rewards.explain(GOOD, {"findings": "x."})
