#!/usr/bin/env bash
# Build the libFuzzer targets with clang in build-fuzz/ (every library instrumented, ASan +
# UBSan on) and run each from its seed corpus for SECONDS (default 60).
#
#   tools/fuzz.sh [SECONDS] [TARGET ...]     targets: fuzz_npy fuzz_npz fuzz_onnx fuzz_case_json fuzz_suite_json fuzz_report_json
#
# New inputs go to build-fuzz/corpus/<target>/ (the seeds in fuzz/corpus/ stay as they are);
# a crash leaves build-fuzz/crash-* and fails the script: turn it into a regression test.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_npy fuzz_npz fuzz_onnx fuzz_case_json fuzz_suite_json fuzz_report_json)
build="${BUILD_DIR:-build-fuzz}"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLDCHECK_FUZZ=ON \
  -DFOLDCHECK_BUILD_TESTS=OFF -DFOLDCHECK_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t"
  echo "fuzz: $t for ${seconds}s"
  (cd "$build" && "./fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
     "corpus/$t" "../fuzz/corpus/$t" 2>&1 | tail -n 4)
done
