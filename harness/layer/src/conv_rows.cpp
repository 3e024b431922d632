// The sequential-order row kernels of one x86-64 level (conv_rows.hpp); FOLDCHECK_ROWS_ISA
// names this build's namespace (rows_v4, rows_v3 or rows_base).
#include "conv_rows.hpp"

#ifndef FOLDCHECK_ROWS_ISA
#error "FOLDCHECK_ROWS_ISA must name this build's namespace"
#endif

namespace foldcheck::detail::FOLDCHECK_ROWS_ISA {
namespace {

template <class A>
inline void row(const ref::ConvGeometry& g, const A* __restrict x, const A* __restrict wo, const A* bias,
                std::int64_t n, std::int64_t o, std::int64_t oh, A* __restrict acc) {
  const std::int64_t OW = g.OW();
  for (std::int64_t ow = 0; ow < OW; ++ow) acc[ow] = A(0);
  ref::for_each_window_row(g, n, o, oh, [&](std::int64_t x_row, std::int64_t w_row) {
    const A* xrow = &x[x_row];
    const A* wrow = &wo[w_row - o * g.terms_per_output()];
    for (std::int64_t kw = 0; kw < g.KW; ++kw) {
      const A wv = wrow[kw];
      const std::int64_t off = kw * g.dil_w - g.pad_left;
      // Pixels whose input column ow*stride + off lies in [0, W).
      std::int64_t lo = 0, hi = OW;
      if (off < 0) lo = (-off + g.stride_w - 1) / g.stride_w;
      if ((OW - 1) * g.stride_w + off >= g.W) hi = g.W - 1 - off < 0 ? 0 : (g.W - 1 - off) / g.stride_w + 1;
      // Columns are indexed as xrow[ow + off] with ow in [lo, hi), never through a pointer
      // xrow + off: with a pad wider than the row that pointer lies before the tensor, which
      // is undefined even when no element is read through it (found by fuzz_model_run).
      if (g.stride_w == 1) {
        for (std::int64_t ow = lo; ow < hi; ++ow) acc[ow] = acc[ow] + xrow[ow + off] * wv;
      } else {
        for (std::int64_t ow = lo; ow < hi; ++ow) acc[ow] = acc[ow] + xrow[ow * g.stride_w + off] * wv;
      }
    }
  });
  if (bias)
    for (std::int64_t ow = 0; ow < OW; ++ow) acc[ow] = acc[ow] + *bias;
}

// Flattened: every inline function of a shared header (ConvGeometry's sizes, the window
// walk) is inlined here, so this unit emits no out-of-line copy of one compiled for its
// level, which the linker could pick for a caller on a CPU without that level.
[[gnu::flatten]] void row_f32(const ref::ConvGeometry& g, const float* x, const float* wo, const float* bias, std::int64_t n,
             std::int64_t o, std::int64_t oh, float* acc) {
  row(g, x, wo, bias, n, o, oh, acc);
}

[[gnu::flatten]] void row_f64(const ref::ConvGeometry& g, const double* x, const double* wo, const double* bias, std::int64_t n,
             std::int64_t o, std::int64_t oh, double* acc) {
  row(g, x, wo, bias, n, o, oh, acc);
}

}  // namespace

RowKernels kernels() { return {row_f32, row_f64}; }

}  // namespace foldcheck::detail::FOLDCHECK_ROWS_ISA
