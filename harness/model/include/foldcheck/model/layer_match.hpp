#pragma once
// Which layer of an observed model (an engine's or a tool's fold, as it wrote it) is which
// layer of the original: by data flow, not by node order or names.
//
// Each value gets a signature from the graph inputs forward. A layer's (foldable_layer) is its
// op (FusedConv counts as Conv, MatMul as Gemm: a fold may write either), weight shape
// output-channel-major (a Gemm's weight stored transposed with transB flipped is the same
// layer: output_major_weight_shape) and group, and its input's signature; ops a fold removes
// or merges pass their input's signature through unchanged (BatchNormalization, Identity,
// Dropout, the activations an engine fuses into a conv, shape-only ops: Flatten, Reshape,
// Squeeze, Unsqueeze, and the Add of a MatMul's bias: matmul_bias_add); a commutative op (Add,
// Mul, Sum, Max, Min, Mean) sorts its inputs' signatures; any other op keeps their order. So
// node order, initializer names (ConvBnFusion_W_*), removed BatchNorms and Identities and
// fused activations do not matter. Layers with the same signature in both models are matched
// one to one; several with one signature (a truly symmetric graph) only where node names pair
// them, else the correspondence is ambiguous (InputError).
//
// Ops of a domain foldcheck does not implement are refused by name (InputError), never read
// as ONNX ops: com.microsoft.nchwc:Conv has a blocked weight layout. com.microsoft:FusedConv
// is read as its Conv (standard OIHW weights).
#include <cstddef>
#include <map>

#include "foldcheck/model/model.hpp"

namespace foldcheck {

// original's foldable layer index -> observed's, for every foldable layer of both.
std::map<std::size_t, std::size_t> match_layers(const Model& original, const Model& observed);

}  // namespace foldcheck
