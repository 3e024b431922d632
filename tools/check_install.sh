#!/usr/bin/env bash
# The installed tree, checked as a user of the library would use it:
#   cmake --install BUILD --prefix a temporary folder, every installed part present, the
#   installed `foldcheck --version` runs, then the consumer project in tests/consumer/
#   (find_package(foldcheck) + foldcheck::harness) configured against that prefix alone,
#   built and run: it must print the TVM weights' verdict, EXPECTED.
#
#   tools/check_install.sh BUILD_DIR      (CMAKE: the cmake to use; default the one on PATH)
# The test suite runs it (ctest -R install_and_consumer). Exit 0 when all of it works.
set -euo pipefail
build="$(cd "${1:?usage: tools/check_install.sh BUILD_DIR}" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
cmake_bin="${CMAKE:-cmake}"
work="$(mktemp -d "${TMPDIR:-/tmp}/foldcheck_install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

"$cmake_bin" --install "$build" --prefix "$prefix" >/dev/null
for f in bin/foldcheck share/foldcheck/foldcheck.schema.json include/foldcheck/compare.hpp \
         include/foldcheck/json_assert.hpp include/foldcheck/reference/certify.hpp \
         include/foldcheck/reports/summary.hpp lib/cmake/foldcheck/foldcheckConfig.cmake \
         lib/cmake/foldcheck/foldcheckConfigVersion.cmake lib/cmake/foldcheck/foldcheckTargets.cmake; do
  [ -e "$prefix/$f" ] || { echo "check_install: $f is not installed" >&2; exit 1; }
done
"$prefix/bin/foldcheck" --version

"$cmake_bin" -S "$src/tests/consumer" -B "$work/consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
"$cmake_bin" --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
out="$("$work/consumer/consumer")"
echo "consumer: $out"
case "$out" in *"verdict EXPECTED"*) ;; *) echo "check_install: the consumer did not print verdict EXPECTED" >&2; exit 1 ;; esac
echo "check_install: passed ($("$cmake_bin" --version | head -n 1))"
