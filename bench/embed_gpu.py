#!/usr/bin/env python3
"""GPU sentence-embedding throughput and parity: `sdr embed --device cuda` (the CUDA build,
scripts/build-sdr.sh --cuda) against sentence-transformers on the same GPU, same weights,
same sentences, in one run (issue 11, item 1).

    .venv-bench/bin/python bench/embed_gpu.py --sdr target-cuda/release/sdr [--model DIR | --random-model]

The venv comes from `SDR_TORCH_INDEX=pypi SDR_SKIP_WHEEL=1 bash scripts/setup-bench.sh` on the GPU
machine: PyPI's torch is the CUDA build, and this script needs no sdr-rewards wheel.

The real all-mpnet-base-v2 weights are 438 MB; on a machine that cannot fetch them,
`--random-model` builds a randomly initialised model of the same shape (transformers'
MPNetModel, seed 0) in a sentence-transformers folder beside the tokenizer and config files of
`--files DIR` (default bench/gpu-model-files, copied there by bench/run-gpu.sh), which is
enough for timing and for parity between the two implementations.

Rows: sentences/s of sentence-transformers (fp32, bf16) and of `sdr` (f32, bf16), whole
process wall-clock and `net` (start-up, measured on one sentence, subtracted: CUDA context,
kernel loading, model upload); min and mean cosine of each row against sentence-transformers
fp32. Goals: sdr >= 1.5x sentence-transformers on the same GPU; cos >= 0.9999 (fp32),
>= 0.999 (bf16). `--device cpu` runs the same script on a CPU (a smoke test).
"""

import os
import sys

sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

import argparse  # noqa: E402
import csv  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
IU = os.path.join(ROOT, "data", "iu-xray", "indiana_reports.csv")
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
               "vocab.txt", "sentence_bert_config.json", "modules.json",
               "config_sentence_transformers.json", "1_Pooling/config.json")


def iu_sentences(n, seed=0, repeat_to=None):
    seen, out = set(), []
    with open(IU, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            for field in ("findings", "impression"):
                for s in re.split(r"(?<=[.!?])\s+", (row.get(field) or "").strip()):
                    s = s.strip()
                    if s and s not in seen:
                        seen.add(s)
                        out.append(s)
    random.Random(seed).shuffle(out)
    if len(out) < n:
        # IU has ~6k distinct sentences: numbered variants keep every line distinct, so
        # neither side's cache can help.
        base = list(out)
        k = 0
        while len(out) < n:
            out.append(f"{base[k % len(base)]} ({k // len(base) + 1})")
            k += 1
    return out[:n]


def random_model(files, dst, seed=0):
    import torch
    from transformers import MPNetConfig, MPNetModel

    os.makedirs(os.path.join(dst, "1_Pooling"), exist_ok=True)
    for name in MODEL_FILES:
        src = os.path.join(files, name)
        if os.path.exists(src):
            shutil.copy(src, os.path.join(dst, name))
    cfg = MPNetConfig.from_pretrained(dst)
    torch.manual_seed(seed)
    model = MPNetModel(cfg, add_pooling_layer=False).eval()
    model.save_pretrained(dst, safe_serialization=True)
    # save_pretrained rewrote config.json; keep the original (model_type, sizes).
    shutil.copy(os.path.join(files, "config.json"), os.path.join(dst, "config.json"))
    return dst


def cos_rows(a, b):
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)


def run_sdr(sdr, model, lines, device, precision, batch, env):
    with tempfile.TemporaryDirectory() as tmp:
        inp = os.path.join(tmp, "in.txt")
        out = os.path.join(tmp, "out.npy")
        with open(inp, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
        cmd = [sdr, "embed", inp, "--model", model, "--format", "npy", "-o", out,
               "--device", device, "--precision", precision, "--batch-size", str(batch),
               "--no-cache"]
        t = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t
        if r.returncode != 0:
            raise SystemExit(f"sdr embed failed ({' '.join(cmd)}):\n{r.stderr}")
        return np.load(out), dt, r.stderr.strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sdr", default=os.path.join(ROOT, "target-cuda", "release", "sdr"))
    ap.add_argument("--model", help="sentence-transformers folder (all-mpnet-base-v2 shape)")
    ap.add_argument("--random-model", action="store_true", help="randomly initialised weights")
    ap.add_argument("--files", default=os.path.join(HERE, "gpu-model-files"),
                    help="config and tokenizer files for --random-model")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    ap.add_argument("-n", type=int, default=20000, help="distinct sentences")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2, help="timed runs per row (best kept)")
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    if not args.model and not args.random_model:
        raise SystemExit("pass --model DIR or --random-model")
    tmp = tempfile.mkdtemp()
    model = args.model or random_model(args.files, os.path.join(tmp, "model"))
    lines = iu_sentences(args.n)
    dev = args.device
    gpu = dev.startswith("cuda")
    name = torch.cuda.get_device_name(0) if gpu else "cpu"
    print(f"device: {name}; torch {torch.__version__}; {len(lines)} distinct IU sentences; "
          f"batch {args.batch_size}; model {'random (seed 0)' if not args.model else model}")

    rows = []

    def add(label, dt, emb=None, ref=None, net=None, note=""):
        c = cos_rows(emb, ref) if emb is not None and ref is not None else None
        rows.append({"run": label, "seconds": dt, "sent_per_s": len(lines) / dt,
                     "net_sent_per_s": len(lines) / net if net else None,
                     "min_cos": float(c.min()) if c is not None else None,
                     "mean_cos": float(c.mean()) if c is not None else None, "note": note})

    def sync():
        if gpu:
            torch.cuda.synchronize()

    ref = None
    for label, dtype in (("sentence-transformers fp32", torch.float32),
                         ("sentence-transformers bf16", torch.bfloat16)):
        st = SentenceTransformer(model, device=dev)
        if dtype != torch.float32:
            st = st.to(dtype)
        st.encode(lines[: args.batch_size], batch_size=args.batch_size)  # warm-up
        best, emb = None, None
        for _ in range(args.repeats):
            sync()
            t = time.perf_counter()
            emb = st.encode(lines, batch_size=args.batch_size, convert_to_numpy=False,
                            convert_to_tensor=True, normalize_embeddings=True)
            sync()
            dt = time.perf_counter() - t
            best = dt if best is None else min(best, dt)
        emb = emb.float().cpu().numpy()
        if ref is None:
            ref = emb
        add(label, best, emb, ref, net=best)
        del st
        if gpu:
            torch.cuda.empty_cache()

    env = dict(os.environ)
    for precision in ("f32", "bf16"):
        _, startup, _ = run_sdr(args.sdr, model, lines[:1], dev, precision, args.batch_size, env)
        best, emb, note = None, None, ""
        for _ in range(args.repeats):
            emb, dt, note = run_sdr(args.sdr, model, lines, dev, precision, args.batch_size, env)
            best = dt if best is None else min(best, dt)
        add(f"sdr {precision}", best, emb, ref, net=max(best - startup, 1e-9),
            note=f"start-up {startup:.2f} s" + (f"; {note}" if note else ""))

    # Ratios on net rates: against sentence-transformers fp32, and like for like
    # (sdr f32 against st fp32, sdr bf16 against st bf16), the goal.
    net_of = {r["run"]: r["net_sent_per_s"] or r["sent_per_s"] for r in rows}
    st_f32 = net_of["sentence-transformers fp32"]
    same = {"sdr f32": st_f32, "sdr bf16": net_of["sentence-transformers bf16"]}
    for r in rows:
        net = net_of[r["run"]]
        r["x_st_fp32"] = net / st_f32
        r["x_st_same_precision"] = net / same[r["run"]] if r["run"] in same else None
    print()
    print("| run | seconds | sent/s | net sent/s | x st fp32 (net) | x st same precision (net) "
          "| min cos vs st fp32 | mean cos | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        mc = "" if r["min_cos"] is None else f"{r['min_cos']:.6f}"
        mean = "" if r["mean_cos"] is None else f"{r['mean_cos']:.6f}"
        like = "" if r["x_st_same_precision"] is None else f"{r['x_st_same_precision']:.2f}"
        print(f"| {r['run']} | {r['seconds']:.2f} | {r['sent_per_s']:,.0f} | {net_of[r['run']]:,.0f} | "
              f"{r['x_st_fp32']:.2f} | {like} | {mc} | {mean} | {r['note']} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "n": len(lines), "batch": args.batch_size, "rows": rows}, f, indent=1)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
