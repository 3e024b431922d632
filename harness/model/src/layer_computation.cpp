// What defines a matched layer's computation, compared (layer_computation.hpp).
#include "foldcheck/model/layer_computation.hpp"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace foldcheck {
namespace {

using Ints = std::vector<std::int64_t>;

std::string list(const Ints& v) { return fmt::format("[{}]", fmt::join(v, ", ")); }

// One side's conv geometry as written, absent attributes at their defaults, per spatial axis.
struct ConvForm {
  Ints kernel, strides, dilations, pads;  // pads: 2 per axis, ONNX order (begins, then ends)
  std::string auto_pad;
  std::int64_t group = 1;
  std::size_t rank() const { return kernel.size(); }
  // A dilation along a kernel axis of size 1 reads nothing else.
  std::int64_t dilation(std::size_t a) const { return kernel[a] == 1 ? 1 : dilations[a]; }
  Ints effective_dilations() const {
    Ints d;
    for (std::size_t a = 0; a < rank(); ++a) d.push_back(dilation(a));
    return d;
  }
  bool same_mode() const { return auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER"; }
};

ConvForm conv_form(const Model& m, const ModelNode& n) {
  ConvForm f;
  const Tensor* w = n.inputs.size() > 1 ? m.initializer(n.inputs[1]) : nullptr;  // a matched layer's is one
  if (n.attr("kernel_shape")) f.kernel = n.ints_attr("kernel_shape");
  else if (w && w->shape.size() > 2) f.kernel.assign(w->shape.begin() + 2, w->shape.end());
  const std::size_t r = f.rank();
  auto filled = [&](const char* key, std::size_t n_values, std::int64_t fallback) {
    Ints v = n.ints_attr(key);
    v.resize(n_values, fallback);
    return v;
  };
  f.strides = filled("strides", r, 1);
  f.dilations = filled("dilations", r, 1);
  f.pads = filled("pads", 2 * r, 0);
  f.auto_pad = n.string_attr("auto_pad", "NOTSET");
  f.group = n.int_attr("group", 1);
  return f;
}

// The begin and end padding of axis a on an input of size `in` (SAME_*: as the spec resolves
// it, in 128-bit arithmetic: hostile attributes cannot overflow), and the output size.
struct AxisWindows {
  __int128 begin = 0, end = 0, out = 0;
};

AxisWindows axis_windows(const ConvForm& f, std::size_t a, __int128 in) {
  const std::size_t r = f.rank();
  const __int128 s = std::max<std::int64_t>(1, f.strides[a]),
                 span = (static_cast<__int128>(f.kernel[a]) - 1) * f.dilations[a] + 1;
  AxisWindows w;
  if (f.same_mode()) {
    const __int128 out = (in + s - 1) / s, total = std::max<__int128>(0, (out - 1) * s + span - in);
    w.begin = f.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
    w.end = total - w.begin;
  } else if (f.auto_pad != "VALID") {
    w.begin = f.pads[a];
    w.end = f.pads[a + r];
  }
  const __int128 padded = in + w.begin + w.end - span;
  w.out = padded < 0 ? 0 : padded / s + 1;
  return w;
}

// Whether both sides read the same windows along axis a on an input of size `in`: the same
// pads, or (`refine`: the size is the real one) the same begin padding and output size with
// the same stride, dilation and kernel (end padding no window reads differs).
bool same_windows(const ConvForm& x, const ConvForm& y, std::size_t a, __int128 in, bool refine) {
  const AxisWindows wx = axis_windows(x, a, in), wy = axis_windows(y, a, in);
  if (wx.begin == wy.begin && wx.end == wy.end) return true;
  return refine && wx.begin == wy.begin && wx.out == wy.out && x.strides[a] == y.strides[a] &&
         x.dilation(a) == y.dilation(a) && x.kernel[a] == y.kernel[a];
}

// The pads of every axis as numbers on `spatial` (ONNX order), with the auto_pad they came from.
std::string resolved_pads(const ConvForm& f, const Shape& spatial) {
  Ints b, e;
  for (std::size_t a = 0; a < f.rank(); ++a) {
    const AxisWindows w = axis_windows(f, a, spatial[a]);
    b.push_back(static_cast<std::int64_t>(w.begin));
    e.push_back(static_cast<std::int64_t>(w.end));
  }
  b.insert(b.end(), e.begin(), e.end());
  return list(b) + (f.auto_pad == "NOTSET" ? "" : " (auto_pad " + f.auto_pad + ")");
}

std::string written_pads(const ConvForm& f) {
  return f.auto_pad == "NOTSET" ? list(f.pads)
                                : "auto_pad " + f.auto_pad + " (resolved from the input shape, not known here)";
}

// Without the input size: the same windows at every size. Both sides' pads depend on the size
// only modulo the stride once it exceeds the kernel and pads: one period above them is
// checked (a stride over 4096 or attributes beyond 2^40: the written forms must be equal).
bool same_windows_at_every_size(const ConvForm& x, const ConvForm& y, std::size_t a) {
  const std::int64_t s = std::max(x.strides[a], y.strides[a]);
  constexpr std::int64_t kHuge = std::int64_t{1} << 40;
  for (const ConvForm* f : {&x, &y})
    if (f->strides[a] > 4096 || f->kernel[a] > kHuge || f->dilations[a] > kHuge || f->pads[a] > kHuge ||
        f->pads[a + f->rank()] > kHuge)
      return x.auto_pad == y.auto_pad && x.pads == y.pads;
  const __int128 low = static_cast<__int128>(kHuge) * 4;
  for (__int128 in = low; in < low + s; ++in)
    if (!same_windows(x, y, a, in, false)) return false;
  return true;
}

// The pads' difference, if any: resolved on the input's spatial shape when known.
std::optional<ComputationDifference> pads_difference(const ConvForm& x, const ConvForm& y, const Shape* input_shape) {
  const std::size_t r = x.rank();
  const bool known = input_shape && input_shape->size() == r + 2 &&
                     std::all_of(input_shape->begin() + 2, input_shape->end(), [](std::int64_t d) { return d >= 1; });
  const Shape spatial = known ? Shape(input_shape->begin() + 2, input_shape->end()) : Shape{};
  bool same = true;
  for (std::size_t a = 0; a < r && same; ++a)
    same = known ? same_windows(x, y, a, spatial[a], true) : same_windows_at_every_size(x, y, a);
  if (same) return std::nullopt;
  if (known) return ComputationDifference{"pads", resolved_pads(x, spatial), resolved_pads(y, spatial)};
  return ComputationDifference{"pads", written_pads(x), written_pads(y)};
}

// A ConvTranspose's padding as written (foldcheck does not run its auto_pad): equal or not.
std::optional<ComputationDifference> transpose_pads_difference(const ConvForm& x, const ConvForm& y) {
  if (x.auto_pad == y.auto_pad && (x.same_mode() || x.auto_pad == "VALID" || x.pads == y.pads)) return std::nullopt;
  auto written = [](const ConvForm& f) { return f.auto_pad == "NOTSET" ? list(f.pads) : "auto_pad " + f.auto_pad; };
  return ComputationDifference{"pads", written(x), written(y)};
}

void conv_differences(const Model& mo, const ModelNode& o, const Model& mb, const ModelNode& b,
                      const Shape* input_shape, std::vector<ComputationDifference>& d) {
  const ConvForm x = conv_form(mb, b), y = conv_form(mo, o);  // x: observed, y: the model's
  if (x.rank() != y.rank()) {
    d.push_back({"kernel_shape", list(x.kernel), list(y.kernel)});
    return;
  }
  auto ints = [&](const char* name, const Ints& xv, const Ints& yv) {
    if (xv != yv) d.push_back({name, list(xv), list(yv)});
  };
  ints("kernel_shape", x.kernel, y.kernel);
  ints("strides", x.strides, y.strides);
  if (x.effective_dilations() != y.effective_dilations())
    d.push_back({"dilations", list(x.dilations), list(y.dilations)});
  if (x.group != y.group) d.push_back({"group", std::to_string(x.group), std::to_string(y.group)});
  const bool transpose = o.op == "ConvTranspose";
  if (auto p = transpose ? transpose_pads_difference(x, y) : pads_difference(x, y, input_shape)) d.push_back(*p);
  if (!transpose) return;
  ints("output_padding", b.ints_attr("output_padding"), o.ints_attr("output_padding"));
  ints("output_shape", b.ints_attr("output_shape"), o.ints_attr("output_shape"));
}

// A linear layer: a Gemm, or a MatMul (a Gemm of transA 0, alpha 1 and its bias added apart).
bool linear(const ModelNode& n) { return n.op == "Gemm" || n.op == "MatMul"; }

// A Gemm's beta where it scales a bias; 1 without C (no bias: a folded one added as is).
double effective_beta(const ModelNode& n) {
  return n.inputs.size() > 2 && !n.inputs[2].empty() ? n.float_attr("beta", 1.0) : 1.0;
}

void gemm_differences(const ModelNode& o, const ModelNode& b, std::vector<ComputationDifference>& d) {
  if (b.int_attr("transA", 0) != o.int_attr("transA", 0))
    d.push_back({"transA", std::to_string(b.int_attr("transA", 0)), std::to_string(o.int_attr("transA", 0))});
  if (b.float_attr("alpha", 1.0) != o.float_attr("alpha", 1.0))
    d.push_back(
        {"alpha", fmt::format("{}", b.float_attr("alpha", 1.0)), fmt::format("{}", o.float_attr("alpha", 1.0))});
  if (effective_beta(b) != effective_beta(o))
    d.push_back({"beta", fmt::format("{}", effective_beta(b)), fmt::format("{}", effective_beta(o))});
}

bool conv_like(const ModelNode& n) { return n.op == "Conv" || n.op == "FusedConv" || n.op == "ConvTranspose"; }

}  // namespace

std::vector<ComputationDifference> computation_differences(const Model& original, std::size_t layer,
                                                           const Model& observed, std::size_t observed_layer,
                                                           const Shape* input_shape) {
  const ModelNode& o = original.nodes.at(layer);
  const ModelNode& b = observed.nodes.at(observed_layer);
  std::vector<ComputationDifference> d;
  if (conv_like(o) && conv_like(b)) conv_differences(original, o, observed, b, input_shape, d);
  else if (linear(o) && linear(b)) gemm_differences(o, b, d);  // a MatMul: a Gemm of transA 0, alpha 1
  return d;
}

bool pads_need_input_shape(const Model& original, std::size_t layer, const Model& observed,
                           std::size_t observed_layer) {
  const ModelNode& o = original.nodes.at(layer);
  const ModelNode& b = observed.nodes.at(observed_layer);
  if (!conv_like(o) || !conv_like(b) || o.op == "ConvTranspose") return false;
  const ConvForm x = conv_form(observed, b), y = conv_form(original, o);
  return x.auto_pad != y.auto_pad || (x.auto_pad == "NOTSET" && x.pads != y.pads);
}

std::string computation_note(const std::vector<ComputationDifference>& differences, const std::string& who) {
  std::string s;
  for (const ComputationDifference& d : differences)
    s += fmt::format("{}{} {}, the model's {}", s.empty() ? who + " has " : "; ", d.attribute, d.observed, d.model);
  return s;
}

}  // namespace foldcheck
