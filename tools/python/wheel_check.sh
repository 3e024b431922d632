#!/usr/bin/env bash
# The Python package as users install it: `pip wheel .` from this checkout (scikit-build-core
# and pybind11 from .venv, pinned: nothing downloaded at build time), the wheel installed in a
# fresh virtual environment (its dependency, numpy, from PyPI), and tried there: `import
# foldcheck` with the TVM thread's weights (EXPECTED, the tvm recipe bit for bit), the
# `foldcheck` command on the TVM case, and what the wheel holds.
#   tools/python/wheel_check.sh       (JOBS: build jobs; WHEEL_DIR: keep the wheel there)
# Exit 0 when every check passes; prints how long the build took and the wheel's size.
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
[ -x .venv/bin/python ] || { echo "wheel_check: no .venv (tools/python/venv.sh makes it)" >&2; exit 1; }
work="$(mktemp -d /tmp/foldcheck-wheel.XXXXXX)"
trap 'rm -rf "$work"' EXIT
out="${WHEEL_DIR:-$work/dist}"
# The build directory inside the checkout (made anew), so that ccache, when tools/bootstrap.sh
# routes compiles through it, hashes its paths relative to the checkout like the other builds.
wheel_build="$root/build-wheel"
rm -rf "$wheel_build"
t0=$(date +%s)
CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-$(nproc)}" .venv/bin/python -m pip wheel -q --no-build-isolation --no-deps \
  --config-settings=build-dir="$wheel_build" -w "$out" . >"$work/build.log" 2>&1 ||
  { tail -n 30 "$work/build.log" >&2; echo "wheel_check: pip wheel failed" >&2; exit 1; }
wheel="$(ls "$out"/foldcheck-*.whl)"
echo "wheel_check: built $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KB) in $(( $(date +%s) - t0 )) s"
# The license text travels with the wheel (pyproject.toml's license-files).
.venv/bin/python -c 'import sys, zipfile; names = zipfile.ZipFile(sys.argv[1]).namelist()
sys.exit(not any(n.endswith(".dist-info/licenses/LICENSE") for n in names))' "$wheel" ||
  { echo "wheel_check: the wheel carries no LICENSE" >&2; exit 1; }
python="$(.venv/bin/python -c 'import sys; print(sys._base_executable)')"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q --disable-pip-version-check "$wheel" >"$work/install.log" 2>&1 ||
  { tail -n 20 "$work/install.log" >&2; echo "wheel_check: installing the wheel failed" >&2; exit 1; }
cd "$work"  # away from the checkout: the installed package, not python/foldcheck, is imported
"$work/venv/bin/python" - "$root" <<'PY'
import os, sys
import foldcheck
assert os.path.dirname(foldcheck.__file__).startswith(sys.prefix), foldcheck.__file__
r = foldcheck.explain([2.1122932], [2.1122828])
assert r.verdict == "EXPECTED" and "tvm" in r.bit_exact_recipes, r.report()
assert abs(float(r.residual_ulp[0])) < 0.6 and not r.residual_ulp.flags.writeable
run = foldcheck.run(os.path.join(sys.argv[1], "cases", "tvm_thread.json"))
assert run.verdict == "EXPECTED", run.report()
print(f"wheel_check: import foldcheck {foldcheck.__version__} from {os.path.dirname(foldcheck.__file__)}: TVM seed "
      f"{r.verdict}, bit for bit {', '.join(r.bit_exact_recipes)}")
PY
"$work/venv/bin/foldcheck" --version
"$work/venv/bin/foldcheck" run "$root/cases/tvm_thread.json" -q | grep -q '^verdict: EXPECTED' ||
  { echo "wheel_check: the installed foldcheck command did not find the TVM case EXPECTED" >&2; exit 1; }
echo "wheel_check: passed"
