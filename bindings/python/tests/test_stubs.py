"""The checked-in stubs describe the built module."""

import ast
import inspect
from pathlib import Path

import sdr_rewards


def stub_names():
    tree = ast.parse((Path(sdr_rewards.__file__).with_name("__init__.pyi")).read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_stubs_cover_the_public_api():
    public = set(sdr_rewards.__all__)
    assert public <= stub_names() | {"__version__"}
    for name in public:
        assert hasattr(sdr_rewards, name), name


def test_stub_signatures_match_python_classes():
    tree = ast.parse((Path(sdr_rewards.__file__).with_name("__init__.pyi")).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "SDRReward")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    stub_params = [a.arg for a in init.args.args][1:]
    real = list(inspect.signature(sdr_rewards.SDRReward.__init__).parameters)[1:]
    assert stub_params == real


def test_py_typed_is_shipped():
    assert Path(sdr_rewards.__file__).with_name("py.typed").exists()


def test_docstrings():
    for f in (
        sdr_rewards.distance,
        sdr_rewards.distances,
        sdr_rewards.parse_report,
        sdr_rewards.split_sentences,
        sdr_rewards.Encoder,
        sdr_rewards.SDRReward,
        sdr_rewards.label,
        sdr_rewards.chexpert_f1,
    ):
        assert f.__doc__ and len(f.__doc__) > 40, f
