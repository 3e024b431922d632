// The per-channel systematic-bias statistic (channel_bias.hpp).
#include "foldcheck/layer/channel_bias.hpp"

#include <cmath>
#include <stdexcept>

#include <boost/math/distributions/students_t.hpp>

#include "foldcheck/base/task_pool.hpp"

namespace foldcheck {
namespace {

// The flat NCHW indices of output channel o's outputs that are used.
std::vector<std::int64_t> channel_outputs(const ChannelBiasInput& in, std::int64_t o) {
  const ref::ConvGeometry& g = in.geometry;
  const std::int64_t plane = g.OH() * g.OW();
  std::vector<std::int64_t> r;
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t p = 0; p < plane; ++p) {
      const std::int64_t i = (n * g.O + o) * plane + p;
      if (!in.use || (*in.use)[static_cast<std::size_t>(i)]) r.push_back(i);
    }
  return r;
}

ChannelBias one_channel(const ChannelBiasInput& in, std::int64_t o) {
  const ref::ConvGeometry& g = in.geometry;
  const std::vector<std::int64_t> idx = channel_outputs(in, o);
  ChannelBias cb;
  cb.outputs = static_cast<std::int64_t>(idx.size());
  if (idx.empty()) return cb;
  const std::vector<double>&z = *in.z, &d = *in.d, &A = *in.magnitude, &M = *in.partial, &x = *in.x, &ws = *in.w_star;
  double zbar = 0;
  for (const std::int64_t i : idx) zbar += z[static_cast<std::size_t>(i)];
  zbar /= static_cast<double>(idx.size());
  double S = 0;
  for (const std::int64_t i : idx) S += (z[static_cast<std::size_t>(i)] - zbar) * (z[static_cast<std::size_t>(i)] - zbar);
  if (!(S > 0) || !std::isfinite(S)) return cb;
  cb.tested = true;
  const double u = in.unit_roundoff, k = in.roundings;
  const std::int64_t pc = g.terms_per_output();
  std::vector<double> G(static_cast<std::size_t>(pc), 0.0);
  double rho = 0, s2 = 0;  // s2: the accumulation part of s^2
  for (const std::int64_t i : idx) {
    const std::size_t iu = static_cast<std::size_t>(i);
    const double r = (z[iu] - zbar) / S;
    rho += d[iu] * r;
    s2 += r * r * u * u * (A[iu] * A[iu] + (k - 1) * M[iu] * M[iu]);
    const ref::OutputIndex oi = ref::output_index(g, i);
    ref::for_each_window_term(g, oi.n, o, oi.oh, oi.ow,
                              [&](std::size_t xi, std::size_t wi) { G[wi - static_cast<std::size_t>(o * pc)] += x[xi] * r; });
  }
  const double th = in.theta[static_cast<std::size_t>(o)], de = in.delta[static_cast<std::size_t>(o)];
  double gsum = 0, fold2 = 0;
  for (std::int64_t j = 0; j < pc; ++j) {
    const double c = de * (1 + th) * ws[static_cast<std::size_t>(o * pc + j)] * G[static_cast<std::size_t>(j)];
    fold2 += c * c;
    gsum += std::fabs(G[static_cast<std::size_t>(j)]);
  }
  cb.rho = rho;
  cb.allowance = th + in.eta * gsum;
  // The statistic is itself computed in double: relative errors near 1e-13 on sums of
  // ~1e6 terms, 1e-9 of margin covers them.
  const double t = std::sqrt(2 * std::log(2 / in.alpha));
  cb.spread = std::sqrt(s2 + fold2) * (1 + 1e-9);
  cb.threshold = (cb.allowance + cb.spread * t) * (1 + 1e-9);
  if (!in.bound_holds) cb.threshold = HUGE_VAL;
  cb.estimated_threshold = cb.threshold;
  const std::size_t K = in.samples.size();
  if (K == 0) return cb;
  double m2 = 0, largest = 0;
  for (std::size_t m = 0; m < K; ++m) {
    const std::vector<double>&y = *in.samples[m], &w = *in.sample_weights[m];
    double rm = 0;
    for (const std::int64_t i : idx) {
      const std::size_t iu = static_cast<std::size_t>(i);
      rm += (y[iu] - (*in.ystar)[iu]) * (z[iu] - zbar) / S;
    }
    for (std::int64_t j = 0; j < pc; ++j) {
      const std::size_t wk = static_cast<std::size_t>(o * pc + j);
      rm -= (w[wk] - ws[wk]) * G[static_cast<std::size_t>(j)];
    }
    m2 += rm * rm;
    largest = std::max(largest, std::fabs(rm));
  }
  cb.honest_rms = std::sqrt(m2 / static_cast<double>(K));
  cb.honest_largest = largest;
  const double tq = boost::math::quantile(boost::math::complement(boost::math::students_t(static_cast<double>(K)), in.alpha / 2));
  const double est = cb.allowance + std::sqrt(fold2) * t + largest + tq * cb.honest_rms;
  cb.estimated_threshold = std::min(cb.threshold, est * (1 + 1e-9));
  return cb;
}

}  // namespace

std::vector<ChannelBias> channel_bias(const ChannelBiasInput& in) {
  const ref::ConvGeometry& g = in.geometry;
  const std::size_t outputs = static_cast<std::size_t>(g.output_size());
  if (!in.x || !in.w_star || !in.z || !in.d || !in.magnitude || !in.partial || in.z->size() != outputs ||
      in.d->size() != outputs || in.magnitude->size() != outputs || in.partial->size() != outputs || (in.use && in.use->size() != outputs) ||
      in.theta.size() != static_cast<std::size_t>(g.O) || in.delta.size() != static_cast<std::size_t>(g.O) ||
      !(in.alpha > 0 && in.alpha < 1))
    throw std::invalid_argument("channel_bias: inputs of the wrong size");
  if (in.samples.size() != in.sample_weights.size() || (!in.samples.empty() && !in.ystar))
    throw std::invalid_argument("channel_bias: samples without their weights or y*");
  for (std::size_t m = 0; m < in.samples.size(); ++m)
    if (in.samples[m]->size() != outputs || in.sample_weights[m]->size() != in.w_star->size())
      throw std::invalid_argument("channel_bias: a sample of the wrong size");
  std::vector<ChannelBias> r(static_cast<std::size_t>(g.O));
  detail::run_tasks(
      r.size(), in.threads, [&](std::size_t o) { r[o] = one_channel(in, static_cast<std::int64_t>(o)); },
      [](std::size_t, std::size_t) {});
  return r;
}

}  // namespace foldcheck
