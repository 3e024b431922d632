#!/usr/bin/env bash
# foldcheck_bench once per x86-64 level this CPU can run (FOLDCHECK_ISA=v4, v3, base; the
# reference's kernels, conv_bn_reference.hpp isa_level), one JSON per level in OUT_DIR, then
# one Markdown table per level (tools/bench_table.py).
#
# usage: tools/bench_levels.sh [BUILD_DIR [OUT_DIR]] [-- BENCHMARK_ARGS...]
#   BUILD_DIR  default build; OUT_DIR default BUILD_DIR/bench_levels
#   e.g. tools/bench_levels.sh build -- --benchmark_filter='conv3x3_64/(onednn|float32|reference)/'
set -euo pipefail
cd "$(dirname "$0")/.."
build=build out=
if [[ $# -gt 0 && $1 != -- ]]; then build=$1; shift; fi
if [[ $# -gt 0 && $1 != -- ]]; then out=$1; shift; fi
[[ $# -gt 0 && $1 == -- ]] && shift
out=${out:-$build/bench_levels}
bench=$build/bench/foldcheck_bench
[[ -x $bench ]] || { echo "bench_levels: no $bench (configure with -DFOLDCHECK_BUILD_BENCH=ON)" >&2; exit 2; }
mkdir -p "$out"
files=()
for level in $("$bench" --list-isa-levels); do
  echo "bench_levels: FOLDCHECK_ISA=$level" >&2
  FOLDCHECK_ISA=$level "$bench" --benchmark_out="$out/$level.json" --benchmark_out_format=json "$@" >&2
  files+=("$out/$level.json")
done
python3 tools/bench_table.py "${files[@]}"
