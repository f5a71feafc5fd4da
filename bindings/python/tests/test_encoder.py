"""sdr.Encoder (mirrors sdr-embed)."""

import pickle

import numpy as np
import pytest

import sdr


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
    assert sdr.distance(e[:1], e[1:2]) < sdr.distance(e[:1], e[2:3])


def test_pickle_reloads_from_the_same_folder(encoder):
    clone = pickle.loads(pickle.dumps(encoder))
    assert clone.model_dir == encoder.model_dir
    np.testing.assert_allclose(clone.embed(["Heart normal."]), encoder.embed(["Heart normal."]), atol=1e-6)


def test_missing_model_dir_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="fetch-model.sh"):
        sdr.Encoder(tmp_path / "nothing-here")


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
        sdr.Encoder(encoder.model_dir, device="tpu")
    try:
        gpu = sdr.Encoder(encoder.model_dir, device="cuda")
    except ValueError as e:
        # A CPU build says how to get a CUDA one.
        assert "no CUDA back-end" in str(e) and "build-sdr.sh --cuda" in str(e)
    except RuntimeError as e:
        # A CUDA build on a machine without a usable GPU: the device is named.
        assert "cuda:0" in str(e)
    else:
        assert gpu.device == "cuda:0"
        np.testing.assert_allclose(gpu.embed(["Heart normal."]), encoder.embed(["Heart normal."]), atol=1e-4)
