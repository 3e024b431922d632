#pragma once
// A conv + BatchNorm layer from its files: the input (.npy, NCHW or N x C), the conv weights
// (.npy, OIHW), an optional conv bias (.npy, one per output channel) and the BatchNorm
// parameters (.npz, bn_params.hpp), with the conv's stride, dilation and padding (by default
// dilation·(K−1)/2, "same" for odd kernels). Every value must be a value of the layer's
// dtype exactly (the input's, unless given): the layer is what a compiled program holds, not
// something rounded behind the user's back (eps excepted: a scalar the recipes model).
//
// conv_geometry is the one rule for a conv's geometry from the shapes of its input and
// weights (diagnose and bisect): groups = C / (weights' axis 1), which must divide C, and
// O must be divisible by the groups; stride and dilation 1 to 2^20, padding 0 to 2^20 (as the
// command's flags). Errors name the file, or the field, given as `what`.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/layer/graph.hpp"
#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck {

// x: NCHW, w: OIHW (both 4-D); stride, dilation and padding symmetric.
ref::ConvGeometry conv_geometry(const Shape& x, const Shape& w, std::int64_t stride, std::int64_t dilation,
                                std::int64_t pad_h, std::int64_t pad_w, const std::string& what);

struct LayerFiles {
  std::string input, weights, bias, bn;  // bias: "" for none
  std::optional<DType> dtype;            // default: the input's
  std::int64_t stride = 1, dilation = 1;
  std::optional<std::int64_t> padding;   // default: dilation·(K−1)/2 per axis
};

struct LayerFromFiles {
  Graph graph;                           // Conv -> BatchNorm, in the layer's dtype
  Tensor input;                          // NCHW
  std::vector<std::string> bn_defaulted; // BatchNorm parameters the archive left out ("beta 0", ...)
};

LayerFromFiles layer_from_files(const LayerFiles& f);

}  // namespace foldcheck
