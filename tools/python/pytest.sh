#!/usr/bin/env bash
# The Python tests (tests/python/) with pytest from the project's .venv (tools/python/venv.sh).
# The test suite runs this (ctest -R python_tests) with FOLDCHECK set to the binary under test.
# A missing .venv, or no test collected (pytest's exit 5), is a failure, never a pass.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="$root/.venv/bin/python"
[ -x "$py" ] || { echo "pytest.sh: no $root/.venv: run tools/python/venv.sh first" >&2; exit 1; }
FOLDCHECK="$(realpath -m "${FOLDCHECK:-$root/build/harness/foldcheck}")"
[ -x "$FOLDCHECK" ] || { echo "pytest.sh: no foldcheck binary at $FOLDCHECK (build it, or set FOLDCHECK)" >&2; exit 1; }
export FOLDCHECK
"$py" -m pytest -q -p no:cacheprovider "$root/tests/python" "$@"
status=$?
[ $status -eq 5 ] && echo "pytest.sh: no test was collected" >&2
exit $status
