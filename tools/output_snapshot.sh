#!/usr/bin/env bash
# The outputs a behaviour-neutral change (the harness redesign, issue 19) must keep byte for
# byte: every shipped case (`run`, JSON and text), the README's examples that need only the
# repository (and the test helpers, when built), `quant-check --case` on the shipped cases,
# and the nightly suite's reports — all with --no-timing. Take one before the change and one
# after, then compare:
#
#   tools/output_snapshot.sh OUT_DIR        FOLDCHECK (default build/harness/foldcheck),
#                                           HELPERS (default build/tests)
#   diff -r BEFORE_DIR AFTER_DIR            (empty: nothing changed)
#
# Each output is OUT_DIR/NAME.{json,txt} with the exit status in NAME.exit. Two things that
# differ between runs of the same inputs are normalized: the random temporary directory of
# `bisect --cmd` (foldcheck_bisect_XXXXXX) and its per-run "seconds", which --no-timing
# does not remove. Not covered: the README's ResNet-18 examples (they need PyTorch exports).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: tools/output_snapshot.sh OUT_DIR}"
fc="${FOLDCHECK:-build/harness/foldcheck}"
helpers="${HELPERS:-build/tests}"
[ -x "$fc" ] || { echo "output_snapshot: $fc not found (build first)" >&2; exit 2; }
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# normalize < raw > clean: the temporary directory's random suffix and per-run seconds.
normalize() {
  sed -E 's/foldcheck_bisect_[A-Za-z0-9]{6}/foldcheck_bisect_XXXXXX/g; s/"seconds": [0-9.e+-]+/"seconds": 0/g'
}

# take NAME ARGS...: the JSON and the text output of one command.
take() {
  local name=$1
  shift
  "$fc" "$@" --format json --no-timing -q 2>"$work/err" | normalize >"$out/$name.json"
  echo "${PIPESTATUS[0]}" >"$out/$name.exit"
  "$fc" "$@" --no-timing -q 2>>"$work/err" | normalize >"$out/$name.txt"
  echo "text ${PIPESTATUS[0]}" >>"$out/$name.exit"
  echo "output_snapshot: $name ($(head -c 1 "$out/$name.exit"))" >&2
}

for c in cases/*.json; do
  case "$c" in cases/nightly.json) continue ;; esac
  n=$(basename "$c" .json)
  take "run_$n" run "$c"
  take "bisect_opt3_$n" bisect "$c" --opt-level 3
done
for c in cases/graffitist_*.json; do take "quant_$(basename "$c" .json)" quant-check --case "$c"; done

# The README's examples.
take explain_seed explain --original 2.1122932,5.5735774,2.0870073 --observed 2.1122828,5.5735493,2.0869968
fx=cases/models/fixture
take adiff_folded accuracy-diff $fx/model.onnx --observed $fx/folded.onnx --input $fx/x.npy
take adiff_corrupt accuracy-diff $fx/model.onnx --observed $fx/corrupt.onnx --input $fx/x.npy
take adiff_output accuracy-diff $fx/model.onnx --input $fx/x.npy --observed-output $fx/y_corrupt.npy
take adiff_weights accuracy-diff $fx/model.onnx --weights-only
take bisect_tvm bisect cases/tvm_thread.json --passes SimplifyInference,FoldConstant,FoldScaleAxis,FuseOps --linear
take bisect_model bisect $fx/model.onnx --input $fx/x.npy --passes SimplifyInference,FoldScaleAxis,FastMath,FuseOps,AlterOpLayout
if [ -x "$helpers/make_bn_seed" ]; then
  "$helpers/make_bn_seed" "$work/seed" >/dev/null
  take diagnose_train diagnose --input "$work/seed/x.npy" --bn "$work/seed/bn.npz" --observed "$work/seed/y_train.npy"
  take diagnose_eval diagnose --input "$work/seed/x.npy" --bn "$work/seed/bn.npz" --observed "$work/seed/y_eval.npy"
fi
if [ -x "$helpers/fake_compiler_impl" ]; then
  "$helpers/fake_compiler_impl" --enabled '' --write-reference "$work/R.npy"
  take bisect_cmd bisect --cmd "$helpers/fake_compiler_impl --disabled {disabled} -o {out}" \
    --passes FoldConstant,Reorder,FuseOps,FastMath,Vectorize --reference "$work/R.npy"
fi
if [ -x "$helpers/fake_conv_compiler" ]; then
  L="$work/L"
  "$helpers/fake_conv_compiler" --seed 4 --write-layer "$L"
  C="$helpers/fake_conv_compiler --seed 4 --enabled {enabled} -o {out}"
  P=SimplifyInference,FoldConstant,FoldScaleAxis,FastMath,FuseOps,Reorder,Vectorize
  take bisect_conv_reference bisect --cmd "$C" --passes $P --reference "$L/reference.npy" --linear
  take bisect_conv_layer bisect --cmd "$C" --passes $P --input "$L/x.npy" --weights "$L/w.npy" --bn "$L/bn.npz" --leave-one-out
  take bisect_conv_model bisect --cmd "$C" --passes $P --model "$L/model.onnx" --input "$L/x.npy"
fi
# Paths under the temporary directory differ between snapshots: name them by their role.
for f in "$out"/*.json "$out"/*.txt; do sed -i "s#$work#WORK#g" "$f"; done

# The nightly suite's reports (JSON, Markdown, HTML, JUnit) and its comparison.
"$fc" suite cases/nightly.json -o "$work/nightly" --no-timing -q
echo "suite $?" >"$out/nightly.exit"
for f in report.json report.md report.html junit.xml; do sed "s#$work#WORK#g" "$work/nightly/$f" >"$out/nightly_$f"; done
"$fc" compare "$work/nightly/report.json" --baseline reports/baselines/nightly.json --no-timing >"$out/nightly_compare.txt"
echo "compare $?" >>"$out/nightly.exit"
echo "output_snapshot: $(ls "$out" | wc -l) files in $out" >&2
