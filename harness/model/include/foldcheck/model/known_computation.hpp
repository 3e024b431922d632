#pragma once
// What an external compiler's outputs are judged against when foldcheck knows the
// computation (`bisect --cmd` given the layer, or the model): its exact outputs and, per
// element, the bounds every correct compilation of it meets.
//
// Layer (Conv -> BatchNorm; the certified reference, conv_bn_reference.hpp). A correct
// compiler may keep the BatchNorm (the ONNX textbook form or the scale-shift form), or fold
// it into the conv by any engine's recipe (PyTorch, TVM, ONNX Runtime, onnxoptimizer, or the
// correctly rounded fold; recipes.hpp), contract multiply-adds into FMAs, multiply by
// 1/sqrt instead of dividing, and sum the conv's terms in any order. Each of those
// lowerings has a bound with IEEE operations (evaluate.hpp): deterministic, gamma_k times
// sum |x w| (+ |b|) and the fold's and BatchNorm's own roundings; probabilistic, Higham &
// Mary's sqrt(k) bound at `confidence`. Both are taken for the sequential order, whose k
// (n + 1 roundings per term) is the largest of every order a compiler can choose: pairwise
// and blocked sums round each term fewer times. The envelope is the per-element maximum
// over the lowerings (7 forms x 4 arithmetics; with a conv bias also TVM with its shift
// fused into the bias, FuseOps: 32; a float16/bfloat16 layer's folds also computed in its
// own type, as PyTorch's fusers compute on a .half() module: 4 x 4 more): a correct
// compiler following any one of them stays within its deterministic envelope always, and
// within the probabilistic one with probability >= confidence. Not covered: Winograd or FFT
// convolutions (not a rounding of the same products), fast-math approximations, reduced
// precision.
//
// Model (the `--model` form): a model that is one layer -> BatchNormalization pair from its
// input to its output is that layer, as above (in its weights' dtype). Any other model has
// the end-to-end probabilistic bound of output_bound.hpp, per output element: a
// deterministic one composes every layer's worst case and is vacuous (ibid.). Computed in
// float32, it also has the calibrated band of output_band.hpp (`band`): a pass that moves one
// channel of one layer by 20 ppm stays far inside the bound, not inside the band.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/layer/graph.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/output_band.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/numerics/tensor.hpp"
#include "foldcheck/reference/certify.hpp"

namespace foldcheck {

struct KnownComputation {
  ref::ValueArray exact;              // the outputs (certified; a float64 run for a model)
  Shape shape;                        // of the outputs
  DType dtype = DType::Float32;       // the type the compiled program computes in
  std::vector<double> bound;          // per element: deterministic (a model of several ops: probabilistic)
  bool deterministic = true;          // whether `bound` is a deterministic bound
  std::vector<double> probabilistic;  // per element
  std::vector<double> abs_sum;        // sum |x w| + |b| of each output's conv (layers only)
  std::string source;                 // what it is, for the report
  std::string formula;                // the bounds, in words
  std::string shape_hint;             // where to look when an output's size differs
  // A model of several layers in float32: an observed output's band (output_band.hpp) against
  // one calibration made here; empty otherwise (a layer, another arithmetic).
  std::function<OutputBand(const std::vector<double>& observed)> band;
};

// The layer (a Conv -> BatchNorm graph) on input x.
KnownComputation layer_computation(const Graph& layer, const std::vector<double>& x, double confidence,
                                   const ref::Options& ref);

// "N outputs x n terms: M multiply-adds" of a layer, for progress messages: the certified
// reference's time grows with M.
std::string layer_size(const Graph& layer);

struct ModelComputationOptions {
  std::optional<DType> dtype;  // default: the layer's weight type (one layer), float32 (a model)
  double confidence = 0.999;
  std::size_t samples = 32;  // end-to-end bound (output_bound.hpp)
  std::uint64_t seed = 0;
  ref::Options ref;
  std::function<void(const std::string&)> progress;
  // The arithmetic the engine's convs run in (TF32, bf16/fp16 operands with float32
  // activations): a model, the one-layer one too, then takes the end-to-end bound of
  // output_bound.hpp with its operand conversions (set_end_to_end_arithmetic).
  ConvArithmetic arithmetic;
};

// A model with one graph input and one graph output, on the input in the .npy `input`
// (its values must be values of the dtype). Throws InputError for a model the runs cannot
// take.
KnownComputation model_computation(const Model& m, const std::string& path, const std::string& input,
                                   const ModelComputationOptions& o);

}  // namespace foldcheck
