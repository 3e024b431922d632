// The typed nodes of a `run` result (run_case.hpp): each node's verdict from its children
// through result/judgement.hpp, and each node's JSON composed from its children's.
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/result/judgement.hpp"

namespace foldcheck {

using json = nlohmann::json;

namespace {

const char* cause_name(BiasMistrust m) {
  return m == BiasMistrust::AllExactZero ? "all_exact_zero" : "rounds_to_zero_or_infinity";
}

}  // namespace

json EpsHeldInFloat32::to_json() const {
  return json{{"recipe", foldcheck::name(recipe)},
              {"eps", eps},
              {"eps_used", eps_used},
              {"max_relative_scale_shift", max_relative_scale_shift},
              {"ulp_min", ulp_min},
              {"ulp_max", ulp_max},
              {"dtype", foldcheck::name(dtype)}};
}

json ScoredCheck::to_json() const {
  json j = foldcheck::to_json(comparison);
  j["name"] = name;
  j["bound"] = {{"kind", "deterministic"}, {"formula", formula}};
  if (comparison.worst_bound_ratio) {
    j["bound"]["worst_ratio"] = *comparison.worst_bound_ratio;
    j["bound"]["bound_ulp_at_worst"] = comparison.worst_bound_ulp;
  }
  if (outputs) {
    const auto& worst_ratio = comparison.worst_probabilistic_ratio;
    j["probabilistic_bound"] = {
        {"model",
         "Higham & Mary 2019 Thm 3.1 on the accumulation: gt_k(lambda) = exp(lambda sqrt(k) u + k u^2/(1-u)) - 1"},
        {"lambda", outputs->lambda},
        {"confidence", outputs->confidence},
        {"worst_ratio", worst_ratio ? json(*worst_ratio) : json(nullptr)},
        {"beyond", comparison.beyond_probabilistic}};
    j["tolerance"] = foldcheck::to_json(outputs->tolerance);
  }
  if (eps_held) j["eps_held_in_float32"] = eps_held->to_json();
  if (mistrusted_cause) j["mistrusted_cause"] = cause_name(*mistrusted_cause);
  return j;
}

json RunPath::to_json() const {
  json j = scored.to_json();
  j.update({{"path", recipe ? "fused" : "unfused"},
            {"recipe", recipe ? json(foldcheck::name(*recipe)) : json(nullptr)},
            {"graph", graph}});
  if (attribution) j["attribution"] = *attribution;
  return j;
}

json FusedVsUnfusedPair::to_json() const {
  json j{{"a", std::string("fused/") + foldcheck::name(recipe)},
         {"b", "unfused"},
         {"elements_differing", elements_differing},
         {"max_abs_ulp", max_abs_ulp},
         {"beyond_combined_bound", beyond_combined_bound},
         {"histogram", foldcheck::to_json(histogram)}};
  if (fold_order) j["attribution"] = *fold_order;
  return j;
}

Verdict RunOrder::verdict() const {
  judgement::Tally t;
  for (const RunPath& p : paths) t.add(p.verdict());
  return t.verdict();
}

json RunOrder::to_json() const {
  json ps = json::array(), pairs = json::array();
  for (const RunPath& p : paths) ps.push_back(p.to_json());
  for (const FusedVsUnfusedPair& p : fused_vs_unfused) pairs.push_back(p.to_json());
  return {{"accumulation", accumulation.label()},
          {"arithmetic", arithmetic.label()},
          {"paths", ps},
          {"fused_vs_unfused", pairs}};
}

Verdict FoldedParameterCheck::verdict() const {
  judgement::Tally t;
  t.add(weights.verdict());
  if (bias) t.add(judgement::unless_vacuous(bias->verdict()));  // the weights compared the same fold
  return t.verdict();
}

json FoldedParameterCheck::to_json() const {
  json j{{"recipe", foldcheck::name(recipe)},
         {"arithmetic", arithmetic.label()},
         {"weight_dtype", foldcheck::name(weight_dtype)},
         {"chain", describe(recipe)}};
  j["weights"] = weights.to_json();
  j["max_drift_ppm_vs_original"] = max_drift_ppm;
  if (bias) {
    j["bias"] = bias->to_json();
  } else {
    j["bias"] = nullptr;
    j["bias_note"] = "TVM keeps b*s and the shift as two adds; scored through the outputs";
  }
  return j;
}

Verdict RunDtype::verdict() const {
  judgement::Tally t;
  for (const FoldedParameterCheck& f : folded_parameters) t.add(f.verdict());
  for (const RunOrder& o : orders) t.add(o.verdict());
  return t.verdict();
}

json RunDtype::to_json() const {
  json weights = json::array(), ords = json::array();
  for (const FoldedParameterCheck& f : folded_parameters) weights.push_back(f.to_json());
  for (const RunOrder& o : orders) ords.push_back(o.to_json());
  return {{"dtype", foldcheck::name(dtype)},
          {"outputs", outputs},
          {"terms_per_output", terms_per_output},
          {"reference_escalations", reference.escalations},
          {"reference_fast_certified", reference.fast_certified},
          {"reference_compensated", reference.compensated},
          {"reference_fallbacks", reference.fallbacks},
          {"folded_parameters", weights},
          {"orders", ords}};
}

json ObservedWeights::to_json() const {
  json j = explanation.to_json();
  json& elements = j["elements"];
  for (std::size_t i = 0; i < labels.size() && i < elements.size(); ++i) {
    elements[i]["channel"] = labels[i].channel;
    elements[i]["weight_index"] = labels[i].weight_index;
  }
  j["note"] = note;
  return j;
}

}  // namespace foldcheck
