#!/usr/bin/env bash
# The hardening run CI makes after the main build's tests: one clang build in
# build-hardening/ (or $BUILD_DIR) with AddressSanitizer + UndefinedBehaviorSanitizer and
# libFuzzer coverage (FOLDCHECK_FUZZ=ON), then
#   1. the whole test suite (ctest) under the sanitizers: any leak, overflow or UB report
#      aborts the process and fails its test;
#   2. every fuzz target for FUZZ_SECONDS (default 20) from its seed corpus: a crash, leak,
#      timeout or out-of-memory fails the script and leaves the input in $build/fuzz-findings/
#      (keep it in fuzz/regressions/<target>/ with the fix).
#
#   tools/hardening.sh [FUZZ_SECONDS]        (FUZZ_SECONDS=0: tests only)
#
# Optimised at -O1 with line tables: the sanitizers' usual setting (readable stacks, a
# build and test run that fit in CI). tools/fuzz.sh runs the targets for longer.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
build="${BUILD_DIR:-build-hardening}"
jobs="${JOBS:-$(nproc)}"
t0=$(date +%s)
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
  -DFOLDCHECK_FUZZ=ON -DFOLDCHECK_BUILD_TESTS=ON -DFOLDCHECK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs"
t1=$(date +%s)
echo "hardening: build $((t1 - t0)) s"

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$build" -j "$jobs" --output-on-failure --timeout 1800
t2=$(date +%s)
echo "hardening: tests under ASan + UBSan $((t2 - t1)) s"

[ "$seconds" -gt 0 ] || exit 0
findings="$build/fuzz-findings"
mkdir -p "$findings"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
status=0
for t in fuzz_npy fuzz_npz fuzz_onnx fuzz_case_json fuzz_suite_json fuzz_report_json; do
  work="$(mktemp -d)"  # new inputs go here: the committed seeds stay as they are
  if ! "$build/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$findings/$t-" "$work" "fuzz/corpus/$t" >"$work.log" 2>&1; then
    echo "hardening: $t FAILED; input kept in $findings/, log below" >&2
    tail -n 60 "$work.log" >&2
    status=1
  else
    echo "hardening: $t ${seconds} s, $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$work.log" | grep -o '[0-9]*$') runs, no crash"
  fi
  rm -rf "$work" "$work.log"
done
echo "hardening: total $(( $(date +%s) - t0 )) s"
exit $status
