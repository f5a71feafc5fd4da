"""sdr_rewards.Encoder (mirrors sdr-embed)."""

import pickle

import numpy as np
import pytest

import sdr_rewards


def test_embed_shape_norm_and_cache(encoder):
    texts = ["No acute cardiopulmonary abnormality.", "Heart size is normal.", "No acute cardiopulmonary abnormality."]
    encoder.clear_cache()
    e = encoder.embed(texts)
    assert e.dtype == np.float32 and e.shape == (3, encoder.dim) and encoder.dim == 768
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(e[0], e[2])
    info = encoder.cache_info()
    assert info["entries"] == 2
    again = encoder.embed(texts[:2])
    np.testing.assert_array_equal(again, e[:2])
    assert encoder.cache_info()["hits"] >= 2
    assert encoder.embed([]).shape == (0, 768)


def test_similar_sentences_are_closer(encoder):
    e = encoder.embed(["The lungs are clear.", "Lungs are clear.", "Large right pleural effusion."])
    assert sdr_rewards.distance(e[:1], e[1:2]) < sdr_rewards.distance(e[:1], e[2:3])


def test_pickle_reloads_from_the_same_folder(encoder):
    clone = pickle.loads(pickle.dumps(encoder))
    assert clone.model_dir == encoder.model_dir
    np.testing.assert_allclose(clone.embed(["Heart normal."]), encoder.embed(["Heart normal."]), atol=1e-6)


def test_missing_model_dir_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="fetch-model.sh"):
        sdr_rewards.Encoder(tmp_path / "nothing-here")


def test_bad_argument_types(encoder):
    with pytest.raises(TypeError):
        encoder.embed("a single string is not a list")
    with pytest.raises(TypeError):
        encoder.embed([1, 2])


def test_device_is_recorded_and_pickled(encoder):
    assert encoder.device == "cpu" and "device='cpu'" in repr(encoder).replace('"', "'")
    clone = pickle.loads(pickle.dumps(encoder))
    assert clone.device == "cpu"


def test_bad_or_missing_devices_are_value_errors(encoder):
    with pytest.raises(ValueError, match="expected cpu, cuda or cuda:N"):
        sdr_rewards.Encoder(encoder.model_dir, device="tpu")
    try:
        gpu = sdr_rewards.Encoder(encoder.model_dir, device="cuda")
    except ValueError as e:
        # A CPU build says how to get a CUDA one.
        assert "no CUDA back-end" in str(e) and "--features cuda" in str(e)
    except RuntimeError as e:
        # A CUDA build on a machine without a usable GPU: the device is named.
        assert "cuda:0" in str(e)
    else:
        assert gpu.device == "cuda:0"
        np.testing.assert_allclose(gpu.embed(["Heart normal."]), encoder.embed(["Heart normal."]), atol=1e-4)


SENTENCES = [
    "Heart size is normal.",
    "There is a small left pleural effusion with adjacent atelectasis.",
    "No acute cardiopulmonary abnormality.",
    "Degenerative changes of the thoracic spine.",
]


def test_bf16_vectors_are_within_cosine_0999_of_f32(encoder):
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bf16 = sdr_rewards.Encoder(encoder.model_dir, precision="bf16")
    fell_back = any(issubclass(w.category, RuntimeWarning) for w in caught)
    assert bf16.precision == "bf16" and encoder.precision == "f32"
    assert "precision='bf16'" in repr(bf16).replace('"', "'")
    a, b = encoder.embed(SENTENCES), bf16.embed(SENTENCES)
    cos = np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.min() >= 0.999, cos
    if not fell_back:
        # bf16 is in force on this CPU: the vectors are not f32's.
        assert not np.array_equal(a, b)
    clone = pickle.loads(pickle.dumps(bf16))
    assert clone.precision == "bf16"
    # The same batch (bf16 rounding depends on its padding), far closer than to f32.
    np.testing.assert_allclose(clone.embed(SENTENCES), b, atol=1e-5)


def test_a_bad_precision_is_one_value_error(encoder):
    for bad in ("fp8", "F16", ""):
        with pytest.raises(ValueError) as e:
            sdr_rewards.Encoder(encoder.model_dir, precision=bad)
        assert str(e.value) == f"precision '{bad}': expected 'f32' or 'bf16'"
