#!/usr/bin/env bash
# The compiler launcher every build of tools/bootstrap.sh uses (CMAKE_<LANG>_COMPILER_LAUNCHER):
#   tools/ccache_launcher.sh COMPILER ARG...
# runs `ccache REALPATH(COMPILER) -std=... ARG...` — the same compile, written one way.
#
# ccache hashes the compiler's name and the arguments in their order. The builds of one CI run
# write the same compile differently: CMake 3.25 (the bare Debian root's) puts -std= after the
# compile options, CMake 4.x (pip's) before them; the wheel's build calls /usr/bin/g++, the
# others /usr/bin/c++ (one binary). Each spelling missed the cache the others had filled, so a
# change of a common header compiled everything five times. Written one way — the compiler by
# its real path when that is still a C++ driver (g++ and c++ are x86_64-linux-gnu-g++-12;
# clang++ stays clang++, whose real path, clang, would be another driver), every -std= first (in their order: the last still wins, and -std= interacts
# with no other argument) — the same compile is one cache entry.
set -euo pipefail
compiler="$(command -v "$1")"
real="$(readlink -f "$compiler")"
case "${real##*/}" in *++*) compiler="$real" ;; esac
shift
std=()
rest=()
for a in "$@"; do
  case "$a" in
    -std=*) std+=("$a") ;;
    *) rest+=("$a") ;;
  esac
done
exec ccache "$compiler" "${std[@]}" "${rest[@]}"
