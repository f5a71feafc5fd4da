"""sdr_rewards.SDRReward as a TRL GRPOTrainer reward function (mirrors sdr-reward)."""

import math
import pickle

import numpy as np
import pytest

import sdr_rewards
from conftest import GOOD, MALFORMED, OTHER, REF, REF_PLAIN


def chat(text):
    return [{"role": "assistant", "content": text}]


def expected_reward(encoder, completion, reference, metric="chamfer", fw=1.0, sw=1.0):
    """The reward from sdr_rewards.Encoder + sdr_rewards.distance, composed here (SPEC §4)."""
    g, r = sdr_rewards.parse_report(completion), sdr_rewards.parse_report(reference)
    if not g["format_valid"]:
        return 0.0
    sem = 0.0
    for s in ("findings", "impression"):
        d = sdr_rewards.distance(encoder.embed(g[s]), encoder.embed(r[s]), metric)
        sem += 1 - min(d, 1.0)
    return fw + sw * sem


def test_values_match_encoder_plus_distance(reward, encoder):
    comps = [REF, GOOD, OTHER]
    got = reward(prompts=["p"] * 3, completions=comps, solution=[REF] * 3)
    # Exactly 3: a sentence's cost against itself is 0, not 0 up to rounding
    # (SPEC §3: every metric gives 0 for identical sets).
    assert got[0] == 3.0
    same = reward.score([REF], references=[REF])
    assert same["findings"] == [1.0] and same["impression"] == [1.0]
    for c, g in zip(comps, got):
        assert g == pytest.approx(expected_reward(encoder, c, REF), abs=1e-5)
    assert got[1] > got[2]  # the paraphrase beats the contradiction


@pytest.mark.parametrize("metric", ["ot", "sinkhorn:eps=0.1", "hung-pen:alpha=0.5", "gw:eps=0.1"])
def test_other_metrics_and_weights(encoder, metric):
    r = sdr_rewards.SDRReward(metric=metric, format_weight=0.5, semantic_weight=2.0)
    got = r.score([GOOD, OTHER], references=[REF, REF])
    for c, g in zip([GOOD, OTHER], got["reward"]):
        assert g == pytest.approx(expected_reward(encoder, c, REF, metric, 0.5, 2.0), abs=1e-5)
    assert r.__name__ == "sdr_" + metric.split(":")[0]


def test_chat_completions_equal_strings(reward):
    strings = reward(completions=[GOOD, OTHER], solution=[REF, REF])
    chats = reward(completions=[chat(GOOD), chat(OTHER)], solution=[REF, REF])
    parts = reward(
        completions=[[{"role": "assistant", "content": [{"type": "text", "text": GOOD}]}], chat(OTHER)],
        solution=[REF, REF],
    )
    assert strings == chats == parts
    assert sdr_rewards.completion_text([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]) == "y"


def test_malformed_completions_score_zero_without_exception(reward):
    out = reward.score(MALFORMED, references=[REF] * len(MALFORMED))
    assert out["reward"] == [0.0] * len(MALFORMED)
    assert out["format"] == [0.0] * len(MALFORMED)


def test_plain_reference_and_section_columns_agree(reward):
    a = reward(completions=[GOOD], solution=[REF])
    b = reward(completions=[GOOD], solution=[REF_PLAIN])
    split = sdr_rewards.SDRReward(reference_columns=("findings", "impression"))
    c = split(
        completions=[GOOD],
        findings=["Heart size is normal. The lungs are clear. No pleural effusion."],
        impression=["No acute cardiopulmonary abnormality."],
    )
    assert a == b
    assert a[0] == pytest.approx(c[0], abs=1e-6)


def test_logging_callbacks(reward):
    extra, metrics = {}, {}
    out = reward(
        prompts=["p", "p"],
        completions=[GOOD, MALFORMED[1]],
        completion_ids=[[1], [2]],
        solution=[REF, REF],
        trainer_state=None,
        log_extra=lambda k, v: extra.__setitem__(k, v),
        log_metric=lambda k, v: metrics.__setitem__(k, v),
    )
    assert set(extra) == {"sdr_chamfer/format", "sdr_chamfer/findings", "sdr_chamfer/impression"}
    assert extra["sdr_chamfer/format"] == [1.0, 0.0]
    assert metrics["sdr_chamfer/format"] == 0.5
    cache_keys = {"sdr_chamfer/cache_hit_rate", "sdr_chamfer/embedded", "sdr_chamfer/encode_seconds"}
    assert set(metrics) == set(extra) | {"sdr_chamfer/seconds"} | cache_keys
    assert 0.0 <= metrics["sdr_chamfer/cache_hit_rate"] <= 1.0
    assert 0.0 < metrics["sdr_chamfer/seconds"] < 60.0
    f, i = extra["sdr_chamfer/findings"], extra["sdr_chamfer/impression"]
    assert out[0] == pytest.approx(1 + f[0] + i[0], abs=1e-12)
    assert f[1] == i[1] == 0.0


def test_batch_is_deduplicated_and_every_sentence_cached():
    r = sdr_rewards.SDRReward()
    comps = [GOOD] * 8 + [OTHER] * 8
    r.score(comps, references=[REF] * 16)
    s = r.last_stats()
    # REF: 4 sentences, GOOD: 3, OTHER: 3 -> 10 distinct, embedded in one call.
    assert s["samples"] == 16 and s["distinct"] == 10 and s["embedded"] == 10 and s["cache_hits"] == 0
    assert s["sentences"] == 16 * 4 + 8 * 3 + 8 * 3
    first = r.score(comps, references=[REF] * 16)
    s = r.last_stats()
    assert s["cache_hits"] == 10 and s["embedded"] == 0 and s["hit_rate"] == 1.0
    assert s["encode_seconds"] == 0.0
    assert r.score(comps, references=[REF] * 16) == first


def test_exact_match_baseline():
    r = sdr_rewards.SDRReward(exact=True)
    same_words = "<think>HEART size is normal.   The lungs are clear.\nNo pleural effusion</think><answer>Something else.</answer>"
    out = r.score([same_words, MALFORMED[1]], references=[REF, REF])
    assert out["reward"] == [2.0, 0.0]
    assert (out["format"], out["findings"], out["impression"]) == ([1.0, 0.0], [1.0, 0.0], [0.0, 0.0])
    assert r.__name__ == "sdr_exact"


def test_references_may_mix_reports_and_section_dicts(reward):
    findings = "Heart size is normal. The lungs are clear. No pleural effusion."
    impression = "No acute cardiopulmonary abnormality."
    sections = {"findings": findings, "impression": impression, "source": "ignored"}
    mixed = reward.score([GOOD, OTHER, GOOD], references=[REF, sections, REF_PLAIN])
    apart = reward.score([OTHER], findings=[findings], impression=[impression])
    whole = reward.score([GOOD, GOOD], references=[REF, REF_PLAIN])
    assert mixed["reward"] == [whole["reward"][0], apart["reward"][0], whole["reward"][1]]
    # A dataset column of section dicts works through the TRL call too.
    assert reward(completions=[OTHER], solution=[sections]) == apart["reward"]
    # Bad ones are named by their index in the one list.
    with pytest.raises(ValueError, match=r"^reference 1: section `findings` is empty"):
        reward.score([GOOD] * 2, references=[REF, {"findings": " ", "impression": "x."}])
    with pytest.raises(ValueError, match=r"^reference 1: needs 'findings' and 'impression' keys, missing 'impression'"):
        reward.score([GOOD] * 2, references=[REF, {"findings": "x."}])
    with pytest.raises(TypeError, match=r"^reference 0 must be a string \(a report\) or a dict"):
        reward.score([GOOD], references=[3])
    with pytest.raises(TypeError, match=r"^reference 0: 'impression' must be a string, got int"):
        reward.score([GOOD], references=[{"findings": "x.", "impression": 3}])
    with pytest.raises(ValueError, match=r"references\[1\] is not valid Unicode text"):
        reward.score([GOOD] * 2, references=[REF, {"findings": "A \udcff.", "impression": "x."}])


def test_empty_reference_section_names_its_index(reward):
    refs = [REF, "<think>Heart normal.</think><answer></answer>"]
    with pytest.raises(ValueError, match=r"reference 1: section `impression` is empty"):
        reward(completions=[GOOD, GOOD], solution=refs)
    with pytest.raises(ValueError, match="reference 0: section `findings` is empty"):
        reward.score([GOOD], findings=["  "], impression=["Normal."])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"metric": "chamfre"}, "unknown metric `chamfre`"),
        ({"metric": "sinkhorn:eps=0"}, r"must be in \[0.001, 1000\]"),
        ({"format_weight": -1.0}, "format_weight must be a finite number >= 0 and <= 1e6, got -1"),
        ({"semantic_weight": float("nan")}, "semantic_weight must be a finite number >= 0"),
        ({"reference_columns": ("findings",)}, "pair of column names"),
    ],
)
def test_bad_configuration_raises_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        sdr_rewards.SDRReward(**kwargs)


def test_bad_types_and_missing_columns(reward):
    with pytest.raises(TypeError, match="format_weight must be a number"):
        sdr_rewards.SDRReward(format_weight="1")
    with pytest.raises(ValueError, match=r"\['solution'\] not among the dataset columns passed: \['answer'\]"):
        reward(completions=[GOOD], answer=[REF])
    with pytest.raises(TypeError, match=r"^reference 0 must be a string \(a report\) or a dict"):
        reward(completions=[GOOD], solution=[None])
    with pytest.raises(ValueError, match="references has 2 items, expected 1"):
        reward(completions=[GOOD], solution=[REF, REF])
    # A bad completion is named by its index, as a bad reference is.
    with pytest.raises(TypeError, match=r"^completions\[1\]: a completion must be a string"):
        reward.score([GOOD, None], references=[REF, REF])
    with pytest.raises(TypeError, match=r"^completions\[2\]: a chat message must be a dict with a 'content'"):
        reward.score([GOOD, GOOD, [{"role": "assistant"}]], references=[REF] * 3)


def test_pickle_round_trip(reward):
    clone = pickle.loads(pickle.dumps(reward))
    assert clone.config() == reward.config() and clone.__name__ == reward.__name__
    assert clone(completions=[GOOD], solution=[REF]) == reward(completions=[GOOD], solution=[REF])
    custom = sdr_rewards.SDRReward(metric="ot", exact=False, reference_columns=("f", "i"), name="mine")
    assert pickle.loads(pickle.dumps(custom)).config() == custom.config()


def test_rewards_are_finite_and_bounded(reward):
    out = reward.score([REF, GOOD, OTHER] + MALFORMED, references=[REF] * (3 + len(MALFORMED)))
    for k in ("reward", "format", "findings", "impression"):
        assert all(math.isfinite(x) for x in out[k])
    assert all(0.0 <= x <= 3.0 for x in out["reward"])


def test_distinct_sentences_removes_the_gain_of_repeats():
    once = "<think>The lungs are clear. Heart is enlarged.</think><answer>No acute disease.</answer>"
    many = (
        "<think>The lungs are clear. The lungs are clear. The lungs are clear. Heart is enlarged.</think>"
        "<answer>No acute disease.</answer>"
    )
    multiset = sdr_rewards.SDRReward().score([once, many], references=[REF, REF])
    assert multiset["findings"][1] != pytest.approx(multiset["findings"][0], abs=1e-6)
    as_set = sdr_rewards.SDRReward(distinct_sentences=True)
    out = as_set.score([once, many], references=[REF, REF])
    assert out["findings"][1] == pytest.approx(out["findings"][0], abs=1e-12)
    assert out["findings"][0] == pytest.approx(multiset["findings"][0], abs=1e-12)
    assert pickle.loads(pickle.dumps(as_set)).config()["distinct_sentences"] is True
    assert "distinct_sentences=True" in repr(as_set) and "distinct_sentences" not in repr(sdr_rewards.SDRReward())


def test_clinical_weight_adds_lambda_times_chexpert_f1(reward):
    contradicting = "<think>Heart size is normal. Large right pleural effusion.</think><answer>Pleural effusion.</answer>"
    comps = [REF, contradicting, "Heart size is normal."]
    refs = [REF] * 3
    base = reward.score(comps, references=refs)
    # lambda = 0 given explicitly: bit-identical, no clinical component.
    zero = sdr_rewards.SDRReward(clinical_weight=0)
    assert zero.score(comps, references=refs) == base
    assert "clinical_weight" not in repr(zero)
    lam = 0.5
    clin = sdr_rewards.SDRReward(clinical_weight=lam)
    out = clin.score(comps, references=refs)
    # Same labels as the reference: +lambda exactly; components unchanged.
    assert out["clinical"][0] == 1.0
    assert out["reward"][0] == base["reward"][0] + lam
    assert out["findings"] == base["findings"] and out["format"] == base["format"]
    # Contradicting labels: less than +lambda.
    assert out["clinical"][1] < 1.0
    assert out["reward"][1] < base["reward"][1] + lam
    # Malformed: 0, like the semantic terms.
    assert out["clinical"][2] == 0.0 and out["reward"][2] == 0.0
    logged = {}
    clin(completions=comps, solution=refs, log_extra=lambda k, v: logged.__setitem__(k, v))
    assert logged["sdr_chamfer/clinical"] == out["clinical"]
    assert "clinical_weight=0.5" in repr(clin)
    clone = pickle.loads(pickle.dumps(clin))
    assert clone.config()["clinical_weight"] == 0.5 and clone.score(comps, references=refs) == out
    with pytest.raises(ValueError, match="clinical_weight must be a finite number >= 0"):
        sdr_rewards.SDRReward(clinical_weight=-1)
    with pytest.raises(TypeError, match="clinical_weight must be a number"):
        sdr_rewards.SDRReward(clinical_weight="1")


def test_device_is_part_of_the_configuration():
    try:
        r = sdr_rewards.SDRReward(metric="chamfer", device="cuda:1")
    except ValueError as e:
        # A build without CUDA refuses it when the reward is made, saying how to get one.
        assert "device 'cuda:1'" in str(e) and "maturin build --release --features cuda" in str(e)
    else:
        assert r.config()["device"] == "cuda:1" and "device='cuda:1'" in repr(r)
        assert pickle.loads(pickle.dumps(r)).config()["device"] == "cuda:1"
    r = sdr_rewards.SDRReward(metric="chamfer", device="CPU")
    assert r.config()["device"] == "CPU" and pickle.loads(pickle.dumps(r)).config()["device"] == "CPU"
    assert "device" not in repr(sdr_rewards.SDRReward(metric="chamfer"))
    with pytest.raises(TypeError, match="device must be a string"):
        sdr_rewards.SDRReward(device=0)
    with pytest.raises(ValueError, match="expected cpu, cuda or cuda:N"):
        sdr_rewards.SDRReward(device="tpu").score([GOOD], references=[REF])


def test_precision_is_part_of_the_configuration():
    r = sdr_rewards.SDRReward(metric="chamfer", precision="bf16")
    assert r.config()["precision"] == "bf16" and "precision='bf16'" in repr(r)
    assert pickle.loads(pickle.dumps(r)).config()["precision"] == "bf16"
    assert "precision" not in repr(sdr_rewards.SDRReward(metric="chamfer"))
    # Checked when the reward is made, not at its first batch.
    for bad in ("fp8", "BF16", 16, None):
        with pytest.raises(ValueError) as e:
            sdr_rewards.SDRReward(precision=bad)
        assert str(e.value) == f"precision {bad!r}: expected 'f32' or 'bf16'"


def test_bf16_rewards_are_within_1e3_of_f32(reward):
    import warnings

    comps, refs = [GOOD, OTHER, REF], [REF] * 3
    bf16 = sdr_rewards.SDRReward(metric="chamfer", precision="bf16", cache_mib=16)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = bf16.score(comps, references=refs)
    fell_back = any(issubclass(w.category, RuntimeWarning) for w in caught)
    want = reward.score(comps, references=refs)
    for key in ("reward", "findings", "impression"):
        assert got[key] == pytest.approx(want[key], abs=1e-3), key
    # The sentence cache is keyed by the precision in force.
    assert reward.cache_info()["identity"].endswith("/f32")
    assert bf16.cache_info()["identity"].endswith("/f32" if fell_back else "bf16")


def test_a_single_string_and_a_device_typo_are_refused_early():
    r = sdr_rewards.SDRReward(encoder=lambda s: np.ones((len(s), 3)) + np.arange(3))
    with pytest.raises(TypeError, match="got a single str: wrap it in a list"):
        r.score(GOOD, references=[REF])
    with pytest.raises(ValueError, match="banana"):
        sdr_rewards.SDRReward(device="banana")


def test_a_lone_surrogate_names_its_text():
    r = sdr_rewards.SDRReward(encoder=lambda s: np.ones((len(s), 3)) + np.arange(3))
    with pytest.raises(ValueError, match=r"completions\[1\] is not valid Unicode text"):
        r.score([GOOD, "<think>A \udcff.</think><answer>B.</answer>"], references=[REF, REF])


def test_ctrl_c_stops_a_long_score_and_keeps_what_was_embedded(encoder):
    import os
    import signal
    import threading
    import time

    def batch(tag, n):
        return [
            f"<think>Finding {tag} {k}: a {k % 7 + 1} mm nodule in segment {k}.</think>"
            f"<answer>Impression {tag} {k}: follow up in {k % 12 + 1} months.</answer>"
            for k in range(n)
        ]

    r = sdr_rewards.SDRReward()
    t0 = time.perf_counter()
    r.score(batch("warm", 32), references=[REF] * 32)
    per_sample = (time.perf_counter() - t0) / 32
    # About 20 s of new sentences (2 per sample), interrupted after 0.3 s:
    # the call returns after the chunk of 256 sentences under way.
    n = max(300, int(20.0 / per_sample))
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        r.score(batch("long", n), references=[REF] * n)
    elapsed = time.perf_counter() - t0
    timer.join()
    assert elapsed < 0.5 * per_sample * n, (elapsed, per_sample * n)
    # The object still scores, and the chunks finished before the stop are
    # cached: scoring the same batch embeds only the rest.
    head = batch("long", 64)
    out = r.score(head, references=[REF] * 64)
    assert out["reward"] == pytest.approx(sdr_rewards.SDRReward().score(head, references=[REF] * 64)["reward"], abs=1e-6)
    assert r.last_stats()["embedded"] == 0


# -- audit fixes ---------------------------------------------------------------


@pytest.mark.parametrize("option", ["exact", "distinct_sentences"])
def test_string_flags_are_parsed_not_truth_tested(option):
    # bool("false") is True: verl's reward_kwargs can arrive as strings.
    for text, value in [("false", False), ("False", False), ("0", False), ("no", False),
                        ("true", True), ("1", True), ("YES", True), (False, False), (True, True),
                        (np.bool_(True), True), (1, True), (0, False)]:
        got = getattr(sdr_rewards.SDRReward(**{option: text}), option)
        assert got is value, (text, got)
    with pytest.raises(ValueError, match=f"{option}='maybe'"):
        sdr_rewards.SDRReward(**{option: "maybe"})
    for bad in (None, 2, 0.0, [True]):
        with pytest.raises(TypeError, match=f"{option} must be a bool"):
            sdr_rewards.SDRReward(**{option: bad})


def test_an_encoder_spec_pickles_as_its_name(tmp_path, monkeypatch):
    (tmp_path / "audit_enc_mod.py").write_text(
        "import numpy as np\n"
        "class Enc:\n"
        "    def __init__(self):\n"
        "        self.weights = np.ones((1024, 1024))  # 8 MiB a pickle must not carry\n"
        "    def __call__(self, sentences):\n"
        "        return np.array([[len(s) % 7 + 1.0, 1.0, float(len(s.split()))] for s in sentences])\n"
        "ENCODER = Enc()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import audit_enc_mod

    r = sdr_rewards.SDRReward(encoder="audit_enc_mod:ENCODER")
    assert r.encoder is audit_enc_mod.ENCODER  # resolved (a typo fails at construction)
    assert r.config()["encoder"] == "audit_enc_mod:ENCODER"
    blob = pickle.dumps(r)
    assert len(blob) < 100_000
    clone = pickle.loads(blob)
    assert clone.encoder is audit_enc_mod.ENCODER and clone.config() == r.config()
    assert clone.score([GOOD], references=[REF]) == r.score([GOOD], references=[REF])
    assert "audit_enc_mod:ENCODER" in repr(r)
    # A callable given directly is pickled by value, as before.
    direct = sdr_rewards.SDRReward(encoder=audit_enc_mod.ENCODER)
    assert direct.config()["encoder"] is audit_enc_mod.ENCODER


def test_small_validation_gaps(reward):
    # numbers.Real: NumPy float32 weights and cache sizes.
    r = sdr_rewards.SDRReward(format_weight=np.float32(0.5), clinical_weight=np.float32(0.25),
                              cache_mib=np.float32(16), cache_save_interval=np.int64(5))
    assert (r.format_weight, r.clinical_weight, r.cache_mib, r.cache_save_interval) == (0.5, 0.25, 16.0, 5.0)
    with pytest.raises(TypeError, match="format_weight must be a number"):
        sdr_rewards.SDRReward(format_weight=np.bool_(True))
    with pytest.raises(TypeError, match="name must be a string, got int"):
        sdr_rewards.SDRReward(name=123)
    with pytest.raises(TypeError, match="completions must be a list .* got None"):
        reward.score(None, references=[REF])
    # NumPy arrays of references, as of completions.
    refs = np.array([REF, REF_PLAIN], dtype=object)
    assert reward.score(np.array([GOOD, GOOD], dtype=object), references=refs) == reward.score(
        [GOOD, GOOD], references=[REF, REF_PLAIN]
    )
    split = reward.score([GOOD], findings=np.array(["Heart size is normal."]), impression=np.array(["Normal."]))
    assert split["reward"][0] > 0
    # A callable encoder with cache_path needs encoder_id: refused when the reward is made.
    with pytest.raises(ValueError, match="encoder_id"):
        sdr_rewards.SDRReward(encoder=lambda s: np.ones((len(s), 3)), cache_path="x.bin")
