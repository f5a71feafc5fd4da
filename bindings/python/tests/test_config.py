"""One record of the reward's options: SDRReward, verl and OpenRLHF read it."""

import inspect

import pytest

import sdr_rewards
import sdr_rewards.openrlhf_reward
import sdr_rewards.verl
from sdr_rewards import config


def test_sdrreward_takes_every_option_with_the_recorded_default():
    params = inspect.signature(sdr_rewards.SDRReward.__init__).parameters
    for option in config.OPTIONS:
        assert option["name"] in params, option["name"]
        default = params[option["name"]].default
        recorded = option["default"]
        if recorded is None:
            assert default is None, option["name"]
        elif option["kind"] == "number":
            assert default == float(recorded), option["name"]
        elif option["kind"] == "flag":
            assert default is (recorded == "true"), option["name"]
        else:
            assert default == recorded, option["name"]


def test_verl_accepts_exactly_the_recorded_options():
    assert sdr_rewards.verl._CONFIG_KEYS == config.NAMES
    assert len(config.NAMES) == 16


def test_the_environment_sets_each_option_by_its_variable():
    env = {
        "SDR_METRIC": "hausdorff",
        "SDR_FORMAT_WEIGHT": "0.5",
        "SDR_EXACT": "yes",
        "SDR_MODEL": "/models/mpnet",
        "SDR_DISTINCT_SENTENCES": "0",
        "SDR_DEVICE": "",
    }
    got = config.from_env(env, defaults={"missing_section": "score"})
    assert got == {
        "metric": "hausdorff",
        "format_weight": 0.5,
        "exact": True,
        "model_dir": "/models/mpnet",
        "distinct_sentences": False,
        "missing_section": "score",
    }
    with pytest.raises(ValueError, match=r"^SDR_CACHE_MIB='lots': expected a number"):
        config.from_env({"SDR_CACHE_MIB": "lots"})
    with pytest.raises(ValueError, match=r"^SDR_EXACT='maybe'"):
        config.from_env({"SDR_EXACT": "maybe"})


def test_openrlhf_builds_its_reward_from_the_environment(monkeypatch):
    monkeypatch.setenv("SDR_METRIC", "hausdorff")
    monkeypatch.setenv("SDR_EXACT", "1")
    monkeypatch.setattr(sdr_rewards.openrlhf_reward, "_reward", None)
    reward = sdr_rewards.openrlhf_reward._get()
    assert (reward.metric, reward.exact, reward.missing_section) == ("hausdorff", True, "score")
    monkeypatch.setattr(sdr_rewards.openrlhf_reward, "_reward", None)
