# Shared by tools/hardening.sh and tools/fuzz.sh (sourced): one clang build with
# AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer coverage serves the test run
# under the sanitizers and the fuzz targets.

FUZZ_TARGETS=(fuzz_npy fuzz_npz fuzz_onnx fuzz_case_json fuzz_suite_json fuzz_report_json fuzz_model_run)

# configure_hardening BUILD_DIR: -O1 with line tables, the sanitizers' usual setting
# (readable stacks; a build and test run that fit in CI).
configure_hardening() {
  CC=clang CXX=clang++ "${CMAKE:-cmake}" -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=None -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
    -DFOLDCHECK_FUZZ=ON -DFOLDCHECK_BUILD_TESTS=ON -DFOLDCHECK_BUILD_BENCH=OFF \
    -DFOLDCHECK_TEST_TIMEOUT_SCALE=6 >/dev/null
}

# run_fuzz_target BUILD_DIR TARGET SECONDS: from the committed seeds (fuzz/corpus/TARGET),
# new inputs in a scratch directory (BUILD_DIR/corpus/TARGET, kept between runs). A crash,
# leak, timeout or out-of-memory input is kept in BUILD_DIR/fuzz-findings/ and the function
# returns 1 after printing the log's end; otherwise it prints one line of statistics.
run_fuzz_target() {
  local build="$1" t="$2" seconds="$3" log
  mkdir -p "$build/corpus/$t" "$build/fuzz-findings"
  log="$(mktemp)"
  if ! ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:allocator_may_return_null=1" \
       UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
       "$build/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="$build/fuzz-findings/$t-" "$build/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1; then
    echo "fuzz: $t FAILED; the input is in $build/fuzz-findings/ (keep it in fuzz/regressions/$t/ with the fix)" >&2
    tail -n 60 "$log" >&2
    rm -f "$log"
    return 1
  fi
  echo "fuzz: $t ${seconds} s: $(grep -o 'number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$') runs," \
       "peak $(grep -o 'peak_rss_mb: *[0-9]*' "$log" | grep -o '[0-9]*$') MB, no crash"
  rm -f "$log"
}
