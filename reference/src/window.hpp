#pragma once
// One output's window (internal to the reference): the (input, weight) index pairs of
// output (n, o, oh, ow), in (c, kh, kw) order, padded positions skipped (their products
// are exact zeros). The multiprecision path and the fast path's second tier both sum
// exactly these terms in this order.
#include <cstdint>

#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck::ref::detail {

// Output (n, o, oh, ow) of the flat NCHW index idx.
struct OutputIndex {
  std::int64_t n, o, oh, ow;
};
inline OutputIndex output_index(const ConvGeometry& g, std::int64_t idx) {
  const std::int64_t OH = g.OH(), OW = g.OW();
  return {idx / (OW * OH * g.O), (idx / (OW * OH)) % g.O, (idx / OW) % OH, idx % OW};
}

// Calls f(x_index, w_index) for each in-bounds term of the window.
template <class F>
void for_each_window_term(const ConvGeometry& g, std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow,
                          F&& f) {
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, c0 = (o / og) * cg;
  for (std::int64_t ci = 0; ci < cg; ++ci)
    for (std::int64_t kh = 0; kh < g.KH; ++kh) {
      const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
      if (ih < 0 || ih >= g.H) continue;
      for (std::int64_t kw = 0; kw < g.KW; ++kw) {
        const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
        if (iw < 0 || iw >= g.W) continue;
        f(static_cast<std::size_t>(((n * g.C + c0 + ci) * g.H + ih) * g.W + iw),
          static_cast<std::size_t>(((o * cg + ci) * g.KH + kh) * g.KW + kw));
      }
    }
}

}  // namespace foldcheck::ref::detail
