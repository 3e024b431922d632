#pragma once
// `foldcheck engines MODEL.onnx --engine ...`: real engines run on the model, and everything
// they produce scored against the certified reference with the bounds.
//
// Each engine is an adapter command (the protocol: engine_manifest.hpp, adapters/README.md)
// that runs the engine on the model and the input and writes what it produced: its folded
// model, its final outputs, and each conv's input and output of its fused run. Per engine:
//   weights  the folded model, matched to the original by data flow (layer_match.hpp), each
//            layer's folded weights and biases against the exact fold (fold_check.hpp);
//   layers   each conv's output (and each Gemm's or MatMul's, as a 1x1 conv over its rows)
//            as the engine computed it against the certified reference
//            of the ORIGINAL layer (conv + BatchNorm, exact) on the engine's own input to
//            that layer, so no rounding accumulates from earlier layers into the bound:
//            per element, the fused path's bound (evaluate.hpp: the fold's error bound for the
//            recipe the weights matched, or the largest over the recipes when the engine
//            wrote no folded model, plus gamma_k of the sequential order, which bounds every
//            order of a direct conv); per channel, the systematic-bias statistic
//            (channel_bias.hpp), with a false-alarm probability of 1 - confidence over all
//            channels of the model (a union bound);
//   first    the first layer, in the original's graph order, whose outputs leave a bound;
//   final    the engine's final outputs against foldcheck's float64 run with the Monte Carlo
//            end-to-end bound of output_bound.hpp (computed once for all engines): far wider
//            than the per-layer bounds (every layer's rounding mixes into one tensor), so it
//            catches gross errors only.
// Every file the adapter names is read under one rule (engine_manifest.hpp's read_adapter_file:
// inside OUTDIR with links resolved, a regular file opened without blocking, size-limited),
// OUTDIR itself still the directory foldcheck made (not replaced by a link), and the
// manifest's names must be the model's; a breach fails that engine (MISTRUSTED).
// SIGINT/SIGTERM/SIGHUP/SIGQUIT end the command promptly in every wait, the work directory removed
// (platform/process.hpp's SignalScope and its backstop).
// An engine's verdict: UNEXPECTED when any weight or layer check is; MISTRUSTED when nothing
// of it could be checked. The command's verdict is the worst engine's.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/model/fold_check.hpp"
#include "foldcheck/model/output_band.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/reference/certify.hpp"

namespace foldcheck {

// One engine: a label and the adapter command ({model}, {input}, {outdir} substituted as
// quoted shell words), or an engine foldcheck runs in-process.
struct EngineSpec {
  std::string label;    // "onnxruntime:basic", or the user's
  std::string command;  // the adapter command template
};

struct EnginesOptions {
  std::vector<EngineSpec> engines;
  std::optional<std::string> input;  // .npy; default: seeded standard normal of the input's shape
  std::uint64_t seed = 0;
  double confidence = 0.999;       // of the per-element probabilistic bound and the channel statistic
  std::size_t channel_samples = 16;  // honest computations per layer for the estimated channel threshold
  std::size_t output_samples = 32;   // perturbed float64 runs of the end-to-end bound (0: final outputs not judged)
  double timeout_seconds = 3600;   // per adapter run
  std::optional<std::string> work_dir;  // keep the adapters' files here (default: a temporary directory, removed)
  // The arithmetic and algorithm the engines' convs computed in, for an engine whose manifest
  // does not say (numerics/conv_arithmetic.hpp; --arithmetic, --algorithm): each layer's bound
  // and the end-to-end bound hold for it. The manifest's `arithmetic` and `accumulation` (a
  // layer's own first) are what the engine says it did, and win. Default float32, direct.
  std::optional<ConvArithmetic> arithmetic;
  std::optional<ConvAlgorithm> algorithm;
  ref::Options ref;
  std::function<void(const std::string&)> progress;
};

// The channel statistic's worst channel (the largest |rho| / estimated threshold), in ppm.
// Writes every field ("channel", "rho_ppm", "threshold_ppm", "estimated_threshold_ppm",
// "allowance_ppm", "honest_rms_ppm", "ratio_to_estimate", "outputs").
struct EngineWorstChannel {
  std::int64_t channel = -1;
  double rho_ppm = 0, threshold_ppm = 0, estimated_threshold_ppm = 0, allowance_ppm = 0, honest_rms_ppm = 0;
  double ratio_to_estimate = 0;  // |rho| / estimated threshold
  std::int64_t outputs = 0;      // outputs the statistic used
};

// A spread over the tested channels, in ppm: {"min", "median", "max"}.
struct PpmSpread {
  double min = 0, median = 0, max = 0;
};

// The per-channel systematic-bias statistic of one layer's outputs (channel_bias.hpp). Either
// not computed (why: the statistic models a direct sum of folded weights), writing
// {"not_computed", "verdict"}, or computed, writing {"tested", "beyond_bound",
// "beyond_estimate", "verdict"} and, when some channel was tested, "worst", "threshold_ppm"
// and "estimated_threshold_ppm". Its verdict: judgement::of_channels of its counts.
struct EngineChannels {
  std::optional<std::string> not_computed;
  std::int64_t tested = 0, beyond_bound = 0, beyond_estimate = 0;  // beyond the bound; the estimate only
  std::optional<EngineWorstChannel> worst;                         // some channel tested
  PpmSpread threshold_ppm, estimated_threshold_ppm;                // with worst
  Verdict verdict() const;
  nlohmann::json to_json() const;
};

// What a layer's outputs were judged with, beside the comparison: the bound's formula, the
// recipes it covers, the fused activation and the channel statistic. Writes {"bound",
// "activation" (null: none), "channels"} and, when the statistic was computed,
// "bound_recipes" and "terms_per_output". Meaningful only with EngineLayer::outputs.
struct EngineOutputsDetail {
  std::string bound;
  // The only bound that applies is too wide to see a wrong channel (a converted-operand
  // arithmetic on Winograd's transforms, as diagnose's general_only): why. Outputs within it
  // pass nothing (MISTRUSTED); beyond it is evidence. Written as "too_wide" when set.
  std::optional<std::string> too_wide;
  std::optional<std::vector<std::string>> bound_recipes;
  std::string activation;  // "" none
  std::optional<std::int64_t> terms_per_output;
  EngineChannels channels;
  nlohmann::json to_json() const;
};

// One layer of one engine.
struct EngineLayer {
  std::string name;                     // the original's layer (conv) name
  std::optional<std::string> observed;  // the engine's node, when it wrote a folded model
  std::optional<FoldCheck> weights;     // its folded parameters against the exact fold
  std::optional<std::string> not_folded;  // why the weights were not checked
  std::optional<Comparison> outputs;    // per element, against the bound
  EngineOutputsDetail outputs_detail;   // with outputs: bound, recipes, activation, channel statistic
  std::optional<std::string> outputs_not_checked;  // why
  std::optional<std::string> left_out;  // the engine did not compute this layer (why): not judged
  bool outputs_missing = false;  // the adapter gave per-layer values, but none usable for this layer: MISTRUSTED
  std::optional<std::string> input_mismatch;  // the engine's input to it is not what it was given: UNEXPECTED
  // The engine's folded layer computes something else than the model's (another stride,
  // dilation, padding, ...: layer_computation.hpp), each attribute named: UNEXPECTED, its
  // outputs not compared (they are another computation's, often of another shape).
  std::optional<std::string> not_the_layer;
  Verdict outputs_verdict() const;            // with `outputs`: the elements' (deterministic bound) and the channels'
  Verdict verdict() const;
};

struct EngineRun {
  EngineSpec spec;
  std::string engine;                   // as the adapter names it
  double seconds = 0;                   // the adapter's run
  std::vector<std::string> notes;
  std::optional<bool> fusion_preserved;
  bool folded_model = false;
  // What its layers and final outputs are held to: the arithmetic (its name) and the
  // algorithm ("direct", "winograd4", "per layer": the adapter named some layers' own).
  std::string arithmetic = "float32", algorithm = "direct";
  std::vector<EngineLayer> layers;      // the original's pairs, graph order
  // The first layers, graph order, whose folded weights are beyond their bounds or that are not
  // the model's layer (not_the_layer), and whose outputs are beyond theirs.
  std::optional<std::string> first_weights_beyond, first_outputs_beyond;
  // The engine's final outputs against the float64 run with the end-to-end bound
  // (output_bound.hpp), one per graph output it wrote. Writes every field ("worst_ratio" null
  // when nothing was scored against the bound).
  struct FinalOutput {
    std::string name;
    std::optional<double> worst_ratio;
    double max_abs_ulp = 0;
    std::string bound;        // its formula
    std::size_t samples = 0;  // of the Monte Carlo bound
    Verdict verdict = Verdict::Expected;  // the bound's and the band's
    // The calibrated band (model/output_band.hpp) of the model's output in float32 arithmetic;
    // not_computed says why not (another arithmetic, a model the reverse pass cannot take).
    std::optional<OutputBand> band;
    nlohmann::json to_json() const;
  };
  std::vector<FinalOutput> final_outputs;
  std::optional<std::string> final_not_checked;
  std::optional<std::string> failed;    // the adapter failed (message); nothing else is filled
  Verdict verdict() const;
};

// The model the engines ran: writes {"path", "producer", "opset", "nodes", "pairs"}.
struct EnginesModel {
  std::string path, producer;
  std::int64_t opset = 0;
  std::size_t nodes = 0, pairs = 0;
  nlohmann::json to_json() const;
};

// The input they ran on: writes {"name", "shape"} and "path" (a given .npy) or "seed" (the
// seeded standard normal input).
struct EnginesInput {
  std::string name;
  std::vector<std::int64_t> shape;
  std::optional<std::string> path;
  std::uint64_t seed = 0;  // without path
  nlohmann::json to_json() const;
};

struct EnginesResult {
  EnginesModel model;
  EnginesInput input;
  double channel_alpha = 0;             // per-channel false-alarm probability
  std::vector<EngineRun> runs;
  Verdict verdict() const;
  nlohmann::json to_json() const;       // schema "engines"
};

EnginesResult engines(const std::string& model_path, const EnginesOptions& opts);


}  // namespace foldcheck
