#pragma once
// The fast path's conv sums: for every output, the double-precision sum s of its exact
// products x*w (float32 values: every product is exact in binary64), the computed sum a
// of |x*w| and ax of |x|, via OpenBLAS dgemm over an im2col of the input (or a direct
// loop for small K or few outputs per group). Internal to the reference.
//
// Contract (rounding-error analysis, Higham 2002, 3.1): whatever order the BLAS kernel
// adds the n = K exact products in, |s - S| <= gamma_{n-1}(2^-53) * sum|p_i|, and a, a
// sum of non-negative doubles, satisfies a >= sum|p_i| (1 - gamma_{n-1}); so
// |s - S| <= gamma_n a / (1 - gamma_n) is a certified radius. Padded positions hold
// exact zeros. The P columns are cut into fixed chunks, each a separate single-threaded
// dgemm, so every output's operation order is the same for any thread count.
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
