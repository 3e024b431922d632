#pragma once
// Layer -> BatchNormalization pairs in a model: what a BN-folding pass merges.
//
// Rule (documented in the README): a BatchNormalization node (inference mode) pairs with
// the node producing its X input, looking back through Identity nodes, when that node is
// a Conv, ConvTranspose, Gemm or MatMul whose weight is an initializer, the BN's four
// parameters are initializers, and every value on the way (the layer's output and each
// Identity's) has exactly one consumer and is not a graph output (otherwise folding would
// change another use of the unnormalised value). Other BatchNormalization nodes are
// listed as unpaired, with the reason.
//
// The pair's layer parameters are given output-channel-major: weight k belongs to output
// channel k / per_channel (Conv: OIHW as stored; ConvTranspose: its I x O/g x kH x kW
// regrouped; Gemm with transB = 0 and MatMul: K x N transposed). `index` maps each of
// these back to the initializer's own layout.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/model/model.hpp"
#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

struct BnPair {
  std::size_t layer = 0, bn = 0;     // node indices
  std::vector<std::size_t> through;  // Identity nodes between them
  std::string name;                  // the layer node's name, else its weight initializer's name
  std::string op;                    // "Conv", "ConvTranspose", "Gemm", "MatMul"
};

struct UnpairedBn {
  std::size_t bn = 0;
  std::string name, reason;
  bool after_layer = false;  // it takes a foldable layer's output, but that layer cannot take the fold (reason)
};

struct BnPatterns {
  std::vector<BnPair> pairs;
  std::vector<UnpairedBn> unpaired;
};

BnPatterns find_bn_pairs(const Model& m);

// A Conv, ConvTranspose, Gemm or MatMul (of the default domain, or ONNX Runtime's
// com.microsoft:FusedConv, a Conv with its activation) whose weight is a floating
// initializer: a layer a BatchNorm can be folded into, and that a folding tool keeps.
bool foldable_layer(const Model& m, const ModelNode& n);

// The BatchNormalization a model still applies to layer `layer`'s output (its node index), or
// none: one of the layer's consumers, or one reached through Identity nodes (an exporter or a
// tool leaves them between the two; find_bn_pairs looks back through them the same way). A
// FusedConv's output is after its activation: a BatchNormalization there is the model's next
// one (a BN after a Relu), not the layer's. An observed layer with one is not folded; its
// unfolded output is that BatchNormalization's.
std::optional<std::size_t> batchnorm_after(const Model& m, std::size_t layer);

// Whether node `add` adds a MatMul layer's bias (ONNX writes a Linear without Gemm, and a fold
// of MatMul + BatchNorm, as MatMul then Add of a constant): an Add of the MatMul's only use and
// a constant of one value per output channel ([N] or [1, N]); the MatMul's node index. That
// constant is read as the layer's bias (layer_params), and layer matching passes the Add's
// input through it as it does a BatchNormalization's (the bias belongs to the layer).
std::optional<std::size_t> matmul_bias_add(const Model& m, const ModelNode& add);

// The layer's weight shape output-channel-major: as stored, except a Gemm with transB = 0 and
// a MatMul, whose K x N weight reads as [N, K]. Two layers computing the same product from
// one weight stored either way (a folder that transposes a Gemm's weight and flips transB)
// have one such shape; their weights compare element for element once regrouped (above).
Shape output_major_weight_shape(const Model& m, const ModelNode& n);

// A pair's parameters, output-channel-major (see above), in the weight's stored dtype.
struct LayerParams {
  DType dtype = DType::Float32;
  Shape weight_shape;  // as stored
  std::int64_t channels = 0, per_channel = 0;
  std::vector<double> weight;      // channels * per_channel, output-channel-major
  std::vector<std::size_t> index;  // weight[k] is the initializer's element index[k]
  std::vector<double> bias;        // the layer's bias (empty: none)
  ref::BnParams bn;
};

// Throws InputError for a layer foldcheck cannot read (e.g. a weight that is not an
// initializer, mismatched channel counts).
LayerParams layer_params(const Model& m, const BnPair& p, bool with_index = true);

// The same layer's weight and bias in another model (a folded one) by initializer names,
// regrouped the same way: `layer` is the node in `other`. Without `with_index`, a Conv's
// index is left empty (it is the identity; a run of the model needs only the weight).
LayerParams layer_params_of_node(const Model& other, std::size_t layer, bool with_index = true);

}  // namespace foldcheck
