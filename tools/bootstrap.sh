#!/usr/bin/env bash
# foldcheck's one-command set-up for a fresh Debian 12 machine.
#
#   tools/bootstrap.sh run    install what building and running needs, build the `foldcheck`
#                             binary, run the main job (the TVM case)
#   tools/bootstrap.sh test   install that and what the tests need, make the Python environment
#                             (.venv), build everything (the Python module too, linked into
#                             .venv: `import foldcheck`), run every test (ctest: the C++ tests,
#                             the Python tests with pytest in .venv, the module's with PyTorch's
#                             fusers, the installed tree with tools/check_install.sh), build the
#                             wheel (`pip wheel .`) and try it in a fresh virtual environment
#                             (tools/python/wheel_check.sh; WHEEL=0 leaves it out), then the
#                             hardening run (tools/hardening.sh: the tests again under ASan +
#                             UBSan in a clang build, and a short run of every fuzz target;
#                             HARDENING=0 leaves it out, FUZZ_SECONDS sets the fuzz time) and
#                             the bare-system check (tools/fresh_machine.sh: both commands in a
#                             bare Debian 12 root, `test` there without the hardening part
#                             and the wheel; FRESH_MACHINE=0 leaves it out)
#
# Debian packages come from apt-get (as root or through sudo); Python packages from PyPI
# into the project's own virtual environment .venv, pinned by tools/python/requirements.txt,
# never into the system's site-packages. Nothing is downloaded at configure or build time.
# BUILD_DIR (default: build), JOBS (default: nproc) and CMAKE (the cmake to use) may be set.
# Every compile goes through ccache (CCACHE_DISABLE=1: none is reused). Prints how long each
# phase took and the compile cache's hits (lines beginning `bootstrap:`).
set -euo pipefail
usage="usage: tools/bootstrap.sh run|test   (environment: BUILD_DIR, JOBS, CMAKE, HARDENING, FUZZ_SECONDS, FRESH_MACHINE, WHEEL)"
case "${1:-}" in
  -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
mode="${1:-run}"
case "$mode" in run|test) ;; *) echo "$usage" >&2; exit 2 ;; esac
[ $# -le 1 ] || { echo "$usage" >&2; exit 2; }
cd "$(dirname "$0")/.."

# What `run` needs: the compiler, the build tools and the libraries of the `foldcheck` binary.
# Each CMake config or module the build loads is listed with what it loads in turn.
run_packages=(
  g++                  # C++20
  ninja-build          # the generator
  libmpfr-dev          # reference/: certified arithmetic (cmake/FindMPFR.cmake) ...
  libgmp-dev           # ... and the GMP it links
  nlohmann-json3-dev   # JSON results and inputs (nlohmann_jsonConfig: no dependency)
  libfmt-dev           # formatting (fmt-config: no dependency)
  libcli11-dev         # the command line (CLI11Config: no dependency)
  libzip-dev           # .npz files (cmake/FindLibZip.cmake: the library only, not its config)
  libonnx-dev          # ONNX models: ONNXTargets' onnx_proto links protobuf::libprotobuf ...
  libprotobuf-dev      # ... which find_package(Protobuf) (CMake's FindProtobuf) defines
  libboost-dev         # Boost.Random (the end-to-end bound's Gaussians) and, for bench/,
                       #   Boost.Multiprecision (BoostConfig, config mode; header-only)
  ccache               # a compile cache: a rebuild of unchanged sources is a lookup (below)
)
# What `test` adds: the test suite, the benchmark (built by the test command), the hardening
# build, the bare-system check and the Python tests.
test_packages=(
  catch2               # the C++ tests (Catch2Config: no dependency)
  libvalijson-dev      # the tests validate every JSON output against the schema
  libbenchmark-dev     # bench/ (benchmarkConfig: find_dependency(Threads))
  libdnnl-dev          # bench/: oneDNN baseline; Debian's dnnl-config.cmake is built with
  ocl-icd-opencl-dev   #   DNNL_GPU_RUNTIME=OCL and calls find_package(OpenCL): headers + library
  clang                # tools/hardening.sh: the ASan + UBSan + libFuzzer build ...
  libclang-rt-14-dev   # ... and clang's sanitizer and fuzzer runtimes
  chromium             # the HTML report is rendered headless in a test
  debootstrap          # tools/fresh_machine.sh: the bare Debian 12 root
  git                  # tools/fresh_machine.sh: clones the project into that root
  universal-ctags      # tools/check_function_length.py: each function's first and last line
  clang-format         # tools/check_format.py (ctest format_check): .clang-format on changed
                       #   lines, through git-clang-format (in the same package) ...
  clang-tidy           # ... and .clang-tidy's checks on them
  python3              # the Python tests run in .venv, made by ...
  python3-venv         # ... Debian's venv module when the machine's python3 has none
  python3-dev          # the Python module (python/: pybind11) compiles against Python's headers
)

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
t_phase=$(date +%s)
phase() {  # phase NAME: print the time since the previous phase
  local now; now=$(date +%s)
  echo "bootstrap: $1 $((now - t_phase)) s" >&2
  t_phase=$now
}

# The cmake to use, said explicitly: $CMAKE, else the first cmake on PATH if it is at least
# the project's minimum (3.25; a new machine has pip's 4.x first on PATH), else Debian's
# (/usr/bin/cmake, installed here when missing). Both 3.25 and 4.x are tested: CI builds
# with the machine's cmake, tools/fresh_machine.sh with Debian's in a bare root.
cmake_ok() {  # cmake_ok BIN: BIN exists and is >= 3.25
  local v
  v="$("$1" --version 2>/dev/null | head -n 1 | grep -oE '[0-9]+\.[0-9]+' | head -n 1)" || return 1
  [ -n "$v" ] && [ "$(printf '%s\n3.25\n' "$v" | sort -V | head -n 1)" = 3.25 ]
}
if [ -n "${CMAKE:-}" ]; then
  cmake_bin="$(command -v "$CMAKE" || true)"
  cmake_ok "${cmake_bin:-/nonexistent}" || { echo "bootstrap: CMAKE=$CMAKE is not a cmake >= 3.25" >&2; exit 2; }
else
  cmake_bin="$(command -v cmake || true)"
  cmake_ok "${cmake_bin:-/nonexistent}" || { cmake_bin=/usr/bin/cmake; run_packages+=(cmake); }
fi

packages=("${run_packages[@]}")
[ "$mode" = test ] && packages+=("${test_packages[@]}")
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
phase "install (${#missing[@]} Debian packages)"
echo "bootstrap: $("$cmake_bin" --version | head -n 1) ($cmake_bin)" >&2

# Every compile goes through ccache (CMake reads the launcher from the environment when it
# first configures a build directory: this one, the hardening build, the wheel's, the
# installed tree's consumer). Paths below the checkout are hashed relative to it, so a fresh
# clone anywhere, and the bare root's (tools/fresh_machine.sh shares the cache with it),
# reuses what an earlier build compiled. A hit proves as much as a compile: ccache reuses an
# object only when the compiler, its flags, the source and every header it read hash the same
# (a missing header fails the lookup, then the compile); linking is never cached.
# CCACHE_DISABLE=1 compiles everything.
# tools/ccache_launcher.sh writes each compile one way (the compiler by its real path, -std=
# first): CMake 3.25 and 4.x, and the wheel's build, spell the same compile differently.
if command -v ccache >/dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER="$PWD/tools/ccache_launcher.sh" CMAKE_CXX_COMPILER_LAUNCHER="$PWD/tools/ccache_launcher.sh"
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  export CCACHE_DIR="${CCACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/ccache}"
fi
ccache_counts() {  # "HITS MISSES" of the cache so far (0 0 without ccache)
  { command -v ccache >/dev/null && ccache --print-stats 2>/dev/null; } |
    awk -F'\t' '$1=="direct_cache_hit"||$1=="preprocessed_cache_hit"{h+=$2} $1=="cache_miss"{m+=$2}
                END{printf "%d %d", h, m}'
}
read -r hits0 misses0 <<<"$(ccache_counts)"
ccache_line() {  # the compile cache's hits and misses since the start (a concurrent build sharing it counts too)
  command -v ccache >/dev/null || return 0
  local h m; read -r h m <<<"$(ccache_counts)"
  echo "bootstrap: compile cache: $((h - hits0)) hits, $((m - misses0)) compiled ($CCACHE_DIR)" >&2
}

build="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"
if [ "$mode" = run ]; then
  # Only the binary: no tests, benchmark or fuzz bodies to configure or compile.
  "$cmake_bin" -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DFOLDCHECK_BUILD_TESTS=OFF -DFOLDCHECK_BUILD_BENCH=OFF >/dev/null
  phase configure
  "$cmake_bin" --build "$build" -j "$jobs" --target foldcheck
  phase build
  ccache_line
  "$build/harness/foldcheck" run cases/tvm_thread.json
  phase run
  exit 0
fi

# The Python environment first: the Python module is built against its interpreter and its
# pybind11 (both pinned in tools/python/requirements.txt).
tools/python/venv.sh
phase "python environment"
"$cmake_bin" -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DFOLDCHECK_BUILD_TESTS=ON -DFOLDCHECK_BUILD_BENCH=ON \
  -DFOLDCHECK_BUILD_PYTHON=ON -DPython_EXECUTABLE="$PWD/.venv/bin/python" >/dev/null
phase configure
"$cmake_bin" --build "$build" -j "$jobs"
phase build
ccache_line
# `import foldcheck` and the `foldcheck` command in .venv, from this build (as `pip install -e`
# would; the wheel itself is built and installed in a fresh environment below).
tools/python/link_build.sh "$build"
ctest_bin="$(dirname "$cmake_bin")/ctest"
# Every test, the installed tree and its consumer (install_and_consumer) and the Python tests
# (python_tests) among them.
# CTEST_EXCLUDE: a regular expression of tests left out (the bare-system check's, below).
"$ctest_bin" --test-dir "$build" -j "$jobs" --output-on-failure ${CTEST_EXCLUDE:+-E "$CTEST_EXCLUDE"}
phase "tests (ctest)"
# `pip wheel .` from this checkout, installed in a fresh virtual environment and tried there.
if [ "${WHEEL:-1}" != 0 ]; then
  JOBS="$jobs" tools/python/wheel_check.sh
  phase "wheel"
  ccache_line
fi
if [ "${HARDENING:-1}" != 0 ]; then
  CMAKE="$cmake_bin" tools/hardening.sh "${FUZZ_SECONDS:-15}"
  phase hardening
  ccache_line
fi
# The two commands again on a bare Debian 12 root, each from nothing: `run` (the TVM verdict)
# proves the run packages; `test` without the hardening part proves the test packages, the
# Python environment and the install check with Debian's cmake (about 7 minutes more). Nor
# the wheel there (WHEEL=0, about 11 minutes): it builds the same sources with the Debian
# packages the bare build has just proven and the pinned .venv it has just made, and it is
# built and tried above — the bare root would prove nothing more, at a sixth of CI's time. Nor
# the Python tests marked slow (FOLDCHECK_SLOW_TESTS=0, tests/python/slow_tests.py: model- and
# compiler-scale, each skips itself there, saying so): they ran above on the same sources and
# packages. Nor format_check (clang-format and
# clang-tidy on the lines changed since tools/format_base, minutes of clang-tidy when a
# session changed much): it judges the sources, the same ones with the same Debian tools
# there; its self-test (format_checker_finds_findings) proves the tools work in the root.
if [ "${FRESH_MACHINE:-1}" != 0 ]; then
  "${sudo_cmd[@]}" tools/fresh_machine.sh --mode run
  phase "bare-system check (run)"
  "${sudo_cmd[@]}" env HARDENING=0 WHEEL=0 FOLDCHECK_SLOW_TESTS=0 CTEST_EXCLUDE='^format_check$' \
    tools/fresh_machine.sh --mode test
  phase "bare-system check (test, HARDENING=0 WHEEL=0 FOLDCHECK_SLOW_TESTS=0, format_check left out)"
fi
