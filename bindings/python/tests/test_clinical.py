"""sdr_rewards.label / sdr_rewards.chexpert_f1 (the Rust labeler) and the wiring of the
sdr_rewards.clinical adapters, with stand-ins of the same interface as the optional
f1chexbert and radgraph packages (no model is loaded or downloaded)."""

import json
import subprocess
import sys
import types

import pytest

import sdr_rewards
from sdr_rewards import clinical

ORDER = [
    "No Finding",
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Lesion",
    "Lung Opacity",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
]

TEXTS = [
    "FINDINGS: Heart size normal. No pneumothorax.\nIMPRESSION: Possible left lower lobe pneumonia.",
    "<think>Cardiomegaly is not present. There are no XXXX of a pleural effusion.</think><answer>Normal chest.</answer>",
    "Midline sternotomy wires. Right PICC line tip in the SVC. Small right pleural effusion.",
    "",
]


def test_label_gives_all_14_in_order():
    l = sdr_rewards.label(TEXTS[0])
    assert list(l) == ORDER
    assert (l["Cardiomegaly"], l["Pneumothorax"], l["Pneumonia"]) == (0, 0, -1)
    assert l["No Finding"] is None and l["Fracture"] is None
    l = sdr_rewards.label(TEXTS[1])
    assert (l["Cardiomegaly"], l["Pleural Effusion"], l["No Finding"]) == (0, 0, 1)
    assert all(v is None for v in sdr_rewards.label("").values())


def test_label_agrees_with_the_cli(sdr_bin, tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    out = subprocess.run([sdr_bin, "label", str(path)], check=True, capture_output=True, text=True)
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert [x["id"] for x in lines] == list(range(len(TEXTS)))
    for text, line in zip(TEXTS, lines):
        assert line["labels"] == sdr_rewards.label(text)


def test_chexpert_f1_macro_micro_and_uncertain():
    hyps = ["Cardiomegaly. Small left pleural effusion.", "No acute disease."]
    refs = ["Cardiomegaly. No effusion.", "Normal chest."]
    r = sdr_rewards.chexpert_f1(hyps, refs)
    per = r["per_observation"]
    assert list(per) == ORDER
    assert (per["Cardiomegaly"], per["Pleural Effusion"], per["No Finding"]) == (1.0, 0.0, 1.0)
    assert r["support"]["Pleural Effusion"] == 0 and r["n"] == 2
    # zero_division=0: the 11 observations without any positive count as 0.
    assert r["macro_f1_14"] == pytest.approx(2 / 14)
    assert r["micro_f1_14"] == pytest.approx(0.8)
    assert r["macro_f1_5"] == pytest.approx(0.2)
    assert r["micro_f1_5"] == pytest.approx(2 / 3)
    hedged = sdr_rewards.chexpert_f1(["Possible pneumonia."], ["Pneumonia."])
    assert hedged["per_observation"]["Pneumonia"] == 1.0
    strict = sdr_rewards.chexpert_f1(["Possible pneumonia."], ["Pneumonia."], uncertain_as_positive=False)
    assert strict["per_observation"]["Pneumonia"] == 0.0
    with pytest.raises(ValueError, match="paired by position"):
        sdr_rewards.chexpert_f1(["a"], [])


def test_clinical_reexports_the_rule_metric():
    assert clinical.chexpert_f1 is sdr_rewards.chexpert_f1 and clinical.label is sdr_rewards.label


class FakeCheXbert:
    loads = 0

    def __init__(self, **options):
        type(self).loads += 1
        self.options = options

    def __call__(self, hyps, refs):
        assert isinstance(hyps, list) and isinstance(refs, list)
        report_14 = {"macro avg": {"f1-score": 0.25}, "micro avg": {"f1-score": 0.5}}
        report_5 = {"macro avg": {"f1-score": 0.75}, "micro avg": {"f1-score": 1.0}}
        return 0.9, [1] * len(hyps), report_14, report_5


class FakeRadGraph:
    def __init__(self, reward_level, **options):
        self.reward_level = reward_level

    def __call__(self, hyps, refs):
        per = [0.25 * (i + 1) for i in range(len(hyps))]
        return sum(per) / len(per), per, [{}] * len(hyps), [{}] * len(refs)


def _module(name, **attrs):
    m = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(m, k, v)
    return m


@pytest.fixture
def fresh(monkeypatch):
    monkeypatch.setattr(clinical, "_SCORERS", {})
    FakeCheXbert.loads = 0


def test_chexbert_adapter_reshapes_and_caches(monkeypatch, fresh):
    monkeypatch.setitem(sys.modules, "f1chexbert", _module("f1chexbert", F1CheXbert=FakeCheXbert))
    r = clinical.chexbert_f1(("a", "b"), ["c", "d"], device="cpu")
    assert r == {"macro_f1_14": 0.25, "micro_f1_14": 0.5, "macro_f1_5": 0.75, "micro_f1_5": 1.0, "accuracy": 0.9}
    clinical.chexbert_f1(["a"], ["b"], device="cpu")
    assert FakeCheXbert.loads == 1


def test_radgraph_adapter(monkeypatch, fresh):
    monkeypatch.setitem(sys.modules, "radgraph", _module("radgraph", F1RadGraph=FakeRadGraph))
    r = clinical.radgraph_f1(["a", "b"], ["c", "d"], reward_level="simple")
    assert r == {"f1": 0.375, "per_report": [0.25, 0.5], "reward_level": "simple"}
    with pytest.raises(ValueError, match="reward_level"):
        clinical.radgraph_f1(["a"], ["b"], reward_level="all")


@pytest.mark.parametrize("fn, package", [(clinical.chexbert_f1, "f1chexbert"), (clinical.radgraph_f1, "radgraph")])
def test_missing_package_says_what_to_install(monkeypatch, fresh, fn, package):
    monkeypatch.setitem(sys.modules, package, None)  # makes `import package` fail
    with pytest.raises(RuntimeError, match=r"sdr-rewards\[clinical-models\]") as e:
        fn(["a"], ["b"])
    assert package in str(e.value)


def test_missing_weights_are_a_runtime_error(monkeypatch, fresh):
    class NoWeights:
        def __init__(self, **options):
            raise OSError("model.pt not found and the Hub is unreachable")

    monkeypatch.setitem(sys.modules, "f1chexbert", _module("f1chexbert", F1CheXbert=NoWeights))
    with pytest.raises(RuntimeError, match="could not load its model weights.*Hub is unreachable"):
        clinical.chexbert_f1(["a"], ["b"])


def test_adapters_check_their_inputs(monkeypatch, fresh):
    monkeypatch.setitem(sys.modules, "f1chexbert", _module("f1chexbert", F1CheXbert=FakeCheXbert))
    with pytest.raises(ValueError, match="paired by position"):
        clinical.chexbert_f1(["a", "b"], ["c"])
    with pytest.raises(TypeError):
        clinical.chexbert_f1("a", "b")
    assert FakeCheXbert.loads == 0


def test_chexpert_f1_of_no_studies_raises_as_the_bootstrap_does():
    with pytest.raises(ValueError, match="no studies"):
        sdr_rewards.chexpert_f1([], [])
