#!/usr/bin/env bash
# Nightly numerics regression: run the nightly suite, compare it with the committed
# baseline, and leave every report in one directory.
#
#   tools/nightly.sh [OUT_DIR]          (default: nightly-report)
#
# Writes OUT_DIR/report.json, report.md, report.html, junit.xml, results/, and the
# comparison as compare.txt, compare.md and compare.json. In GitHub Actions the Markdown
# goes to the job summary ($GITHUB_STEP_SUMMARY).
# Environment: FOLDCHECK (default build/harness/foldcheck), SUITE (default
# cases/nightly.json), BASELINE (default reports/baselines/nightly.json), TOLERANCE
# (default: compare's, 0.1), THREADS (default 0: all cores).
# Exit: 0 every entry passed and nothing regressed; 1 an entry failed or a regression;
# 2 a usage or tool error.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-nightly-report}"
fc="${FOLDCHECK:-build/harness/foldcheck}"
suite="${SUITE:-cases/nightly.json}"
baseline="${BASELINE:-reports/baselines/nightly.json}"
[ -x "$fc" ] || { echo "nightly: $fc not found (build first: tools/bootstrap.sh run)" >&2; exit 2; }
[ -f "$baseline" ] || { echo "nightly: no baseline $baseline (tools/refresh_baselines.sh makes one)" >&2; exit 2; }

"$fc" suite "$suite" -o "$out" --threads "${THREADS:-0}" -q
suite_rc=$?
[ $suite_rc -le 1 ] || exit 2
tol=()
[ -n "${TOLERANCE:-}" ] && tol=(--tolerance "$TOLERANCE")
"$fc" compare "$out/report.json" --baseline "$baseline" "${tol[@]}" --format json -o "$out/compare.json"
compare_rc=$?
[ $compare_rc -le 1 ] || exit 2
"$fc" compare "$out/report.json" --baseline "$baseline" "${tol[@]}" --format markdown -o "$out/compare.md"
"$fc" compare "$out/report.json" --baseline "$baseline" "${tol[@]}" | tee "$out/compare.txt"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  cat "$out/report.md" "$out/compare.md" >> "$GITHUB_STEP_SUMMARY"
fi
echo "nightly: suite $([ $suite_rc -eq 0 ] && echo passed || echo FAILED), $([ $compare_rc -eq 0 ] && echo 'no regression' || echo REGRESSION); reports in $out/"
[ $suite_rc -eq 0 ] && [ $compare_rc -eq 0 ]
