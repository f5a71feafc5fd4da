"""sdr_rewards.metrics against `sdr score` on the same inputs (same numbers, bit for
bit), metric selection, bad input, and the optional model-based metrics with
stand-ins of the f1chexbert and radgraph packages (nothing is downloaded)."""

import json
from pathlib import Path
import subprocess
import sys
import types

import pytest

import sdr_rewards
from sdr_rewards import clinical, metrics

from conftest import GOOD, OTHER, REF, REF_PLAIN

HYPS = [
    GOOD,
    OTHER,
    "not a report",
    "<think>The lungs are clear. Possible small left pleural effusion.</think><answer>No acute disease.</answer>",
    "Findings: Heart size is normal.\nImpression: Normal chest.",
]
REFS = [REF, REF_PLAIN, REF, "Findings: Small left effusion.\nImpression: Effusion.", REF]


def run_cli(sdr_bin, tmp_path, args, hyps=HYPS, refs=REFS):
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps({"id": i, "hyp": h, "ref": r}) + "\n" for i, (h, r) in enumerate(zip(hyps, refs))))
    summary = tmp_path / "summary.json"
    out = subprocess.run(
        [sdr_bin, "score", str(path), "--summary", str(summary)] + args,
        check=True,
        capture_output=True,
        text=True,
    )
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    assert [x.pop("id") for x in lines] == list(range(len(hyps)))
    return lines, json.loads(summary.read_text())


@pytest.mark.parametrize("whole", [False, True])
def test_same_numbers_as_sdr_score_without_bertscore(sdr_bin, tmp_path, whole):
    args = ["--no-bertscore"] + (["--whole"] if whole else [])
    cli_lines, cli_summary = run_cli(sdr_bin, tmp_path, args)
    wanted = [m for m in metrics.SDR_SCORE_METRICS if not m.startswith("BERTScore")]
    lines, summary = metrics.evaluate(HYPS, REFS, metrics=wanted, sections=not whole)
    assert lines == cli_lines
    assert summary == cli_summary
    assert metrics.score(HYPS, REFS, metrics=wanted, sections=not whole) == cli_lines
    assert metrics.corpus(HYPS, REFS, metrics=wanted, sections=not whole) == cli_summary


def test_same_numbers_as_sdr_score_with_bertscore_and_uncertain_negative(sdr_bin, tmp_path):
    cli_lines, cli_summary = run_cli(sdr_bin, tmp_path, ["--uncertain-negative"])
    lines, summary = metrics.evaluate(HYPS, REFS, uncertain_negative=True)
    assert lines == cli_lines
    assert summary == cli_summary
    assert summary["bertscore_model"] and summary["uncertain"] == "negative"
    assert set(lines[0]["findings"]) == set(metrics.SDR_SCORE_METRICS)


def test_values_and_selection():
    lines = metrics.score([REF, "junk"], [REF_PLAIN, REF], metrics=["BLEU-4", "CheXpert-rule F1"])
    assert lines[0]["format_valid"] is True and lines[1]["format_valid"] is False
    assert lines[0]["findings"] == {"BLEU-4": pytest.approx(1.0), "CheXpert-rule F1": 1.0}
    assert lines[1]["impression"]["BLEU-4"] == 0.0
    summary = metrics.corpus([REF], [REF], metrics="ROUGE-L")
    assert summary["findings"] == {"mean": {"ROUGE-L": pytest.approx(1.0)}}
    summary = metrics.corpus([REF, GOOD], [REF, REF], metrics=["BLEU-2", "CheXpert-rule F1"])
    assert set(summary["impression"]["corpus_bleu"]) == {"BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4"}
    assert set(summary["impression"]["chexpert_rule"]) == {"macro_14", "micro_14", "macro_5", "micro_5"}
    assert summary["pairs"] == 2 and summary["well_formed"] == 2
    assert metrics.score([], [], metrics=["ROUGE-L"]) == []
    assert sdr_rewards.metrics is metrics


def test_bad_input_gives_clear_errors(tmp_path):
    with pytest.raises(ValueError, match=r"pair 1: the reference has no Impression section"):
        metrics.score([REF, REF], [REF, "Findings: Lungs clear."], metrics=["ROUGE-L"])
    with pytest.raises(ValueError, match="2 hyps but 1 refs"):
        metrics.score([REF, REF], [REF], metrics=["ROUGE-L"])
    with pytest.raises(ValueError, match="unknown metric 'BLEU'; known: BLEU-1"):
        metrics.score([REF], [REF], metrics=["BLEU"])
    with pytest.raises(ValueError, match="metrics is empty"):
        metrics.score([REF], [REF], metrics=[])
    with pytest.raises(TypeError, match="hyps must be a list of strings"):
        metrics.score(REF, [REF])
    with pytest.raises(TypeError, match="refs item 0 must be a string"):
        metrics.score([REF], [None])
    with pytest.raises(FileNotFoundError, match="BERTScore needs the sentence-transformers model"):
        metrics.score([REF], [REF], metrics=["BERTScore-F1"], model_dir=tmp_path / "nowhere")
    with pytest.raises(RuntimeError, match="WordNet"):
        metrics.score([REF], [REF], metrics=["METEOR"], wordnet_dir=tmp_path)


class FakeCheXbert:
    def __init__(self, **options):
        pass

    def __call__(self, hyps, refs):
        report = {"macro avg": {"f1-score": 0.5}, "micro avg": {"f1-score": 0.75}}
        return 0.9, [1] * len(hyps), report, report


class FakeRadGraph:
    seen = []

    def __init__(self, reward_level, **options):
        pass

    def __call__(self, hyps, refs):
        type(self).seen.append(list(hyps))
        per = [0.5] * len(hyps)
        return 0.5, per, [{}] * len(hyps), [{}] * len(refs)


def _module(name, **attrs):
    m = types.ModuleType(name)
    for k, v in attrs.items():
        setattr(m, k, v)
    return m


def test_model_metrics_through_the_adapters(monkeypatch):
    monkeypatch.setattr(clinical, "_SCORERS", {})
    monkeypatch.setitem(sys.modules, "f1chexbert", _module("f1chexbert", F1CheXbert=FakeCheXbert))
    monkeypatch.setitem(sys.modules, "radgraph", _module("radgraph", F1RadGraph=FakeRadGraph))
    FakeRadGraph.seen = []
    lines, summary = metrics.evaluate([GOOD, "junk"], [REF, REF], metrics=["chexbert_f1", "radgraph_f1"])
    # The section texts reach the packages; a missing hypothesis section scores 0 unseen.
    assert FakeRadGraph.seen[0] == ["The heart is normal in size. Lungs are clear."]
    assert [x["findings"]["radgraph_f1"] for x in lines] == [0.5, 0.0]
    assert summary["findings"]["radgraph"]["f1"] == 0.25
    assert summary["impression"]["chexbert"]["micro_f1_14"] == 0.75
    assert "mean" in summary["findings"] and summary["findings"]["mean"] == {}


def test_model_metrics_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setattr(clinical, "_SCORERS", {})
    monkeypatch.setitem(sys.modules, "radgraph", None)
    with pytest.raises(RuntimeError, match=r"sdr-rewards\[clinical-models\]"):
        metrics.score([REF], [REF], metrics=["radgraph_f1"])


BERT_FIXTURES = Path(__file__).resolve().parents[3] / "crates/sdr-eval/tests/fixtures/bertscore"


def test_bertscore_model_matches_bert_score_and_sdr_score(sdr_bin, tmp_path):
    """bert-score's P/R/F1 on a small random RoBERTa (tools/fixtures/bertscore_roberta.py),
    with idf and baseline rescaling, through sdr_rewards.metrics; the same numbers as `sdr score`."""
    f = json.loads((BERT_FIXTURES / "bertscore.json").read_text())
    cli = f["cli"]
    hyps = [f["hyps"][i] for i in cli["pairs"]]
    refs = [f["refs"][i] for i in cli["pairs"]]
    opts = dict(
        bertscore_model=BERT_FIXTURES / "roberta-tiny",
        bertscore_layer=cli["layer"],
        rescale_baseline=BERT_FIXTURES / "roberta-tiny-baseline.tsv",
        idf=True,
    )
    lines, summary = metrics.evaluate(hyps, refs, metrics=list(metrics.BERT_METRICS), sections=False, **opts)
    for k, line in enumerate(lines):
        for key, col in (("P", "BERTScore-P"), ("R", "BERTScore-R"), ("F", "BERTScore-F1")):
            assert line["whole"][col] == pytest.approx(cli[key][k], abs=1e-5)
    assert summary["bertscore_model"] == "roberta-tiny L3 (idf, rescaled with baseline)"
    args = ["--whole", "--bertscore-model", str(opts["bertscore_model"]), "--bertscore-layer", "3",
            "--idf", "--rescale-baseline", str(opts["rescale_baseline"])]
    cli_lines, cli_summary = run_cli(sdr_bin, tmp_path, args, hyps=hyps, refs=refs)
    assert [x["whole"]["BERTScore-F1"] for x in cli_lines] == [x["whole"]["BERTScore-F1"] for x in lines]
    assert cli_summary["bertscore_model"] == summary["bertscore_model"]


def test_bertscore_model_errors(tmp_path):
    folder = BERT_FIXTURES / "roberta-tiny"
    with pytest.raises(FileNotFoundError, match="bertscore_model"):
        metrics.score([REF], [REF], metrics=["BERTScore-F1"], bertscore_model=tmp_path / "nowhere")
    with pytest.raises(ValueError, match="layer = 9"):
        metrics.score([REF], [REF], metrics=["BERTScore-F1"], bertscore_model=folder, bertscore_layer=9)
    with pytest.raises(ValueError, match="need bertscore_model"):
        metrics.score([REF], [REF], metrics=["BERTScore-F1"], bertscore_layer=3)
    with pytest.raises(FileNotFoundError, match="rescale_baseline"):
        metrics.score([REF], [REF], metrics=["BERTScore-F1"], bertscore_model=folder,
                      rescale_baseline=tmp_path / "none.tsv")
    bad = tmp_path / "bad.tsv"
    bad.write_text("LAYER,P,R\n0,0.1,0.2\n")
    with pytest.raises(ValueError, match="expected `LAYER,P,R,F`"):
        metrics.score([REF], [REF], metrics=["BERTScore-F1"], bertscore_model=folder, rescale_baseline=bad)
    with pytest.raises(TypeError, match="bertscore_layer must be an int"):
        metrics.score([REF], [REF], metrics=["BERTScore-F1"], bertscore_model=folder, bertscore_layer="3")


def test_paired_bootstrap():
    base = [1.0, 2.0, 3.0, 4.0, 5.0]
    lo, hi = metrics.paired_bootstrap([1.1 * b for b in base], base)
    assert lo == pytest.approx(10.0) and hi == pytest.approx(10.0)
    lo, hi = metrics.paired_bootstrap([1.0, 0.5, 1.5, 1.0], [1.0, 1.5, 0.5, 1.0])
    assert lo < 0 < hi
    assert metrics.paired_bootstrap([1.0, 1.0], [0.0, 1.0]) is None
    with pytest.raises(ValueError, match="paired by study"):
        metrics.paired_bootstrap([1.0], [1.0, 2.0])
    with pytest.raises(TypeError, match="policy item 0 must be a number"):
        metrics.paired_bootstrap(["x"], [1.0])
    refs = ["Cardiomegaly.", "No acute disease.", "Pleural effusion.", "Normal."] * 5
    cis = metrics.chexpert_f1_bootstrap(refs, ["Normal."] * 20, refs)
    assert set(cis) == {"macro_f1_14", "micro_f1_14", "macro_f1_5", "micro_f1_5"}
    with pytest.raises(ValueError, match="paired by position"):
        metrics.chexpert_f1_bootstrap(refs, refs[:3], refs)


def test_paired_bootstrap_names_a_non_finite_value_and_takes_arrays():
    import numpy as np

    with pytest.raises(ValueError, match=r"^policy\[1\] is not finite \(nan\)"):
        metrics.paired_bootstrap([0.1, float("nan"), 0.3], [0.1, 0.1, 0.2])
    with pytest.raises(ValueError, match=r"^baseline\[0\] is not finite \(inf\)"):
        metrics.paired_bootstrap([0.1], [float("inf")])
    policy, baseline = [1.1, 2.2, 3.3, 4.4], [1.0, 2.0, 3.0, 4.0]
    assert metrics.paired_bootstrap(np.array(policy), np.array(baseline, dtype=np.float32)) == pytest.approx(
        metrics.paired_bootstrap(policy, [float(np.float32(b)) for b in baseline])
    )
