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


def stub_tree():
    return ast.parse((Path(sdr_rewards.__file__).with_name("__init__.pyi")).read_text())


def stub_all():
    for node in stub_tree().body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return [ast.literal_eval(e) for e in node.value.elts]
    raise AssertionError("the stub has no __all__")


def test_stub_all_is_the_runtime_all():
    # `from sdr_rewards import *` under mypy must define what it defines at run time.
    assert sorted(stub_all()) == sorted(sdr_rewards.__all__)


def typed_dict_keys(name):
    cls = next(n for n in stub_tree().body if isinstance(n, ast.ClassDef) and n.name == name)
    return {
        n.target.id: ast.unparse(n.annotation)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
    }


def test_stub_typed_dicts_have_the_runtime_keys():
    assert typed_dict_keys("Explanation")["cost"] == "NotRequired[str]"
    assert "conflict" in typed_dict_keys("SentenceExplanation")
    score = typed_dict_keys("ScoreResult")
    for key in ("unconverged", "failed"):
        assert score[key] == "List[int]"
    assert score["missing_sections"] == "NotRequired[List[int]]"
    for key in ("reward", "format", "findings", "impression"):
        assert score[key] == "List[float]"


def test_typing_only_names_are_documented():
    # A name the stub defines but the package does not export is a TypedDict or
    # alias for type checkers, listed as such in the stub's header comment.
    text = (Path(sdr_rewards.__file__).with_name("__init__.pyi")).read_text()
    header = text[: text.index("import os")]
    for name in stub_names() | {"Completion"}:
        if name.startswith("_") or hasattr(sdr_rewards, name):
            continue
        assert name in header, f"{name}: stub-only, not documented as typing-only"
