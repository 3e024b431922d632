#pragma once
// The typed view of an `engines` result (reports/schema: command "engines"), restored once
// from its JSON for the renderer (reports/src/engines_text.cpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/verdict.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"

namespace foldcheck::result::views {

// A layer's folded weights ("weights"): null when the engine gave none (nothing to show),
// {"not_folded"} when it kept the layer unfolded, else the fold check (fold_check.cpp's
// to_json without its recipes) whose "worst_ratio" (null: infinite), "closest_recipe" and
// "worst_channel" (null: within its bound) are optional.
struct EngineWeights {
  bool not_folded = false;
  std::optional<double> worst_ratio;
  std::optional<std::string> closest_recipe;
  std::optional<std::int64_t> worst_channel;
  static EngineWeights from_json(const nlohmann::json& j);
};

// The channel statistic's worst channel ("channels": {"worst"}), in ppm: all required.
struct EngineWorstChannel {
  double rho_ppm = 0, estimated_threshold_ppm = 0, threshold_ppm = 0;
  std::int64_t channel = 0;
};

// A layer's outputs ("outputs"): {"left_out"} (the engine left the layer out), {"not_checked"}
// (why not), or the comparison: "worst_ratio", "probabilistic_worst_ratio" (each null:
// none), "nonfinite" (outputs NaN or infinite where the layer's value is finite, which the
// ratios leave out; absent: 0), "channels" (required there) with "worst" (absent when no
// channel was tested) or "not_computed" (why the statistic was not computed).
struct EngineOutputs {
  std::optional<std::string> left_out, not_checked;
  std::optional<double> worst_ratio, probabilistic_worst_ratio;
  std::int64_t nonfinite = 0;
  std::optional<EngineWorstChannel> worst;
  std::optional<std::string> channels_not_computed;
  std::optional<std::string> too_wide;  // "too_wide": the only bound that applies sees no wrong channel
  static EngineOutputs from_json(const nlohmann::json& j);
};

// A layer of an engine's run. Required: "name", "verdict" (the layer's verdict, or "LEFT OUT"
// for a layer the engine left out and that has no weights: reported, not judged), "weights",
// "outputs" (each null when absent), "input_mismatch" (null: none); optional "not_the_layer"
// (null or absent: the engine's layer computes what the model's does; else what differs).
struct EngineLayer {
  std::string name;
  std::optional<Verdict> verdict;  // none: "LEFT OUT"
  std::optional<EngineWeights> weights;
  std::optional<EngineOutputs> outputs;
  std::optional<std::string> input_mismatch, not_the_layer;
  static EngineLayer from_json(const nlohmann::json& j);
};

// A graph output of the engine's model judged end to end ("final_outputs" element): "name",
// "verdict", "samples" required; "worst_ratio" null when none; "band" (the calibrated band, as
// accuracy-diff's observed output's) when the engine's output had one made.
struct EngineFinalOutput {
  std::string name;
  Verdict verdict = Verdict::Mistrusted;
  std::optional<double> worst_ratio;
  std::size_t samples = 0;
  std::optional<AdiffBand> band;
  static EngineFinalOutput from_json(const nlohmann::json& j);
};

// One engine's run ("engines" element). Required: "label", "engine" ("" when unknown),
// "verdict", "seconds", "failed" (null unless the run failed: then nothing else is read),
// "notes", "fusion_preserved" (null: not said), "final_outputs", "final_not_checked",
// "first_weights_beyond", "first_outputs_beyond" (null: none), "layers"; optional
// "arithmetic", "algorithm" (what its layers were held to; default float32, direct).
struct EngineRun {
  std::string label, engine;
  std::string arithmetic = "float32", algorithm = "direct";
  Verdict verdict = Verdict::Mistrusted;
  double seconds = 0;
  std::optional<std::string> failed;
  std::vector<std::string> notes;
  std::optional<bool> fusion_preserved;
  std::vector<EngineFinalOutput> final_outputs;
  std::optional<std::string> final_not_checked, first_weights_beyond, first_outputs_beyond;
  std::vector<EngineLayer> layers;
  static EngineRun from_json(const nlohmann::json& j);
};

// The whole result. Required: "model" {"path", "pairs"}, "channel_statistic"
// {"false_alarm_per_channel"}, "engines", "verdict"; optional "timing" {"seconds"}.
struct Engines {
  std::string model_path;
  std::size_t pairs = 0;
  double false_alarm_per_channel = 0;
  std::vector<EngineRun> engines;
  Verdict verdict = Verdict::Mistrusted;
  std::optional<double> seconds;
  static Engines from_json(const nlohmann::json& j);
};

}  // namespace foldcheck::result::views
