#pragma once
// The layer's vocabulary, on the ground floor: a conv's geometry, inference BatchNorm's
// parameters, a layer's data, and the index arithmetic of a conv window. Every layer of
// foldcheck (the certified reference, the float paths, the ONNX runner, the benchmarks)
// names a layer with these types and walks a window with these functions.
//
// Contract (windows): the terms of output (n, o, oh, ow) are the (input, weight) index
// pairs of its in-bounds positions in (c, kh, kw) order — im2col's K order, the order the
// engines' direct loops and the certified reference both use. Padded positions are skipped,
// not visited as zeros: their products are exact zeros for the reference, and 0 * inf is
// NaN. (A float path may add them as zeros only where it proves the result the same: the
// channel-lane kernels, harness/layer/src/conv_rows.hpp, with finite weights.)
#include <cstdint>
#include <vector>

namespace foldcheck::ref {

struct ConvGeometry {
  std::int64_t N = 1, C = 1, H = 1, W = 1;  // input NCHW
  std::int64_t O = 1, KH = 1, KW = 1;       // weights O x (C/groups) x KH x KW
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  std::int64_t dil_h = 1, dil_w = 1;
  std::int64_t groups = 1;

  // Always inlined: the per-level kernel units (-march=x86-64-v4, ...) call them, and an
  // out-of-line copy emitted there (at -O0, or -O1 with sanitizers) could be the one the
  // linker keeps for every caller, a CPU without that level included.
  [[gnu::always_inline]] std::int64_t OH() const { return (H + pad_top + pad_bottom - dil_h * (KH - 1) - 1) / stride_h + 1; }
  [[gnu::always_inline]] std::int64_t OW() const { return (W + pad_left + pad_right - dil_w * (KW - 1) - 1) / stride_w + 1; }
  [[gnu::always_inline]] std::int64_t terms_per_output() const { return (C / groups) * KH * KW; }
  [[gnu::always_inline]] std::int64_t output_size() const { return N * O * OH() * OW(); }
  // The channel of element i of an N x O x OH x OW output (row-major, NCHW).
  [[gnu::always_inline]] std::size_t output_channel(std::size_t i) const {
    return static_cast<std::size_t>((static_cast<std::int64_t>(i) / (OH() * OW())) % O);
  }
};

// Whether a kernel's scratch copy of `elements` values (a padded input, a row panel) stays
// within 4x the layer's input and output, plus 64 Ki: padding or strides of millions (a
// hostile file) would otherwise cost gigabytes for a handful of outputs, and the kernel then
// takes a path that walks only in-bounds terms. In double: no int64 product can wrap.
inline bool scratch_fits(const ConvGeometry& g, double elements) {
  auto d = [](std::int64_t v) { return static_cast<double>(v); };
  return elements <= 4.0 * (d(g.N) * d(g.C) * d(g.H) * d(g.W) + d(g.output_size())) + 65536.0;
}

// The sizes of a conv of an NCHW input by OIHW weights (both of rank 4, the caller's check):
// N, C, H, W, O, KH, KW set; strides, padding, dilation and groups left at their defaults
// for the caller, who knows where they come from.
inline ConvGeometry conv_sizes(const std::vector<std::int64_t>& x, const std::vector<std::int64_t>& w) {
  ConvGeometry g;
  g.N = x[0];
  g.C = x[1];
  g.H = x[2];
  g.W = x[3];
  g.O = w[0];
  g.KH = w[2];
  g.KW = w[3];
  return g;
}

// Inference BatchNorm over the O output channels: y = (c - mean)·gamma/sqrt(var+eps) + beta.
struct BnParams {
  std::vector<double> gamma, beta, mean, var;
  double eps = 1e-5;
};

struct LayerData {
  ConvGeometry geometry;
  const std::vector<double>* x = nullptr;     // N*C*H*W
  const std::vector<double>* w = nullptr;     // O*(C/groups)*KH*KW
  const std::vector<double>* bias = nullptr;  // O, or nullptr for no conv bias
  const BnParams* bn = nullptr;               // nullptr: the conv alone
};

// Output (n, o, oh, ow) of the flat NCHW index idx.
struct OutputIndex {
  std::int64_t n, o, oh, ow;
};
inline OutputIndex output_index(const ConvGeometry& g, std::int64_t idx) {
  const std::int64_t OH = g.OH(), OW = g.OW();
  return {idx / (OW * OH * g.O), (idx / (OW * OH)) % g.O, (idx / OW) % OH, idx % OW};
}

// Calls f(x_row, w_row) for each (c, kh) of output row (n, o, oh) whose input row is in
// bounds, in (c, kh) order: x_row is the flat NCHW index of input row (n, c, ih, 0), w_row
// the flat index of weight row (o, c, kh, 0). The caller walks kw along the rows.
template <class F>
void for_each_window_row(const ConvGeometry& g, std::int64_t n, std::int64_t o, std::int64_t oh, F&& f) {
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, c0 = (o / og) * cg;
  for (std::int64_t ci = 0; ci < cg; ++ci)
    for (std::int64_t kh = 0; kh < g.KH; ++kh) {
      const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
      if (ih < 0 || ih >= g.H) continue;
      f(((n * g.C + c0 + ci) * g.H + ih) * g.W, ((o * cg + ci) * g.KH + kh) * g.KW);
    }
}

// Calls f(x_index, w_index) for each in-bounds term of output (n, o, oh, ow), in (c, kh, kw)
// order.
template <class F>
void for_each_window_term(const ConvGeometry& g, std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow,
                          F&& f) {
  for_each_window_row(g, n, o, oh, [&](std::int64_t x_row, std::int64_t w_row) {
    for (std::int64_t kw = 0; kw < g.KW; ++kw) {
      const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
      if (iw < 0 || iw >= g.W) continue;
      f(static_cast<std::size_t>(x_row + iw), static_cast<std::size_t>(w_row + kw));
    }
  });
}

}  // namespace foldcheck::ref
