#pragma once
// The typed view of a `quant-check` result (reports/schema: command "quant-check"), restored
// once from its JSON for the renderer (reports/src/quant_check_text.cpp). Two shapes, by
// "mode": "layer" (quant-check --case: a whole int8 layer) or the weights' check (no mode).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"

namespace foldcheck::result::views {

// The quantizer ("spec"): all required.
struct QuantSpec {
  int bits = 8;
  bool per_channel = false, pow2 = false;
  std::string rounding;
  static QuantSpec from_json(const nlohmann::json& j);
};

// One flipped integer of a recipe's fold ("flips" element): all required.
struct QuantFlip {
  std::size_t flat_index = 0;
  std::int64_t expected = 0, recipe = 0;
  double tie_distance = 0;
  std::string stage;
  static QuantFlip from_json(const nlohmann::json& j);
};

// A recipe's fold, quantized, against the quantized exact fold: "recipe", "flip_count"
// required; "flips" (the weights' check only; empty when absent).
struct QuantRecipe {
  std::string recipe;
  std::size_t flip_count = 0;
  std::vector<QuantFlip> flips;
  static QuantRecipe from_json(const nlohmann::json& j);
};

// One dumped integer that differs ("mismatches" element): all required; "index" kept as JSON
// (printed as written: a multi-index).
struct QuantMismatch {
  nlohmann::json index;
  std::int64_t found = 0, expected = 0;
  double tie_distance = 0, bound_steps = 0;
  Verdict verdict = Verdict::Mistrusted;
  static QuantMismatch from_json(const nlohmann::json& j);
};

// A layer's output integers against the reference ("integer" or "fake_quant"): all required;
// "lsb_histogram" kept as JSON ({"LSB difference": count}, counts printed as written).
struct QuantOutputs {
  std::int64_t matches = 0, expected_flips = 0, unexpected = 0;
  nlohmann::json lsb_histogram;
  Verdict verdict = Verdict::Mistrusted;
  std::string bound;
  static QuantOutputs from_json(const nlohmann::json& j);
};

// mode "layer". Required: "case" {"path"}, "fold", "scales" {"input", "output"}, "outputs",
// "integer", "fake_quant", "fake_quant_error_lsb" {"max_abs"}. Optional: "weights"
// {"near_tie", "recipes"} (the folded weights' check, when the layer has weights to fold).
struct QuantLayerCheck {
  std::string case_path, fold;
  double input_scale = 0, output_scale = 0;
  std::size_t outputs = 0;
  QuantOutputs integer, fake_quant;
  double fake_quant_max_abs_lsb = 0;
  struct Weights {
    std::int64_t near_tie = 0;
    std::vector<QuantRecipe> recipes;
  };
  std::optional<Weights> weights;
  static QuantLayerCheck from_json(const nlohmann::json& j);
};

// The weights' check. Required: "weights" {"elements", "shape" (kept as JSON)}, "scales",
// "scale_source", "expected_summary" {"near_tie"}, "recipes". Optional: "mismatches" with
// "mismatch_counts" {"matching", "expected_flips", "unexpected"} (only when integers were given).
struct QuantWeightsCheck {
  std::size_t elements = 0;
  nlohmann::json shape;
  std::vector<double> scales;
  std::string scale_source;
  std::int64_t near_tie = 0;
  std::vector<QuantRecipe> recipes;
  struct Dumped {
    std::int64_t matching = 0, expected_flips = 0, unexpected = 0;
    std::vector<QuantMismatch> mismatches;
  };
  std::optional<Dumped> dumped;
  static QuantWeightsCheck from_json(const nlohmann::json& j);
};

// The whole result: the spec, one of the two checks, the verdict, and the run's seconds
// ("timing" {"seconds"}: absent with --no-timing).
struct QuantCheck {
  QuantSpec spec;
  std::optional<QuantLayerCheck> layer;      // mode "layer"
  std::optional<QuantWeightsCheck> weights;  // otherwise
  Verdict verdict = Verdict::Mistrusted;
  std::optional<double> seconds;
  static QuantCheck from_json(const nlohmann::json& j);
};

}  // namespace foldcheck::result::views
