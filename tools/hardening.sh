#!/usr/bin/env bash
# The hardening run, the last part of the test command (tools/bootstrap.sh test, .ci/run):
# one clang build in build-hardening/ (or $BUILD_DIR) with AddressSanitizer +
# UndefinedBehaviorSanitizer and libFuzzer coverage (FOLDCHECK_FUZZ=ON), then
#   1. the test suite (ctest) under the sanitizers, but the format checks and the slow Python
#      tests: any leak, overflow or UB report aborts the process and fails its test;
#   2. every fuzz target for FUZZ_SECONDS (default 15) from its seed corpus: a crash, leak,
#      timeout or out-of-memory fails the script and keeps the input in
#      build-hardening/fuzz-findings/ (keep it in fuzz/regressions/<target>/ with the fix).
#
#   tools/hardening.sh [FUZZ_SECONDS]        (0: the tests only)
#
# tools/fuzz.sh runs the same fuzz executables for longer.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/hardening_lib.sh
seconds="${1:-15}"
build="${BUILD_DIR:-build-hardening}"
jobs="${JOBS:-$(nproc)}"
t0=$(date +%s)
configure_hardening "$build"
"${CMAKE:-cmake}" --build "$build" -j "$jobs"
t1=$(date +%s)
echo "hardening: build $((t1 - t0)) s"

# FOLDCHECK_SLOW_TESTS=0: the Python tests marked slow (tests/python/slow_tests.py: minutes of
# TVM, TFLite, torch.compile around a few foldcheck calls, already run by the main test run)
# are left out here, each saying so; every other Python test runs this build's binary.
FOLDCHECK_SLOW_TESTS=0 ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  "$(dirname "$(command -v "${CMAKE:-cmake}")")/ctest" --test-dir "$build" -j "$jobs" --output-on-failure --timeout 1800 \
  -E '^format_check'
# format_check and its self-test run clang-format and clang-tidy on the sources: no code of
# this build runs in them (the ordinary test run has them).
t2=$(date +%s)
echo "hardening: the test suite under ASan + UBSan passed, $((t2 - t1)) s"

status=0
if [ "$seconds" -gt 0 ]; then
  for t in "${FUZZ_TARGETS[@]}"; do run_fuzz_target "$build" "$t" "$seconds" || status=1; done
fi
echo "hardening: $( [ $status = 0 ] && echo passed || echo FAILED ), $(( $(date +%s) - t0 )) s in all"
exit $status
