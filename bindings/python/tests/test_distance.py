"""sdr.distance / sdr.distances / sdr.METRICS (mirrors sdr-core distance/)."""

import json
import subprocess

import numpy as np
import pytest

import sdr

CANONICAL = [
    "chamfer", "hausdorff", "ot", "sinkhorn:eps=0.01", "sinkhorn:eps=0.1", "sinkhorn:eps=0.5",
    "uot:eps=0.1,tau=0.5", "uot:eps=0.1,tau=1", "gw:eps=0.1", "hung-nn", "hung-pen:alpha=0.1",
    "hung-pen:alpha=0.5", "pot:rho=adaptive", "pot:rho=0.5", "pot:rho=0.8",
]


def pair(seed, n=4, m=6, d=16, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(dtype), rng.normal(size=(m, d)).astype(dtype)


def test_metrics_are_the_fifteen_canonical_specs():
    assert sdr.METRICS == CANONICAL


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_equal_the_cli(sdr_bin, dtype):
    pairs = [pair(s, n=2 + s % 4, m=1 + s % 5, dtype=dtype) for s in range(6)]
    lines = "".join(
        json.dumps({"a": a.astype(np.float64).tolist(), "b": b.astype(np.float64).tolist()}) + "\n"
        for a, b in pairs
    )
    out = subprocess.run([sdr_bin, "distances"], input=lines, capture_output=True, text=True, check=True)
    cli = [json.loads(l) for l in out.stdout.splitlines()]
    assert len(cli) == len(pairs)
    for (a, b), expected in zip(pairs, cli):
        got = sdr.distances(a, b)
        assert list(got) == CANONICAL
        for k in CANONICAL:
            assert got[k] == expected[k], k  # same inputs, same code path: bit-equal
            assert sdr.distance(a, b, k) == expected[k]


def test_metric_subset_and_defaults():
    a, b = pair(1)
    d = sdr.distances(a, b, ["sinkhorn", "pot"])
    assert list(d) == ["sinkhorn:eps=0.1", "pot:rho=adaptive"]
    assert d["sinkhorn:eps=0.1"] == sdr.distance(a, b, "sinkhorn:eps=0.1")


def test_properties():
    a, b = pair(2)
    for m in CANONICAL:
        assert sdr.distance(a, b, m) == pytest.approx(sdr.distance(b, a, m), abs=1e-9), m
    perm = a[::-1].copy()
    assert sdr.distance(perm, b) == pytest.approx(sdr.distance(a, b), abs=1e-15)
    for m in ["chamfer", "hausdorff", "ot", "hung-nn", "pot:rho=0.5"]:
        assert sdr.distance(a, a, m) == pytest.approx(0.0, abs=1e-12), m
    # Cosine: scale does not matter.
    assert sdr.distance(a * 7.5, b) == pytest.approx(sdr.distance(a, b), abs=1e-14)


def test_non_contiguous_input_equals_contiguous():
    a, b = pair(3, n=5, d=8)
    fortran = np.asfortranarray(a)
    assert not fortran.flags.c_contiguous
    assert sdr.distance(fortran, b) == sdr.distance(a, b)
    view = np.hstack([a, b[:5]])[:, ::2]  # strided columns
    assert not view.flags.c_contiguous
    assert sdr.distance(view, b[:, :8].copy()) == sdr.distance(view.copy(), b[:, :8].copy())


def test_type_errors():
    a, b = pair(4)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        sdr.distance(a.tolist(), b)
    with pytest.raises(TypeError, match="float32 or float64"):
        sdr.distance(a.astype(np.int64), b)
    with pytest.raises(TypeError, match="float32 or float64"):
        sdr.distance(a, b.astype(np.float16))


def test_value_errors():
    a, b = pair(5)
    with pytest.raises(ValueError, match="2-D"):
        sdr.distance(a[0], b)
    with pytest.raises(ValueError, match="2-D"):
        sdr.distance(a[None], b)
    with pytest.raises(ValueError, match="empty"):
        sdr.distance(np.zeros((0, 16)), b)
    with pytest.raises(ValueError, match="different dimensions"):
        sdr.distance(a, b[:, :8].copy())
    bad = a.copy()
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="row 1 is not finite"):
        sdr.distance(bad, b)
    bad = b.copy()
    bad[2] = 0
    with pytest.raises(ValueError, match="set `b` row 2 is the zero vector"):
        sdr.distance(a, bad)
    with pytest.raises(ValueError, match="unknown metric `chamfre`"):
        sdr.distance(a, b, "chamfre")
    with pytest.raises(ValueError, match="> 0"):
        sdr.distances(a, b, ["sinkhorn:eps=-1"])
