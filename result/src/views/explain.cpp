// Restoring an `explain` result (views/explain.hpp).
#include "foldcheck/result/views/explain.hpp"

#include "foldcheck/result/views/json_io.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

ExplainElement ExplainElement::from_json(const json& j) {
  ExplainElement e;
  e.index = required_count(j, "index");
  e.weight_index = optional<std::vector<std::int64_t>>(j, "weight_index");
  e.channel = required_count<int>(j, "channel");
  e.original = required<double>(j, "original");
  e.observed = required<double>(j, "observed");
  e.drift_ppm = optional<double>(j, "drift_ppm");
  e.exact_folded_digits = required<std::string>(j, "exact_folded_digits");
  e.residual_ulp = required<double>(j, "residual_ulp");
  e.bound_ulp = required<double>(j, "bound_ulp");
  return e;
}

ExplainRecipe ExplainRecipe::from_json(const json& j) {
  ExplainRecipe r;
  r.name = required<std::string>(j, "name");
  r.bit_exact = required<bool>(j, "bit_exact");
  r.mismatches = required_count<int>(j, "mismatches");
  r.bound_ulp_max = required<double>(j, "bound_ulp_max");
  r.explains = required<bool>(j, "explains");
  return r;
}

Explain Explain::from_json(const json& j) {
  Explain x;
  x.dtype = required<std::string>(j, "dtype");
  const json& bn = j.at("bn");
  x.bn_source = required<std::string>(bn, "source");
  x.bn_eps = required<double>(bn, "eps");
  for (const json& e : j.at("elements")) x.elements.push_back(ExplainElement::from_json(e));
  x.elements_total = optional_count<std::size_t>(j, "elements_total").value_or(x.elements.size());
  for (const json& r : j.at("recipes")) x.recipes.push_back(ExplainRecipe::from_json(r));
  x.residuals_ulp = Histogram::from_json(j.at("summary").at("histograms").at("ulp"));
  if (auto it = j.find("scale_inference"); it != j.end()) x.scale_inference = required<std::string>(*it, "summary");
  x.verdict = required_verdict(j, "verdict");
  x.reasoning = optional<std::vector<std::string>>(j, "reasoning").value_or(std::vector<std::string>{});
  x.bit_exact_recipes = optional<std::vector<std::string>>(j, "bit_exact_recipes").value_or(std::vector<std::string>{});
  x.note = optional<std::string>(j, "note").value_or("");
  return x;
}

}  // namespace foldcheck::result::views
