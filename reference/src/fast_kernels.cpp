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

// The blocking of this level, from its register file (fast_kernels.hpp, Blocking): a block
// holds kTileRegs registers of pixels for each of kOB output channels in accumulators, and
// must leave registers for the loaded input and the broadcast weight, or the compiler
// spills accumulators to the stack between the multiply-adds (measured on AVX2 with the
// AVX-512 blocking: 88% of the time in a spilling kernel).
//   v4  32 zmm of 8 doubles: 16 pixels; sums 8 channels (16 accumulators), with |x w| 4
//       (16), depthwise 4 groups (24 with |x w|);
//   v3  16 ymm of 4 doubles: 8 pixels; sums 6 channels (12 accumulators + 2 inputs + 1
//       weight), with |x w| 2 (8 + 4 inputs and their |x| + 2 weights), depthwise 2 groups;
//   base 16 xmm of 2 doubles: 4 pixels, the same channel counts as v3.
#if defined(__AVX512F__)
inline constexpr int kLanes = 8, kTileRegs = 2, kObSums = 8, kObAbs = 4, kDwGroups = 4;
#elif defined(__AVX2__)
inline constexpr int kLanes = 4, kTileRegs = 2, kObSums = 6, kObAbs = 2, kDwGroups = 2;
#else
inline constexpr int kLanes = 2, kTileRegs = 2, kObSums = 6, kObAbs = 2, kDwGroups = 2;
#endif
inline constexpr int kPix = kLanes * kTileRegs;  // output pixels per block
static_assert(kPix <= kTilePixelsMax && kTilePixelsMax % kPix == 0 && kObSums <= kOBMax && kObAbs <= kOBMax);

// One register of doubles, its lanes as integers, and as floats. Every kernel, the
// epilogue's included, works at this width: GCC lowers a generic vector wider than the
// target's registers piece by piece, and its comparisons, 64-bit arithmetic shifts and
// narrowing conversions lane by lane in scalar code (measured on AVX2 with 8-double vectors:
// the epilogue was 46% of a depthwise layer, in setge / vcmpltsd / vpinsrq sequences).
typedef double vt __attribute__((vector_size(kLanes * sizeof(double))));
typedef long long vti __attribute__((vector_size(kLanes * sizeof(double))));
typedef unsigned long long vtu __attribute__((vector_size(kLanes * sizeof(double))));
typedef float vtf __attribute__((vector_size(kLanes * sizeof(float))));
[[gnu::always_inline]] inline vt vabs(vt v) { return (vt)((vti)v & 0x7fffffffffffffffLL); }

// The kPix input values under output pixels ow0..ow0+kPix-1 at kernel column kw of the row
// xr (which starts at ow0's window), as kTileRegs registers.
template <bool kUnitStride>
[[gnu::always_inline]] inline void load_tile(const double* xr, std::int64_t kw, std::int64_t dw, std::int64_t sw,
                                             vt (&x)[kTileRegs]) {
  for (int t = 0; t < kTileRegs; ++t) {
    if constexpr (kUnitStride) {
      __builtin_memcpy(&x[t], xr + t * kLanes + kw * dw, sizeof(vt));
    } else {
      double g[kLanes];
      for (int j = 0; j < kLanes; ++j) g[j] = xr[(t * kLanes + j) * sw + kw * dw];
      __builtin_memcpy(&x[t], g, sizeof(vt));
    }
  }
}

// kPix output pixels of channels o0..o0+kOB-1: every product x*w of the window (padding
// included as exact zeros) in (c, kh, kw) order, accumulated into a sum and (kAbs) a sum of
// |x*w| per output, in registers; also the window sums of |x| (stored if ax_out). Lanes are
// independent outputs, so the vector width and the blocking do not change any output's
// operation order: every level gives the same bits.
// Contraction to FMA is allowed here, and only here: every product x*w and |x|*|w| of
// float32 values is exact in binary64, so fma(x, w, s) = RN(x*w + s) = RN(RN(x*w) + s),
// bit for bit the same sums as separate multiplies and adds, in fewer instructions.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")
// kK: the kernel's size known at compile time (1 or 3; 0: from A); kAx: also sum |x|.
template <int kOB, bool kUnitStride, bool kAbs, int kK, bool kAx>
[[gnu::always_inline]] inline void block(const RowSumsArgs& A, std::int64_t cg, const double* __restrict wr,
                                         const double* __restrict war, const double* xc, double* __restrict s_out,
                                         double* __restrict a_out, double* __restrict ax_out) {
  vt s[kOB][kTileRegs] = {}, a[kOB][kTileRegs] = {}, ax[kTileRegs] = {};
  const std::int64_t sw = A.stride_w, dw = A.dil_w, KW = kK ? kK : A.KW, KH = kK ? kK : A.KH;
  // Pointers walk the window: the input row of (ci, kh) and its weights, advanced by
  // constant strides instead of recomputed indices.
  const std::int64_t row_step = A.row_step, chan_step = A.chan_step;
  for (std::int64_t ci = 0; ci < cg; ++ci, xc += chan_step) {
    const double* xr = xc;
    for (std::int64_t kh = 0; kh < KH; ++kh, xr += row_step, wr += KW * kOB, war += KW * kOB) {
      for (std::int64_t kw = 0; kw < KW; ++kw) {
        vt x[kTileRegs], xa[kTileRegs];
        load_tile<kUnitStride>(xr, kw, dw, sw, x);
        for (int t = 0; t < kTileRegs; ++t) xa[t] = vabs(x[t]);
        if constexpr (kAx)
          for (int t = 0; t < kTileRegs; ++t) ax[t] += xa[t];
        for (int b = 0; b < kOB; ++b) {
          const double wv = wr[kw * kOB + b];
          for (int t = 0; t < kTileRegs; ++t) s[b][t] += x[t] * wv;
          if constexpr (kAbs) {
            const double wa = war[kw * kOB + b];
            for (int t = 0; t < kTileRegs; ++t) a[b][t] += xa[t] * wa;
          }
        }
      }
    }
  }
  for (int b = 0; b < kOB; ++b)
    for (int t = 0; t < kTileRegs; ++t) {
      __builtin_memcpy(s_out + b * A.stride + t * kLanes, &s[b][t], sizeof(vt));
      if constexpr (kAbs) __builtin_memcpy(a_out + b * A.stride + t * kLanes, &a[b][t], sizeof(vt));
    }
  if constexpr (kAx)
    for (int t = 0; t < kTileRegs; ++t) __builtin_memcpy(ax_out + t * kLanes, &ax[t], sizeof(vt));
}

// Depthwise layers (one input and one output channel per group): kPix output pixels of
// kDwGroups consecutive groups at once, each with its own input rows and weights, so that
// several accumulator chains (sums and sums of |x|) run side by side instead of one per
// register. Per output the operations and their order are block's.
template <bool kUnitStride, bool kAbs, int kK>
[[gnu::always_inline]] inline void block_dw(const RowSumsArgs& A, const double* __restrict wr,
                                            const double* __restrict war, const double* xc, double* __restrict s_out,
                                            double* __restrict a_out, double* __restrict ax_out) {
  constexpr int kG = kDwGroups;
  vt s[kG][kTileRegs] = {}, a[kG][kTileRegs] = {}, ax[kG][kTileRegs] = {};
  const std::int64_t sw = A.stride_w, dw = A.dil_w, KW = kK ? kK : A.KW, KH = kK ? kK : A.KH, per = KH * KW;
  for (std::int64_t kh = 0; kh < KH; ++kh) {
    for (std::int64_t kw = 0; kw < KW; ++kw) {
      for (int b = 0; b < kG; ++b) {
        const double* xr = xc + b * A.chan_step + kh * A.row_step;
        vt x[kTileRegs];
        load_tile<kUnitStride>(xr, kw, dw, sw, x);
        const double wv = wr[b * per + kh * KW + kw];
        for (int t = 0; t < kTileRegs; ++t) {
          const vt xa = vabs(x[t]);
          ax[b][t] += xa;
          s[b][t] += x[t] * wv;
          if constexpr (kAbs) a[b][t] += xa * war[b * per + kh * KW + kw];
        }
      }
    }
  }
  for (int b = 0; b < kG; ++b)
    for (int t = 0; t < kTileRegs; ++t) {
      __builtin_memcpy(s_out + b * A.stride + t * kLanes, &s[b][t], sizeof(vt));
      __builtin_memcpy(ax_out + b * A.stride + t * kLanes, &ax[b][t], sizeof(vt));
      if constexpr (kAbs) __builtin_memcpy(a_out + b * A.stride + t * kLanes, &a[b][t], sizeof(vt));
    }
}

// Every kPix-pixel tile of the row, every group, every block of the group; for each tile all
// blocks reuse the same panel window while it sits in L1. (Blocks outermost, each block's
// weights kept in L1 across the row's tiles, measured no faster on AVX2.)
template <int kOB, bool kUnitStride, bool kAbs, int kK>
void row_sums_k(const RowSumsArgs& A) {
  const std::int64_t cg = A.C / A.groups, per = cg * A.KH * A.KW;
  const bool dw = kOB == 1 && cg == 1 && A.og == 1;  // depthwise: kDwGroups groups at a time
  for (std::int64_t ow0 = 0; ow0 < A.OW; ow0 += kPix) {
    std::int64_t g0 = 0;
    if (dw)
      for (; g0 + kDwGroups <= A.groups; g0 += kDwGroups)
        block_dw<kUnitStride, kAbs, kK>(A, A.w + g0 * A.group_stride, A.wabs + g0 * A.group_stride,
                                        A.x + g0 * A.chan_step + ow0 * A.stride_w, A.s + g0 * A.stride + ow0,
                                        A.a + g0 * A.stride + ow0, A.ax + g0 * A.stride + ow0);
    for (std::int64_t gi = g0; gi < A.groups; ++gi) {
      const double* xc = A.x + gi * cg * A.chan_step + ow0 * A.stride_w;
      for (std::int64_t bi = 0; bi < A.blocks_per_group; ++bi) {
        const std::int64_t o0 = gi * A.og + bi * kOB, off = gi * A.group_stride + bi * per * kOB;
        double *s = A.s + o0 * A.stride + ow0, *a = A.a + o0 * A.stride + ow0;
        if (bi == 0)  // the group's first block also sums |x|
          block<kOB, kUnitStride, kAbs, kK, true>(A, cg, A.w + off, A.wabs + off, xc, s, a, A.ax + gi * A.stride + ow0);
        else
          block<kOB, kUnitStride, kAbs, kK, false>(A, cg, A.w + off, A.wabs + off, xc, s, a, nullptr);
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

template <int kOB, bool kAbs>
void row_sums_o(const RowSumsArgs& A) {
  (A.stride_w == 1 ? row_sums_t<kOB, true, kAbs> : row_sums_t<kOB, false, kAbs>)(A);
}

// A.kOB is one of this level's Blocking (fast_conv.cpp blocks the weights with it).
void row_sums(const RowSumsArgs& A) {
  if (A.abs_sums) (A.kOB == kObAbs ? row_sums_o<kObAbs, true> : row_sums_o<1, true>)(A);
  else if (A.kOB == kObSums) row_sums_o<kObSums, false>(A);
  else (A.kOB == kObAbs ? row_sums_o<kObAbs, false> : row_sums_o<1, false>)(A);
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
[[gnu::always_inline]] inline void enclose_affine(vt S, vt Ec, const ChannelAffine& ch, vt& y, vt& r) {
  constexpr double u = 0x1p-53;
  const vt c = S + ch.bias;
  const vt ec = Ec + u * vabs(c);
  if constexpr (kBn) {
    const vt d = c - ch.mean;
    const vt ed = ec + u * vabs(d);
    const vt p = d * ch.t_hi;
    const double tlo = std::fabs(ch.t_lo) + ch.t_rad, tmag = std::fabs(ch.t_hi) + tlo;
    const vt ep = u * vabs(p) + vabs(d) * tlo + ed * tmag;
    y = p + ch.beta;
    r = (ep + u * vabs(y)) * (1 + 0x1p-40) + 0x1p-1070;
  } else {
    y = c;
    r = ec * (1 + 0x1p-40) + 0x1p-1070;
  }
}

// Enclosure and float32 test of kLanes outputs: the scalar algorithm in each lane, selects
// instead of branches. Returns the number of lanes certified.
template <bool kBn>
[[gnu::always_inline]] inline int enclose_lanes(const FinishArgs& A, const double* s, const double* mag, double rf,
                                                const ChannelAffine& ch, double* __restrict hi, double* __restrict rad,
                                                double* __restrict r32, std::uint8_t* __restrict ok,
                                                std::uint8_t* __restrict cert) {
  const vt zero = {};
  vt S, M;
  __builtin_memcpy(&S, s, sizeof S);
  __builtin_memcpy(&M, mag, sizeof M);
  vt yh, r;
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
  // fails (left to the multiprecision path). The exponent field is taken with a logical
  // shift (AVX2 has no 64-bit arithmetic one; the field is non-negative either way).
  const vt v = __builtin_convertvector(__builtin_convertvector(yh, vtf), vt);
  const vti bits = (vti)v;
  const vti e = (vti)(((vtu)bits >> 52) & 0x7ff) - 1023;
  const vti emin = vti{} + kFloat32.emin;
  const vti q = (e > emin ? e : emin) - (kFloat32.precision - 1);
  const vt half = (vt)((q - 1 + 1023) << 52);
  const vti pow2 = ((bits & ((1LL << 52) - 1)) == 0) & (e > emin);
  const vt toward_zero = half * (pow2 ? zero + 0.5 : zero + 1.0);
  const vti pos = v > zero;
  const vt below = pos ? toward_zero : half, above = pos ? half : toward_zero;
  const vt d = yh - v;  // exact (Sterbenz)
  const vt m = r + 0x1p-50 * (vabs(d) + r);
  const vti in_cell = (d - m > -below) & (d + m < above) & (vabs(v) <= 0x1.fffffep127);
  const vt out = v + 0.0;  // -0 becomes +0
  __builtin_memcpy(r32, &out, sizeof out);
  const vti okm = (in_cell | (A.want32 ? 0 : -1)) & 1;  // lanes -1/0 -> 1/0
#if defined(__AVX512F__)
  {  // AVX-512 narrows the lanes to bytes in one instruction (vpmovqb), as measured there.
    typedef signed char v8c __attribute__((vector_size(8)));
    const v8c okv = __builtin_convertvector(okm, v8c);
    __builtin_memcpy(ok, &okv, sizeof okv);
    const v8c certv = okv * static_cast<signed char>(A.formats);
    __builtin_memcpy(cert, &certv, sizeof certv);
    std::uint64_t bits8;
    __builtin_memcpy(&bits8, &okv, sizeof bits8);
    return __builtin_popcountll(bits8);  // one bit per certified lane's byte
  }
#else
  {  // narrower levels have no such narrowing: a byte per lane
    int n = 0;
    for (int j = 0; j < kLanes; ++j) {
      const auto k = static_cast<std::uint8_t>(okm[j]);
      ok[j] = k;
      cert[j] = static_cast<std::uint8_t>(k * A.formats);
      n += k;
    }
    return n;
  }
#endif
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
  for (; i + kLanes <= count; i += kLanes)
    certified += enclose_lanes<kBn>(A, s + i, mag + i, rf, ch, hi + i, rad + i, r32 + i, ok + i, cert + i);
  if (i < count) {  // the last partial group: computed whole, stored in part
    double h[kLanes], r[kLanes], v[kLanes];
    std::uint8_t k[kLanes], c[kLanes];
    enclose_lanes<kBn>(A, s + i, mag + i, rf, ch, h, r, v, k, c);
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
  // kLanes at a time, branch-free: d survives the round trip through float, or is NaN.
  vti bad = {};
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    vt d;
    __builtin_memcpy(&d, v + i, sizeof d);
    const vt back = __builtin_convertvector(__builtin_convertvector(d, vtf), vt);
    bad |= (back != d) & (d == d);
  }
  bool ok = true;
  for (int j = 0; j < kLanes; ++j) ok &= bad[j] == 0;
  for (; i < n; ++i) ok &= (static_cast<double>(static_cast<float>(v[i])) == v[i]) | (v[i] != v[i]);
  return ok;
}

}  // namespace

#define FOLDCHECK_STR2(x) #x
#define FOLDCHECK_STR(x) FOLDCHECK_STR2(x)
Kernels kernels() {
  return {FOLDCHECK_STR(FOLDCHECK_ISA), {kPix, kObSums, kObAbs}, row_sums, finish_row, all_float32};
}

}  // namespace foldcheck::ref::detail::FOLDCHECK_ISA
