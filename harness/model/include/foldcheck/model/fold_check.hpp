#pragma once
// Folded parameters of one layer against the exact fold, with each engine recipe's
// a-priori bounds (fold_pass.hpp, bounded.hpp).
//
// Contract: the exact fold w*gamma/sqrt(var+eps) and (b-mean)*gamma/sqrt(var+eps)+beta is
// certified correctly rounded in the layer's dtype (reference fold_weights/fold_bias).
// Without observed values, each recipe's own fold is scored against its own bound (the
// drift a correct engine produces). With observed values (another engine's folded model),
// the observation is EXPECTED iff some recipe's bound contains every weight's and bias's
// distance to the exact fold; otherwise UNEXPECTED, and the worst element (largest ratio
// to the bound of the recipe that comes closest) names the output channel.
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace foldcheck {

struct ObservedFold {
  std::vector<double> weight, bias;  // output-channel-major like LayerParams; bias empty: all 0
};

struct RecipeFoldCheck {
  Recipe recipe = Recipe::PyTorch;
  std::optional<DType> fold_dtype;  // observed 16-bit folds: also each recipe in that arithmetic
  std::string label() const { return recipe_label(recipe, fold_dtype); }
  Verdict verdict = Verdict::Expected;
  double worst_ratio = 0;          // max over elements of distance / bound
  std::int64_t worst_channel = -1;  // output channel of that element
  bool worst_in_bias = false;
  // Comparisons with the exact fold (ULP/ppm histograms, bound check), computed for the
  // recipe shown only (FoldCheck::shown); the others have elements = 0 and no bias.
  Comparison weights;
  std::optional<Comparison> bias;  // absent when the recipe keeps no single folded bias
};

struct FoldCheck {
  Verdict verdict = Verdict::Expected;
  std::vector<RecipeFoldCheck> recipes;
  std::size_t best = 0;   // index into recipes: closest_fit (recipes.hpp): the closest, the model's own arithmetic first
  std::size_t shown = 0;  // the one reported in full: observed -> best; else the largest ratio
  bool observed = false;
};

FoldCheck check_fold(const LayerParams& layer, const std::optional<ObservedFold>& observed, const ref::Options& opts);
nlohmann::json to_json(const FoldCheck& f);

}  // namespace foldcheck
