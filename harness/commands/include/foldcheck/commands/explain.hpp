#pragma once
// `foldcheck explain`: from numbers alone (original weights, observed folded weights and
// the BatchNorm parameters), say whether the observed values are a correct fold.
//
// Contract: for each element (channel = index / (n / channels), i.e. axis 0 of OIHW
// weights) it computes the certified exact fold x = w·gamma/sqrt(var+eps), the drift
// 1e6 (observed - original)/|original| and the residual (observed - x) in ULP of the
// dtype. Each recipe is replayed bit for bit (a 16-bit dtype: also in that arithmetic, as
// PyTorch folds a .half() module); each recipe's a-priori bound
// |w' - x| <= alpha |w| + eta (bounded.hpp) is evaluated per element. The verdict is
// EXPECTED iff some recipe's bound contains every residual. When the BatchNorm was not
// given, the common scale is inferred from the observations (an interval of real scales
// consistent with one rounding per element) and matched to known framework defaults.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/recipes.hpp"
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

// One recipe replayed on the original weights, in the model's arithmetic or, for a 16-bit
// model, also with every fold operation rounded to the model's type (fold_dtype).
struct RecipeScore {
  Recipe recipe = Recipe::Exact;
  std::optional<DType> fold_dtype;
  std::string label() const { return recipe_label(recipe, fold_dtype); }
  std::int64_t mismatches = 0;   // elements whose replay differs from the observation
  double bound_ulp_max = 0;      // its largest per-element bound, in ULP of the exact fold
  double worst_ratio = 0;        // max |observed - exact| / bound
  std::vector<double> bound;     // per element, absolute
  std::vector<std::size_t> infinite;  // the elements its replay makes infinite (an overflow of its chain)
  bool bit_exact() const { return mismatches == 0; }
  bool explains() const { return worst_ratio <= 1.0; }
};

// One element as the result lists it.
struct ExplainElement {
  std::size_t index = 0, channel = 0;
  double original = 0, observed = 0;
  std::optional<long double> drift_ppm;  // none for a zero original
  ref::Value exact;                      // the certified exact fold
  double correctly_rounded = 0;          // the exact fold rounded to the dtype
  double residual_ulp = 0, bound_ulp = 0;
};

// What explain finds; the verdict and the reasoning follow from these fields.
struct ExplainResult {
  DType dtype = DType::Float32;
  ref::BnParams bn;
  std::string bn_source;
  bool bn_given = false;
  long precision_bits = 0;                // of the certified reference
  std::vector<RecipeScore> recipes;       // all_recipes() order, each in observed_fold_arithmetics(dtype)
  std::size_t cited = 0;                  // the recipe cited: first bit-exact, else the best-fitting bound
  Comparison summary;                     // every element against the exact fold, with the cited bound
  std::vector<ExplainElement> elements;   // all, or the worst relative to their bound (listed_elements)
  std::size_t elements_total = 0;
  std::size_t worst_index = 0;            // the largest |residual|
  double worst_residual_ulp = 0, worst_bound_ulp = 0;
  double worst_observed = 0, worst_exact = 0;  // there: the observation, the exact fold (to double)
  bool worst_exact_overflows = false;         // the exact fold's correct rounding there is infinite
  std::int64_t overflow_matches = 0;          // observed infinities that are the exact fold's correct rounding
  std::optional<ScaleInference> scale;    // when the BatchNorm was not given
  // Every element (index order), for callers that take arrays (the Python module): the residual
  // in ULP, the cited recipe's bound in ULP, and the exact fold (to double).
  std::vector<double> residual_ulp, bound_ulp, exact_fold;

  bool explained() const;                 // some recipe's bound holds everywhere, no NaN, no Inf mismatch
  bool vacuous() const;                   // explained, but nothing compared (every exact value 0 or not finite)
  Verdict verdict() const;
  nlohmann::json to_json() const;         // the `explain` result (schema "explain")
};

ExplainResult explain(const ExplainInput& in);
ScaleInference infer_scale(const std::vector<double>& original, const std::vector<double>& observed, DType t);

}  // namespace foldcheck
