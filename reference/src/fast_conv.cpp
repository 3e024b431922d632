#include "fast_conv.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <thread>

#include "foldcheck/reference/dd_arith.hpp"

namespace foldcheck::ref::detail {
namespace {

typedef double v8 __attribute__((vector_size(64)));
typedef long long v8i __attribute__((vector_size(64)));
constexpr std::int64_t kOBMax = 4;  // output channels per block: each input vector feeds up to 4

#define FOLDCHECK_VABS(v) ((v8)((v8i)(v) & 0x7fffffffffffffffLL))

// The input with its padding made explicit (zeros), plus slack so that a block of 16
// output pixels past the row's end reads zeros or other rows' values (never used).
struct Padded {
  std::vector<double> v;
  std::int64_t Hp = 0, Wp = 0;
};

Padded pad_input(const ConvGeometry& g, const std::vector<double>& x) {
  Padded p;
  p.Hp = g.H + g.pad_top + g.pad_bottom;
  p.Wp = g.W + g.pad_left + g.pad_right;
  p.v.assign(static_cast<std::size_t>(g.N * g.C * p.Hp * p.Wp + 16 * g.stride_w + g.KW * g.dil_w + 64), 0.0);
  for (std::int64_t nc = 0; nc < g.N * g.C; ++nc)
    for (std::int64_t h = 0; h < g.H; ++h)
      std::copy_n(&x[static_cast<std::size_t>((nc * g.H + h) * g.W)], g.W,
                  &p.v[static_cast<std::size_t>((nc * p.Hp + h + g.pad_top) * p.Wp + g.pad_left)]);
  return p;
}

// Weights regrouped per group and block of kOB output channels as [c][kh][kw][kOB], with
// zero weights for the channels a last block lacks (their outputs are discarded), and
// their absolute values.
struct BlockedWeights {
  std::int64_t kOB = 1, blocks_per_group = 1;
  std::vector<std::vector<double>> w, wabs;  // per group
};

BlockedWeights block_weights(const ConvGeometry& g, const std::vector<double>& w) {
  BlockedWeights b;
  const std::int64_t og = g.O / g.groups, cg = g.C / g.groups, per = cg * g.KH * g.KW;
  b.kOB = og >= kOBMax ? kOBMax : 1;
  b.blocks_per_group = (og + b.kOB - 1) / b.kOB;
  b.w.assign(static_cast<std::size_t>(g.groups), std::vector<double>(static_cast<std::size_t>(b.blocks_per_group * per * b.kOB), 0.0));
  for (std::int64_t gi = 0; gi < g.groups; ++gi)
    for (std::int64_t ol = 0; ol < og; ++ol)
      for (std::int64_t k = 0; k < per; ++k)
        b.w[gi][static_cast<std::size_t>(((ol / b.kOB) * per + k) * b.kOB + ol % b.kOB)] =
            w[static_cast<std::size_t>((gi * og + ol) * per + k)];
  b.wabs = b.w;
  for (auto& v : b.wabs)
    for (double& d : v) d = std::fabs(d);
  return b;
}

// One output row's sums, by channel: s, a at [o * stride + ow], ax at [group * stride + ow]
// (stride: OW rounded up to 16, plus kOBMax spare rows for a last block's unused lanes).
struct RowSums {
  std::int64_t stride = 0;
  std::vector<double> s, a, ax;
};

// 16 output pixels (n, oh, ow0..ow0+15) of channels o0..o0+kOB-1: every product x*w of the
// window (padding included as exact zeros) in (c, kh, kw) order, accumulated into a
// sum and a sum of |x*w| per output, in registers. Lanes are independent outputs, so
// the vector width (target_clones: AVX-512, AVX2 or SSE at run time) does not change any
// output's operation order. With ax, also the window sums of |x|.
// Contraction to FMA is allowed here, and only here: every product x*w and |x|*|w| of
// float32 values is exact in binary64, so fma(x, w, s) = RN(x*w + s) = RN(RN(x*w) + s),
// bit for bit the same sums as separate multiplies and adds, in fewer instructions.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
template <int kOB, bool kUnitStride>
__attribute__((always_inline)) inline void block16(const ConvGeometry& g, const Padded& xp, const double* __restrict wr,
                                                   const double* __restrict war, const double* xc,
                                                   double* __restrict s_out, double* __restrict a_out,
                                                   double* __restrict ax_out, std::int64_t stride) {
  const std::int64_t cg = g.C / g.groups;
  v8 s[kOB][2] = {}, a[kOB][2] = {}, ax[2] = {};
  const std::int64_t sw = g.stride_w, dw = g.dil_w, KW = g.KW;
  // Pointers walk the window: the input row of (ci, kh) and its weights, advanced by
  // constant strides instead of recomputed indices.
  const std::int64_t row_step = g.dil_h * xp.Wp, chan_step = xp.Hp * xp.Wp;
  for (std::int64_t ci = 0; ci < cg; ++ci, xc += chan_step) {
    const double* xr = xc;
    for (std::int64_t kh = 0; kh < g.KH; ++kh, xr += row_step, wr += KW * kOB, war += KW * kOB) {
      for (std::int64_t kw = 0; kw < KW; ++kw) {
        v8 xv[2];
        if (kUnitStride) {
          __builtin_memcpy(&xv[0], xr + kw * dw, sizeof(v8));
          __builtin_memcpy(&xv[1], xr + 8 + kw * dw, sizeof(v8));
        } else {
          for (int j = 0; j < 16; ++j) xv[j / 8][j % 8] = xr[j * sw + kw * dw];
        }
        const v8 xa0 = FOLDCHECK_VABS(xv[0]), xa1 = FOLDCHECK_VABS(xv[1]);
        ax[0] += xa0;  // always (cheaper than a branch); stored if asked
        ax[1] += xa1;
        for (std::int64_t b = 0; b < kOB; ++b) {
          const double wv = wr[kw * kOB + b], wa = war[kw * kOB + b];
          s[b][0] += xv[0] * wv;
          s[b][1] += xv[1] * wv;
          a[b][0] += xa0 * wa;
          a[b][1] += xa1 * wa;
        }
      }
    }
  }
  for (std::int64_t b = 0; b < kOB; ++b) {
    __builtin_memcpy(s_out + b * stride, &s[b][0], sizeof(v8));
    __builtin_memcpy(s_out + b * stride + 8, &s[b][1], sizeof(v8));
    __builtin_memcpy(a_out + b * stride, &a[b][0], sizeof(v8));
    __builtin_memcpy(a_out + b * stride + 8, &a[b][1], sizeof(v8));
  }
  if (ax_out) {
    __builtin_memcpy(ax_out, &ax[0], sizeof(v8));
    __builtin_memcpy(ax_out + 8, &ax[1], sizeof(v8));
  }
}

template <int kOB, bool kUnitStride>
__attribute__((always_inline)) inline void row_sums_impl(const ConvGeometry& g, const Padded& xp,
                                                         const BlockedWeights& bw, std::int64_t n, std::int64_t oh,
                                                         RowSums& rs) {
  const std::int64_t og = g.O / g.groups, cg = g.C / g.groups, per = cg * g.KH * g.KW, OW = g.OW();
  for (std::int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
    for (std::int64_t gi = 0; gi < g.groups; ++gi) {
      const double* xc = &xp.v[static_cast<std::size_t>(((n * g.C + gi * cg) * xp.Hp + oh * g.stride_h) * xp.Wp +
                                                        ow0 * g.stride_w)];
      for (std::int64_t bi = 0; bi < bw.blocks_per_group; ++bi) {
        const std::int64_t o0 = gi * og + bi * kOB;
        const std::size_t off = static_cast<std::size_t>(bi * per * kOB);
        // The group's first block also sums |x| for all its channels.
        block16<kOB, kUnitStride>(g, xp, bw.w[gi].data() + off, bw.wabs[gi].data() + off, xc,
                                  &rs.s[static_cast<std::size_t>(o0 * rs.stride + ow0)],
                                  &rs.a[static_cast<std::size_t>(o0 * rs.stride + ow0)],
                                  bi == 0 ? &rs.ax[static_cast<std::size_t>(gi * rs.stride + ow0)] : nullptr,
                                  rs.stride);
      }
    }
  }
}

// The kernel for blocks of 4 channels (ordinary convs) and of 1 (depthwise: one output
// channel per group), unit or general stride, each compiled for AVX-512, AVX2+FMA and
// baseline x86-64.
#define FOLDCHECK_ROW_SUMS(NAME, KOB, UNIT)                                                                      \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void NAME(                         \
      const ConvGeometry& g, const Padded& xp, const BlockedWeights& bw, std::int64_t n, std::int64_t oh, \
      RowSums& rs) {                                                                                               \
    row_sums_impl<KOB, UNIT>(g, xp, bw, n, oh, rs);                                                                \
  }
FOLDCHECK_ROW_SUMS(row_sums4_unit, 4, true)
FOLDCHECK_ROW_SUMS(row_sums4, 4, false)
FOLDCHECK_ROW_SUMS(row_sums1_unit, 1, true)
FOLDCHECK_ROW_SUMS(row_sums1, 1, false)
#undef FOLDCHECK_ROW_SUMS
#pragma GCC pop_options

void row_sums(const ConvGeometry& g, const Padded& xp, const BlockedWeights& bw, std::int64_t n, std::int64_t oh,
              RowSums& rs) {
  const bool unit = g.stride_w == 1;
  if (bw.kOB == kOBMax) (unit ? row_sums4_unit : row_sums4)(g, xp, bw, n, oh, rs);
  else (unit ? row_sums1_unit : row_sums1)(g, xp, bw, n, oh, rs);
}

// The epilogue for `count` outputs of one channel row: the enclosure y +- rad of the
// layer's output and conv +- conv_rad of the conv's, from the sums s (radius
// radius_factor * a), in double-double arithmetic (dd_arith.hpp) with every rounding of
// the bound evaluation covered; then float32's rounding, certified when the enclosure
// lies strictly inside its rounding cell (certify_cell's test, written branch-free so the
// loop vectorises). ok[i] reports whether output i is certified in every requested format.
struct RowOut {
  double *hi, *lo, *rad;
  std::array<double*, kNumFormats> rounded;  // null: format not requested
  std::uint8_t* certified;
  std::int32_t* precision;
  double *conv, *conv_rad, *abs_sum, *abs_x_sum;  // null: not asked for
};

constexpr std::size_t kF32 = 1;  // kFormats index of binary32
static_assert(kFormats[kF32].precision == 24 && kFormats[kF32].emin == -126);

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void finish_row(
    const double* __restrict s, const double* __restrict a, const double* __restrict ax, std::int64_t count,
    const ChannelAffine& ch, const FastLayer& L, const RowOut& o, double* __restrict scratch,
    std::uint8_t* __restrict ok) {
  const dd::DD t{ch.t_hi, ch.t_lo};
  const double tmag = dd::mag(t), rf = L.radius_factor;
  const bool want32 = o.rounded[kF32] != nullptr;
  double* __restrict hi = o.hi;
  double* __restrict lo = o.lo;
  double* __restrict rad = o.rad;
  double* __restrict r32 = want32 ? o.rounded[kF32] : scratch;
  for (std::int64_t i = 0; i < count; ++i) {
    const double Ec = a[i] * rf;
    const dd::DD c = dd::two_sum(s[i], ch.bias);  // exact
    double yh = c.hi, yl = c.lo, r;
    if (ch.has_bn) {
      const dd::DD d = dd::plus_fp(c, -ch.mean);
      const double rad_d = Ec + dd::kOpRel * dd::mag(d);
      const dd::DD p = dd::times_dd(d, t);
      const double rad_p = (dd::mag(d) + rad_d) * ch.t_rad + tmag * rad_d + dd::kOpRel * dd::mag(p);
      const dd::DD y = dd::plus_fp(p, ch.beta);
      const double ry = rad_p + dd::kOpRel * dd::mag(y);
      // Cover the evaluation of ry itself and of the endpoints y +- r used below.
      r = ry * (1 + 0x1p-40) + 2 * dd::kOpRel * (dd::mag(y) + ry);
      yh = y.hi;
      yl = y.lo;
    } else {
      r = Ec * (1 + 0x1p-40) + 2 * dd::kOpRel * (dd::mag(c) + Ec);
    }
    hi[i] = yh;
    lo[i] = yl;
    rad[i] = r;
    // float32: v = the hardware rounding of yh; if y's enclosure lies inside v's cell, v
    // is the rounding of every point of it (certify_cell, below, explains the cell).
    // For v = 0 the formulas give half = 2^-150 on both sides, as they should.
    const double v = static_cast<double>(static_cast<float>(yh));
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
    const std::int64_t e = static_cast<std::int64_t>((bits >> 52) & 0x7ff) - 1023;
    const std::int64_t q = std::max<std::int64_t>(e, kFloat32.emin) - (kFloat32.precision - 1);
    const double half = std::bit_cast<double>(static_cast<std::uint64_t>(q - 1 + 1023) << 52);
    const bool pow2 = (bits & ((std::uint64_t{1} << 52) - 1)) == 0 && e > kFloat32.emin;
    const double toward_zero = pow2 ? half * 0.5 : half;
    const double below = v > 0 ? toward_zero : half, above = v > 0 ? half : toward_zero;
    const double d = (yh - v) + yl;
    const double m = r + 0x1p-50 * (std::fabs(d) + r);
    const bool in_cell = d - m > -below && d + m < above && std::fabs(v) <= 0x1.fffffep127;
    r32[i] = v == 0.0 ? 0.0 : v;
    ok[i] = static_cast<std::uint8_t>(in_cell || !want32);
  }
  // Other narrow formats (float16, bfloat16): the general test, one output at a time.
  for (std::size_t k = 0; k < kNumFormats; ++k) {
    if (k == kF32 || !o.rounded[k]) continue;
    for (std::int64_t i = 0; i < count; ++i)
      if (ok[i]) ok[i] = certify_cell(hi[i], lo[i], rad[i], kFormats[k], o.rounded[k][i]);
  }
  for (std::int64_t i = 0; i < count; ++i) {
    o.certified[i] = ok[i] ? static_cast<std::uint8_t>(L.formats) : 0;
    o.precision[i] = 0;
  }
  if (o.conv) {
    for (std::int64_t i = 0; i < count; ++i) {
      const double Ec = a[i] * rf;
      const dd::DD c = dd::two_sum(s[i], ch.bias);  // exact
      o.conv[i] = c.hi;
      o.conv_rad[i] = (Ec + std::fabs(c.lo)) * (1 + 0x1p-50);
      o.abs_sum[i] = a[i] * L.abs_factor;  // a / (1 - gamma_K), rounded up
      o.abs_x_sum[i] = ax[i] * L.abs_x_factor;
    }
  }
}

}  // namespace

// v = round(y); the reals that round to v form the open cell between the midpoints with
// v's neighbours, at distances `below` and `above` (half a spacing; half of that toward
// zero from a power of two, where the spacing halves; half the smallest subnormal around
// zero). The interval is certified when it lies strictly inside the cell: d - r > -below
// and d + r < above with d = y - v. yh - v is exact (Sterbenz: v is yh's rounding, within
// a factor of 2, or 0); adding yl rounds once (<= 2^-53 |d|), and the margin 2^-50 (|d| + r)
// on r covers that and the two comparisons' subtractions. Inf and double subnormal
// results are left to the multiprecision path.
bool certify_cell(double yh, double yl, double r, const Format& f, double& out) {
  // For binary32 the hardware conversion of yh serves as v: if the test below passes, y
  // lies in v's cell, so v is y's rounding too (and it fails otherwise).
  const double v = f.precision == kFloat32.precision && f.emin == kFloat32.emin
                       ? static_cast<double>(static_cast<float>(yh))
                       : round_to_format(yh, yl, f);
  if (!std::isfinite(v)) return false;
  double below, above;
  if (v == 0.0) {
    below = above = std::ldexp(1.0, f.emin - f.precision);
  } else {
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
    const int biased = static_cast<int>((bits >> 52) & 0x7ff);
    if (biased == 0) return false;
    const int e = biased - 1023;
    const int q = std::max(e, f.emin) - (f.precision - 1);
    const double half = std::bit_cast<double>(static_cast<std::uint64_t>(q - 1 + 1023) << 52);
    const bool pow2 = (bits & ((std::uint64_t{1} << 52) - 1)) == 0 && e > f.emin;
    const double toward_zero = pow2 ? half / 2 : half;
    below = v > 0 ? toward_zero : half;
    above = v > 0 ? half : toward_zero;
  }
  const double d = (yh - v) + yl;
  const double m = r + 0x1p-50 * (std::fabs(d) + r);
  if (!(d - m > -below && d + m < above)) return false;
  out = v == 0.0 ? 0.0 : v;
  return true;
}

std::vector<std::int64_t> fast_conv_bn(const FastLayer& L, FastOut& out) {
  const ConvGeometry& g = *L.g;
  const Padded xp = pad_input(g, *L.x);
  const BlockedWeights bw = block_weights(g, *L.w);
  const std::int64_t OH = g.OH(), OW = g.OW();
  // Work items: output rows (n, oh), fixed: the result is the same for any thread count.
  // Within a row, for each tile of 16 pixels every channel block reuses the same input
  // window while it sits in L1 (large-C 1x1 layers would otherwise stream the whole input
  // from memory once per block).
  const std::int64_t items = g.N * OH;
  unsigned nt = L.threads ? L.threads : std::max(1u, std::thread::hardware_concurrency());
  nt = static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(nt, items)));
  ValueArray& y = *out.y;
  const bool bounds = out.conv != nullptr;
  std::vector<std::vector<std::int64_t>> failed(nt);
  auto work = [&](unsigned t) {
    RowSums rs;
    rs.stride = (OW + 15) / 16 * 16;
    rs.s.assign(static_cast<std::size_t>((g.O + kOBMax) * rs.stride), 0.0);
    rs.a.assign(rs.s.size(), 0.0);
    rs.ax.assign(static_cast<std::size_t>(g.groups * rs.stride), 0.0);
    std::vector<std::uint8_t> ok(static_cast<std::size_t>(OW));
    std::vector<double> scratch(static_cast<std::size_t>(OW));
    for (std::int64_t it = t; it < items; it += nt) {
      const std::int64_t n = it / OH, oh = it % OH;
      row_sums(g, xp, bw, n, oh, rs);
      for (std::int64_t o = 0; o < g.O; ++o) {
        const std::int64_t base = ((n * g.O + o) * OH + oh) * OW;
        const std::size_t b = static_cast<std::size_t>(base), r = static_cast<std::size_t>(o * rs.stride);
        RowOut ro{y.hi() + b, y.lo() + b, y.radius() + b, {}, y.certified() + b, y.precision_used() + b,
                  bounds ? out.conv + b : nullptr, bounds ? out.conv_radius + b : nullptr,
                  bounds ? out.abs_sum + b : nullptr, bounds ? out.abs_x_sum + b : nullptr};
        for (std::size_t k = 0; k < kNumFormats; ++k)
          if (L.formats & (1u << k)) ro.rounded[k] = y.rounded(k) + b;
        finish_row(&rs.s[r], &rs.a[r], &rs.ax[static_cast<std::size_t>((o / (g.O / g.groups)) * rs.stride)], OW,
                   L.channels[static_cast<std::size_t>(o)], L, ro, scratch.data(), ok.data());
        for (std::int64_t i = 0; i < OW; ++i)
          if (!ok[static_cast<std::size_t>(i)]) failed[t].push_back(base + i);
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
  std::vector<std::int64_t> all;
  for (auto& f : failed) all.insert(all.end(), f.begin(), f.end());
  std::sort(all.begin(), all.end());
  return all;
}

}  // namespace foldcheck::ref::detail
