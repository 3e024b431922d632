// The fast path's vector kernels (see fast_kernels.hpp). Built three times; FOLDCHECK_ISA
// names the namespace of this build (isa_v4, isa_v3 or isa_base).
#include "fast_kernels.hpp"

#include <bit>
#include <cmath>

#include "foldcheck/reference/dd_arith.hpp"
#include "foldcheck/reference/formats.hpp"

#ifndef FOLDCHECK_ISA
#error "FOLDCHECK_ISA must name this build's namespace"
#endif

namespace foldcheck::ref::detail::FOLDCHECK_ISA {
namespace {

typedef double v8 __attribute__((vector_size(64)));
typedef long long v8i __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));

[[gnu::always_inline]] inline v8 vabs(v8 v) { return (v8)((v8i)v & 0x7fffffffffffffffLL); }

// The 16 input values under output pixels ow0..ow0+15 at kernel column kw of the row xr
// (which starts at ow0's window), as two vectors.
template <bool kUnitStride>
[[gnu::always_inline]] inline void load16(const double* xr, std::int64_t kw, std::int64_t dw, std::int64_t sw, v8& x0,
                                          v8& x1) {
  x0 = v8{};
  x1 = v8{};
  if constexpr (kUnitStride) {
    __builtin_memcpy(&x0, xr + kw * dw, sizeof(v8));
    __builtin_memcpy(&x1, xr + 8 + kw * dw, sizeof(v8));
  } else {
    for (int j = 0; j < 8; ++j) x0[j] = xr[j * sw + kw * dw];
    for (int j = 0; j < 8; ++j) x1[j] = xr[(j + 8) * sw + kw * dw];
  }
}

// 16 output pixels of channels o0..o0+kOB-1: every product x*w of the window (padding
// included as exact zeros) in (c, kh, kw) order, accumulated into a sum and (kAbs) a sum of
// |x*w| per output, in registers; also the window sums of |x| (stored if ax_out). Lanes are
// independent outputs, so the vector width does not change any output's operation order.
// Contraction to FMA is allowed here, and only here: every product x*w and |x|*|w| of
// float32 values is exact in binary64, so fma(x, w, s) = RN(x*w + s) = RN(RN(x*w) + s),
// bit for bit the same sums as separate multiplies and adds, in fewer instructions.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
// kK: the kernel's size known at compile time (1 or 3; 0: from A); kAx: also sum |x|.
template <int kOB, bool kUnitStride, bool kAbs, int kK, bool kAx>
[[gnu::always_inline]] inline void block16(const RowSumsArgs& A, std::int64_t cg, const double* __restrict wr,
                                           const double* __restrict war, const double* xc, double* __restrict s_out,
                                           double* __restrict a_out, double* __restrict ax_out) {
  v8 s[kOB][2] = {}, a[kOB][2] = {}, ax[2] = {};
  const std::int64_t sw = A.stride_w, dw = A.dil_w, KW = kK ? kK : A.KW, KH = kK ? kK : A.KH;
  // Pointers walk the window: the input row of (ci, kh) and its weights, advanced by
  // constant strides instead of recomputed indices.
  const std::int64_t row_step = A.row_step, chan_step = A.chan_step;
  for (std::int64_t ci = 0; ci < cg; ++ci, xc += chan_step) {
    const double* xr = xc;
    for (std::int64_t kh = 0; kh < KH; ++kh, xr += row_step, wr += KW * kOB, war += KW * kOB) {
      for (std::int64_t kw = 0; kw < KW; ++kw) {
        v8 x0, x1;
        load16<kUnitStride>(xr, kw, dw, sw, x0, x1);
        const v8 xa0 = vabs(x0), xa1 = vabs(x1);
        if constexpr (kAx) {
          ax[0] += xa0;
          ax[1] += xa1;
        }
        for (std::int64_t b = 0; b < kOB; ++b) {
          const double wv = wr[kw * kOB + b];
          s[b][0] += x0 * wv;
          s[b][1] += x1 * wv;
          if constexpr (kAbs) {
            const double wa = war[kw * kOB + b];
            a[b][0] += xa0 * wa;
            a[b][1] += xa1 * wa;
          }
        }
      }
    }
  }
  for (std::int64_t b = 0; b < kOB; ++b) {
    __builtin_memcpy(s_out + b * A.stride, &s[b][0], sizeof(v8));
    __builtin_memcpy(s_out + b * A.stride + 8, &s[b][1], sizeof(v8));
    if constexpr (kAbs) {
      __builtin_memcpy(a_out + b * A.stride, &a[b][0], sizeof(v8));
      __builtin_memcpy(a_out + b * A.stride + 8, &a[b][1], sizeof(v8));
    }
  }
  if constexpr (kAx) {
    __builtin_memcpy(ax_out, &ax[0], sizeof(v8));
    __builtin_memcpy(ax_out + 8, &ax[1], sizeof(v8));
  }
}

// Depthwise layers (one input and one output channel per group): 16 output pixels of 4
// consecutive groups at once, each with its own input rows and weights, so that 8
// accumulator chains (sums and sums of |x|) run side by side instead of 2. Per output
// the operations and their order are block16's.
template <bool kUnitStride, bool kAbs, int kK>
[[gnu::always_inline]] inline void block16_dw4(const RowSumsArgs& A, const double* __restrict wr,
                                               const double* __restrict war, const double* xc,
                                               double* __restrict s_out, double* __restrict a_out,
                                               double* __restrict ax_out) {
  constexpr int kG = 4;
  v8 s[kG][2] = {}, a[kG][2] = {}, ax[kG][2] = {};
  const std::int64_t sw = A.stride_w, dw = A.dil_w, KW = kK ? kK : A.KW, KH = kK ? kK : A.KH, per = KH * KW;
  for (std::int64_t kh = 0; kh < KH; ++kh) {
    for (std::int64_t kw = 0; kw < KW; ++kw) {
      for (int b = 0; b < kG; ++b) {
        const double* xr = xc + b * A.chan_step + kh * A.row_step;
        v8 x0, x1;
        load16<kUnitStride>(xr, kw, dw, sw, x0, x1);
        const v8 xa0 = vabs(x0), xa1 = vabs(x1);
        ax[b][0] += xa0;
        ax[b][1] += xa1;
        const double wv = wr[b * per + kh * KW + kw];
        s[b][0] += x0 * wv;
        s[b][1] += x1 * wv;
        if constexpr (kAbs) {
          const double wa = war[b * per + kh * KW + kw];
          a[b][0] += xa0 * wa;
          a[b][1] += xa1 * wa;
        }
      }
    }
  }
  for (int b = 0; b < kG; ++b) {
    __builtin_memcpy(s_out + b * A.stride, &s[b][0], sizeof(v8));
    __builtin_memcpy(s_out + b * A.stride + 8, &s[b][1], sizeof(v8));
    __builtin_memcpy(ax_out + b * A.stride, &ax[b][0], sizeof(v8));
    __builtin_memcpy(ax_out + b * A.stride + 8, &ax[b][1], sizeof(v8));
    if constexpr (kAbs) {
      __builtin_memcpy(a_out + b * A.stride, &a[b][0], sizeof(v8));
      __builtin_memcpy(a_out + b * A.stride + 8, &a[b][1], sizeof(v8));
    }
  }
}

// Every 16-pixel tile of the row, every group, every block of the group; for each tile all
// blocks reuse the same panel window while it sits in L1.
template <int kOB, bool kUnitStride, bool kAbs, int kK>
void row_sums_k(const RowSumsArgs& A) {
  const std::int64_t cg = A.C / A.groups, per = cg * A.KH * A.KW;
  const bool dw4 = kOB == 1 && cg == 1 && A.og == 1;  // depthwise: 4 groups at a time
  for (std::int64_t ow0 = 0; ow0 < A.OW; ow0 += 16) {
    std::int64_t g0 = 0;
    if (dw4)
      for (; g0 + 4 <= A.groups; g0 += 4)
        block16_dw4<kUnitStride, kAbs, kK>(A, A.w + g0 * A.group_stride, A.wabs + g0 * A.group_stride,
                                           A.x + g0 * A.chan_step + ow0 * A.stride_w, A.s + g0 * A.stride + ow0,
                                           A.a + g0 * A.stride + ow0, A.ax + g0 * A.stride + ow0);
    for (std::int64_t gi = g0; gi < A.groups; ++gi) {
      const double* xc = A.x + gi * cg * A.chan_step + ow0 * A.stride_w;
      for (std::int64_t bi = 0; bi < A.blocks_per_group; ++bi) {
        const std::int64_t o0 = gi * A.og + bi * kOB, off = gi * A.group_stride + bi * per * kOB;
        double *s = A.s + o0 * A.stride + ow0, *a = A.a + o0 * A.stride + ow0;
        if (bi == 0)  // the group's first block also sums |x|
          block16<kOB, kUnitStride, kAbs, kK, true>(A, cg, A.w + off, A.wabs + off, xc, s, a, A.ax + gi * A.stride + ow0);
        else
          block16<kOB, kUnitStride, kAbs, kK, false>(A, cg, A.w + off, A.wabs + off, xc, s, a, nullptr);
      }
    }
  }
}

template <int kOB, bool kUnitStride, bool kAbs>
void row_sums_t(const RowSumsArgs& A) {
  if (A.KH == 1 && A.KW == 1) row_sums_k<kOB, kUnitStride, kAbs, 1>(A);
  else if (A.KH == 3 && A.KW == 3) row_sums_k<kOB, kUnitStride, kAbs, 3>(A);
  else row_sums_k<kOB, kUnitStride, kAbs, 0>(A);
}

void row_sums(const RowSumsArgs& A) {
  const bool unit = A.stride_w == 1;
  if (A.abs_sums) {
    if (A.kOB == 4) (unit ? row_sums_t<4, true, true> : row_sums_t<4, false, true>)(A);
    else (unit ? row_sums_t<1, true, true> : row_sums_t<1, false, true>)(A);
  } else {
    if (A.kOB == 8) (unit ? row_sums_t<8, true, false> : row_sums_t<8, false, false>)(A);
    else if (A.kOB == 4) (unit ? row_sums_t<4, true, false> : row_sums_t<4, false, false>)(A);
    else (unit ? row_sums_t<1, true, false> : row_sums_t<1, false, false>)(A);
  }
}
#pragma GCC pop_options

// The layer output's enclosure y +- r in binary64 from the conv sum S (within Ec of the
// exact sum): the value (S + bias - mean) * t_hi + beta in four roundings, and r a running
// error bound (Higham 2002, 3.3): each rounding to nearest adds at most u |result|
// (u = 2^-53), the scale's low part t_lo and radius t_rad add |d| (|t_lo| + t_rad), and the
// incoming error e_d is scaled by |t| <= |t_hi| + |t_lo| + t_rad. Evaluating r itself takes
// about a dozen roundings: the factor 1 + 2^-40 covers them; 2^-1070 covers underflow (each
// rounding's absolute error is then at most 2^-1075). The enclosure is ~2^-51 relative
// wider than the double-double one, far inside the sum's own ~2^-40: float32 certifies
// as often. (The second tier, fast_conv.cpp, keeps double-double for the hard cases.)
template <bool kBn>
[[gnu::always_inline]] inline void enclose_affine(v8 S, v8 Ec, const ChannelAffine& ch, v8& y, v8& r) {
  constexpr double u = 0x1p-53;
  const v8 c = S + ch.bias;
  const v8 ec = Ec + u * vabs(c);
  if constexpr (kBn) {
    const v8 d = c - ch.mean;
    const v8 ed = ec + u * vabs(d);
    const v8 p = d * ch.t_hi;
    const double tlo = std::fabs(ch.t_lo) + ch.t_rad, tmag = std::fabs(ch.t_hi) + tlo;
    const v8 ep = u * vabs(p) + vabs(d) * tlo + ed * tmag;
    y = p + ch.beta;
    r = (ep + u * vabs(y)) * (1 + 0x1p-40) + 0x1p-1070;
  } else {
    y = c;
    r = ec * (1 + 0x1p-40) + 0x1p-1070;
  }
}

// Enclosure and float32 test of 8 outputs: the scalar algorithm in each lane, selects
// instead of branches.
// Returns the number of lanes certified.
template <bool kBn>
[[gnu::always_inline]] inline int enclose8(const FinishArgs& A, const double* s, const double* mag, double rf,
                                            const ChannelAffine& ch, double* __restrict hi, double* __restrict rad,
                                            double* __restrict r32, std::uint8_t* __restrict ok,
                                            std::uint8_t* __restrict cert) {
  const v8 zero = {};
  v8 S, M;
  __builtin_memcpy(&S, s, sizeof S);
  __builtin_memcpy(&M, mag, sizeof M);
  v8 yh, r;
  enclose_affine<kBn>(S, M * rf, ch, yh, r);
  __builtin_memcpy(hi, &yh, sizeof yh);
  __builtin_memcpy(rad, &r, sizeof r);
  // float32: v = the hardware rounding of yh; if y's enclosure lies strictly inside v's
  // rounding cell, v is the rounding of every point of it. The cell reaches half a spacing
  // above and below v (a quarter toward zero from a power of two, where the spacing
  // halves); the spacing is 2^(max(e, emin) - 23); for v = 0 this gives half = 2^-150 on
  // both sides, as it should. d = y - v: yh - v is exact (Sterbenz), adding yl rounds once,
  // and the margin 2^-50 (|d| + r) covers that and the comparisons' subtractions
  // (fast_conv.cpp's certify_cell states the same test for every format). An infinite v
  // fails (left to the multiprecision path).
  const v8 v = __builtin_convertvector(__builtin_convertvector(yh, v8f), v8);
  const v8i bits = (v8i)v;
  const v8i e = ((bits >> 52) & 0x7ff) - 1023;
  const v8i emin = v8i{} + kFloat32.emin;
  const v8i q = (e > emin ? e : emin) - (kFloat32.precision - 1);
  const v8 half = (v8)((q - 1 + 1023) << 52);
  const v8i pow2 = ((bits & ((1LL << 52) - 1)) == 0) & (e > emin);
  const v8 toward_zero = half * (pow2 ? zero + 0.5 : zero + 1.0);
  const v8i pos = v > zero;
  const v8 below = pos ? toward_zero : half, above = pos ? half : toward_zero;
  const v8 d = yh - v;  // exact (Sterbenz)
  const v8 m = r + 0x1p-50 * (vabs(d) + r);
  const v8i in_cell = (d - m > -below) & (d + m < above) & (vabs(v) <= 0x1.fffffep127);
  const v8 out = v + 0.0;  // -0 becomes +0
  __builtin_memcpy(r32, &out, sizeof out);
  typedef signed char v8c __attribute__((vector_size(8)));
  const v8c okv = __builtin_convertvector(in_cell | (A.want32 ? 0 : -1), v8c) & 1;  // lanes -1/0 -> 1/0
  __builtin_memcpy(ok, &okv, sizeof okv);
  const v8c certv = okv * static_cast<signed char>(A.formats);
  __builtin_memcpy(cert, &certv, sizeof certv);
  std::uint64_t bits8;
  __builtin_memcpy(&bits8, &okv, sizeof bits8);
  return __builtin_popcountll(bits8);  // one bit per certified lane's byte
}

// One channel's row.
template <bool kBn>
[[gnu::always_inline]] inline std::int64_t finish_channel(const FinishArgs& A, std::int64_t o) {
  const ChannelAffine& ch = A.channels[o];
  const double rf = A.rf[o];
  const double* s = A.s + o * A.stride;
  const double* a = A.a + o * A.stride;
  const double* ax = A.ax + (o / A.og) * A.stride;
  const double* mag = A.bounds ? a : ax;
  const std::int64_t p = o * A.plane, count = A.count;
  double *hi = A.hi + p, *rad = A.rad + p, *r32 = A.r32 + o * A.r32_plane;
  std::uint8_t *ok = A.ok + o * count, *cert = A.certified + p;
  std::int64_t i = 0, certified = 0;
  for (; i + 8 <= count; i += 8)
    certified += enclose8<kBn>(A, s + i, mag + i, rf, ch, hi + i, rad + i, r32 + i, ok + i, cert + i);
  if (i < count) {  // the last partial group: computed whole, stored in part
    double h[8], r[8], v[8];
    std::uint8_t k[8], c[8];
    enclose8<kBn>(A, s + i, mag + i, rf, ch, h, r, v, k, c);
    for (std::int64_t j = 0; i + j < count; ++j) {
      hi[i + j] = h[j];
      rad[i + j] = r[j];
      r32[i + j] = v[j];
      ok[i + j] = k[j];
      cert[i + j] = c[j];
      certified += k[j];
    }
  }
  if (A.conv) {
    double* __restrict conv = A.conv + p;
    double* __restrict conv_rad = A.conv_rad + p;
    double* __restrict abs_sum = A.abs_sum + p;
    double* __restrict abs_x_sum = A.abs_x_sum + p;
    for (std::int64_t j = 0; j < count; ++j) {
      const dd::DD c = dd::two_sum(s[j], ch.bias);  // exact
      conv[j] = c.hi;
      conv_rad[j] = (mag[j] * rf + std::fabs(c.lo)) * (1 + 0x1p-50);
      abs_sum[j] = a[j] * A.abs_factor;  // a / (1 - gamma_K), rounded up
      abs_x_sum[j] = ax[j] * A.abs_x_factor;
    }
  }
  return count - certified;
}

std::int64_t finish_row(const FinishArgs& A) {
  std::int64_t failed = 0;
  for (std::int64_t o = 0; o < A.O; ++o)
    failed += A.channels[o].has_bn ? finish_channel<true>(A, o) : finish_channel<false>(A, o);
  return failed;
}

bool all_float32(const double* v, std::size_t n) {
  // 8 at a time, branch-free: d survives the round trip through float, or is NaN.
  v8i bad = {};
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8 d;
    __builtin_memcpy(&d, v + i, sizeof d);
    const v8 back = __builtin_convertvector(__builtin_convertvector(d, v8f), v8);
    bad |= (back != d) & (d == d);
  }
  bool ok = true;
  for (int j = 0; j < 8; ++j) ok &= bad[j] == 0;
  for (; i < n; ++i) ok &= (static_cast<double>(static_cast<float>(v[i])) == v[i]) | (v[i] != v[i]);
  return ok;
}

}  // namespace

#define FOLDCHECK_STR2(x) #x
#define FOLDCHECK_STR(x) FOLDCHECK_STR2(x)
Kernels kernels() { return {FOLDCHECK_STR(FOLDCHECK_ISA), row_sums, finish_row, all_float32}; }

}  // namespace foldcheck::ref::detail::FOLDCHECK_ISA
