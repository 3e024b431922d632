#pragma once
// The exact conv + BatchNorm layer and the exact fold, certified.
//
// Contract: for float32-representable (or narrower) inputs each product x·w is exact in
// binary64 (24+24 <= 53 significand bits; exponents from 2^-298 to 2^256 stay normal),
// otherwise products are formed exactly in 106-bit MPFR. mpfr_sum then rounds the exact
// sum of products (and the conv bias) correctly to the working precision, with a ternary
// that gives a one-ulp enclosure; BatchNorm is applied in interval arithmetic. Every
// output is certified (see certify.hpp): its rounding to each format is exact.
// In exact arithmetic the fused and unfused layers are the same function, so this one
// reference scores both.
//
// Fast path (float32-representable data, Options::fast, float64 not among
// Options::formats): the conv sums come from a vectorised kernel over exact products with a
// certified radius gamma_K * sum|p| (src/fast_conv.hpp); the BatchNorm is applied in binary64
// with a running error bound to a 128-bit interval enclosure of each channel's scale; the
// output is certified when its enclosure (about 2^-40 relative) lies strictly inside one
// rounding cell of every requested format. An output that is not (about 2 in 10^4 for
// float32: within ~2^-40 of a rounding boundary) is summed again with a compensated
// (TwoSum) summation and the BatchNorm in double-double arithmetic with proven bounds
// (dd_arith.hpp), an enclosure of about 2^-100; what still fails (exact ties) takes the
// multiprecision path above, an exact long accumulation (mpfr_sum) that certifies
// anything. The paths give bit-identical rounded values (tested differentially); the fast
// path's approx is a binary64 value accurate to its radius rather than 106 bits, far below
// a float32 ULP. LayerResult counts the outputs of each path.
#include <cstdint>
#include <vector>

#include "foldcheck/reference/certify.hpp"
#include "foldcheck/reference/layer.hpp"

namespace foldcheck::ref {

struct LayerResult {
  ValueArray y;                    // certified layer outputs, NCHW
  // Bound data (empty unless Options::bound_data):
  std::vector<double> conv;        // conv output incl. bias (before BN), to within conv_radius
  std::vector<double> conv_radius; // |conv - exact conv| <= conv_radius (certified)
  std::vector<double> abs_sum;     // upper bound on sum |x_i w_i| over each output's window
  std::vector<double> abs_x_sum;   // upper bound on sum |x_i| over each output's window
  std::int64_t escalations = 0;    // outputs that needed more than opts.precision bits
  std::int64_t fast_certified = 0; // outputs certified by the fast path (either tier)
  std::int64_t compensated = 0;    // of those, by its second tier (a compensated re-sum)
  std::int64_t fallbacks = 0;      // fast-path outputs that needed the multiprecision path
  long max_precision_used = 0;
};

// The x86-64 level the fast path's kernels run at: "v4" (AVX-512), "v3" (AVX2 + FMA) or
// "base" -- the best this CPU has, or the level the environment variable FOLDCHECK_ISA
// names, so that tests and benchmarks can run every level the machine has. Every level
// gives bit-identical results (each output's operations and their order do not depend on
// the vector width or the blocking); only the speed differs. Throws std::invalid_argument
// for a FOLDCHECK_ISA other than base, v3, v4 or empty, or naming a level this CPU lacks.
const char* isa_level();
// The levels this CPU can run, best first (each a valid FOLDCHECK_ISA).
std::vector<const char*> available_isa_levels();

// Throws std::invalid_argument on inconsistent sizes, std::domain_error if var+eps <= 0.
LayerResult conv_bn(const LayerData& layer, const Options& opts);

// Exact fold quantities (per channel), certified:
//   scale  = gamma / sqrt(var + eps)
//   weight = w · scale
//   bias   = (b - mean) · scale + beta
Value fold_scale(double gamma, double var, double eps, const Options& opts);
Value fold_weight(double w, double gamma, double var, double eps, const Options& opts);
Value fold_bias(double b, double gamma, double beta, double mean, double var, double eps,
                const Options& opts);

// fold_weight for many weights at once (weight k of output channel k / per_channel),
// certified in opts.formats. Each channel's scale is enclosed once (128-bit interval, held
// as a double-double with a radius); each product w * scale is formed in double-double
// arithmetic (dd_arith.hpp: relative error <= 2^-102, plus |w| times the scale's radius)
// and certified by the rounding-cell test of the fast path; a weight whose enclosure
// (~2^-100 relative) straddles a rounding boundary of a requested format takes
// fold_weight. Bit-identical to calling fold_weight per weight (tested); thousands of
// times faster, for models with millions of weights. Uses opts.threads.
ValueArray fold_weights(const std::vector<double>& w, std::int64_t per_channel, const BnParams& bn,
                        const Options& opts);

}  // namespace foldcheck::ref
