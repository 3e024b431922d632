// A program built against an installed foldcheck (tools/check_install.sh): the TVM user's three
// folded weights scored against the certified exact fold of a fresh BatchNorm (the reference
// and the comparison API) with each recipe's bound (explain, rendered by the reports library),
// then an ONNX model and its fold (argv[1], argv[2]: the library's ONNX reader links too).
#include <cstdio>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/commands/explain.hpp"
#include "foldcheck/reports/text.hpp"
// foldcheck's nlohmann::json configuration (json_assert.hpp) comes from the installed targets'
// interface, never from an include of the consumer's: without it this does not compile.
static_assert(sizeof(foldcheck::JsonAccessError) > 0);

int main(int argc, char** argv) {
  foldcheck::ExplainInput in;
  in.original = {2.1122932f, 5.5735774f, 2.0870073f};
  in.observed = {2.1122828f, 5.5735493f, 2.0869968f};
  in.bn = {{1.0}, {0.0}, {0.0}, {1.0}, 1e-5};  // one channel, a fresh BatchNorm
  in.bn_given = true;
  const auto exact = foldcheck::ref::fold_weights(in.original, 3, in.bn, in.ref_options);
  const foldcheck::Comparison c = foldcheck::compare(in.observed, exact, foldcheck::DType::Float32);
  const nlohmann::json weights = foldcheck::explain(in).to_json();
  std::printf("%s", foldcheck::reports::explain_text(weights).c_str());
  std::printf("max |ULP| %.3f, verdict %s\n", c.ulp.max_abs, weights["verdict"].get<std::string>().c_str());
  if (argc < 3) return 2;
  foldcheck::AccuracyDiffOptions opts;
  opts.observed_model = argv[2];
  opts.weights_only = true;
  const nlohmann::json model = foldcheck::accuracy_diff(argv[1], opts).to_json();
  std::printf("model: %zu layers, verdict %s\n", model["layers"].size(), model["verdict"].get<std::string>().c_str());
  return weights["verdict"] == "EXPECTED" && model["verdict"] == "EXPECTED" ? 0 : 1;
}
