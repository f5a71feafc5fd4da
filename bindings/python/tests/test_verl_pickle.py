"""verl loads sdr_rewards/verl.py by path under a name other processes cannot import, so
Ray's cloudpickle sends compute_score by value (the `remote` reward manager):
it must pickle, and rebuild its state in the process that unpickles it."""

import functools
import importlib.util
import pickle
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

import sdr_rewards
from conftest import GOOD, REF

cloudpickle = pytest.importorskip("cloudpickle")


def load_as_verl_does():
    # verl.utils.import_utils.load_extern_object: spec_from_file_location under
    # a module name of its own, not in sys.modules: cloudpickle then sends the
    # functions by value, with the globals they read.
    path = Path(sdr_rewards.__file__).with_name("verl.py")
    name = f"custom_module_{uuid.uuid4().hex}"
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, name


def test_compute_score_pickles_by_value_and_scores_in_a_fresh_process(tmp_path):
    mod, name = load_as_verl_does()
    # Used once here first: the state a call leaves behind must not be pickled either.
    here = mod.compute_score(None, GOOD, REF, metric="chamfer")
    fn = functools.partial(mod.compute_score, metric="chamfer")  # as verl's get_custom_reward_fn wraps it
    blob = cloudpickle.dumps(fn)
    async_blob = cloudpickle.dumps(mod.compute_score_async)
    assert pickle.loads(blob)(None, GOOD, REF) == here
    (tmp_path / "fn.pkl").write_bytes(blob)
    (tmp_path / "async.pkl").write_bytes(async_blob)
    script = f"""
import asyncio, json, pickle, sys
assert {name!r} not in sys.modules
fn = pickle.load(open({str(tmp_path / 'fn.pkl')!r}, "rb"))
afn = pickle.load(open({str(tmp_path / 'async.pkl')!r}, "rb"))
out = fn(None, {GOOD!r}, {REF!r})
aout = asyncio.run(afn(None, {GOOD!r}, {REF!r}))
print(json.dumps([out, aout]))
"""
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    import json

    out, aout = json.loads(res.stdout)
    assert out == here and aout == here
