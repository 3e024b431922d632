#pragma once
// One layer of an engine's run: its output against the certified reference of the original
// layer on the engine's own input (engines.hpp states the bounds). Internal to commands.
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/commands/engines.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
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
  bool winograd = false;          // the engine used Winograd F(2x2,3x3) where it applies: its bound, no channel statistic
  bool unfused = false;           // the engine kept the BatchNorm after the conv: the unfused path's bound, no channel statistic
  double confidence = 0.999, channel_alpha = 1e-6;
  std::size_t samples = 16;        // honest computations for the estimated channel threshold
  std::uint64_t seed = 0, layer_index = 0;
  ref::Options ref;
};

// Fills layer.outputs, outputs_detail and the channel fields; InputError when the values'
// shapes are not the layer's (naming `where`).
void check_layer_outputs(const LayerOutputCheck& c, EngineLayer& layer, const std::string& where);

}  // namespace foldcheck
