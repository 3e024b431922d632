#pragma once
// `foldcheck explain`: from numbers alone (original weights, observed folded weights and
// the BatchNorm parameters), say whether the observed values are a correct fold.
//
// Contract: for each element (channel = index / (n / channels), i.e. axis 0 of OIHW
// weights) it computes the certified exact fold x = w·gamma/sqrt(var+eps), the drift
// 1e6 (observed - original)/|original| and the residual (observed - x) in ULP of the
// dtype. Each recipe is replayed bit for bit; each recipe's a-priori bound
// |w' - x| <= alpha |w| + eta (bounded.hpp) is evaluated per element. The verdict is
// EXPECTED iff some recipe's bound contains every residual. When the BatchNorm was not
// given, the common scale is inferred from the observations (an interval of real scales
// consistent with one rounding per element) and matched to known framework defaults.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck {

struct ExplainInput {
  std::vector<double> original, observed;  // in dtype
  ref::BnParams bn;                        // per channel (length C), already broadcast
  bool bn_given = false;
  std::string bn_source;  // "defaults (fresh BatchNorm)", "flags", a file name
  DType dtype = DType::Float32;
  ref::Options ref_options;
};

struct ScaleInference {
  bool consistent = false;  // one common real scale explains every element
  double lo = 0, hi = 0, estimate = 0;
  double eps_lo = 0, eps_hi = 0;  // eps range if gamma = 1 and var = 1
  std::vector<std::string> matches;  // e.g. "1/sqrt(1+1e-5): fresh BatchNorm, eps 1e-5 (PyTorch, ONNX, TVM default)"
  std::string summary;
};

nlohmann::json explain(const ExplainInput& in);
ScaleInference infer_scale(const std::vector<double>& original, const std::vector<double>& observed, DType t);

}  // namespace foldcheck
