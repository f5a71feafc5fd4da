#!/usr/bin/env bash
# Headless Chromium (Debian's `chromium` package) for the browser check of
# `sdr explain --html` (scripts/test-explain-page.sh). Idempotent; prints the
# browser's path on its last line.
set -euo pipefail
for b in chromium chromium-browser; do
  if command -v "$b" >/dev/null; then command -v "$b"; exit 0; fi
done
command -v apt-get >/dev/null || { echo "install-chromium: no apt-get; install Chromium and put it on PATH" >&2; exit 1; }
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
echo "== installing chromium (Debian package)" >&2
$SUDO apt-get install -y -q chromium >/dev/null 2>&1 \
  || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; }
command -v chromium
