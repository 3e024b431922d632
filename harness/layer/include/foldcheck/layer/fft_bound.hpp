#pragma once
// The rounding-error bound of a conv computed by FFT (cuDNN's FFT algorithms, FFT-based convs
// of other engines), in float32: per image and input channel the zero-padded input plane x_c,
// per output channel o the flipped, zero-padded kernel w_oc, both transformed by a 2-D FFT of
// size n = n1 x n2 (powers of two, each at least the padded input's side: the cyclic
// correlation then equals the conv at every output), multiplied pointwise, summed over the
// group's C channels, transformed back and scaled by 1/n (exact: a power of two):
//   y_o = F^-1 ( sum_c F(x_c) (.) F(w_oc) ).
//
// Contract and derivation (normwise: an FFT mixes every element of a tile into every other):
//   - each 2-D FFT is t = log2 n radix-2 stages; with twiddle factors within mu = u of exact
//     (float32 tables computed in higher precision and rounded, as FFTW, pocketfft and cuFFT
//     keep them), Higham (Accuracy and Stability, Thm 24.2) gives
//       ||fl(F v) - F v||_2 <= eps ||F v||_2,  eps = t eta / (1 - t eta),  eta = mu + gamma_4 (sqrt2 + mu)
//     (row then column transforms compound to the same form with t = t1 + t2);
//   - ||F v||_2 = sqrt(n) ||v||_2 and |F(w)_f| <= ||w||_1 (the DFT of a kernel);
//   - the pointwise complex products err by sqrt2 gamma_2 and the C-term channel sum by
//     gamma_{C-1} (componentwise, each part): g = (1 + sqrt2 gamma_2)(1 + gamma_{C-1}) - 1;
//   - ||a (.) b||_2 <= ||a||_2 ||b||_inf.
// With s_c = ||x_c||_2, w1 = ||w_oc||_1, w2 = ||w_oc||_2 (the transform's error of the kernel
// in the infinity norm bounded by its 2-norm, eps sqrt(n) w2):
//   ||Z^ - Z||_2 / sqrt(n) <= sum_c s_c [eps w1 + (1 + eps) eps sqrt(n) w2 + g (1 + eps)(w1 + eps sqrt(n) w2)]
//   ||Z||_2 / sqrt(n)      <= sum_c s_c w1
//   ||y^ - y||_2 <= (1 + eps) ||Z^ - Z||_2 / sqrt(n) + eps ||Z^||_2 / sqrt(n)   (the inverse transform)
// and every output of the plane is within that 2-norm. A conv bias added after: one more
// rounding, u (|c| + E). Underflow (products only: a sum with a subnormal result is exact),
// each product within 2^-150 absolutely, reaches an output with gain at most ||w||_1 (forward
// transform of x), ||x_c||_1 (of the kernel), 1 (pointwise products: n of them, times 1/n) or
// 1/n (inverse): 2^-150 [2 n t sum_c (w1 + ||x_c||_1) + 4 C + 2 t + 1], with the 1/n applied
// last; applied anywhere else (folded into the kernel's spectrum, a forward-normalized
// transform) it makes the values it scales n times smaller: U = n times that.
// A tiled FFT (tiles of powers of two no larger, each output from one tile) is covered: every
// term grows with the tile and its s_c. Another radix or a non-power-of-two size is not what
// the theorem states; the bound says so (its assumptions are the report's). Stride 1 and
// dilation 1 only (where the algorithm applies); any padding, kernel size, groups.
#include <cstdint>
#include <vector>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

struct FftBound {
  std::vector<double> E;        // per output (NCHW): |y^ - y| <= E (the bias's rounding included)
  std::int64_t n1 = 0, n2 = 0;  // the transform's size per dimension
  double eps = 0;               // the transform's normwise relative error
};

// Throws InputError when the geometry is not one an FFT conv computes (stride or dilation
// other than 1) or the transform's bound is undefined (t eta >= 1).
FftBound fft_bound(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                   const std::vector<double>& bias, const std::vector<long double>& c);

}  // namespace foldcheck
