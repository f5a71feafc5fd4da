"""sdr_rewards.distance / sdr_rewards.distances / sdr_rewards.METRICS (mirrors sdr-core distance/)."""

import json
import subprocess

import numpy as np
import pytest

import sdr_rewards

CANONICAL = [
    "chamfer", "hausdorff", "ot", "sinkhorn:eps=0.01", "sinkhorn:eps=0.1", "sinkhorn:eps=0.5",
    "uot:eps=0.1,tau=0.5", "uot:eps=0.1,tau=1", "gw:eps=0.1", "hung-nn", "hung-pen:alpha=0.1",
    "hung-pen:alpha=0.5", "pot:rho=adaptive", "pot:rho=0.5", "pot:rho=0.8",
]


def pair(seed, n=4, m=6, d=16, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)).astype(dtype), rng.normal(size=(m, d)).astype(dtype)


def test_metrics_are_the_fifteen_canonical_specs():
    assert sdr_rewards.METRICS == CANONICAL


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
        got = sdr_rewards.distances(a, b)
        assert list(got) == CANONICAL
        for k in CANONICAL:
            assert got[k] == expected[k], k  # same inputs, same code path: bit-equal
            assert sdr_rewards.distance(a, b, k) == expected[k]


def test_metric_subset_and_defaults():
    a, b = pair(1)
    d = sdr_rewards.distances(a, b, ["sinkhorn", "pot"])
    assert list(d) == ["sinkhorn:eps=0.1", "pot:rho=adaptive"]
    assert d["sinkhorn:eps=0.1"] == sdr_rewards.distance(a, b, "sinkhorn:eps=0.1")


def test_properties():
    a, b = pair(2)
    for m in CANONICAL:
        assert sdr_rewards.distance(a, b, m) == pytest.approx(sdr_rewards.distance(b, a, m), abs=1e-9), m
    perm = a[::-1].copy()
    assert sdr_rewards.distance(perm, b) == pytest.approx(sdr_rewards.distance(a, b), abs=1e-15)
    for m in ["chamfer", "hausdorff", "ot", "hung-nn", "pot:rho=0.5"]:
        assert sdr_rewards.distance(a, a, m) == pytest.approx(0.0, abs=1e-12), m
    # Cosine: scale does not matter.
    assert sdr_rewards.distance(a * 7.5, b) == pytest.approx(sdr_rewards.distance(a, b), abs=1e-14)


def test_non_contiguous_input_equals_contiguous():
    a, b = pair(3, n=5, d=8)
    fortran = np.asfortranarray(a)
    assert not fortran.flags.c_contiguous
    assert sdr_rewards.distance(fortran, b) == sdr_rewards.distance(a, b)
    view = np.hstack([a, b[:5]])[:, ::2]  # strided columns
    assert not view.flags.c_contiguous
    assert sdr_rewards.distance(view, b[:, :8].copy()) == sdr_rewards.distance(view.copy(), b[:, :8].copy())


def test_type_errors():
    a, b = pair(4)
    with pytest.raises(TypeError, match="numpy.ndarray"):
        sdr_rewards.distance(a.tolist(), b)
    with pytest.raises(TypeError, match="float32 or float64"):
        sdr_rewards.distance(a.astype(np.int64), b)
    with pytest.raises(TypeError, match="float32 or float64"):
        sdr_rewards.distance(a, b.astype(np.float16))


def test_value_errors():
    a, b = pair(5)
    with pytest.raises(ValueError, match="2-D"):
        sdr_rewards.distance(a[0], b)
    with pytest.raises(ValueError, match="2-D"):
        sdr_rewards.distance(a[None], b)
    with pytest.raises(ValueError, match="empty"):
        sdr_rewards.distance(np.zeros((0, 16)), b)
    with pytest.raises(ValueError, match="different dimensions"):
        sdr_rewards.distance(a, b[:, :8].copy())
    bad = a.copy()
    bad[1, 3] = np.nan
    with pytest.raises(ValueError, match="row 1 is not finite"):
        sdr_rewards.distance(bad, b)
    bad = b.copy()
    bad[2] = 0
    with pytest.raises(ValueError, match="set `b` row 2 is the zero vector"):
        sdr_rewards.distance(a, bad)
    with pytest.raises(ValueError, match="unknown metric `chamfre`"):
        sdr_rewards.distance(a, b, "chamfre")
    with pytest.raises(ValueError, match=r"`eps` must be in \[0.001, 1000\], got -1"):
        sdr_rewards.distances(a, b, ["sinkhorn:eps=-1"])
    with pytest.raises(ValueError, match=r"`eps` must be in \[0.001, 1000\], got 1e-100"):
        sdr_rewards.distance(a, b, "gw:eps=1e-100")


# --- many pairs in one call -------------------------------------------------


def batch_pairs(dtype, count=12, d=16):
    """Pairs of mixed sizes; the first reference is shared by four samples."""
    rng = np.random.default_rng(11)
    ref = rng.normal(size=(5, d)).astype(dtype)
    out = [(rng.normal(size=(1 + k % 6, d)).astype(dtype), ref) for k in range(4)]
    for k in range(count - 4):
        out.append(pair(100 + k, n=1 + k % 5, m=2 + k % 7, d=d, dtype=dtype))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_equals_one_pair_at_a_time(dtype):
    pairs = batch_pairs(dtype)
    got = sdr_rewards.distances_batch(pairs)
    assert list(got) == CANONICAL
    for spec in CANONICAL:
        assert got[spec].dtype == np.float64 and got[spec].shape == (len(pairs),)
        # Same cost matrices, same solvers: bit-equal.
        assert got[spec].tolist() == [sdr_rewards.distance(a, b, spec) for a, b in pairs], spec
    one = sdr_rewards.distance_batch(pairs, "hung-pen:alpha=0.1")
    assert one.tolist() == got["hung-pen:alpha=0.1"].tolist()
    assert sdr_rewards.distance_batch(pairs).tolist() == got["chamfer"].tolist()


def test_batch_shares_a_repeated_set():
    # One reference against eight samples (the reward's shape): the batch
    # computes the reference's norms once; the values must not change.
    rng = np.random.default_rng(5)
    ref = rng.normal(size=(6, 32)).astype(np.float32)
    pairs = [(rng.normal(size=(3 + k, 32)).astype(np.float32), ref) for k in range(8)]
    for spec in ["chamfer", "hung-pen:alpha=0.5", "ot", "gw:eps=0.1"]:
        assert sdr_rewards.distance_batch(pairs, spec).tolist() == [sdr_rewards.distance(a, b, spec) for a, b in pairs]


def test_batch_mixes_dtypes_and_layouts():
    pairs = batch_pairs(np.float32, count=6)
    a, b = pairs[5]
    mixed = pairs[:5] + [(np.asfortranarray(a.astype(np.float64)), b)]
    strided = np.hstack([b, b])[:, ::2]
    assert not strided.flags.c_contiguous
    mixed.append((a, strided))
    # Tuples, lists and generators of pairs are all accepted.
    got = sdr_rewards.distance_batch((list(p) for p in mixed), "hausdorff")
    assert got.tolist() == [sdr_rewards.distance(x, y, "hausdorff") for x, y in mixed]
    # All float32, one of them in Fortran order: read as rows, not columns.
    f32 = pairs[:5] + [(np.asfortranarray(a), b)]
    assert sdr_rewards.distance_batch(f32, "ot").tolist() == [sdr_rewards.distance(x, y, "ot") for x, y in f32]


def test_batch_of_nothing_is_empty():
    assert sdr_rewards.distance_batch([]).shape == (0,)
    assert sdr_rewards.distances_batch([], ["ot"])["ot"].shape == (0,)


def test_batch_errors_name_the_pair():
    pairs = batch_pairs(np.float64, count=6)
    bad = [list(p) for p in pairs]
    nan = bad[3][1].copy()
    nan[1, 2] = np.nan
    bad[3][1] = nan
    zero = bad[4][0].copy()
    zero[0] = 0
    bad[4][0] = zero
    with pytest.raises(ValueError, match=r"^pairs\[3\]: set `b` row 1 is not finite \(NaN"):
        sdr_rewards.distance_batch(bad)
    with pytest.raises(ValueError, match=r"^pairs\[3\]: set `a` row 0 is the zero vector"):
        sdr_rewards.distance_batch(bad[:3] + bad[4:])
    a, b = pairs[0]
    with pytest.raises(ValueError, match=r"pairs\[1\]: sets have different dimensions: a is 16-d, b is 8-d"):
        sdr_rewards.distance_batch([(a, b), (a, b[:, :8].copy())])
    with pytest.raises(ValueError, match=r"pairs\[1\]\[0\] is empty"):
        sdr_rewards.distance_batch([(a, b), (np.zeros((0, 16)), b)])
    with pytest.raises(ValueError, match=r"pairs\[0\] must be an \(a, b\) pair of arrays, got 3 items"):
        sdr_rewards.distance_batch([(a, b, a)])
    with pytest.raises(ValueError, match=r"pairs\[1\] must be an \(a, b\) pair of arrays, got 1 items"):
        sdr_rewards.distance_batch([[a, b], [a]])
    assert sdr_rewards.distance_batch([[a, b], iter((a, b))]).tolist() == sdr_rewards.distance_batch([(a, b)] * 2).tolist()
    with pytest.raises(TypeError, match=r"pairs\[1\]\[1\] must have dtype float32 or float64, got int64"):
        sdr_rewards.distance_batch([(a, b), (a, b.astype(np.int64))])
    with pytest.raises(TypeError, match=r"pairs\[0\]\[0\] must be a numpy.ndarray"):
        sdr_rewards.distance_batch([(a.tolist(), b)])
    with pytest.raises(ValueError, match=r"pairs\[0\]\[1\] must be a 2-D array"):
        sdr_rewards.distance_batch([(a, b[0])])
    with pytest.raises(ValueError, match="unknown metric `chamfre`"):
        sdr_rewards.distance_batch([(a, b)], "chamfre")


def test_converged_batch_raises_no_warning():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sdr_rewards.distances_batch(batch_pairs(np.float64), ["sinkhorn:eps=0.01", "gw:eps=0.1"])


def test_odd_strides_and_offsets_are_read_as_numpy_reads_them():
    a, b = pair(21, n=4, m=3, d=6)
    # A float64 field of a structured array: rows 36 bytes apart, not a multiple of 8.
    rec = np.zeros((4, 6), dtype=[("x", "<f8"), ("pad", "<i4")])
    rec["x"] = a
    field = rec["x"]
    assert field.strides[1] % 8 != 0 or field.strides[0] % 8 != 0
    want = sdr_rewards.distance(a, b, "ot")
    assert sdr_rewards.distance(field, b, "ot") == want
    assert sdr_rewards.distance_batch([(field, b)], "ot").tolist() == [want]
    # float32 rows in a buffer at an odd offset (not aligned for float32).
    raw = np.zeros(1 + a.size * 4, dtype=np.uint8)
    odd = np.frombuffer(raw.data, dtype=np.float32, count=a.size, offset=1).reshape(a.shape)
    assert not odd.flags.aligned
    raw[1:] = np.frombuffer(a.astype(np.float32).tobytes(), dtype=np.uint8)
    want32 = sdr_rewards.distance(a.astype(np.float32), b.astype(np.float32), "chamfer")
    assert sdr_rewards.distance(odd, b.astype(np.float32), "chamfer") == want32
    assert sdr_rewards.distance_batch([(odd, b.astype(np.float32))], "chamfer").tolist() == [want32]


def test_an_absurd_length_is_only_a_hint():
    with pytest.raises(TypeError, match=r"pairs\[0\] must be an \(a, b\) pair|not iterable"):
        sdr_rewards.distance_batch(range(10**12))


def test_one_metric_as_a_string_and_bad_items_name_their_pair():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(3, 8)), rng.normal(size=(4, 8))
    assert sdr_rewards.distances(a, b, "ot") == sdr_rewards.distances(a, b, ["ot"])
    assert list(sdr_rewards.distances_batch([(a, b)], "chamfer")) == ["chamfer"]
    with pytest.raises(TypeError, match="metrics must be a list of metric specs"):
        sdr_rewards.distances(a, b, 42)
    with pytest.raises(TypeError, match=r"^pairs\[1\] must be an \(a, b\) pair of arrays, got NoneType"):
        sdr_rewards.distance_batch([(a, b), None])


def test_ctrl_c_stops_a_long_batch():
    import os
    import signal
    import threading
    import time

    rng = np.random.default_rng(5)
    sets = [rng.normal(size=(8, 16)) for _ in range(64)]
    pairs = [(sets[k % 64], sets[(k * 7 + 1) % 64]) for k in range(4_000)]
    t0 = time.perf_counter()
    sdr_rewards.distance_batch(pairs, "gw")
    per_pair = (time.perf_counter() - t0) / len(pairs)
    # A batch that would take about 4 s, interrupted after 0.2 s.
    big = pairs * max(1, int(4.0 / per_pair / len(pairs)))
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        sdr_rewards.distance_batch(big, "gw")
    elapsed = time.perf_counter() - t0
    timer.join()
    assert elapsed < 0.5 * per_pair * len(big), (elapsed, per_pair * len(big))


def _signal_after(delay, signum):
    """A started timer that sends `signum` to this process after `delay`
    seconds, and the list its send time is appended to."""
    import os
    import threading
    import time

    sent = []

    def send():
        sent.append(time.perf_counter())
        os.kill(os.getpid(), signum)

    timer = threading.Timer(delay, send)
    timer.start()
    return timer, sent


# GW on this pair takes about 7 s uninterrupted (2-core development machine);
# a Ctrl-C used to wait for all of it.
def _long_gw_pair():
    rng = np.random.default_rng(7)
    return rng.normal(size=(1500, 64)), rng.normal(size=(1000, 64))


class _Raised(Exception):
    pass


def _raise(signum, frame):
    raise _Raised()


@pytest.mark.parametrize(
    "call, handler, expected",
    [
        ("distance", None, KeyboardInterrupt),
        ("distances", None, KeyboardInterrupt),
        # Whatever a signal handler raises stops the pair and is raised.
        ("distance", _raise, _Raised),
    ],
)
def test_ctrl_c_stops_one_long_pair(call, handler, expected):
    import signal
    import time

    a, b = _long_gw_pair()
    previous = signal.signal(signal.SIGINT, handler) if handler else None
    try:
        timer, sent = _signal_after(0.3, signal.SIGINT)
        with pytest.raises(expected):
            if call == "distance":
                sdr_rewards.distance(a, b, "gw")
            else:
                sdr_rewards.distances(a, b, ["chamfer", "gw"])
        late = time.perf_counter() - sent[0]
        timer.join()
    finally:
        if handler:
            signal.signal(signal.SIGINT, previous)
    # Signals are read every 50 ms, and the solver stops within milliseconds.
    assert late < 1.0, late


def test_ctrl_c_stops_a_batch_within_its_long_pair():
    import signal
    import time

    a, b = _long_gw_pair()
    small = [(a[:3], b[:4])] * 5
    timer, sent = _signal_after(0.3, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        sdr_rewards.distance_batch(small + [(a, b)] + small, "gw")
    late = time.perf_counter() - sent[0]
    timer.join()
    assert late < 1.0, late


def test_a_bad_item_of_metrics_is_named():
    a = np.eye(3, 8, dtype=np.float32) + 0.1
    b = np.eye(4, 8, dtype=np.float32) + 0.1
    with pytest.raises(TypeError, match=r"^metrics\[1\] must be a metric spec .*got NoneType"):
        sdr_rewards.distances(a, b, ["chamfer", None])
    with pytest.raises(TypeError, match="metrics must be a list of metric specs"):
        sdr_rewards.distances(a, b, 3)
    # Keys are canonical specs, as the README says.
    assert list(sdr_rewards.distances(a, b, ["sinkhorn", "hung-pen:alpha=0.10"])) == [
        "sinkhorn:eps=0.1", "hung-pen:alpha=0.1"
    ]
