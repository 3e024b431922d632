#pragma once
// Fold, then quantize: are dumped integer weights the quantized fold of the BatchNorm, and
// where do correct float folds flip an integer?
//
// The expected integers quantize the exact fold x = w * gamma / sqrt(var + eps) (certified,
// reference fold_weights) with the given or computed scales (quantize.hpp). A correct float
// fold lands within B of x, B the largest a-priori bound of the engine recipes (PyTorch,
// TVM, ONNX Runtime, onnxoptimizer, correctly rounded storage) for that weight
// (fold_pass.hpp FoldInfo::weight_bound). So an integer one step from the expected one, on
// the side of a rounding tie that lies within B of x (tie_distance * s <= B), is an
// EXPECTED flip: some correct float fold gives it. Anything else — two or more steps, one
// step away from a far tie, out of range — is UNEXPECTED.
//
// Each recipe's own fold, quantized with the same scales, is also compared with the
// expected integers: every flip is listed with its tie distance and the float stage whose
// rounding crossed the tie, tried in order with everything after it exact —
//   "rsqrt"       w gamma / sqrt_f32(var + eps): the sum and square root in float32 alone
//                 already land across the tie;
//   "fold_order"  w t with the recipe's float scale t (its reciprocal or division and its
//                 gamma product, in the recipe's order), the product kept exact;
//   "multiply"    only rounding w * t to the storage type crosses it;
//   "storage"     the correctly rounded exact fold (Recipe::Exact).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/numerics/quantize.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"
#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck {

struct QuantCheckInput {
  Tensor weights;                          // OIHW (or any shape with channels on axis 0)
  ref::BnParams bn;                        // one value per output channel
  std::optional<std::vector<std::int64_t>> found;  // dumped integers, same element count
  std::optional<std::vector<double>> scales;       // given scales (one, or one per channel)
  QuantSpec spec;
  ref::Options ref;
};

// JSON: "verdict", "spec", "scales" (+ "scale_source"), "expected_summary", "recipes"
// (each: "recipe", "flips" [{"index", "recipe", "expected", "tie_distance", "stage"}],
// "flip_count"), and with found integers "mismatches" [{"index", "found", "expected",
// "tie_distance", "bound_steps", "verdict"}] and "mismatch_counts".
nlohmann::json quant_check(const QuantCheckInput& in);

// The integers a fold gives: Recipe::Exact quantizes the exact fold; other recipes their
// float fold. Scales as in quant_check.
struct QuantizedFold {
  std::vector<std::int64_t> q;
  std::vector<double> scales;
};
QuantizedFold quantized_fold(const QuantCheckInput& in, const std::string& fold);  // fold: a recipe name or "exact"

}  // namespace foldcheck
