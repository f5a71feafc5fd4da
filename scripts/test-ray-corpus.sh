#!/usr/bin/env bash
# Integration tier: a sharded corpus build on a local Ray cluster on loopback (a head
# and two worker nodes, one CPU each, all on 127.0.0.1), by recipes/ray_corpus.py, then
# a check that the merged corpus equals `sdr corpus build` of the same reports: same
# header metadata, including content_sha256 (every tensor's bytes: reports, order,
# sentence table, vectors bit for bit) and meta_sha256 (every other metadata value, so it
# differs exactly when content_sha256 does). Called by scripts/test-integration.sh; runs alone.
#
# With the stand-in encoder (the default, hash-64) the vectors must be bit for bit equal.
# all-mpnet-base-v2 (SDR_RAY_ENCODER=mpnet) is not batch-invariant: a sentence's vector can
# differ in the last bits with the other sentences of its padded batch (measured: 10 of 221
# sentences, max |diff| 1.3e-7), and a shard batches other sentences than a single build;
# there everything but the vectors must be equal and the vectors within 1e-6.
#
# Environment: SDR_RAY_PORT (default 26379: outside 10002-19999, Ray's worker ports),
# SDR_RAY_SHARDS (6), SDR_RAY_SAMPLE (300 IU train reports), SDR_RAY_ENCODER (hash-64,
# or mpnet).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash scripts/setup-ray.sh | tail -n 1)
[[ "$VENV" = /* ]] || VENV=$PWD/$VENV
RAY=$VENV/bin/ray
PY=$VENV/bin/python
bash scripts/build-sdr.sh -q
SDR="${CARGO_TARGET_DIR:-target}/release/sdr"
ENCODER=${SDR_RAY_ENCODER:-hash-64}
[ "$ENCODER" != mpnet ] || bash scripts/fetch-model.sh >/dev/null
PORT=${SDR_RAY_PORT:-26379}
SHARDS=${SDR_RAY_SHARDS:-6}
SAMPLE=${SDR_RAY_SAMPLE:-300}
OUT=$PWD/results/integration/ray
rm -rf "$OUT"
mkdir -p "$OUT"
# An absolute input: the recipe records the path its workers read (they start in another
# folder), and the single build must record the same `source` to compare equal.
SEL=(--input "$PWD/data/iu-xray/indiana_reports.csv" --format csv --split train --sample "$SAMPLE" --seed 0)
export RAY_USAGE_STATS_ENABLED=0

echo "== local Ray cluster on 127.0.0.1:$PORT: head + 2 workers"
# `ray stop` ends the Ray processes of this user on this host: the cluster started here.
trap '"$RAY" stop --force >/dev/null 2>&1 || true' EXIT
NODE=(--node-ip-address 127.0.0.1 --num-cpus 1 --object-store-memory 100000000 --disable-usage-stats)
"$RAY" start --head --port "$PORT" --include-dashboard false "${NODE[@]}" >"$OUT/head.log" 2>&1
for w in 1 2; do
  "$RAY" start --address "127.0.0.1:$PORT" "${NODE[@]}" >"$OUT/worker-$w.log" 2>&1
done
"$PY" - "$PORT" <<'PY'
import sys, time, ray
ray.init(address=f"127.0.0.1:{sys.argv[1]}", logging_level="error")
for _ in range(60):
    alive = [n for n in ray.nodes() if n["Alive"]]
    if len(alive) >= 3:
        break
    time.sleep(1)
print(f"cluster: {len(alive)} nodes, {ray.cluster_resources().get('CPU', 0):g} CPUs")
assert len(alive) == 3, alive
PY

echo "== recipes/ray_corpus.py: $SHARDS shards of $SAMPLE IU train reports, encoder $ENCODER"
"$PY" recipes/ray_corpus.py --address "127.0.0.1:$PORT" "${SEL[@]}" --shards "$SHARDS" \
  --encoder "$ENCODER" --out "$OUT/merged.safetensors" --report "$OUT/ray-report.json"
echo "== sdr corpus build (one machine) of the same reports"
"$SDR" corpus build "${SEL[@]}" --encoder "$ENCODER" --quiet --out "$OUT/single.safetensors"
"$SDR" corpus info "$OUT/merged.safetensors" >/dev/null

"$PY" - "$OUT" "$ENCODER" <<'PY'
import json, struct, sys
import numpy as np
out = sys.argv[1]
def load(p):
    with open(p, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        head = json.loads(f.read(n))
        data = f.read()
    meta = head.pop("__metadata__")
    dt = {"F32": np.float32, "I64": np.int64, "U32": np.uint32, "U8": np.uint8}
    t = {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dt[v["dtype"]])
         for k, v in head.items()}
    return meta, t
(ms, ts), (mm, tm) = load(f"{out}/single.safetensors"), load(f"{out}/merged.safetensors")
rep = json.load(open(f"{out}/ray-report.json"))
print(f"merged: {mm['n_reports']} reports, {mm['n_sentences']} sentences, "
      f"{rep['shards']} shards built on {len(rep['nodes'])} nodes")
assert len(rep["nodes"]) >= 2, f"all shards ran on one node: {rep['nodes']}"
diff = {k for k in ms.keys() | mm.keys() if ms.get(k) != mm.get(k)}
other = [k for k in ts if k != "embeddings" and not np.array_equal(ts[k], tm[k])]
assert not other, f"tensors differ: {other}"
assert diff <= {"content_sha256", "meta_sha256"}, f"metadata differs: { {k: (ms.get(k), mm.get(k)) for k in diff} }"
if diff:
    d = np.abs(ts["embeddings"] - tm["embeddings"])
    rows = int((d.reshape(int(ms["n_sentences"]), -1).max(axis=1) > 0).sum())
    msg = (f"embeddings differ in {rows} of {ms['n_sentences']} rows, max |diff| {d.max():.3g} "
           "(the encoder's vectors depend on the batch a sentence is embedded in)")
    assert sys.argv[2] == "mpnet" and d.max() <= 1e-6, msg
    print(f"merged corpus == single build except: {msg}")
    sys.exit(0)
print("merged corpus == single build: metadata, reports, sentence table, vectors bit for bit")
PY
echo "== recipes/ray_corpus.py --device cuda with this CPU wheel: refused before any task"
if "$PY" recipes/ray_corpus.py --address "127.0.0.1:$PORT" "${SEL[@]}" --shards 2 --device cuda \
    --num-gpus 1 --out "$OUT/gpu.safetensors" 2>"$OUT/gpu.err"; then
  echo "expected --device cuda to be refused by a wheel without CUDA" >&2; exit 1
fi
grep -q "no CUDA back-end" "$OUT/gpu.err" || { cat "$OUT/gpu.err" >&2; exit 1; }
[ ! -e "$OUT/gpu.safetensors" ] && [ ! -e "$OUT/gpu.safetensors.parts" ]
echo "refused: $(tail -n 1 "$OUT/gpu.err")"
echo "ray corpus: ok"
