#!/usr/bin/env bash
# Run the libFuzzer targets for longer than CI's short run: each from its seed corpus for
# SECONDS (default 60), in the clang ASan + UBSan build that tools/hardening.sh uses
# (build-hardening/, or $BUILD_DIR; only the fuzz targets are built here).
#
#   tools/fuzz.sh [SECONDS] [TARGET ...]   targets: fuzz_npy fuzz_npz fuzz_onnx fuzz_case_json
#                                                   fuzz_suite_json fuzz_report_json fuzz_model_run
#
# New inputs accumulate in BUILD_DIR/corpus/<target>/ (the seeds in fuzz/corpus/ stay as
# they are); a crash leaves its input in BUILD_DIR/fuzz-findings/ and fails the script.
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/hardening_lib.sh
seconds="${1:-60}"
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${FUZZ_TARGETS[@]}")
build="${BUILD_DIR:-build-hardening}"
configure_hardening "$build"
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"
status=0
for t in "${targets[@]}"; do run_fuzz_target "$build" "$t" "$seconds" || status=1; done
exit $status
