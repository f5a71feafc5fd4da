"""OpenRLHF's reward-function file."""

import importlib.util
from pathlib import Path

import pytest

import sdr_rewards
from conftest import GOOD, MALFORMED, REF


def load():
    # As OpenRLHF loads a --remote_rm_url ending in .py: by path, under the
    # name "reward_func", without registering a package around it.
    path = Path(sdr_rewards.__file__).with_name("openrlhf_reward.py")
    spec = importlib.util.spec_from_file_location("reward_func", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reward_func_strips_prompts(reward):
    mod = load()
    prompt = "<|im_start|>user\nIndication: cough.<|im_end|>\n<|im_start|>assistant\n"
    out = mod.reward_func([prompt + GOOD, prompt + MALFORMED[1], GOOD], [prompt, prompt, "not a prefix"], [REF] * 3)
    rewards = [float(x) for x in out["rewards"]]
    expected = reward.score([GOOD], references=[REF])["reward"][0]
    assert rewards[0] == pytest.approx(expected, abs=1e-5)
    assert rewards[1] == 0.0
    assert rewards[2] == pytest.approx(expected, abs=1e-5)  # no prefix: the whole query is parsed
    # missing_sections: the file's default policy, SDR_MISSING_SECTION=score, counts them.
    assert set(out["extra_logs"]) == {
        "format", "findings", "impression", "unconverged", "failed", "missing_sections", "prompt_mismatch"
    }
    assert [float(x) for x in out["scores"]] == rewards
    with pytest.raises(ValueError, match="2 queries but 1 prompts"):
        mod.reward_func([GOOD, GOOD], [""], [REF, REF])


def test_special_tokens_of_decoded_queries_do_not_zero_the_reward(reward):
    # OpenRLHF decodes queries with skip_special_tokens=False: every query ends
    # with the end-of-sequence token, and may start with a BOS token the prompt
    # lacks. Neither is the model's text.
    mod = load()
    prompt = "<|im_start|>user\nIndication: cough.<|im_end|>\n<|im_start|>assistant\n"
    expected = reward.score([GOOD], references=[REF])["reward"][0]
    queries = [
        prompt + GOOD + "<|im_end|>",
        prompt + GOOD + "<|im_end|>\n<|endoftext|>",
        "<s>" + prompt + GOOD + "</s>",
        "<|begin_of_text|>" + prompt + GOOD + "<|eot_id|>",
        prompt + GOOD + "<end_of_turn>\n<eos>",
        prompt + GOOD + " trailing words<|im_end|>",
    ]
    out = mod.reward_func(queries, [prompt] * len(queries), [REF] * len(queries))
    rewards = [float(x) for x in out["rewards"]]
    assert rewards[:5] == pytest.approx([expected] * 5, abs=1e-5)
    assert rewards[5] == 0.0  # the model's own text after </answer> still breaks the format
    assert mod.completion_from_query("<s>" + prompt + GOOD + "</s>", prompt) == GOOD


def test_sdr_precision_selects_the_precision(monkeypatch):
    monkeypatch.setenv("SDR_PRECISION", "bf16")
    assert load()._get().precision == "bf16"
    monkeypatch.delenv("SDR_PRECISION")
    assert load()._get().precision == "f32"
    monkeypatch.setenv("SDR_PRECISION", "fp8")
    with pytest.raises(ValueError, match="precision 'fp8': expected 'f32' or 'bf16'"):
        load()._get()


def test_sdr_device_selects_the_device(monkeypatch):
    monkeypatch.setenv("SDR_DEVICE", "cpu")
    assert load()._get().device == "cpu"
    monkeypatch.setenv("SDR_DEVICE", "tpu")
    with pytest.raises(ValueError, match="expected cpu, cuda or cuda:N"):
        load()._get()
    monkeypatch.setenv("SDR_DEVICE", "cuda")
    try:
        assert load()._get().device == "cuda"
    except ValueError as e:
        assert "no CUDA back-end" in str(e)


# -- audit fixes ---------------------------------------------------------------

CHAT_PROMPT = (
    "<|im_start|>system\nYou are a radiologist.<|im_end|>\n"
    "<|im_start|>user\nWrite the report.<|im_end|>\n<|im_start|>assistant\n"
)


def test_a_prompt_cut_from_the_left_is_found_by_its_end(reward, monkeypatch):
    # OpenRLHF 0.11 keeps the last max_prompt_length prompt tokens and decodes the
    # query from them, but passes the whole prompt string.
    import warnings

    monkeypatch.setenv("SDR_COALESCE_MS", "0")
    mod = load()
    expected = reward.score([GOOD], references=[REF])["reward"][0]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = mod.reward_func([CHAT_PROMPT + GOOD + "<|im_end|>"], [CHAT_PROMPT], [REF])
    assert not w and [float(x) for x in out["extra_logs"]["prompt_mismatch"]] == [0.0]
    cut = [CHAT_PROMPT[20:] + GOOD + "<|im_end|>", CHAT_PROMPT[60:] + GOOD + "<|im_end|>"]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = mod.reward_func(cut, [CHAT_PROMPT] * 2, [REF] * 2)
        again = mod.reward_func(cut, [CHAT_PROMPT] * 2, [REF] * 2)
    assert [float(x) for x in out["rewards"]] == pytest.approx([expected] * 2, abs=1e-5)
    assert [float(x) for x in out["extra_logs"]["prompt_mismatch"]] == [1.0, 1.0]
    messages = [str(x.message) for x in w if "does not start with its prompt" in str(x.message)]
    assert len(messages) == 1 and "longest end of the prompt" in messages[0]  # once per process
    assert [float(x) for x in again["rewards"]] == [float(x) for x in out["rewards"]]
    assert mod.completion_from_query(cut[0], CHAT_PROMPT) == GOOD
    # A prompt the tokenizer does not decode exactly (a normaliser changed a quote).
    fancy = CHAT_PROMPT.replace("the report", "the patient\u2019s report")
    plain = CHAT_PROMPT.replace("the report", "the patient's report")
    assert mod.completion_from_query(plain + GOOD + "<|im_end|>", fancy) == GOOD
    # Nothing of the prompt found: the whole query, with its own warning.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = mod.reward_func([GOOD], ["not a prefix of the query at all"], [REF])
    assert float(out["rewards"][0]) == pytest.approx(expected, abs=1e-5)
    assert any("whole query was scored" in str(x.message) for x in w)


def test_extra_logs_carry_clinical_unconverged_and_failed(monkeypatch):
    import warnings

    monkeypatch.setenv("SDR_COALESCE_MS", "0")
    monkeypatch.setenv("SDR_METRIC", "uot:eps=0.001,tau=100")
    monkeypatch.setenv("SDR_CLINICAL_WEIGHT", "0.5")
    ref = (
        "<think>Heart size is normal. There is a small right pleural effusion. No pneumothorax. "
        "Mild degenerative changes of the spine. Lungs are clear.</think><answer>Small right effusion.</answer>"
    )
    c = (
        "<think>Heart is normal. Small right effusion. Bones intact. Lungs clear. No acute findings. "
        "Mediastinum normal.</think><answer>Effusion.</answer>"
    )
    mod = load()
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        out = mod.reward_func([c], [""], [ref])
    logs = {k: [float(x) for x in v] for k, v in out["extra_logs"].items()}
    total = logs["format"][0] + logs["findings"][0] + logs["impression"][0] + 0.5 * logs["clinical"][0]
    assert float(out["rewards"][0]) == pytest.approx(total, abs=1e-5)
    assert logs["unconverged"][0] >= 1 and logs["failed"] == [0.0]
    assert any("unconverged" in str(x.message) for x in w)


def test_sdr_serve_url_is_read(monkeypatch):
    monkeypatch.setenv("SDR_SERVE_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("SDR_COALESCE_MS", "0")
    mod = load()
    with pytest.raises(ConnectionError, match="127.0.0.1:9"):
        mod.reward_func([GOOD], [""], [REF])
    assert mod._get() is None  # no reward, no encoder in this worker
    monkeypatch.setenv("SDR_FORMAT_WEIGHT", "2")
    with pytest.warns(RuntimeWarning, match=r"server's .*ignoring \['SDR_FORMAT_WEIGHT'\]"):
        with pytest.raises(ConnectionError):
            load().reward_func([GOOD], [""], [REF])


def test_misspelt_variables_warn_and_bad_values_are_named(monkeypatch):
    monkeypatch.setenv("SDR_METRICS", "hausdorff")
    monkeypatch.setenv("SDR_HOME", "/tmp")  # another tool's variable: no warning
    with pytest.warns(RuntimeWarning, match="SDR_METRICS.*did you mean SDR_METRIC") as w:
        assert load()._get().metric == "chamfer"
    assert not any("SDR_HOME" in str(x.message) for x in w)
    monkeypatch.delenv("SDR_METRICS")
    monkeypatch.setenv("SDR_COALESCE_MS", "abc")
    with pytest.raises(ValueError, match="SDR_COALESCE_MS='abc'"):
        load()._get()


def test_concurrent_first_calls_build_one_reward(monkeypatch):
    import sys
    import threading

    import numpy as np

    from sdr_rewards import reward as R

    made = []
    orig = R.SDRReward.__init__

    def counting(self, *a, **k):
        made.append(1)
        return orig(self, *a, **k)

    monkeypatch.setattr(R.SDRReward, "__init__", counting)
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(10):
            mod = load()
            mod.set_encoder(lambda s: np.ones((len(s), 4)) + np.arange(4))
            made.clear()
            barrier = threading.Barrier(8)
            got = []
            ts = [threading.Thread(target=lambda: (barrier.wait(), got.append(mod._get()))) for _ in range(8)]
            [t.start() for t in ts]
            [t.join() for t in ts]
            assert len(made) == 1 and len({id(g) for g in got}) == 1
    finally:
        sys.setswitchinterval(old)
