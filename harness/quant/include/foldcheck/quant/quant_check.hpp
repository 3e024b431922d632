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
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/numerics/compare.hpp"
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

// Dumped integers against the expected ones. A mismatch is an expected flip when it is one
// step, within qmax, and the tie on its side lies within the fold bound B of the exact fold.
struct FoundCheck {
  std::int64_t expected_flips = 0, unexpected = 0, matching = 0;
  std::int64_t nonzero = 0;    // found integers that are not 0
  nlohmann::json mismatches;   // [{"index", "flat_index", "found", "expected", "tie_distance", "bound_steps", "verdict"}]
  // UNEXPECTED for any unexpected mismatch; MISTRUSTED when every found integer is 0 (a dump
  // of zeros matches whatever the fold did wherever the expected integer is 0 too).
  Verdict verdict() const;
};

// The result of `quant-check` on weights. JSON: "verdict", "spec", "scales" (+
// "scale_source"), "expected_summary", "recipes" (each: "recipe", "flips" [{"index",
// "recipe", "expected", "tie_distance", "stage"}], "flip_count"), and with found integers
// "mismatches" and "mismatch_counts".
struct QuantCheckResult {
  nlohmann::json detail;       // everything but the found integers' check and the verdict
  std::int64_t near_tie = 0;   // weights within B of a tie: their integer may flip under a correct engine
  std::optional<FoundCheck> found;
  Verdict verdict() const { return found ? found->verdict() : Verdict::Expected; }
  nlohmann::json to_json() const;
  // The scales, near-tie count and recipes' flips: what the layer mode lists as "weights".
  nlohmann::json weights_summary() const;
};
QuantCheckResult quant_check(const QuantCheckInput& in);

// How the BatchNorm's values are read for these weights (bn_params.hpp): dumped integers are
// checked against a real fold, so its four parameters must be given (none from a fresh
// BatchNorm's defaults; eps may be left out: 1e-5), one per output channel (axis 0), checked
// in the weights' dtype. For every caller (the CLI, the module).
BnRule quant_bn_rule(const Tensor& weights);

// The integers a fold gives: Recipe::Exact quantizes the exact fold; other recipes their
// float fold. Scales as in quant_check.
struct QuantizedFold {
  std::vector<std::int64_t> q;
  std::vector<double> scales;
};
QuantizedFold quantized_fold(const QuantCheckInput& in, const std::string& fold);  // fold: a recipe name or "exact"

}  // namespace foldcheck
