#pragma once
// `foldcheck accuracy-diff MODEL.onnx`: every layer -> BatchNormalization pair of a model
// (model_patterns.hpp), with the weight-level fold of each engine recipe against the exact
// fold (fold_check.hpp), and, given another engine's folded model (--observed), its folded
// weights and biases checked layer by layer and channel by channel.
//
// Matching rule for an observed folded model: its foldable layer nodes (Conv,
// ConvTranspose, Gemm, MatMul whose weight is an initializer), in graph order, correspond
// one to one to the original model's, in graph order. The match is refused (InputError,
// naming the first difference) when the counts differ or a pair differs in op type, weight
// shape or group count: folding never adds, drops, reorders or reshapes these nodes, so any
// such difference makes the correspondence ambiguous.
#include <functional>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/reference/certify.hpp"

namespace foldcheck {

struct AccuracyDiffOptions {
  std::optional<std::string> observed_model;
  ref::Options ref;
  std::function<void(const std::string&)> progress;  // optional status lines
};

// JSON: "verdict", "model", "layers" (each: "name", "op", "batchnorm", "verdict",
// "fold", and with --observed "worst_channel"), "unpaired", "observed".
nlohmann::json accuracy_diff(const std::string& model_path, const AccuracyDiffOptions& opts);

}  // namespace foldcheck
