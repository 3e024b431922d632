// A conv + BatchNorm layer from its files (layer_files.hpp).
#include "foldcheck/io/layer_files.hpp"

#include <cmath>
#include <tuple>
#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"

namespace foldcheck {

ref::ConvGeometry conv_geometry(const Shape& x, const Shape& w, std::int64_t stride, std::int64_t dilation,
                                std::int64_t pad_h, std::int64_t pad_w, const std::string& what) {
  // The same ranges as the command's flags, for every caller (a stride of 0 would divide by 0).
  constexpr std::int64_t kMax = std::int64_t{1} << 20;
  for (const auto& [v, name, lo] : {std::tuple{stride, "stride", 1}, std::tuple{dilation, "dilation", 1},
                                    std::tuple{pad_h, "padding", 0}, std::tuple{pad_w, "padding", 0}})
    if (v < lo || v > kMax)
      throw InputError(fmt::format("{}: must be an integer from {} to {}, not {}", field(name), lo, kMax, v));
  ref::ConvGeometry g = ref::conv_sizes(x, w);
  if (w[1] <= 0 || g.C % w[1])
    throw InputError(fmt::format("{}: {} input channels per group do not divide the input's {} channels", what, w[1], g.C));
  g.groups = g.C / w[1];
  if (g.O % g.groups) throw InputError(fmt::format("{}: {} output channels are not divisible by the {} groups", what, g.O, g.groups));
  g.stride_h = g.stride_w = stride;
  g.dil_h = g.dil_w = dilation;
  g.pad_top = g.pad_bottom = pad_h;
  g.pad_left = g.pad_right = pad_w;
  return g;
}

namespace {

// The input and weight files as tensors, with their shapes checked.
std::pair<Tensor, Tensor> read_layer_tensors(const LayerFiles& f) {
  Tensor x = read_npy(f.input);
  Tensor w = read_npy(f.weights);
  if (x.shape.size() == 2) x.shape = {x.shape[0], x.shape[1], 1, 1};
  if (x.shape.size() != 4 || x.data.empty())
    throw InputError(fmt::format("{}: shape {}: the layer's input must be NCHW (or N x C) and not empty", f.input, shape_string(x.shape)));
  if (w.shape.size() != 4 || w.data.empty())
    throw InputError(fmt::format("{}: shape {}: conv weights must be OIHW and not empty", f.weights, shape_string(w.shape)));
  return {std::move(x), std::move(w)};
}

// Every value as the compiled program holds it: in the layer's dtype, exactly.
void check_dtype_values(const std::vector<double>& v, const std::string& path, DType t, bool dtype_given) {
  for (const double d : v)
    if (!std::isfinite(d) || round_to(t, d) != d)
      throw InputError(fmt::format(fmt::runtime("{}: value {:.17g} is {} (the layer's dtype, from " + field("input") + "{})"), path, d,
                                   std::isfinite(d) ? fmt::format("not exactly a {} value", name(t)) : std::string("not finite"),
                                   dtype_given ? " or " + field("dtype") : ""));
}

}  // namespace

LayerFromFiles layer_from_files(const LayerFiles& f) {
  auto [x, w] = read_layer_tensors(f);
  const DType t = f.dtype.value_or(x.dtype);
  const ref::ConvGeometry g = conv_geometry(x.shape, w.shape, f.stride, f.dilation, f.padding.value_or(f.dilation * (w.shape[2] - 1) / 2),
                                            f.padding.value_or(f.dilation * (w.shape[3] - 1) / 2), f.weights);
  if (g.OH() <= 0 || g.OW() <= 0)
    throw InputError(fmt::format("bisect: the layer has no output (input {}, weights {}, stride {}, dilation {}, padding {})",
                                 shape_string(x.shape), shape_string(w.shape), f.stride, f.dilation, g.pad_top));
  // 28 lowerings' bounds and the reference: ~ 40 doubles per output held at once.
  const std::int64_t outputs = checked_element_count({g.N, g.O, g.OH(), g.OW()}, "the layer's output");
  check_fits_in_memory(static_cast<std::uint64_t>(outputs), 400, "bisect on this layer");
  LayerFromFiles r;
  r.graph.dtype = t;
  Node conv;
  conv.kind = Node::Kind::Conv;
  conv.name = "conv";
  conv.geometry = g;
  conv.weight = w;
  if (!f.bias.empty()) {
    const Tensor b = read_npy(f.bias);
    if (b.shape.size() != 1 || b.shape[0] != g.O)
      throw InputError(fmt::format("{}: shape {}: a conv bias is one value per output channel (1-D, {} values)", f.bias,
                                   shape_string(b.shape), g.O));
    conv.bias = b.data;
  }
  check_dtype_values(x.data, f.input, t, f.dtype.has_value());
  check_dtype_values(conv.weight.data, f.weights, t, f.dtype.has_value());
  check_dtype_values(conv.bias, f.bias, t, f.dtype.has_value());
  BnRule rule;
  rule.max_values = g.O;
  rule.channels = static_cast<std::size_t>(g.O);
  rule.dtype = t;
  rule.values = BnValues::Exact;
  const LoadedBn bn = load_bn_params(BnSources::archive(f.bn), rule);
  Node norm;
  norm.kind = Node::Kind::BatchNorm;
  norm.name = "bn";
  norm.bn = bn.bn;
  r.graph.nodes = {conv, norm};
  r.input = std::move(x);
  r.bn_defaulted = bn.defaulted;
  return r;
}

}  // namespace foldcheck
