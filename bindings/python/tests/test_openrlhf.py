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
    assert set(out["extra_logs"]) == {"format", "findings", "impression", "missing_sections"}
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
