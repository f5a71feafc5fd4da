"""Build an SDR reference corpus on a Ray cluster: one shard per task, then merge.

    .venv-ray/bin/python recipes/ray_corpus.py --input data/iu-xray/indiana_reports.csv \\
        --format csv --split train --shards 8 --out iu-train.safetensors [--address auto]

Ray Data holds the shard indices 0..N-1 (``ray.data.range``); ``map_batches`` calls
``sdr_rewards.build_corpus(..., shard=(i, N))`` for each, which reads the source, keeps the
contiguous range of reports ``i*n//N .. (i+1)*n//N`` of the n selected, embeds their
distinct sentences and writes ``part-i-of-N.safetensors`` into ``--workdir``. The driver
then calls ``sdr_rewards.merge_corpus``, which checks that the shards are complete, disjoint and of
one build, and writes the corpus a single ``sdr corpus build`` with the same options
would have written (same reports, order, sentence table and metadata; ``source`` is the
path as the workers saw it; vectors bit for bit with the hash stand-in, within about 1e-7
with all-mpnet-base-v2, whose vectors move in the last bits with their padded batch).

On a real cluster (``--address auto`` on a node of it, or ``ray://HOST:10001``), every
node needs the ``sdr-rewards`` wheel (``scripts/setup-ray.sh``), the model folder (``SDR_MODEL`` or
``scripts/fetch-model.sh``), and the input and ``--workdir`` on a file system that all
nodes see (NFS, a mounted bucket).

GPU workers: ``--device cuda --num-gpus 1`` (one GPU per shard task; Ray sets each task's
``CUDA_VISIBLE_DEVICES``, so ``cuda`` is the GPU it was given). The wheel on the workers must
then be built with the ``cuda`` feature (``maturin build --release --features cuda -m
bindings/python/Cargo.toml``, toolkit from ``scripts/install-cuda.sh``) and find CUDA 13's
libraries (``scripts/cuda-libs.sh``); a CPU wheel refuses ``--device cuda`` in one line
before any shard starts. ``--precision bf16`` halves the encoder's cost on CPUs with
AVX-512 BF16 or AMX and on GPUs; every shard must use the same precision (the merge checks).
"""

import argparse
import json
import os
import socket
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--input", required=True, help="CSV, JSON Lines, or a folder of MIMIC-CXR .txt")
    p.add_argument("--format", required=True, choices=["csv", "jsonl", "mimic-dir"])
    p.add_argument("--out", required=True, help="the merged corpus (.safetensors)")
    p.add_argument("--shards", type=int, required=True, help="number of shards (tasks)")
    p.add_argument("--workdir", help="where shards are written (shared by all nodes); default: OUT's folder/OUT.parts")
    p.add_argument("--address", default=None, help="Ray cluster address (auto, HOST:PORT, ray://HOST:10001); default: a local Ray")
    p.add_argument("--num-cpus", type=float, default=1.0, help="CPUs reserved per shard task")
    p.add_argument("--num-gpus", type=float, default=0.0, help="GPUs reserved per shard task (with --device cuda: 1)")
    p.add_argument("--device", default="cpu", help="where each task's encoder runs: cpu, or cuda (needs a wheel built with --features cuda)")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"], help="encoder precision (bf16: about 2x faster on CPUs with AVX-512 BF16 or AMX, and on GPUs)")
    p.add_argument("--split", default="all")
    p.add_argument("--sample", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--id-col", default=None)
    p.add_argument("--findings-col", default="findings")
    p.add_argument("--impression-col", default="impression")
    p.add_argument("--encoder", default="mpnet", help="mpnet or hash-DIM (the stand-in)")
    p.add_argument("--model", default=None, help="model folder on the workers (default: $SDR_MODEL, then the cache folder)")
    p.add_argument("--keep-parts", action="store_true", help="keep the shard files after the merge")
    p.add_argument("--report", default=None, help="write a JSON summary (shards, nodes, seconds) here")
    return p.parse_args(argv)


def build_shards(batch, *, args, n, workdir):
    """One Ray Data batch of shard indices -> build each shard; return what each wrote."""
    import ray
    import sdr_rewards

    node = ray.get_runtime_context().get_node_id()
    out = {k: [] for k in ("shard", "path", "n_reports", "n_sentences", "node", "host", "seconds")}
    for i in batch["id"]:
        i = int(i)
        path = os.path.join(workdir, f"part-{i:05d}-of-{n:05d}.safetensors")
        t0 = time.time()
        info = sdr_rewards.build_corpus(
            args.input, path, args.format, shard=(i, n), split=args.split, sample=args.sample,
            seed=args.seed, id_col=args.id_col, findings_col=args.findings_col,
            impression_col=args.impression_col, encoder=args.encoder, model_dir=args.model,
            device=args.device, precision=args.precision,
        )
        seconds = time.time() - t0
        print(f"shard {i}/{n}: {info['n_reports']} reports, {info['n_sentences']} sentences "
              f"on {socket.gethostname()} node {node[:8]} in {seconds:.1f}s", flush=True)
        for k, v in (("shard", i), ("path", path), ("n_reports", info["n_reports"]),
                     ("n_sentences", info["n_sentences"]), ("node", node),
                     ("host", socket.gethostname()), ("seconds", seconds)):
            out[k].append(v)
    return out


def main(argv=None):
    args = parse_args(argv)
    import ray
    import sdr_rewards

    if args.shards < 1:
        sys.exit("--shards must be at least 1")
    try:
        sdr_rewards.check_device(args.device)  # a CPU wheel refuses cuda here, not in every task
    except ValueError as e:
        sys.exit(f"--device {args.device}: {e}")
    if args.device.lower() != "cpu" and args.num_gpus <= 0:
        sys.exit(f"--device {args.device} needs --num-gpus > 0, so that Ray gives each task a GPU")
    for name in ("input", "model"):
        v = getattr(args, name)
        if v is not None:
            setattr(args, name, os.path.abspath(v))  # workers start in another folder
    out = os.path.abspath(args.out)
    workdir = os.path.abspath(args.workdir or out + ".parts")
    os.makedirs(workdir, exist_ok=True)

    ray.init(address=args.address, log_to_driver=True)
    t0 = time.time()
    ds = ray.data.range(args.shards, override_num_blocks=args.shards)
    built = ds.map_batches(
        build_shards, batch_size=1, num_cpus=args.num_cpus, num_gpus=args.num_gpus,
        fn_kwargs={"args": args, "n": args.shards, "workdir": workdir},
    ).take_all()
    build_s = time.time() - t0
    built.sort(key=lambda r: r["shard"])
    nodes = sorted({r["node"] for r in built})
    print(f"built {len(built)} shards on {len(nodes)} nodes in {build_s:.1f}s; merging", flush=True)
    t1 = time.time()
    merged = sdr_rewards.merge_corpus([r["path"] for r in built], out)
    merge_s = time.time() - t1
    print(f"merged: {merged['n_reports']} reports, {merged['n_sentences']} distinct sentences -> {out} "
          f"in {merge_s:.1f}s", flush=True)
    if not args.keep_parts:
        for r in built:
            os.remove(r["path"])
        if not os.listdir(workdir):
            os.rmdir(workdir)
    if args.report:
        summary = {
            "out": out, "shards": len(built), "nodes": nodes, "build_seconds": build_s,
            "merge_seconds": merge_s, "n_reports": merged["n_reports"],
            "n_sentences": merged["n_sentences"],
            "per_shard": [{k: r[k] for k in ("shard", "n_reports", "n_sentences", "node", "seconds")}
                          for r in built],
        }
        with open(args.report, "w") as f:
            json.dump(summary, f, indent=1)
    ray.shutdown()


if __name__ == "__main__":
    main()
