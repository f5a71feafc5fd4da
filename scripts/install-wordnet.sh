#!/usr/bin/env bash
# WordNet 3.0 for METEOR's synonym stage: Debian's wordnet-base, read from
# /usr/share/wordnet (or $SDR_WORDNET_DIR). Idempotent; a failure only warns,
# since METEOR then runs without synonyms and says so in its tables.
set -uo pipefail
[ -f /usr/share/wordnet/index.noun ] && exit 0
command -v apt-get >/dev/null || { echo "install-wordnet: no apt-get; METEOR will run without synonyms" >&2; exit 0; }
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
echo "== installing wordnet-base (METEOR synonyms)"
$SUDO apt-get install -y -q wordnet-base >/dev/null 2>&1 \
  || { $SUDO apt-get update -q >/dev/null 2>&1 && $SUDO apt-get install -y -q wordnet-base >/dev/null 2>&1; } \
  || echo "install-wordnet: wordnet-base not installed; METEOR will run without synonyms" >&2
exit 0
