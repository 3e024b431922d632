#pragma once
// What defines a matched layer's computation besides its weights, compared between the
// original's layer and the observed model's (layer_match.hpp pairs them by op, weight shape,
// group and input; the folded weights are compared by fold_check.hpp). A fold changes
// weights and biases only: any difference here means the observed layer computes something
// else than the model's, whatever its weights.
//
// Compared (absent attributes at their ONNX defaults), each only where it can change a value:
//  - Conv, com.microsoft:FusedConv (its fused activation is not compared here), ConvTranspose:
//    strides; dilations (a dilation along a kernel axis of size 1 reads nothing else:
//    irrelevant); kernel_shape (the attribute, else the weight's); group; pads resolved to
//    numbers per side with the layer's input spatial shape (auto_pad NOTSET: the explicit
//    pads; VALID: none; SAME_UPPER / SAME_LOWER: as the spec resolves them, extra padding at
//    the end or at the beginning). Two resolutions are the same computation when their pads
//    are equal, or, with the input shape known, when they differ only in end padding that no
//    window reads (the same begin padding and output size, stride, dilation and kernel): the
//    same windows over the same values. Without the input shape, auto_pad SAME_* is compared
//    over every input size (its pads depend only on the size modulo the stride): a
//    difference at some size is a difference, shown in the attributes' own form.
//    ConvTranspose: also output_padding and output_shape; its auto_pad (which foldcheck does
//    not run) is compared as written, with the pads.
//  - Gemm: transA, alpha, and beta where it scales a bias (a Gemm without C adds none: its beta
//    counts as 1, so a folded bias added with beta 1 is the same). Not transB: each side's
//    weight is read through its own transB (model_patterns.hpp regroups it output-channel-
//    major), so a weight stored transposed with transB flipped is the same product, and a
//    flipped transB over an untransposed weight reads other weights, which the fold check
//    compares element for element (the same product only where the weight is symmetric).
//  - MatMul: nothing against a MatMul; against a Gemm (a fold may write MatMul + BatchNorm as a
//    Gemm, or a Gemm as MatMul + Add: layer_match pairs them), the Gemm's attributes with the
//    MatMul's as those of a Gemm of transA 0 and alpha 1.
#include <cstddef>
#include <string>
#include <vector>

#include "foldcheck/model/model.hpp"

namespace foldcheck {

// One attribute of a matched pair that defines another computation: its name and both
// values as a note shows them ("[2, 2]"; pads resolved: "[0, 0, 1, 1] (auto_pad SAME_UPPER)").
struct ComputationDifference {
  std::string attribute;
  std::string observed, model;
};

// The differences between the original's layer node `layer` and the observed model's node
// `observed_layer` (a matched pair: the same op, FusedConv counting as Conv); empty when they
// compute the same. `input_shape`: the layer's input shape in the original (N, C, spatial...)
// when known, else null (see above).
std::vector<ComputationDifference> computation_differences(const Model& original, std::size_t layer,
                                                           const Model& observed, std::size_t observed_layer,
                                                           const Shape* input_shape);

// Whether comparing the pair's pads needs the layer's input shape: a SAME_* auto_pad on either
// side, written differently on the other (another auto_pad, or explicit pads). Callers get the
// shape (a run) only then.
bool pads_need_input_shape(const Model& original, std::size_t layer, const Model& observed, std::size_t observed_layer);

// The differences as one sentence: "<who> has strides [2, 2], the model's [1, 1]; pads ...".
std::string computation_note(const std::vector<ComputationDifference>& differences, const std::string& who);

}  // namespace foldcheck
