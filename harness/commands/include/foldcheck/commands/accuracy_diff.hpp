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

#include "foldcheck/model/model.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/reference/certify.hpp"

namespace foldcheck {

struct AccuracyDiffOptions {
  std::optional<std::string> observed_model;
  // The model input (.npy); without, a seeded standard-normal float32 input of the graph
  // input's shape (unknown dimensions: batch 1, others refused).
  std::optional<std::string> input;
  std::uint64_t seed = 0;
  // Another engine's output on `input` (.npy, float32 or float64; needs `input`): checked
  // against the float64 run with the Monte Carlo end-to-end bound of output_bound.hpp,
  // estimated from `output_samples` perturbed runs (seeded by `seed`).
  std::optional<std::string> observed_output;
  std::size_t output_samples = 32;
  bool weights_only = false;  // skip the runs (per-layer activations and end to end)
  Recipe recipe = Recipe::PyTorch;  // the fold of the fused end-to-end run
  std::size_t attribution_elements = 256;  // per layer and path (0: none)
  double confidence = 0.999;
  ref::Options ref;
  std::function<void(const std::string&)> progress;  // optional status lines
};

// JSON: "verdict", "model", "layers" (each: "name", "op", "batchnorm", "verdict",
// "fold", "activations" (the layer on its real input: unfused and fused paths against the
// certified reference, with bounds and the dominant error stage), and with --observed
// "worst_channel"), "unpaired", "observed", "end_to_end" (the model's outputs in float32,
// unfused and fused, against a float64 run: ULP/ppm histograms, top-1 agreement, the
// first layer whose drift leaves its bound, and a verdict; with --observed-output also
// "observed_output": the other engine's output against the float64 run and the end-to-end
// bound, and foldcheck's own float32 runs against the same bound).
//
// End-to-end verdict: the difference between the float32 runs and the float64 run is the
// composition of every layer's rounding; it is EXPECTED when every analysed layer's
// outputs lie within their rounding-error bounds on the real activations (and the folded
// parameters within theirs). The float64 run is the reference precision: each of its
// operations errs by at most 2^-53 relative, 2^-29 of float32's. When the end-to-end bound
// is computed (--observed-output), the float32 runs' outputs must also lie within it.
nlohmann::json accuracy_diff(const std::string& model_path, const AccuracyDiffOptions& opts);
// The same for a model already in memory (benchmarks, tests).
nlohmann::json accuracy_diff(const Model& model, const AccuracyDiffOptions& opts);

}  // namespace foldcheck
