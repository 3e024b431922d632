#!/usr/bin/env bash
# The installed tree, checked as a user of the library would use it:
#   cmake --install BUILD --prefix a temporary folder, every installed part present, the
#   installed `foldcheck --version` runs, then the consumer project in tests/consumer/
#   (find_package(foldcheck) + foldcheck::harness) configured against that prefix (and
#   checked to have found foldcheck there, not elsewhere), built and run on the fixture
#   model and its fold: it must print EXPECTED for the TVM weights and for the model; then the
#   README's example, copied from README.md as printed, built and run the same way.
#
#   tools/check_install.sh BUILD_DIR      (CMAKE: the cmake to use; default the one on PATH)
# The test suite runs it (ctest -R install_and_consumer). Exit 0 when all of it works.
set -euo pipefail
[ $# -eq 1 ] && [ -d "$1" ] || { echo "usage: tools/check_install.sh BUILD_DIR  (a configured and built build folder)" >&2; exit 2; }
build="$(cd "$1" && pwd)"
src="$(cd "$(dirname "$0")/.." && pwd)"
cmake_bin="${CMAKE:-cmake}"
work="$(mktemp -d "${TMPDIR:-/tmp}/foldcheck_install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

"$cmake_bin" --install "$build" --prefix "$prefix" >/dev/null
for f in bin/foldcheck share/foldcheck/foldcheck.schema.json include/foldcheck/numerics/compare.hpp \
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
# The README's example (its ```cmake and ```cpp blocks under "Installing, and foldcheck as a
# C++ library"), exactly as printed: configured, built and run against the same prefix.
readme_block() {  # readme_block LANG: the first LANG block of that section
  awk -v lang="$1" '/^### Installing, and foldcheck as a C\+\+ library/ {in_sec = 1; next}
                    in_sec && /^##/ {exit}
                    in_sec && !done && $0 == "```" lang {in_blk = 1; next}
                    in_blk && $0 == "```" {in_blk = 0; done = 1; next}
                    in_blk {print}' "$src/README.md"
}
mkdir -p "$work/readme"
readme_block cmake >"$work/readme/CMakeLists.txt"
readme_block cpp >"$work/readme/main.cpp"
[ -s "$work/readme/CMakeLists.txt" ] && [ -s "$work/readme/main.cpp" ] ||
  { echo "check_install: the README's cmake/cpp example blocks were not found" >&2; exit 1; }
"$cmake_bin" -S "$work/readme" -B "$work/readme-build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/readme.log" 2>&1 && "$cmake_bin" --build "$work/readme-build" >>"$work/readme.log" 2>&1 ||
  { cat "$work/readme.log" >&2; echo "check_install: the README's example does not build" >&2; exit 1; }
out="$("$work/readme-build/consumer")" || { echo "check_install: the README's example exited $?" >&2; exit 1; }
echo "README example: $out"
case "$out" in *"verdict EXPECTED"*) ;; *) echo "check_install: the README's example did not print verdict EXPECTED" >&2; exit 1 ;; esac
echo "check_install: passed ($("$cmake_bin" --version | head -n 1))"
