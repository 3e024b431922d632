#!/usr/bin/env bash
# foldcheck's one-command set-up for a fresh Debian 12 machine.
#
#   tools/bootstrap.sh run    install what is missing, build, run the main job (the TVM case)
#   tools/bootstrap.sh test   install what is missing, build, run every test (ctest), then the
#                             hardening run (tools/hardening.sh: the tests again under ASan +
#                             UBSan in a clang build, and a short run of every fuzz target;
#                             HARDENING=0 leaves it out, FUZZ_SECONDS sets the fuzz time)
#
# Installs only Debian packages (apt-get, as root or through sudo); nothing is downloaded
# at configure or build time. BUILD_DIR (default: build) and JOBS (default: nproc) may be set.
set -euo pipefail
mode="${1:-run}"
case "$mode" in run|test) ;; *) echo "usage: tools/bootstrap.sh run|test" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ libmpfr-dev libgmp-dev libcli11-dev catch2 libbenchmark-dev
          nlohmann-json3-dev libfmt-dev libzip-dev libboost-dev libdnnl-dev
          libonnx-dev libprotobuf-dev protobuf-compiler libvalijson-dev chromium
          clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build="${BUILD_DIR:-build}"
jobs="${JOBS:-$(nproc)}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$jobs"

if [ "$mode" = run ]; then
  "$build/harness/foldcheck" run cases/tvm_thread.json
else
  ctest --test-dir "$build" -j "$jobs" --output-on-failure
  if [ "${HARDENING:-1}" != 0 ]; then
    tools/hardening.sh "${FUZZ_SECONDS:-15}"
  fi
fi
