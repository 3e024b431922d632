#!/usr/bin/env bash
# Build foldcheck and its tests with AddressSanitizer + UndefinedBehaviorSanitizer in
# build-asan/ (or $BUILD_DIR) and run the whole test suite there. Any sanitizer report
# aborts the failing process, so the run fails on the first leak, overflow or UB.
#
#   tools/sanitize.sh            configure, build, ctest
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build-asan}"
jobs="${JOBS:-$(nproc)}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLDCHECK_SANITIZE=ON -DFOLDCHECK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "$jobs"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ctest --test-dir "$build" -j "$jobs" --output-on-failure --timeout 1800
