#!/usr/bin/env bash
# The installed tree, checked as a user of the library would use it:
#   cmake --install BUILD --prefix a temporary folder, every installed part present, the
#   installed `foldcheck --version` runs, then the consumer project in tests/consumer/
#   (find_package(foldcheck) + foldcheck::harness) configured against that prefix (and
#   checked to have found foldcheck there, not elsewhere), built and run on the fixture
#   model and its fold: it must print EXPECTED for the TVM weights and for the model.
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

"$cmake_bin" -S "$src/tests/consumer" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >"$work/configure.log" 2>&1 || { cat "$work/configure.log" >&2; exit 1; }
found="$(sed -n 's/^foldcheck_DIR:PATH=//p' "$work/consumer/CMakeCache.txt")"
[ "$found" = "$prefix/lib/cmake/foldcheck" ] ||
  { echo "check_install: the consumer found foldcheck in '$found', not in the installed prefix" >&2; exit 1; }
"$cmake_bin" --build "$work/consumer" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
status=0
out="$("$work/consumer/consumer" "$src/cases/models/fixture/model.onnx" "$src/cases/models/fixture/folded.onnx")" || status=$?
printf '%s\n' "$out" | tail -n 2 | sed 's/^/consumer: /'
if [ "$status" -ne 0 ] || [ "$(printf '%s\n' "$out" | grep -c 'verdict EXPECTED')" -ne 2 ]; then
  echo "check_install: the consumer exited $status; it must print verdict EXPECTED twice" >&2
  exit 1
fi
echo "check_install: passed ($("$cmake_bin" --version | head -n 1))"
