// An FFT conv's error bound (foldcheck/layer/fft_bound.hpp states it and its derivation).
#include "foldcheck/layer/fft_bound.hpp"

#include <cmath>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/numerics/bounded.hpp"

namespace foldcheck {
namespace {

constexpr double kU = 0x1p-24;           // float32's unit roundoff
constexpr double kUnderflow = 0x1p-150;  // a float32 product's absolute error at underflow

std::int64_t pow2_at_least(std::int64_t v) {
  std::int64_t p = 1;
  while (p < v) p *= 2;
  return p;
}

// Per input plane (image b, channel c): ||x_c||_2 and ||x_c||_1, rounded up.
struct PlaneNorms {
  std::vector<double> l2, l1;
};
PlaneNorms plane_norms(const ref::ConvGeometry& g, const std::vector<double>& x) {
  PlaneNorms p;
  const std::int64_t plane = g.H * g.W;
  for (std::int64_t bc = 0; bc < g.N * g.C; ++bc) {
    long double sq = 0, ab = 0;
    for (std::int64_t i = 0; i < plane; ++i) {
      const long double v = x[static_cast<std::size_t>(bc * plane + i)];
      sq += v * v;
      ab += std::fabs(v);
    }
    p.l2.push_back(round_up(std::sqrt(static_cast<double>(sq)) * (1 + 0x1p-40)));
    p.l1.push_back(round_up(static_cast<double>(ab) * (1 + 0x1p-40)));
  }
  return p;
}

}  // namespace

FftBound fft_bound(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                   const std::vector<double>& bias, const std::vector<long double>& c) {
  if (g.stride_h != 1 || g.stride_w != 1 || g.dil_h != 1 || g.dil_w != 1)
    throw InputError("an FFT conv computes convs of stride 1 and dilation 1 only");
  FftBound r;
  r.n1 = pow2_at_least(g.H + g.pad_top + g.pad_bottom);
  r.n2 = pow2_at_least(g.W + g.pad_left + g.pad_right);
  const double n = static_cast<double>(r.n1) * static_cast<double>(r.n2), t = std::log2(n), rn = std::sqrt(n);
  const double eta = kU + gamma_k(4, kU) * (std::sqrt(2.0) + kU);
  if (t * eta >= 0.5) throw InputError("the FFT's size is past its bound's range (t eta >= 1/2)");
  r.eps = round_up(t * eta / (1 - t * eta));
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, taps = g.KH * g.KW, OHW = g.OH() * g.OW();
  const double e = r.eps, gm = round_up((1 + std::sqrt(2.0) * gamma_k(2, kU)) * (1 + gamma_k(cg - 1, kU)) - 1);
  const PlaneNorms xs = plane_norms(g, x);
  r.E.assign(static_cast<std::size_t>(g.output_size()), 0.0);
  for (std::int64_t b = 0; b < g.N; ++b)
    for (std::int64_t o = 0; o < g.O; ++o) {
      double zerr = 0, zmag = 0, x1w = 0;
      for (std::int64_t ci = 0; ci < cg; ++ci) {
        double w1 = 0, w2 = 0;
        for (std::int64_t k = 0; k < taps; ++k) {
          const double v = w[static_cast<std::size_t>((o * cg + ci) * taps + k)];
          w1 += std::fabs(v);
          w2 += v * v;
        }
        w1 = round_up(w1 * (1 + 0x1p-40));
        w2 = round_up(std::sqrt(w2) * (1 + 0x1p-40));
        const std::size_t plane = static_cast<std::size_t>(b * g.C + (o / og) * cg + ci);
        const double s = xs.l2[plane];
        zerr += s * (e * w1 + (1 + e) * e * rn * w2 + gm * (1 + e) * (w1 + e * rn * w2));
        zmag += s * w1;
        x1w += w1 + xs.l1[plane];
      }
      // Scaled last, each underflow reaches an output with the gains in the header; the exact
      // 1/n may be applied anywhere (folded into the kernel's spectrum, a forward-normalized
      // transform), where it makes the values n times smaller: n times the term covers it.
      const double under = kUnderflow * n * (2 * n * t * x1w + 4.0 * static_cast<double>(cg) + 2 * t + 1);
      const double E = round_up(((1 + e) * zerr + e * (zmag + zerr)) * (1 + 0x1p-30) + (1 + e) * (1 + e) * under);
      for (std::int64_t i = 0; i < OHW; ++i) {
        const std::size_t at = static_cast<std::size_t>((b * g.O + o) * OHW + i);
        r.E[at] = bias.empty() ? E : round_up(E + kU * (static_cast<double>(std::fabs(c[at])) + E));
      }
    }
  return r;
}

}  // namespace foldcheck
