#pragma once
// The fast path's conv sums: for every output, the double-precision sum s of its exact
// products x*w (float32 values: every product is exact in binary64), the computed sum a
// of |x*w| and ax of |x|. A direct kernel vectorised across output pixels and blocked
// over output channels (fast_conv.cpp). Internal to the reference.
//
// Contract (rounding-error analysis, Higham 2002, 3.1): the K exact products of the
// window (padded positions as exact zeros) are added sequentially in (c, kh, kw) order,
// so |s - S| <= gamma_{K-1}(2^-53) sum|p_i|, and a, a sum of non-negative doubles,
// satisfies a >= sum|p_i| (1 - gamma_{K-1}); hence |s - S| <= gamma_K a / (1 - gamma_K) is
// a certified radius. Each output's order is fixed, so results are identical for any
// thread count and vector width.
//
// Why not BLAS: Debian's OpenBLAS 0.3.21 does not recognise this machine's CPU and falls
// back to its Prescott kernels (measured 4.5 G multiply-adds/s per core for dgemm, 22 G
// with OPENBLAS_CORETYPE=SkylakeX forced); two dgemms (values and absolute values) plus
// an im2col then lose to one fused pass that accumulates both.
#include <cstdint>
#include <vector>

#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck::ref::detail {

struct ConvSums {
  std::vector<double> s, a, ax;  // per output, NCHW
};

void conv_sums(const ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w, unsigned threads,
               ConvSums& out);

}  // namespace foldcheck::ref::detail

namespace foldcheck::ref::detail {

// Per channel: the BatchNorm's scale enclosure and parameters (no BN: has_bn false).
struct ChannelAffine {
  bool has_bn = false;
  double t_hi = 1, t_lo = 0, t_rad = 0;  // scale = t_hi + t_lo within t_rad
  double mean = 0, beta = 0, bias = 0;   // bias: the conv's (0 if none)
};

// For `count` outputs of one channel: the enclosure y +- rad of the layer's output and
// conv +- conv_rad of the conv's, from the sums s (radius radius_factor * a) in
// double-double arithmetic (dd_arith.hpp), with every rounding of the bound evaluation
// covered. Vectorisable; compiled for FMA hardware where present (target_clones).
void enclose_channel(const double* __restrict s, const double* __restrict a, std::size_t count, const ChannelAffine& ch,
                     double radius_factor, double* __restrict y_hi, double* __restrict y_lo, double* __restrict rad,
                     double* __restrict conv, double* __restrict conv_rad);

}  // namespace foldcheck::ref::detail
