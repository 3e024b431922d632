#!/usr/bin/env bash
# Refresh the committed baseline after an intended change: run the nightly suite without
# the timing block (the report is then the same bytes on every run and thread count), show
# what changed against the old baseline, and replace it. Review the diff and commit it.
#
#   tools/refresh_baselines.sh
#
# Environment: FOLDCHECK (default build/harness/foldcheck), SUITE (default
# cases/nightly.json), BASELINE (default reports/baselines/nightly.json).
set -euo pipefail
cd "$(dirname "$0")/.."
fc="${FOLDCHECK:-build/harness/foldcheck}"
suite="${SUITE:-cases/nightly.json}"
baseline="${BASELINE:-reports/baselines/nightly.json}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$fc" suite "$suite" -o "$tmp" --no-timing -q || true   # a failing entry is part of the record
if [ -f "$baseline" ]; then
  "$fc" compare "$tmp/report.json" --baseline "$baseline" || true
fi
mkdir -p "$(dirname "$baseline")"
cp "$tmp/report.json" "$baseline"
echo "refreshed $baseline"
