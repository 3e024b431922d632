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
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/layer/attribution.hpp"
#include "foldcheck/model/fold_check.hpp"
#include "foldcheck/model/layer_computation.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/output_band.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/reference/certify.hpp"

namespace foldcheck {

struct AccuracyDiffOptions {
  std::optional<std::string> observed_model;
  // The observed model already loaded (engines reads an adapter's model under its own file
  // rule): used instead of loading observed_model; must outlive the call.
  const Model* observed = nullptr;
  // The model input (.npy); without, a seeded standard-normal float32 input of the graph
  // input's shape (unknown dimensions: batch 1, others refused).
  std::optional<std::string> input;
  std::uint64_t seed = 0;
  // Another engine's output on `input` (.npy, float32 or float64; needs `input`): checked
  // against the float64 run with the Monte Carlo end-to-end bound of output_bound.hpp,
  // estimated from `output_samples` perturbed runs (seeded by `seed`).
  std::optional<std::string> observed_output;
  std::size_t output_samples = 32;
  // The arithmetic `observed_output` was computed in (numerics/conv_arithmetic.hpp): float32, or
  // a 16-bit operand format whose values every activation was stored in (torch.autocast): the
  // end-to-end bound then models the operand conversions and 16-bit activations
  // (output_bound.hpp). Recognised by the observed values: all of them values of the format.
  ConvArithmetic arithmetic;
  bool weights_only = false;  // skip the runs (per-layer activations and end to end)
  Recipe recipe = Recipe::PyTorch;  // the fold of the fused end-to-end run
  bool attribution = true;                 // the stage attribution of each layer's fused path
  std::size_t attribution_elements = 256;  // per layer and path (0: all), as run's
  double confidence = 0.999;
  ref::Options ref;
  std::function<void(const std::string&)> progress;  // optional status lines
  // Layers (the model's layer names, as the result names them) whose observed fold a caller
  // knows foldcheck cannot judge, each with why (a fuser folded another op into it besides its
  // BatchNorm; a fold in a dtype no recipe folds in): judgement's unmodelled Surely, the layer
  // MISTRUSTED whatever its comparisons show (they are of a stand-in), the reason its note.
  std::map<std::string, std::string> unmodelled;
};

// The result tree. Each node holds typed facts and writes its part of the `accuracy-diff`
// JSON with to_json() (the schema's keys; nlohmann objects are key-sorted); each verdict a node
// writes is computed from its facts and its children by a judgement.hpp policy.

// Which layer -> BatchNormalization pair a layer is (model_patterns.hpp) and its parameters'
// shapes. Writes "name", "op", "batchnorm", "dtype", "weight_shape", "output_channels",
// "conv_bias", "eps"; "through_identity" (the Identity nodes between layer and BatchNorm) only
// when there are some; "observed_node" only with an observed model (its matched node: its
// name, or its weight's name when it has none).
struct LayerIdentity {
  std::string name, op, batchnorm;
  DType dtype = DType::Float32;
  Shape weight_shape;
  std::int64_t output_channels = 0;
  bool conv_bias = false;
  double eps = 0;
  std::vector<std::string> through_identity;
  std::optional<std::string> observed_node;
  nlohmann::json to_json() const;
};

// One path of a layer (unfused, or fused by a recipe) run in float32 on the layer's real
// input, against the certified reference and its bounds (layer_on_activations). `recipe` and
// `attribution` only on the fused path: the fold it used and, when attribution was asked,
// the stage attribution of a sample of its outputs. verdict(): the comparison's. Writes
// "verdict", "max_abs_ulp", "p99_9_abs_ulp", "worst_ratio" (null: none), "beyond_bound",
// "bound", "probabilistic_worst_ratio" (null: none); with a recipe "recipe"; with the
// attribution "dominant_stage" (the stage of the largest sum of squared contributions, ""
// when no stage contributed) and "attributed_elements".
struct PathOnActivations {
  Comparison comparison;
  std::string bound;  // the bound's formula
  std::optional<Recipe> recipe;
  std::optional<Attribution> attribution;
  Verdict verdict() const { return comparison.verdict; }
  std::optional<Stage> dominant_stage() const;  // absent: no attribution, or no stage contributed
  nlohmann::json to_json() const;
};

// A layer on its real input (the runs): its unfused and fused paths. verdict(): the worse of
// the two paths after judgement::deterministic_only (foldcheck's own run is the modelled
// computation: a per-element probabilistic excess is no evidence of a bug here). Writes
// "input_shape", "outputs", "terms_per_output", "unfused", "fused" and "verdict".
struct LayerActivations {
  Shape input_shape;
  std::size_t outputs = 0;
  std::int64_t terms_per_output = 0;
  PathOnActivations unfused, fused;
  Verdict verdict() const;
  nlohmann::json to_json() const;
};

// One layer -> BatchNormalization pair. `fold` is absent when the observed model did not fold
// the layer (observed_not_folded); `activations` only when the runs were made and the layer
// analysed on them; `activations_note` instead when the runs were made but the pair is not
// analysed on activations (ConvTranspose: "activations": {"note"}). `not_the_layer`: what
// defines the observed layer's computation besides its weights and differs from the model's
// layer (layer_computation.hpp): the layer is UNEXPECTED whatever its fold (judgement's
// not_the_layer); JSON "not_the_layer" [{"attribute", "observed", "model"}] and "observed_note"
// naming each ("the observed layer has strides [2, 2], the model's [1, 1]"), its fold kept.
struct LayerDiff {
  LayerIdentity identity;
  bool observed_not_folded = false; // the observed model still applies a BatchNormalization after it
  std::vector<ComputationDifference> not_the_layer;
  std::optional<std::string> unmodelled;  // why its fold cannot be judged (AccuracyDiffOptions::unmodelled)
  std::optional<FoldCheck> fold;    // the folded parameters against the exact fold (absent when not folded)
  std::optional<LayerActivations> activations;
  std::optional<std::string> activations_note;

  Verdict fold_verdict() const;     // UNEXPECTED when not folded
  std::optional<Verdict> activations_verdict() const;  // absent: not analysed
  Verdict verdict()
      const;  // judgement::of_layer: another computation or an UNEXPECTED fold, else the worse of fold and activations
  std::optional<std::string> observed_note() const;  // not judged, not folded, or not the layer: why
  nlohmann::json to_json() const;  // identity's keys, "verdict", "fold" and/or "observed_note", "activations", ...
};

// The top-1 agreement of an [N, K] output (K > 1): rows, and rows agreeing per pair of runs.
struct Top1Agreement {
  std::int64_t rows = 0, unfused_vs_reference = 0, fused_vs_reference = 0, fused_vs_unfused = 0;
};

// The other engine's outputs against the float64 run and the end-to-end bound
// (output_bound.hpp). `bound_ulp` absent when the output has no element; `worst` when some
// element was compared with its bound; `top1` only for an [N, K > 1] output. verdict():
// the observed comparison's; foldcheck_runs_verdict(): the worse of foldcheck's own runs
// against the same bound. Writes "path", "shape", "bound", "lambda", "sqrt_c", "samples",
// "seed", "confidence", "comparison", "verdict", "foldcheck_runs", and when present
// "bound_ulp", "worst", "top1_agreement".
struct ObservedOutputCheck {
  std::string path;
  Shape shape;
  std::string bound;  // the bound's formula
  double lambda = 0, sqrt_c = 0, confidence = 0;
  std::size_t samples = 0;
  std::uint64_t seed = 0;
  Comparison observed;              // the other engine's outputs
  Comparison unfused, fused;        // foldcheck's own float32 runs, held to the same bound
  struct BoundUlp {                 // the bound's size in float32 ULP of the reference
    double median = 0, max = 0, min = 0;
  };
  std::optional<BoundUlp> bound_ulp;
  struct Worst {  // the element of the largest ratio to its bound
    Shape index;
    std::size_t flat_index = 0;
    double observed = 0, reference = 0, bound = 0, ratio = 0;
  };
  std::optional<Worst> worst;
  struct Top1 {
    std::size_t rows = 0;
    std::int64_t observed_vs_reference = 0;
  };
  std::optional<Top1> top1;
  // The calibrated band beside the bound (model/output_band.hpp): directions (one channel of a
  // layer, a BatchNorm's eps) along which the error stands out of honest runs' (SUSPICIOUS).
  OutputBand band;
  Verdict verdict() const;
  Verdict foldcheck_runs_verdict() const;
  nlohmann::json to_json() const;
};

// One graph output: foldcheck's float32 runs (unfused, fused) against the float64 run.
// compared_nothing(): either run MISTRUSTED (a reference all zero or not finite). Writes
// "name", "shape", "unfused", "fused" (the comparisons; with an observed-output check also
// each run's "worst_bound_ratio" against its bound) and "top1_agreement" when present.
struct OutputRuns {
  std::string name;
  Shape shape;
  Comparison unfused, fused;
  std::optional<Top1Agreement> top1;
  bool compared_nothing() const;
  nlohmann::json to_json(const ObservedOutputCheck* bound_check) const;
};

// The model end to end: float32 runs (unfused, fused) against a float64 run. With `not_run`
// (why the runs could not be made) nothing else is set and it writes {"not_run"} alone.
// Its children are the outputs, the observed-output check and the layers' activations (the
// result's `layers`, passed in): verdict(layers) is the worst of the analysed layers'
// activation verdicts, UNEXPECTED when foldcheck's own runs leave the end-to-end bound (the
// bound's self-check), MISTRUSTED joining when an output compared nothing. Writes
// "reference", "fused_recipe", "input", "input_shape", "outputs", "first_layer_beyond_bound"
// (null: none), "verdict", and "observed_output" when checked, or "observed_output_not_checked"
// (why: an observed output of another shape than the model's where an observed layer is not
// the model's layer, LayerDiff::not_the_layer, which already makes the result UNEXPECTED).
struct EndToEnd {
  std::optional<std::string> not_run;    // why the runs could not be made
  Recipe fused_recipe = Recipe::PyTorch;
  std::string input;  // the input file, or how the input was made
  Shape input_shape;
  std::vector<OutputRuns> outputs;  // graph order
  std::optional<ObservedOutputCheck> observed_output;
  std::optional<std::string> observed_output_not_checked;
  bool outputs_compared_nothing() const;
  static std::optional<std::string> first_layer_beyond_bound(const std::vector<LayerDiff>& layers);
  Verdict verdict(const std::vector<LayerDiff>& layers) const;
  nlohmann::json to_json(const std::vector<LayerDiff>& layers) const;
};

// The model checked: writes "path", "producer", "opset", "nodes", "inputs" [{"name", "shape"}].
struct ModelFacts {
  std::string path, producer;
  std::int64_t opset = 0;
  std::size_t nodes = 0;
  std::vector<ValueInfo> inputs;
  nlohmann::json to_json() const;
};

// The observed (folded) model: writes "path", "producer", "matching" (the matching rule).
struct ObservedModel {
  std::string path, producer;
  nlohmann::json to_json() const;
};

struct AccuracyDiffResult {
  ModelFacts model;
  std::vector<LayerDiff> layers;         // graph order
  std::vector<UnpairedBn> unpaired;      // BatchNorms without a foldable layer: "batchnorm", "reason"
  std::optional<EndToEnd> end_to_end;    // absent with weights_only
  std::optional<ObservedModel> observed;  // with an observed model
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
