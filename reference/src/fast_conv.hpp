#pragma once
// The reference's fast path for float32-representable data (internal to the reference).
//
// For every output: the double-precision sum s of its exact products x*w (float32
// values: every product is exact in binary64), the computed window sum ax of |x| and, when
// the bound data is asked for, the computed sum a of |x*w|, from a direct kernel
// vectorised across 16 output pixels and blocked over output channels (fast_kernels.cpp,
// built per x86-64 level); then, per output row, the BatchNorm applied in binary64 with a
// running error bound to a certified enclosure of the channel's scale, and the
// certification of each requested format's rounding (fast_conv.cpp).
//
// Contract (rounding-error analysis, Higham 2002, 3.1): the K exact products of the
// window (padded positions as exact zeros) are added sequentially in (c, kh, kw) order,
// so |s - S| <= gamma_{K-1}(2^-53) sum|p_i|, and a, a sum of non-negative doubles,
// satisfies a >= sum|p_i| (1 - gamma_{K-1}); hence |s - S| <= gamma_K a / (1 - gamma_K) is
// a certified radius (without a: the a-priori bound sum|p_i| <= max|w_o| sum|x_i|, see
// fast_conv_bn). Each output's order is fixed, so results are identical for any
// thread count and vector width. An output is certified when its enclosure lies strictly
// inside one rounding cell of every requested format; the others are summed again with a
// compensated (TwoSum) summation whose enclosure is ~2^-100 relative, and what still fails
// (exact ties, results within ~2^-100 of a boundary) is returned for the multiprecision path.
//
// Why not BLAS: Debian's OpenBLAS 0.3.21 does not recognise this machine's CPU and falls
// back to its Prescott kernels (measured 4.5 G multiply-adds/s per core for dgemm, 22 G
// with OPENBLAS_CORETYPE=SkylakeX forced); two dgemms (values and absolute values) plus
// an im2col then lose to one fused pass that accumulates both.
#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "fast_kernels.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck::ref::detail {

struct FastLayer {
  const ConvGeometry* g = nullptr;
  const std::vector<double>* x = nullptr;
  const std::vector<double>* w = nullptr;
  // Channel o's affine data (computed by the fast path's threads, channels o = t mod
  // threads on thread t, before any row); must not throw.
  std::function<ChannelAffine(std::int64_t o)> channel;
  unsigned formats = 0;                 // formats to certify (never float64: see the header)
  unsigned threads = 0;
  // Per-layer factors from gamma_K (conv_bn_reference.cpp): gamma >= gamma_K, the sum's
  // radius is radius_factor * a, and abs_factor * a, abs_x_factor * ax are upper bounds on
  // sum|x w| and sum|x|.
  double gamma = 0, radius_factor = 0, abs_factor = 1, abs_x_factor = 1;
};

// Where the fast path writes: y (every output; certified 0 for those it returns for the
// multiprecision path, which overwrites them) and,
// when the pointers are set, the bound data of every output (conv_bn_reference.hpp).
struct FastOut {
  ValueArray* y = nullptr;
  double *conv = nullptr, *conv_radius = nullptr, *abs_sum = nullptr, *abs_x_sum = nullptr;
};

struct FastResult {
  std::vector<std::int64_t> uncertified;  // indices for the multiprecision path, ascending
  std::int64_t compensated = 0;           // certified by the second tier (compensated re-sum)
};

// Runs the fast path over every output: the vector pass, then the second tier (a
// compensated re-sum, fast_conv.cpp) for the outputs it could not certify.
FastResult fast_conv_bn(const FastLayer& layer, FastOut& out);

// Whether the fast path's row panel (per thread: every input channel's kernel rows, as wide
// as the last tile of 16 pixels reads, fast_conv.cpp) fits (layer.hpp, scratch_fits); when
// not, the layer takes the multiprecision path, which walks only in-bounds terms.
bool fast_panel_fits(const ConvGeometry& g);

// Whether every value is float32-representable (NaN counts); threads as in Options.
bool all_float32(const std::vector<double>& v, unsigned threads = 1);

// The vector kernels for this CPU (fast_kernels.hpp): AVX-512, AVX2 + FMA, or baseline.
const Kernels& kernels();

// Whether every real in [y - r, y + r] (y = yh + yl) rounds to the same value of format f,
// and which (zero as +0).
bool certify_cell(double yh, double yl, double r, const Format& f, double& out);
// certify_cell for every format of `formats`, into rounded[format index]; false at the first
// that fails.
bool certify_cells(double yh, double yl, double r, unsigned formats, std::array<double, kNumFormats>& rounded);

}  // namespace foldcheck::ref::detail
