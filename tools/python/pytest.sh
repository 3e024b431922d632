#!/usr/bin/env bash
# The Python tests (tests/python/) with pytest from the project's .venv (tools/python/venv.sh).
# The test suite runs this (ctest -R python_tests; python_module_tests with tests/python_module)
# with FOLDCHECK set to the binary under test.
#   tools/python/pytest.sh [tests/python | tests/python_module[/FILE.py] | tests/python_keras] [pytest arguments]
# (tests/python_keras imports tensorflow: a process apart from the torch tests, see tests/CMakeLists.txt)
# A missing .venv, or no test collected (pytest's exit 5), is a failure, never a pass.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="$root/.venv/bin/python"
[ -x "$py" ] || { echo "pytest.sh: no $root/.venv: run tools/python/venv.sh first" >&2; exit 1; }
FOLDCHECK="$(realpath -m "${FOLDCHECK:-$root/build/harness/foldcheck}")"
[ -x "$FOLDCHECK" ] || { echo "pytest.sh: no foldcheck binary at $FOLDCHECK (build it, or set FOLDCHECK)" >&2; exit 1; }
export FOLDCHECK
# The Python package of the same build (BUILD/python beside BUILD/harness/foldcheck), for the
# module's tests; its first argument names the test folder (default tests/python).
package="$(dirname "$(dirname "$FOLDCHECK")")/python"
[ -d "$package/foldcheck" ] && export PYTHONPATH="$package${PYTHONPATH:+:$PYTHONPATH}"
tests="$root/tests/python"
if [ $# -gt 0 ] && [ -e "$root/$1" ]; then tests="$root/$1"; shift; fi
if [ "$tests" != "$root/tests/python" ] && [ ! -d "$package/foldcheck" ]; then
  echo "pytest.sh: no Python package at $package (configure with -DFOLDCHECK_BUILD_PYTHON=ON)" >&2
  exit 1
fi
"$py" -m pytest -q -p no:cacheprovider "$tests" "$@"
status=$?
[ $status -eq 5 ] && echo "pytest.sh: no test was collected" >&2
exit $status
