#pragma once
// One layer of an engine's run: its output against the certified reference of the original
// layer on the engine's own input (engines.hpp states the bounds). Internal to commands.
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "foldcheck/commands/engines.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace foldcheck {

// An activation an engine fused into the conv, applied to its output: exact on its input
// (Relu, Clip), so a bound on its input bounds its output too.
struct FusedActivation {
  std::string op;                       // "" (none), "Relu", "Clip"
  double lo = -HUGE_VAL, hi = HUGE_VAL; // Relu: [0, inf); Clip: its bounds
};

// Where an engine's values of one layer are: the value names of its input and output (in
// the model `values` are named by), and the activation applied to that output.
struct LayerValueNames {
  std::string key;  // the layer: its node's name, or its output's when it has none
  std::string x, y;
  FusedActivation activation;
  std::optional<std::string> unsupported;  // an activation foldcheck does not model: why
};

struct LayerOutputCheck {
  const Model* model = nullptr;   // the original
  const BnPair* pair = nullptr;
  Tensor x, y;                    // the engine's values (file checked by the caller)
  FusedActivation activation;
  // The recipes whose bounds may hold (the one the weights matched, or all of them); the
  // bound is the largest.
  std::vector<Recipe> recipes;
  Arithmetic arith;               // weight_dtype: the folded weights' storage (else the layer's)
  // The algorithm the engine's conv used where it applies (Winograd: 3x3, stride 1, dilation
  // 1; FFT: stride 1, dilation 1; elsewhere a direct sum) and the arithmetic of its products
  // and sums (numerics/conv_arithmetic.hpp). Other than direct / split-k in float32: the
  // conv's error of that algorithm and arithmetic added to the bound (check_layer_outputs),
  // and no channel statistic (it models float32 products summed directly).
  ConvAlgorithm algorithm;
  ConvArithmetic arithmetic;
  bool unfused = false;           // the engine kept the BatchNorm after the conv: the unfused path's bound, no channel statistic
  double confidence = 0.999, channel_alpha = 1e-6;
  std::size_t samples = 16;        // honest computations for the estimated channel threshold
  std::uint64_t seed = 0, layer_index = 0;
  ref::Options ref;
};

// The layer's arithmetic or algorithm has no bound here (why): the layer is not judged.
struct NoLayerBound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Fills layer.outputs, outputs_detail and the channel fields; InputError when the values'
// shapes are not the layer's (naming `where`); NoLayerBound when the arithmetic has no bound
// here (fp16 accumulation of 1,024 products or more; FFT in another arithmetic than float32).
//
// The algorithm's and arithmetic's part, added to the fused (or unfused) path's float32
// bound of a direct conv (which stays: a little looser, still a bound), per output, of the
// conv as the engine computed it on its stored weights w' and bias b' (the recipe's fold;
// the largest over the recipes), S = sum|x w'| <= (|t| + alpha) sum|x w| + eta sum|x|:
//   Winograd F(m x m)   gamma_N(u) W          (layer/winograd_bound.hpp; F(2x2): the order's own)
//   FFT                 the normwise bound    (layer/fft_bound.hpp)
//   an arithmetic a     general_conv_bound(a, k): factor M + its underflow terms, M = S (direct,
//                       k = the terms) or W (Winograd, k = N: the transforms' operands converted)
// An unfused conv's error reaches the output through the BatchNorm: times |gamma| /
// sqrt(var + eps), with a 2^-20 margin for the BatchNorm's own roundings of the larger value.
void check_layer_outputs(const LayerOutputCheck& c, EngineLayer& layer, const std::string& where);

}  // namespace foldcheck
