"""sdr_rewards.PruneScorer: the partial score of distance-guided pruning (SPEC §6)."""

import math

import pytest

import sdr_rewards

ROWS = [
    ("2", "Heart size normal. Lungs are clear.", "No acute disease."),
    ("3", "Large left pleural effusion.", "Left effusion."),
    ("4", "Mild cardiomegaly. No pneumothorax.", "Cardiomegaly."),
]


@pytest.fixture()
def corpus(tmp_path):
    src = tmp_path / "r.csv"
    lines = ["uid,findings,impression"] + [f'{u},"{f}","{i}"' for u, f, i in ROWS]
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "c.safetensors"
    sdr_rewards.build_corpus(src, out, "csv", encoder="hash-16")
    return out


def test_mean_over_the_sections_present(corpus):
    s = sdr_rewards.PruneScorer(corpus, "chamfer", "min", encoder="hash-16")
    assert s.policy == "chamfer@min"
    got = s.score(
        [
            (["Heart size normal.", "Lungs are clear."], ["No acute disease."]),
            (["Heart size normal.", "Lungs are clear."], []),
            ([], ["Left effusion."]),
            ([], []),
            (["Spine degenerative changes."], ["Unrelated words here."]),
        ]
    )
    scores = got["scores"]
    # Sentences of a corpus report: distance 0 (to the f32 Gram's ~1e-7) whichever
    # sections are present.
    assert scores[0] == pytest.approx(0.0, abs=1e-6)
    assert scores[1] == pytest.approx(0.0, abs=1e-6)
    assert scores[2] == pytest.approx(0.0, abs=1e-6)
    assert math.isinf(scores[3])
    assert scores[4] > 0.0
    assert got["evaluated"] > 0 and got["unconverged"] == 0 and got["failed"] == 0


def test_mean_of_the_two_sections(corpus):
    s = sdr_rewards.PruneScorer(corpus, encoder="hash-16")
    f, i = ["Spine degenerative changes."], ["Unrelated words here."]
    both, only_f, only_i = s.score([(f, i), (f, []), ([], i)])["scores"]
    assert both == pytest.approx((only_f + only_i) / 2)


def test_bad_arguments_raise_value_error(corpus, tmp_path):
    with pytest.raises(ValueError, match="metric"):
        sdr_rewards.PruneScorer(corpus, "nope", encoder="hash-16")
    # The spec named once, as sdr_rewards.distance names it.
    with pytest.raises(ValueError, match=r"^metric `pot:rho=2`: `rho` must be `adaptive` or in \(0, 1\], got 2$"):
        sdr_rewards.PruneScorer(corpus, "pot:rho=2", encoder="hash-16")
    with pytest.raises(ValueError):
        sdr_rewards.PruneScorer(corpus, "chamfer", "worst", encoder="hash-16")
    # A corpus built with another encoder is refused.
    with pytest.raises(ValueError, match="encoder"):
        sdr_rewards.PruneScorer(corpus, encoder="hash-8")
    with pytest.raises(FileNotFoundError):
        sdr_rewards.PruneScorer(tmp_path / "missing.safetensors", encoder="hash-16")


def test_a_bf16_corpus_wants_bf16_queries(tmp_path, encoder):
    import warnings

    src = tmp_path / "r.csv"
    lines = ["uid,findings,impression"] + [f'{u},"{f}","{i}"' for u, f, i in ROWS]
    src.write_text("\n".join(lines) + "\n")
    out = tmp_path / "bf16.safetensors"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        info = sdr_rewards.build_corpus(src, out, "csv", model_dir=encoder.model_dir, precision="bf16")
    if any(issubclass(w.category, RuntimeWarning) for w in caught):
        pytest.skip("no bf16 on this CPU: the corpus is f32")
    assert info["encoder"] == "all-mpnet-base-v2+bf16"
    partials = [(["Heart size normal."], ["No acute disease."])]
    s = sdr_rewards.PruneScorer(out, model_dir=encoder.model_dir, precision="bf16")
    assert math.isfinite(s.score(partials)["scores"][0])
    with pytest.raises(ValueError, match=r"embedded at bf16 .*--precision bf16"):
        sdr_rewards.PruneScorer(out, model_dir=encoder.model_dir)


def test_a_bad_precision_is_a_value_error(corpus, tmp_path):
    with pytest.raises(ValueError, match=r"^precision 'fp8': expected 'f32' or 'bf16'$"):
        sdr_rewards.PruneScorer(corpus, encoder="hash-16", precision="fp8")
    with pytest.raises(ValueError, match=r"^precision 'fp8': expected 'f32' or 'bf16'$"):
        sdr_rewards.build_corpus(tmp_path / "r.csv", tmp_path / "x.safetensors", "csv", precision="fp8")
