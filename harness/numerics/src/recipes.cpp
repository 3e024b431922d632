#include "foldcheck/numerics/recipes.hpp"

#include "foldcheck/base/errors.hpp"

namespace foldcheck {

const std::vector<Recipe>& all_recipes() {
  static const std::vector<Recipe> v{Recipe::PyTorch, Recipe::Tvm, Recipe::OnnxRuntime, Recipe::OnnxOptimizer,
                                     Recipe::Exact};
  return v;
}

const char* name(Recipe r) {
  switch (r) {
    case Recipe::PyTorch: return "pytorch";
    case Recipe::Tvm: return "tvm";
    case Recipe::OnnxRuntime: return "onnxruntime";
    case Recipe::OnnxOptimizer: return "onnxoptimizer";
    case Recipe::Exact: return "exact";
  }
  return "?";
}

Recipe recipe_from_name(std::string_view n) {
  for (Recipe r : all_recipes())
    if (n == name(r)) return r;
  throw InputError("unknown recipe '" + std::string(n) +
                   "' (expected pytorch, tvm, onnxruntime, onnxoptimizer or exact)");
}

std::string describe(Recipe r) {
  switch (r) {
    case Recipe::PyTorch: return "r = 1/sqrt(var + eps); w' = w*(gamma*r); b' = ((b - mean)*r)*gamma + beta";
    case Recipe::Tvm: return "s = (1/sqrt(var + float(eps)))*gamma; w' = w*s; shift = (-mean)*s + beta";
    case Recipe::OnnxRuntime: return "s = gamma/sqrt(var + float(eps)); w' = w*s; b' = ((b - mean)*s) + beta or beta - mean*s";
    case Recipe::OnnxOptimizer: return "s = gamma/sqrt(var + float(eps)); w' = w*s; b' = ((b - mean)*s) + beta";
    case Recipe::Exact: return "w' = RN(w*gamma/sqrt(var + eps)), b' = RN((b - mean)*gamma/sqrt(var + eps) + beta)";
  }
  return "";
}

std::string recipe_label(Recipe r, std::optional<DType> fold_dtype) {
  if (!fold_dtype) return name(r);
  return std::string(name(r)) + " (" + foldcheck::name(*fold_dtype) + " arithmetic)";
}

std::vector<std::optional<DType>> observed_fold_arithmetics(DType t) {
  if (info(t).arithmetic == t) return {std::nullopt};
  return {std::nullopt, t};
}

std::size_t closest_fit(const std::vector<FitCandidate>& c) {
  std::size_t best = 0, best_own = c.size();
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c[i].worst_ratio < c[best].worst_ratio) best = i;
    if (!c[i].narrow_arithmetic && (best_own == c.size() || c[i].worst_ratio < c[best_own].worst_ratio)) best_own = i;
  }
  return best_own < c.size() && c[best_own].worst_ratio <= 1 ? best_own : best;
}

bool eps_through_float32(Recipe r) { return r != Recipe::PyTorch; }

}  // namespace foldcheck
