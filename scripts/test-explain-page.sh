#!/usr/bin/env bash
# Browser check of `sdr explain --html` (integration tier): render the bundled
# example (data/explain/iu-test-example.jsonl) with the real encoder, open the
# page in headless Chromium (Debian package, scripts/install-chromium.sh), check
# the DOM it built, and take a screenshot. Chromium runs with the network-facing
# features off, so a page that tried to fetch anything would render without it.
#
# Usage: bash scripts/test-explain-page.sh [SCREENSHOT.png]
#   (default results/explain/explain.png; docs/explain.png is made with
#   `bash scripts/test-explain-page.sh docs/explain.png`)
set -euo pipefail
cd "$(dirname "$0")/.."
SHOT=${1:-results/explain/explain.png}
SDR="${CARGO_TARGET_DIR:-target}/release/sdr"
[ -x "$SDR" ] || bash scripts/build-sdr.sh -q
bash scripts/fetch-model.sh >/dev/null
CHROMIUM=$(bash scripts/install-chromium.sh | tail -n 1)

OUT=results/explain
mkdir -p "$OUT" "$(dirname "$SHOT")"
"$SDR" explain data/explain/iu-test-example.jsonl --html "$OUT/explain.html" -o "$OUT/explain.jsonl"
PAGE="file://$PWD/$OUT/explain.html"
PROFILE=$(mktemp -d)
trap 'rm -rf "$PROFILE"' EXIT
FLAGS=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
  --disable-component-update --disable-sync --hide-scrollbars --user-data-dir="$PROFILE")

# The DOM Chromium built: every study is there, and nothing external was referenced.
"$CHROMIUM" "${FLAGS[@]}" --dump-dom "$PAGE" 2>/dev/null > "$OUT/dom.html"
python3 - "$OUT/dom.html" "$OUT/explain.jsonl" <<'PY'
import json, re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
lines = [json.loads(l) for l in open(sys.argv[2], encoding="utf-8")]
studies = re.findall(r'<section class="study" id="s\d+">', dom)
assert len(studies) == len(lines), (len(studies), len(lines))
for bad in ("<script", "<link", "src=", "url("):
    assert bad not in dom, bad
flagged = sum(len(s[k]) for l in lines if l["sections"] for s in l["sections"].values() for k in ("missing", "unsupported"))
marked = len(re.findall(r'<li class="(missing|unsupported)"', dom))
assert marked == flagged, (marked, flagged)
print(f"explain page: {len(studies)} studies, {marked} missing/unsupported sentences highlighted")
PY

"$CHROMIUM" "${FLAGS[@]}" --window-size=1400,1800 --screenshot="$PWD/$SHOT" "$PAGE" 2>/dev/null
python3 - "$SHOT" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", data[16:24])
assert (w, h) == (1400, 1800) and len(data) > 50_000, (w, h, len(data))
print(f"explain page: screenshot {sys.argv[1]} ({w}x{h}, {len(data) // 1024} KiB)")
PY
