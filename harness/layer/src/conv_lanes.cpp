// The channel-lane conv's operands and threads (conv_rows.hpp): the padded input, the
// weights transposed into blocks of channels, the bias per block; one task per output row of
// a block, each writing only its own outputs, so y does not depend on the thread count.
#include <algorithm>
#include <cfenv>
#include <cmath>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "conv_rows.hpp"
#include "foldcheck/base/task_pool.hpp"

namespace foldcheck::detail {
namespace {

// The zero-padding argument (conv_rows.hpp) holds in the default floating-point environment:
// round to nearest, subnormals kept. Under another rounding mode +0 + (-0) can be -0, and
// with flush-to-zero a tiny sum can become -0: a host process built with -ffast-math
// (crtfastmath sets FTZ/DAZ) or one that calls fesetround gets the row kernels, which skip
// padded positions as the order does.
bool default_fp_environment() {
  if (std::fegetround() != FE_TONEAREST) return false;
#if defined(__SSE__)
  constexpr unsigned kFtzDaz = 0x8040;  // MXCSR flush-to-zero (bit 15) and denormals-are-zero (bit 6)
  if (_mm_getcsr() & kFtzDaz) return false;
#endif
  return true;
}

template <class A>
bool all_finite(const std::vector<A>& v) {
  for (const A a : v)
    if (!std::isfinite(a)) return false;
  return true;
}

// The job's shape, or false when the lanes do not apply (conv_rows.hpp, conv_lanes).
template <class A>
bool plan(const ref::ConvGeometry& g, int lanes, LaneJob<A>& j) {
  j.N = g.N, j.C = g.C, j.O = g.O, j.OH = g.OH(), j.OW = g.OW(), j.KH = g.KH, j.KW = g.KW;
  j.sh = g.stride_h, j.sw = g.stride_w, j.dh = g.dil_h, j.dw = g.dil_w, j.groups = g.groups;
  j.cpg = g.C / g.groups, j.opg = g.O / g.groups;
  j.depthwise = j.cpg == 1 && j.opg == 1 && g.groups > 1;
  const std::int64_t channels = j.depthwise ? g.C : j.opg;  // what the lanes run across
  if (2 * channels < lanes) return false;                  // under half a register of useful lanes
  j.vectors = channels <= lanes ? 1 : 2;
  j.block = j.vectors * lanes;
  j.blocks = (channels + j.block - 1) / j.block;
  j.Hp = (j.OH - 1) * j.sh + (j.KH - 1) * j.dh + 1;
  j.Wp = (j.OW - 1) * j.sw + (j.KW - 1) * j.dw + 1;
  j.Cp = j.depthwise ? j.blocks * j.block : g.C;
  // Large strides or dilations with padding could make the padded copy far larger than
  // the data it holds: the row kernels then.
  return ref::scratch_fits(g, static_cast<double>(j.N) * static_cast<double>(j.Hp) * static_cast<double>(j.Wp) *
                                  static_cast<double>(j.Cp));
}

// Row r of every padded image (every channel's): one task per (n, r), each writing only its
// own elements; NHWC for depthwise lanes, NCHW otherwise (conv_rows.hpp).
template <class A>
std::vector<A> padded_input(const ref::ConvGeometry& g, const LaneJob<A>& j, const std::vector<double>& x,
                            unsigned threads) {
  std::vector<A> xp(static_cast<std::size_t>(j.N * j.Hp * j.Wp * j.Cp), A(0));
  run_tasks(static_cast<std::size_t>(j.N * j.Hp), threads, [&](std::size_t task) {
    const std::int64_t n = static_cast<std::int64_t>(task) / j.Hp, r = static_cast<std::int64_t>(task) % j.Hp;
    const std::int64_t ih = r - g.pad_top;
    if (ih < 0 || ih >= g.H) return;
    const std::int64_t iw_end = std::min(g.W, j.Wp - g.pad_left);
    if (iw_end <= 0) return;  // no input column within reach (and &row[pad_left] would be out of range)
    for (std::int64_t c = 0; c < g.C; ++c) {
      const double* xr = &x[static_cast<std::size_t>(((n * g.C + c) * g.H + ih) * g.W)];
      if (j.depthwise) {
        A* row = &xp[static_cast<std::size_t>((n * j.Hp + r) * j.Wp * j.Cp + c)];
        for (std::int64_t iw = 0; iw < iw_end; ++iw) row[(iw + g.pad_left) * j.Cp] = static_cast<A>(xr[iw]);
      } else {
        A* row = &xp[static_cast<std::size_t>(((n * j.Cp + c) * j.Hp + r) * j.Wp + g.pad_left)];
        for (std::int64_t iw = 0; iw < iw_end; ++iw) row[iw] = static_cast<A>(xr[iw]);
      }
    }
  }, [](std::size_t, std::size_t) {});
  return xp;
}

// wt [group][block][term][lane] (depthwise: [block][term][lane]), zero past the channels;
// bias [group][block][lane] likewise.
template <class A>
void block_weights(const LaneJob<A>& j, const std::vector<A>& w, const std::vector<A>& bias, std::vector<A>& wt,
                   std::vector<A>& bt) {
  const std::int64_t terms = j.cpg * j.KH * j.KW, groups = j.depthwise ? 1 : j.groups;
  const std::int64_t channels = j.depthwise ? j.C : j.opg;
  wt.assign(static_cast<std::size_t>(groups * j.blocks * terms * j.block), A(0));
  if (!bias.empty()) bt.assign(static_cast<std::size_t>(groups * j.blocks * j.block), A(0));
  for (std::int64_t gi = 0; gi < groups; ++gi)
    for (std::int64_t k = 0; k < channels; ++k) {
      const std::int64_t o = gi * channels + k, b = k / j.block, lane = k % j.block;
      const std::int64_t base = (gi * j.blocks + b) * terms * j.block + lane;
      for (std::int64_t t = 0; t < terms; ++t) wt[static_cast<std::size_t>(base + t * j.block)] = w[static_cast<std::size_t>(o * terms + t)];
      if (!bias.empty()) bt[static_cast<std::size_t>((gi * j.blocks + b) * j.block + lane)] = bias[static_cast<std::size_t>(o)];
    }
}

}  // namespace

template <class A>
bool conv_lanes(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<A>& w,
                const std::vector<A>& bias, unsigned threads, std::vector<double>& y, bool bias_first) {
  const RowKernels& k = row_kernels();
  LaneJob<A> j;
  j.bias_first = bias_first;
  if (!plan(g, std::is_same_v<A, float> ? k.lanes_f32 : k.lanes_f64, j) || !all_finite(w) || !default_fp_environment())
    return false;
  const std::vector<A> xp = padded_input(g, j, x, threads);
  std::vector<A> wt, bt;
  block_weights(j, w, bias, wt, bt);
  y.resize(static_cast<std::size_t>(g.output_size()));
  j.xp = xp.data();
  j.wt = wt.data();
  j.bias = bt.empty() ? nullptr : bt.data();
  j.y = y.data();
  run_tasks(static_cast<std::size_t>(j.items()), threads, [&](std::size_t item) {
    if constexpr (std::is_same_v<A, float>) k.lane_item_f32(j, static_cast<std::int64_t>(item));
    else k.lane_item_f64(j, static_cast<std::int64_t>(item));
  }, [](std::size_t, std::size_t) {});
  return true;
}

template bool conv_lanes(const ref::ConvGeometry&, const std::vector<double>&, const std::vector<float>&,
                         const std::vector<float>&, unsigned, std::vector<double>&, bool);
template bool conv_lanes(const ref::ConvGeometry&, const std::vector<double>&, const std::vector<double>&,
                         const std::vector<double>&, unsigned, std::vector<double>&, bool);

}  // namespace foldcheck::detail
