#pragma once
// An `explain` result (harness explain.hpp's to_json), restored once for the renderers
// (reports explain_text, and run's observed weights, which are an explain result with a note).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"
#include "foldcheck/result/views/histogram.hpp"

namespace foldcheck::result::views {

// One listed element of "elements". weight_index ([o,c,kh,kw]) is present only when the
// producer knew the tensor's shape (run's observed weights); drift_ppm is null (nullopt) when
// the original value is zero. exact_folded_digits is the exact fold as a 21-digit string.
struct ExplainElement {
  std::int64_t index = 0;
  std::optional<std::vector<std::int64_t>> weight_index;
  int channel = 0;
  double original = 0, observed = 0, residual_ulp = 0, bound_ulp = 0;
  std::optional<double> drift_ppm;
  std::string exact_folded_digits;
  static ExplainElement from_json(const nlohmann::json& j);
};

// One replayed recipe of "recipes": bit-exact or how many elements differ, its a-priori bound.
struct ExplainRecipe {
  std::string name;
  bool bit_exact = false, explains = false;
  int mismatches = 0;
  double bound_ulp_max = 0;
  static ExplainRecipe from_json(const nlohmann::json& j);
};

// The result: {"dtype", "bn": {"source", "eps"}, "elements", "elements_total"?, "recipes",
// "summary": {"histograms": {"ulp"}}, "scale_inference"?: {"summary"}, "verdict", "reasoning",
// "bit_exact_recipes"?, "note"?}. reasoning is empty when absent. elements lists the elements farthest from the exact
// fold; elements_total (absent in older results: then the listed ones are all) counts every element. scale_inference is
// present when the BatchNorm was not given. bit_exact_recipes (empty when absent) and note (run's observed weights:
// what was observed; "" when absent) serve run's answer.
struct Explain {
  std::string dtype, bn_source;
  double bn_eps = 0;
  std::vector<ExplainElement> elements;
  std::size_t elements_total = 0;
  std::vector<ExplainRecipe> recipes;
  Histogram residuals_ulp;
  std::optional<std::string> scale_inference;
  Verdict verdict = Verdict::Mistrusted;
  std::vector<std::string> reasoning, bit_exact_recipes;
  std::string note;
  static Explain from_json(const nlohmann::json& j);
};

}  // namespace foldcheck::result::views
