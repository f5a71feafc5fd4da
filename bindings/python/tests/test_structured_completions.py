"""Completions as trainers hand them: TRL's parsed responses, reasoning fields,
content parts; an unreadable shape is an error naming it, never a silent 0."""

import pytest

import sdr_rewards
import sdr_rewards.verl
from conftest import GOOD, REF

FINDINGS = "The heart is normal in size. Lungs are clear."
ANSWER = "<answer>No acute disease.</answer>"
assert GOOD == f"<think>{FINDINGS}</think>{ANSWER}"


def parsed(**fields):
    """One completion as TRL's GRPOTrainer passes it after parse_response."""
    return [{"role": "assistant", **fields}]


@pytest.mark.parametrize("key", ["reasoning_content", "reasoning", "thinking"])
def test_reasoning_apart_from_content_scores_as_the_whole_report(reward, key):
    # TRL's qwen3 response schema cuts <think>...</think> into reasoning_content:
    # read as content alone, every reward and format term was 0.
    expected = reward.score([GOOD], references=[REF])
    got = reward.score([parsed(**{key: FINDINGS, "content": ANSWER})], references=[REF])
    assert got == expected
    assert got["format"] == [1.0] and got["reward"][0] > 2.0
    assert sdr_rewards.completion_text(parsed(**{key: FINDINGS, "content": ANSWER})) == GOOD


def test_every_form_of_the_same_report_gets_the_same_reward(reward):
    forms = [
        GOOD,
        {"role": "assistant", "content": GOOD},
        [{"role": "user", "content": "Write the report."}, {"role": "assistant", "content": GOOD}],
        parsed(reasoning_content=FINDINGS, content=ANSWER),
        parsed(content=[{"type": "thinking", "thinking": FINDINGS}, {"type": "text", "text": ANSWER}]),
        parsed(content=[{"type": "reasoning", "text": FINDINGS}, ANSWER]),
        # tool_calls and other keys TRL adds are not the report.
        parsed(reasoning_content=FINDINGS, content=ANSWER, tool_calls=[]),
    ]
    rewards = reward(completions=forms, solution=[REF] * len(forms))
    assert len(set(rewards)) == 1 and rewards[0] > 2.0


def test_no_reasoning_is_not_invented():
    # A model that wrote no <think> block: the content alone, which breaks the template.
    assert sdr_rewards.completion_text(parsed(content=ANSWER)) == ANSWER
    assert sdr_rewards.completion_text(parsed(reasoning_content=None, content=ANSWER)) == ANSWER
    assert sdr_rewards.completion_text(parsed(reasoning_content=FINDINGS)) == f"<think>{FINDINGS}</think>"


@pytest.mark.parametrize(
    "completion, needle",
    [
        (parsed(content=[{"type": "image", "url": "x"}]), r"content part 0 is not text or reasoning"),
        (parsed(content=5), r"content must be a string or a list of parts, got int"),
        (parsed(reasoning_content=3, content=ANSWER), r"'reasoning_content' must be a string, got int"),
        (parsed(reasoning="a", thinking="b", content=""), r"different reasoning"),
        (parsed(reasoning_content="a", content=[{"type": "thinking", "thinking": "b"}]), r"both in a field"),
        ([{"role": "assistant"}], r"got a dict with keys \['role'\]"),
        (["text", "more"], r"must hold chat message dicts, got a list of str"),
        (42, r"got int"),
        ([], r"got an empty list"),
    ],
)
def test_an_unreadable_shape_is_named(reward, completion, needle):
    with pytest.raises(TypeError, match=r"^completions\[0\]: .*" + needle):
        reward.score([completion], references=[REF])


def test_verl_takes_structured_solutions(reward):
    expected = reward.score([GOOD], references=[REF])["reward"][0]
    got = sdr_rewards.verl.compute_score(None, parsed(reasoning_content=FINDINGS, content=ANSWER), REF)
    assert got["score"] == expected
    with pytest.raises(TypeError, match=r"^solution_str of sample 0: .*got int"):
        sdr_rewards.verl.compute_score(None, 42, REF)
