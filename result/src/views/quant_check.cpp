// Reading a `quant-check` result into its view (views/quant_check.hpp).
#include "foldcheck/result/views/quant_check.hpp"

#include "model_views_common.hpp"

namespace foldcheck::result::views {

using json = nlohmann::json;

QuantSpec QuantSpec::from_json(const json& j) {
  return {required<int>(j, "bits"), required<bool>(j, "per_channel"), required<bool>(j, "pow2"),
          required<std::string>(j, "rounding")};
}

QuantFlip QuantFlip::from_json(const json& j) {
  return {required<std::size_t>(j, "flat_index"), required<std::int64_t>(j, "expected"),
          required<std::int64_t>(j, "recipe"), required<double>(j, "tie_distance"), required<std::string>(j, "stage")};
}

QuantRecipe QuantRecipe::from_json(const json& j) {
  return {required<std::string>(j, "recipe"), required_count<std::size_t>(j, "flip_count"),
          list_of(j, "flips", QuantFlip::from_json)};
}

QuantMismatch QuantMismatch::from_json(const json& j) {
  return {j.at("index"),
          required<std::int64_t>(j, "found"),
          required<std::int64_t>(j, "expected"),
          required<double>(j, "tie_distance"),
          required<double>(j, "bound_steps"),
          required_verdict(j, "verdict")};
}

QuantOutputs QuantOutputs::from_json(const json& j) {
  return {required_count(j, "matches"), required_count(j, "expected_flips"), required_count(j, "unexpected"),
          j.at("lsb_histogram"),        required_verdict(j, "verdict"),      required<std::string>(j, "bound")};
}

QuantLayerCheck QuantLayerCheck::from_json(const json& j) {
  QuantLayerCheck c;
  c.case_path = required<std::string>(j.at("case"), "path");
  c.fold = required<std::string>(j, "fold");
  c.input_scale = required<double>(j.at("scales"), "input");
  c.output_scale = required<double>(j.at("scales"), "output");
  c.outputs = required_count<std::size_t>(j, "outputs");
  c.integer = QuantOutputs::from_json(j.at("integer"));
  c.fake_quant = QuantOutputs::from_json(j.at("fake_quant"));
  c.fake_quant_max_abs_lsb = required<double>(j.at("fake_quant_error_lsb"), "max_abs");
  if (auto w = j.find("weights"); w != j.end())
    c.weights = Weights{required_count(*w, "near_tie"), list_of(*w, "recipes", QuantRecipe::from_json)};
  return c;
}

QuantWeightsCheck QuantWeightsCheck::from_json(const json& j) {
  QuantWeightsCheck c;
  c.elements = required_count<std::size_t>(j.at("weights"), "elements");
  c.shape = j.at("weights").at("shape");
  c.scales = required<std::vector<double>>(j, "scales");
  c.scale_source = required<std::string>(j, "scale_source");
  c.near_tie = required_count(j.at("expected_summary"), "near_tie");
  c.recipes = list_of(j, "recipes", QuantRecipe::from_json);
  if (j.contains("mismatches")) {
    const json& n = j.at("mismatch_counts");
    c.dumped = Dumped{required_count(n, "matching"), required_count(n, "expected_flips"),
                      required_count(n, "unexpected"), list_of(j, "mismatches", QuantMismatch::from_json)};
  }
  return c;
}

QuantCheck QuantCheck::from_json(const json& j) {
  QuantCheck q;
  q.spec = QuantSpec::from_json(j.at("spec"));
  const auto mode = optional<std::string>(j, "mode");
  if (mode && *mode == "layer") q.layer = QuantLayerCheck::from_json(j);
  else q.weights = QuantWeightsCheck::from_json(j);
  q.verdict = required_verdict(j, "verdict");
  q.seconds = timing_seconds(j);
  return q;
}

}  // namespace foldcheck::result::views
