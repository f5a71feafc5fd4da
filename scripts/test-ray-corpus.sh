#!/usr/bin/env bash
# Integration tier: a sharded corpus build on a local Ray cluster on loopback (a head
# and two worker nodes, one CPU each, all on 127.0.0.1), by recipes/ray_corpus.py, then
# a check that the merged corpus equals `sdr corpus build` of the same reports: same
# header metadata, including content_sha256 (every tensor's bytes: reports, order,
# sentence table, vectors bit for bit). Called by scripts/test-integration.sh; runs alone.
#
# Environment: SDR_RAY_PORT (default 16379), SDR_RAY_SHARDS (6), SDR_RAY_SAMPLE (300 IU
# train reports), SDR_RAY_ENCODER (mpnet; hash-64 needs no model).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=$(bash scripts/setup-ray.sh | tail -n 1)
[[ "$VENV" = /* ]] || VENV=$PWD/$VENV
RAY=$VENV/bin/ray
PY=$VENV/bin/python
cargo build --release -q -p sdr-cli --bin sdr
SDR="${CARGO_TARGET_DIR:-target}/release/sdr"
ENCODER=${SDR_RAY_ENCODER:-mpnet}
[ "$ENCODER" != mpnet ] || bash scripts/fetch-model.sh >/dev/null
PORT=${SDR_RAY_PORT:-16379}
SHARDS=${SDR_RAY_SHARDS:-6}
SAMPLE=${SDR_RAY_SAMPLE:-300}
OUT=$PWD/results/integration/ray
rm -rf "$OUT"
mkdir -p "$OUT"
SEL=(--input data/iu-xray/indiana_reports.csv --format csv --split train --sample "$SAMPLE" --seed 0)
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

"$PY" - "$OUT" <<'PY'
import json, struct, sys
out = sys.argv[1]
def header(p):
    with open(p, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return json.loads(f.read(n))["__metadata__"]
single, merged = header(f"{out}/single.safetensors"), header(f"{out}/merged.safetensors")
diff = {k: (single.get(k), merged.get(k)) for k in single.keys() | merged.keys() if single.get(k) != merged.get(k)}
rep = json.load(open(f"{out}/ray-report.json"))
print(f"merged: {merged['n_reports']} reports, {merged['n_sentences']} sentences, "
      f"{rep['shards']} shards built on {len(rep['nodes'])} nodes")
assert not diff, f"merged corpus differs from the single build: {diff}"
assert len(rep["nodes"]) >= 2, f"all shards ran on one node: {rep['nodes']}"
print("merged corpus == single build (metadata and content_sha256)")
PY
echo "ray corpus: ok"
