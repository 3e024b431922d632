// The TVM user's three folded weights (README), through an installed foldcheck: the certified
// exact fold of a fresh BatchNorm (foldcheck::reference), each observed float32 weight scored
// against it (the comparison API), and the verdict with each recipe's bound (explain).
#include <cstdio>

#include "foldcheck/explain.hpp"

int main() {
  foldcheck::ExplainInput in;
  in.original = {2.1122932f, 5.5735774f, 2.0870073f};
  in.observed = {2.1122828f, 5.5735493f, 2.0869968f};
  in.bn = {{1.0}, {0.0}, {0.0}, {1.0}, 1e-5};  // one channel, a fresh BatchNorm
  in.bn_given = true;
  const auto exact = foldcheck::ref::fold_weights(in.original, 3, in.bn, in.ref_options);
  const foldcheck::Comparison c = foldcheck::compare(in.observed, exact, foldcheck::DType::Float32);
  const nlohmann::json result = foldcheck::explain(in);
  std::printf("max |ULP| %.3f, verdict %s\n", c.ulp.max_abs, result["verdict"].get<std::string>().c_str());
  return result["verdict"] == "EXPECTED" ? 0 : 1;
}
