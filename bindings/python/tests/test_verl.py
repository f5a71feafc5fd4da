"""sdr_rewards.verl.compute_score: verl's custom reward function."""

from concurrent.futures import ThreadPoolExecutor

import pytest

import sdr_rewards
import sdr_rewards.verl
from conftest import GOOD, MALFORMED, OTHER, REF

KEYS = {"score", "format", "findings", "impression", "unconverged", "failed"}


def test_keys_on_every_sample():
    for s in [REF, GOOD, OTHER] + MALFORMED:
        out = sdr_rewards.verl.compute_score("iu_xray", s, REF, extra_info={"index": 0})
        assert set(out) == KEYS
        assert all(isinstance(v, float) for v in out.values())
    assert sdr_rewards.verl.compute_score("iu_xray", MALFORMED[1], REF)["score"] == 0.0


def test_matches_sdr_reward_and_accepts_section_dicts(reward):
    expected = reward.score([GOOD], references=[REF])["reward"][0]
    assert sdr_rewards.verl.compute_score(None, GOOD, REF)["score"] == pytest.approx(expected, abs=1e-6)
    gt = {"findings": "Heart size is normal. The lungs are clear. No pleural effusion.",
          "impression": "No acute cardiopulmonary abnormality."}
    assert sdr_rewards.verl.compute_score(None, GOOD, gt)["score"] == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="'impression'"):
        sdr_rewards.verl.compute_score(None, GOOD, {"findings": "A."})


def test_reward_kwargs_select_the_reward():
    a = sdr_rewards.verl.compute_score(None, GOOD, REF, metric="ot", format_weight=0.0)
    b = sdr_rewards.SDRReward(metric="ot", format_weight=0.0).score([GOOD], references=[REF])["reward"][0]
    assert a["score"] == pytest.approx(b, abs=1e-6)
    with pytest.raises(ValueError, match="unknown metric"):
        sdr_rewards.verl.compute_score(None, GOOD, REF, metric="nope")


def test_every_reward_option_reaches_the_reward_and_typos_warn():
    for key, value in (("clinical_weight", 1.0), ("distinct_sentences", True)):
        a = sdr_rewards.verl.compute_score(None, OTHER, REF, **{key: value})
        b = sdr_rewards.SDRReward(**{key: value}).score([OTHER], references=[REF])["reward"][0]
        assert a["score"] == pytest.approx(b, abs=1e-6), key
    plain = sdr_rewards.verl.compute_score(None, GOOD, REF)["score"]
    assert sdr_rewards.verl.compute_score(None, GOOD, REF, clinical_weight=1.0)["score"] > plain
    with pytest.warns(UserWarning, match=r"ignoring unknown keyword\(s\) \['metirc'\]"):
        sdr_rewards.verl.compute_score(None, OTHER, REF, metirc="ot")
    # What verl itself passes is not warned about.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sdr_rewards.verl.compute_score(data_source="iu", solution_str=OTHER, ground_truth=REF, extra_info={}, return_dict=True)


def test_precision_key_reaches_the_reward():
    a = sdr_rewards.verl.compute_score(None, GOOD, REF)["score"]
    b = sdr_rewards.verl.compute_score(None, GOOD, REF, precision="bf16")["score"]
    assert b == pytest.approx(a, abs=1e-3)
    assert any(r.precision == "bf16" for r in sdr_rewards.verl._rewards.values())
    with pytest.raises(ValueError, match="precision 'fp8'"):
        sdr_rewards.verl.compute_score(None, GOOD, REF, precision="fp8")


def test_device_key_reaches_the_reward():
    sdr_rewards.verl.compute_score(None, GOOD, REF, device="cpu")
    assert any(r.device == "cpu" for r in sdr_rewards.verl._rewards.values())
    with pytest.raises(ValueError, match="expected cpu, cuda or cuda:N"):
        sdr_rewards.verl.compute_score(None, GOOD, REF, device="tpu")
    try:
        sdr_rewards.verl.compute_score(None, GOOD, REF, device="cuda:0", encoder=lambda s: [[1.0, 0.0]] * len(s))
    except ValueError as e:
        assert "no CUDA back-end" in str(e)


def test_concurrent_calls_equal_serial_ones():
    samples = [GOOD, OTHER, REF, MALFORMED[2]] * 16
    serial = [sdr_rewards.verl.compute_score(None, s, REF)["score"] for s in samples]
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = list(pool.map(lambda s: sdr_rewards.verl.compute_score(None, s, REF)["score"], samples))
    assert threaded == pytest.approx(serial, abs=1e-6)


def test_loads_by_path_as_verl_does():
    """verl (trainer/ppo/reward.py, get_custom_reward_fn) loads the file by path
    under the name ``custom_module``, registers it in sys.modules and calls the
    named function with the config's reward_kwargs; a relative import in the file
    fails there with "attempted relative import with no known parent package"."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(sdr_rewards.verl.__file__)
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["custom_module"] = module
    try:
        spec.loader.exec_module(module)
        fn = getattr(module, "compute_score")
        reward_kwargs = {"metric": "hausdorff"}
        out = fn("iu_xray", GOOD, REF, extra_info={"index": 3}, **reward_kwargs)
    finally:
        del sys.modules["custom_module"]
    expected = sdr_rewards.SDRReward(metric="hausdorff").score([GOOD], references=[REF])["reward"][0]
    assert set(out) == KEYS
    assert out["score"] == pytest.approx(expected, abs=1e-6)


def test_batch_manager_calls_score_the_batch_at_once():
    """verl's batch reward manager calls the function once per batch with
    data_sources=, solution_strs=, ground_truths=, extra_infos= (numpy object
    arrays) and the reward_kwargs; the result is one dict per sample, equal to
    the per-sample calls, with text and section-dict ground truths mixed."""
    import numpy as np

    gt = {"findings": "Heart size is normal. The lungs are clear. No pleural effusion.",
          "impression": "No acute cardiopulmonary abnormality."}
    sols = [GOOD, OTHER, MALFORMED[1], REF, GOOD]
    truths = [REF, gt, REF, gt, REF]
    n = len(sols)
    per_sample = [sdr_rewards.verl.compute_score("iu_xray", s, t, metric="ot") for s, t in zip(sols, truths)]
    kwargs = dict(
        data_sources=np.array(["iu_xray"] * n, dtype=object),
        solution_strs=sols,
        ground_truths=np.array(truths, dtype=object),
        extra_infos=np.array([{"index": k} for k in range(n)], dtype=object),
        metric="ot",
    )
    for fn in (sdr_rewards.verl.compute_score, sdr_rewards.verl.compute_score_batch):
        got = fn(**kwargs)
        assert isinstance(got, list) and len(got) == n
        for a, b in zip(got, per_sample):
            assert set(a) == KEYS
            assert a == pytest.approx(b, abs=1e-6)
    assert sdr_rewards.verl.compute_score_batch(solution_strs=[], ground_truths=[]) == []
    with pytest.raises(ValueError, match="solution_strs has 2 samples but ground_truths has 1"):
        sdr_rewards.verl.compute_score_batch(solution_strs=[GOOD, GOOD], ground_truths=[REF])
    with pytest.raises(ValueError, match="'impression'"):
        sdr_rewards.verl.compute_score_batch(solution_strs=[GOOD], ground_truths=[{"findings": "A."}])
    with pytest.raises(TypeError, match="solution_str"):
        sdr_rewards.verl.compute_score("iu_xray")


def test_batch_manager_embeds_once_per_batch():
    calls = []

    def enc(sentences):
        import numpy as np

        calls.append(len(sentences))
        return np.array([[float(len(s)), 1.0, float(s.count("e"))] for s in sentences])

    sols = [GOOD, OTHER, REF] * 4
    sdr_rewards.verl.compute_score(solution_strs=sols, ground_truths=[REF] * len(sols), encoder=enc)
    assert len(calls) == 2  # the probe, then one call for the whole batch


def test_a_missing_ground_truth_is_named():
    with pytest.raises(TypeError, match="ground_truth of sample 0 must be the reference report"):
        sdr_rewards.verl.compute_score(None, GOOD, None)


def test_a_bad_ground_truth_in_a_mixed_batch_is_named_by_its_sample():
    # Texts and section dicts are scored in one call; the error names the sample.
    sections = {"findings": "Heart normal.", "impression": "No acute disease."}
    with pytest.raises(ValueError, match=r"^reference 2: section `findings` is empty"):
        sdr_rewards.verl.compute_score(solution_strs=[GOOD] * 3, ground_truths=[sections, sections, "no sections here"])
    with pytest.raises(TypeError, match=r"^reference 2: 'findings' must be a string, got NoneType"):
        sdr_rewards.verl.compute_score(
            solution_strs=[GOOD] * 3, ground_truths=[REF, sections, {"findings": None, "impression": "x."}]
        )
    with pytest.raises(ValueError, match=r"^reference 2: "):
        sdr_rewards.verl.compute_score(solution_strs=[GOOD] * 3, ground_truths=[sections, REF, "junk"])


# -- audit fixes ---------------------------------------------------------------


def test_string_flags_in_reward_kwargs_are_parsed():
    # A quoted YAML value, a JSON/CLI override: reward_kwargs can arrive as strings.
    plain = sdr_rewards.verl.compute_score("d", GOOD, REF, None)
    assert sdr_rewards.verl.compute_score("d", GOOD, REF, None, exact="false") == plain
    assert sdr_rewards.verl.compute_score("d", GOOD, REF, None, exact="true")["score"] == pytest.approx(
        sdr_rewards.SDRReward(exact=True).score([GOOD], references=[REF])["reward"][0]
    )
    with pytest.raises(ValueError, match="distinct_sentences='sometimes'"):
        sdr_rewards.verl.compute_score("d", GOOD, REF, None, distinct_sentences="sometimes")


def test_clinical_unconverged_and_failed_are_returned():
    import warnings

    ref = (
        "<think>Heart size is normal. There is a small right pleural effusion. No pneumothorax. "
        "Mild degenerative changes of the spine. Lungs are clear.</think><answer>Small right effusion.</answer>"
    )
    c = (
        "<think>Heart is normal. Small right effusion. Bones intact. Lungs clear. No acute findings. "
        "Mediastinum normal.</think><answer>Effusion.</answer>"
    )
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = sdr_rewards.verl.compute_score(
            "d", c, ref, {}, metric="uot:eps=0.001,tau=100", clinical_weight=0.5
        )
    assert set(out) == KEYS | {"clinical"}
    assert all(isinstance(v, float) for v in out.values())
    assert out["unconverged"] >= 1 and out["failed"] == 0.0
    assert out["score"] == pytest.approx(out["format"] + out["findings"] + out["impression"] + 0.5 * out["clinical"])
    assert any("unconverged" in str(x.message) for x in w)
    batch = sdr_rewards.verl.compute_score_batch(
        solution_strs=[c, GOOD], ground_truths=[ref, REF], metric="uot:eps=0.001,tau=100", clinical_weight=0.5
    )
    assert [set(b) for b in batch] == [KEYS | {"clinical"}] * 2
