// The sequential-order row kernels of one x86-64 level (conv_rows.hpp); FOLDCHECK_ROWS_ISA
// names this build's namespace (rows_v4, rows_v3 or rows_base).
#include "conv_rows.hpp"

#include <utility>

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

// The channel-lane kernels (conv_rows.hpp). Register blocking per level: a tile of P
// pixels x V vectors of channels keeps P*V accumulators, V weight vectors and one input
// value in registers — v4 (32 registers): 12 x 2 = 24 + 3; v3 and the baseline (16): 6 x 2
// = 12 + 3.
#if defined(__AVX512F__)
constexpr int kVecBytes = 64, kTilePixels = 12;
#elif defined(__AVX2__)
constexpr int kVecBytes = 32, kTilePixels = 6;
#else
constexpr int kVecBytes = 16, kTilePixels = 6;
#endif

template <class A>
struct Vec {
  static constexpr int L = kVecBytes / static_cast<int>(sizeof(A));
  typedef A type __attribute__((vector_size(kVecBytes)));
};

// Pixels [ow0, ow0 + P) of output row (n, oh) for the V*L channels of one block. xrow0:
// the padded input at (n, the block's or group's first channel, row oh*sh, column 0); wb: the
// block's weights [terms][block]; o0: the block's first output channel; valid: its channels
// that exist.
template <class A, int P, int V, bool D>
inline void lane_tile(const LaneJob<A>& j, const A* xrow0, const A* wb, const A* bias, std::int64_t o0,
                      std::int64_t valid, std::int64_t n, std::int64_t oh, std::int64_t ow0) {
  using vec = typename Vec<A>::type;
  constexpr int L = Vec<A>::L;
  vec acc[P][V];
  const bool first = bias && j.bias_first;  // the accumulators start from the bias (its last add skipped)
  for (int p = 0; p < P; ++p)
    for (int v = 0; v < V; ++v) {
      acc[p][v] = vec{};  // +0 in every lane
      if (first) __builtin_memcpy(&acc[p][v], bias + v * L, sizeof(vec));
    }
  // Element steps: NHWC for depthwise lanes (a pixel's channels adjacent), NCHW otherwise
  // (a row's pixels adjacent, one broadcast each).
  const std::int64_t row_step = D ? j.Wp * j.Cp : j.Wp, col_step = D ? j.sw * j.Cp : j.sw;
  const std::int64_t channel_step = D ? 1 : j.Hp * j.Wp, tap_step = D ? j.dw * j.Cp : j.dw;
  std::int64_t t = 0;
  for (std::int64_t c = 0; c < j.cpg; ++c)
    for (std::int64_t kh = 0; kh < j.KH; ++kh) {
      const A* xr = xrow0 + c * channel_step + kh * j.dh * row_step + ow0 * col_step;
      for (std::int64_t kw = 0; kw < j.KW; ++kw, ++t) {
        vec w[V];
        for (int v = 0; v < V; ++v) __builtin_memcpy(&w[v], wb + t * j.block + v * L, sizeof(vec));
        const A* xq = xr + kw * tap_step;
        for (int p = 0; p < P; ++p) {
          if constexpr (D) {
            for (int v = 0; v < V; ++v) {
              vec xv;
              __builtin_memcpy(&xv, xq + p * col_step + v * L, sizeof(vec));
              acc[p][v] = acc[p][v] + xv * w[v];
            }
          } else {
            const A xs = xq[p * col_step];
            for (int v = 0; v < V; ++v) acc[p][v] = acc[p][v] + xs * w[v];
          }
        }
      }
    }
  for (int v = 0; v < V; ++v) {
    vec b{};
    if (bias) __builtin_memcpy(&b, bias + v * L, sizeof(vec));
    for (int p = 0; p < P; ++p) {
      if (bias && !first) acc[p][v] = acc[p][v] + b;
      A lanes[L];
      __builtin_memcpy(lanes, &acc[p][v], sizeof(vec));
      for (int l = 0; l < L && v * L + l < valid; ++l)
        j.y[((n * j.O + o0 + v * L + l) * j.OH + oh) * j.OW + ow0 + p] = lanes[l];
    }
  }
}

// Output row (n, oh) of one block: full tiles of kTilePixels, then the rest.
template <class A, int V, bool D>
inline void lane_row(const LaneJob<A>& j, std::int64_t item) {
  const std::int64_t oh = item % j.OH;
  std::int64_t rest = item / j.OH;
  const std::int64_t b = rest % j.blocks;
  rest /= j.blocks;
  const std::int64_t gi = D ? 0 : rest % j.groups, n = D ? rest : rest / j.groups;
  const std::int64_t wblock = gi * j.blocks + b;
  const A* wb = j.wt + wblock * j.cpg * j.KH * j.KW * j.block;
  const A* bias = j.bias ? j.bias + wblock * j.block : nullptr;
  const std::int64_t first = b * j.block;  // the block's first channel, within the group (depthwise: in all)
  const std::int64_t o0 = D ? first : gi * j.opg + first;
  const std::int64_t valid = (D ? j.C : j.opg) - first;
  const A* xrow0 = D ? j.xp + ((n * j.Hp + oh * j.sh) * j.Wp) * j.Cp + first
                     : j.xp + ((n * j.C + gi * j.cpg) * j.Hp + oh * j.sh) * j.Wp;
  std::int64_t ow0 = 0;
  for (; ow0 + kTilePixels <= j.OW; ow0 += kTilePixels)
    lane_tile<A, kTilePixels, V, D>(j, xrow0, wb, bias, o0, valid, n, oh, ow0);
  [&]<int... Ps>(std::integer_sequence<int, Ps...>) {
    const std::int64_t left = j.OW - ow0;
    ((left == Ps + 1 ? lane_tile<A, Ps + 1, V, D>(j, xrow0, wb, bias, o0, valid, n, oh, ow0) : void()), ...);
  }(std::make_integer_sequence<int, kTilePixels - 1>{});
}

template <class A>
inline void lane_item(const LaneJob<A>& j, std::int64_t item) {
  if (j.depthwise) j.vectors == 1 ? lane_row<A, 1, true>(j, item) : lane_row<A, 2, true>(j, item);
  else j.vectors == 1 ? lane_row<A, 1, false>(j, item) : lane_row<A, 2, false>(j, item);
}

[[gnu::flatten]] void lane_item_f32(const LaneJob<float>& j, std::int64_t item) { lane_item(j, item); }
[[gnu::flatten]] void lane_item_f64(const LaneJob<double>& j, std::int64_t item) { lane_item(j, item); }

}  // namespace

RowKernels kernels() { return {row_f32, row_f64, Vec<float>::L, Vec<double>::L, lane_item_f32, lane_item_f64}; }

}  // namespace foldcheck::detail::FOLDCHECK_ROWS_ISA
