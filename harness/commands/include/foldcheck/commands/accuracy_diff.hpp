#pragma once
// `foldcheck accuracy-diff MODEL.onnx`: every layer -> BatchNormalization pair of a model
// (model_patterns.hpp), with the weight-level fold of each engine recipe against the exact
// fold (fold_check.hpp), and, given another engine's folded model (--observed), its folded
// weights and biases checked layer by layer and channel by channel.
//
// Matching rule for an observed folded model: by data flow (layer_match.hpp): each foldable
// layer (Conv, ConvTranspose, Gemm, MatMul whose weight is an initializer; FusedConv as its
// Conv) is identified by its place in the graph from the inputs, its op, weight shape and
// group, so node order, initializer names, removed BatchNorms and fused activations do not
// matter. A layer without a counterpart, a truly symmetric graph without names to pair it,
// or an op of a domain foldcheck does not implement is refused (InputError, naming it).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/model/fold_check.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/numerics/compare.hpp"
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
  bool attribution = true;                 // the stage attribution of each layer's fused path
  std::size_t attribution_elements = 256;  // per layer and path (0: all), as run's
  double confidence = 0.999;
  ref::Options ref;
  std::function<void(const std::string&)> progress;  // optional status lines
};

// One layer -> BatchNormalization pair.
struct LayerDiff {
  nlohmann::json identity;          // name, op, batchnorm, dtype, weight shape, channels, conv bias, eps, ...
  bool observed_not_folded = false; // the observed model still applies a BatchNormalization after it
  std::optional<FoldCheck> fold;    // the folded parameters against the exact fold (absent when not folded)
  // On its real input (the runs): each path against the certified reference, and the verdict.
  std::optional<nlohmann::json> activations;
  std::optional<Verdict> activations_verdict;  // absent: not analysed (no runs, or a ConvTranspose pair)

  Verdict fold_verdict() const;     // UNEXPECTED when not folded
  Verdict verdict() const;          // judgement::of_layer: an UNEXPECTED fold, else the worse of fold and activations
};

// The other engine's outputs against the float64 run and the end-to-end bound.
struct ObservedOutputCheck {
  nlohmann::json detail;            // path, shape, bound, its size in ULP, worst element, top-1, comparison
  Comparison observed;              // the other engine's outputs
  Comparison unfused, fused;        // foldcheck's own float32 runs, held to the same bound
};

// The model end to end: float32 runs (unfused, fused) against a float64 run.
struct EndToEnd {
  std::optional<std::string> not_run;    // why the runs could not be made
  nlohmann::json runs;                   // reference, fused recipe, input, and per output the comparisons and top-1
  bool outputs_compared_nothing = false; // an output whose reference is all zero or not finite
  std::optional<ObservedOutputCheck> observed_output;
  std::optional<std::string> first_layer_beyond_bound;
  Verdict verdict = Verdict::Expected;   // from the layers' activation verdicts and the checks above
};

struct AccuracyDiffResult {
  nlohmann::json model;                  // path, producer, opset, nodes, inputs
  std::vector<LayerDiff> layers;         // graph order
  nlohmann::json unpaired;               // BatchNorms without a foldable layer, with the reason
  std::optional<EndToEnd> end_to_end;    // absent with weights_only
  std::optional<nlohmann::json> observed;  // the observed model and the matching rule
  // When no layer -> BatchNormalization pair was found (MISTRUSTED): why, and what to do.
  std::vector<std::string> reasoning;

  Verdict verdict() const;
  nlohmann::json to_json() const;        // the `accuracy-diff` result (schema "accuracy-diff")
};

// JSON (to_json): "verdict", "model", "layers" (each: "name", "op", "batchnorm", "verdict",
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
AccuracyDiffResult accuracy_diff(const std::string& model_path, const AccuracyDiffOptions& opts);
// The same for a model already in memory (benchmarks, tests).
AccuracyDiffResult accuracy_diff(const Model& model, const AccuracyDiffOptions& opts);

}  // namespace foldcheck
