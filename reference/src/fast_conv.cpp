#include "fast_conv.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

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

// 16 output pixels (n, oh, ow0..ow0+15) of channels o0..o0+nb-1: every product x*w of the
// window (padding included as exact zeros) in (c, kh, kw) order, accumulated into a
// sum and a sum of |x*w| per output, in registers. Lanes are independent outputs, so
// the vector width (target_clones: AVX-512, AVX2 or SSE at run time) does not change any
// output's operation order. With ax, also the window sums of |x|.
// Contraction to FMA is allowed here, and only here: every product x*w and |x|*|w| of
// float32 values is exact in binary64, so fma(x, w, s) = RN(x*w + s) = RN(RN(x*w) + s),
// bit for bit the same sums as separate multiplies and adds, in fewer instructions.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
template <int kOB>
__attribute__((always_inline)) inline void block16(
    const ConvGeometry& g, const Padded& xp, const double* __restrict w4, const double* __restrict w4abs,
    std::int64_t n, std::int64_t gi,
    std::int64_t bi, std::int64_t oh, std::int64_t ow0, double* __restrict s_out, double* __restrict a_out,
    double* __restrict ax_out) {
  const std::int64_t cg = g.C / g.groups, c0 = gi * cg;
  v8 s[kOB][2] = {}, a[kOB][2] = {}, ax[2] = {};
  const std::int64_t sw = g.stride_w, dw = g.dil_w, KW = g.KW;
  // Pointers walk the window: the input row of (ci, kh) and its weights, advanced by
  // constant strides instead of recomputed indices.
  const double* xc = &xp.v[static_cast<std::size_t>(((n * g.C + c0) * xp.Hp + oh * g.stride_h) * xp.Wp + ow0 * sw)];
  const double* wr = &w4[static_cast<std::size_t>(bi * cg * g.KH * KW * kOB)];
  const double* war = &w4abs[static_cast<std::size_t>(bi * cg * g.KH * KW * kOB)];
  const std::int64_t row_step = g.dil_h * xp.Wp, chan_step = xp.Hp * xp.Wp;
  for (std::int64_t ci = 0; ci < cg; ++ci, xc += chan_step) {
    const double* xr = xc;
    for (std::int64_t kh = 0; kh < g.KH; ++kh, xr += row_step, wr += KW * kOB, war += KW * kOB) {
      for (std::int64_t kw = 0; kw < KW; ++kw) {
        v8 xv[2] = {};
        if (sw == 1) {
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
  for (std::int64_t b = 0; b < kOB; ++b)
    for (int j = 0; j < 16; ++j) {
      s_out[b * 16 + j] = s[b][j / 8][j % 8];
      a_out[b * 16 + j] = a[b][j / 8][j % 8];
    }
  if (ax_out)
    for (int j = 0; j < 16; ++j) ax_out[j] = ax[j / 8][j % 8];
}
// The kernel for blocks of 4 channels (ordinary convs) and of 1 (depthwise: one output
// channel per group), each compiled for AVX-512, AVX2+FMA and baseline x86-64.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void block16x4(
    const ConvGeometry& g, const Padded& xp, const double* w4, const double* w4abs, std::int64_t n, std::int64_t gi,
    std::int64_t bi, std::int64_t oh, std::int64_t ow0, double* s_out, double* a_out, double* ax_out) {
  block16<4>(g, xp, w4, w4abs, n, gi, bi, oh, ow0, s_out, a_out, ax_out);
}
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default"))) void block16x1(
    const ConvGeometry& g, const Padded& xp, const double* w4, const double* w4abs, std::int64_t n, std::int64_t gi,
    std::int64_t bi, std::int64_t oh, std::int64_t ow0, double* s_out, double* a_out, double* ax_out) {
  block16<1>(g, xp, w4, w4abs, n, gi, bi, oh, ow0, s_out, a_out, ax_out);
}
#pragma GCC pop_options

}  // namespace

void conv_sums(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w, unsigned threads,
               ConvSums& out) {
  const std::size_t total = static_cast<std::size_t>(g.output_size());
  out.s.assign(total, 0.0);
  out.a.assign(total, 0.0);
  out.ax.assign(total, 0.0);
  const Padded xp = pad_input(g, x);
  const std::int64_t og = g.O / g.groups, OH = g.OH(), OW = g.OW();
  const std::int64_t kOB = og >= kOBMax ? kOBMax : 1;
  const std::int64_t blocks_per_group = (og + kOB - 1) / kOB, blocks = g.groups * blocks_per_group;
  // Work items: output rows (n, oh), fixed: the result is the same for any thread count.
  // Within a row, for each tile of 16 pixels every channel block reuses the same input
  // window while it sits in L1 (large-C 1x1 layers would otherwise stream the whole input
  // from memory once per block).
  const std::int64_t items = g.N * OH;
  unsigned nt = threads ? threads : std::max(1u, std::thread::hardware_concurrency());
  nt = static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(nt, items)));
  // Weights regrouped per group and block of 4 output channels as [c][kh][kw][4], with
  // zero weights for the channels a last block lacks (their outputs are discarded).
  const std::int64_t cg = g.C / g.groups, per = cg * g.KH * g.KW;
  std::vector<std::vector<double>> w4(static_cast<std::size_t>(g.groups),
                                      std::vector<double>(static_cast<std::size_t>(blocks_per_group * per * kOB), 0.0));
  for (std::int64_t gi = 0; gi < g.groups; ++gi)
    for (std::int64_t ol = 0; ol < og; ++ol)
      for (std::int64_t k = 0; k < per; ++k)
        w4[gi][static_cast<std::size_t>(((ol / kOB) * per + k) * kOB + ol % kOB)] = w[static_cast<std::size_t>((gi * og + ol) * per + k)];
  std::vector<std::vector<double>> w4abs = w4;
  for (auto& v : w4abs)
    for (double& d : v) d = std::fabs(d);
  auto work = [&](unsigned t) {
    double s[kOBMax * 16], a[kOBMax * 16], ax[16];
    for (std::int64_t it = t; it < items; it += nt) {
      const std::int64_t n = it / OH, oh = it % OH;
      for (std::int64_t ow0 = 0; ow0 < OW; ow0 += 16) {
        const std::int64_t nw = std::min<std::int64_t>(16, OW - ow0);
        for (std::int64_t blk = 0; blk < blocks; ++blk) {
          const std::int64_t gi = blk / blocks_per_group, bi = blk % blocks_per_group;
          const std::int64_t o0 = gi * og + bi * kOB, nb = std::min(kOB, gi * og + og - o0);
          const bool first = bi == 0;  // the group's first block also sums |x| for all its channels
          (kOB == kOBMax ? block16x4 : block16x1)(g, xp, w4[gi].data(), w4abs[gi].data(), n, gi, bi, oh, ow0, s, a,
                                                  first ? ax : nullptr);
          for (std::int64_t b = 0; b < nb; ++b)
            for (std::int64_t j = 0; j < nw; ++j) {
              const std::size_t i = static_cast<std::size_t>(((n * g.O + o0 + b) * OH + oh) * OW + ow0 + j);
              out.s[i] = s[b * 16 + j];
              out.a[i] = a[b * 16 + j];
            }
          if (first)
            for (std::int64_t ol = 0; ol < og; ++ol)
              for (std::int64_t j = 0; j < nw; ++j)
                out.ax[static_cast<std::size_t>(((n * g.O + gi * og + ol) * OH + oh) * OW + ow0 + j)] = ax[j];
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t) pool.emplace_back(work, t);
  work(0);
  for (auto& th : pool) th.join();
}

}  // namespace foldcheck::ref::detail

#include "foldcheck/reference/dd_arith.hpp"

namespace foldcheck::ref::detail {

__attribute__((target_clones("arch=x86-64-v3", "default"))) void enclose_channel(
    const double* __restrict s, const double* __restrict a, std::size_t count, const ChannelAffine& ch,
    double radius_factor, double* __restrict y_hi, double* __restrict y_lo, double* __restrict rad,
    double* __restrict conv, double* __restrict conv_rad) {
  const dd::DD t{ch.t_hi, ch.t_lo};
  const double tmag = dd::mag(t);
  // Two branch-free loops (BatchNorm or not) so the compiler vectorises across outputs.
  if (ch.has_bn) {
    for (std::size_t i = 0; i < count; ++i) {
      const double Ec = a[i] * radius_factor;
      const dd::DD c = dd::two_sum(s[i], ch.bias);  // exact
      conv[i] = c.hi;
      conv_rad[i] = (Ec + std::fabs(c.lo)) * (1 + 0x1p-50);
      const dd::DD d = dd::plus_fp(c, -ch.mean);
      const double rad_d = Ec + dd::kOpRel * dd::mag(d);
      const dd::DD p = dd::times_dd(d, t);
      const double rad_p = (dd::mag(d) + rad_d) * ch.t_rad + tmag * rad_d + dd::kOpRel * dd::mag(p);
      const dd::DD y = dd::plus_fp(p, ch.beta);
      const double r = rad_p + dd::kOpRel * dd::mag(y);
      // Cover the evaluation of r itself and of the endpoints y +- r formed by the caller.
      rad[i] = r * (1 + 0x1p-40) + 2 * dd::kOpRel * (dd::mag(y) + r);
      y_hi[i] = y.hi;
      y_lo[i] = y.lo;
    }
  } else {
    for (std::size_t i = 0; i < count; ++i) {
      const double Ec = a[i] * radius_factor;
      const dd::DD c = dd::two_sum(s[i], ch.bias);  // exact
      conv[i] = c.hi;
      conv_rad[i] = (Ec + std::fabs(c.lo)) * (1 + 0x1p-50);
      rad[i] = Ec * (1 + 0x1p-40) + 2 * dd::kOpRel * (dd::mag(c) + Ec);
      y_hi[i] = c.hi;
      y_lo[i] = c.lo;
    }
  }
}

}  // namespace foldcheck::ref::detail
