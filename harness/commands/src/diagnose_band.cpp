// diagnose's calibrated band (diagnose_band.hpp).
#include "diagnose_band.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foldcheck/layer/channel_bias.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/layer/honest_samples.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace foldcheck {
namespace {

using diagnosis::AffineModel;
using diagnosis::Layer;
using diagnosis::ld;

// Why the band does not apply to this observation, or none.
std::optional<std::string> no_band(const DiagnoseInput& in, const std::optional<ref::ConvGeometry>& g, const Layer& L,
                                   bool overflow) {
  if (!g) return std::string("a BatchNorm alone: the statistic is a conv channel's common factor");
  if (L.dtype != DType::Float32) return fmt::format("a {} output: the honest computations are float32", name(L.dtype));
  if (in.arithmetic.kind != ConvArithmeticKind::Float32)
    return fmt::format("{}: the honest computations have float32 products", in.arithmetic.name());
  if (in.algorithm.kind != ConvAlgorithmKind::Direct && in.algorithm.kind != ConvAlgorithmKind::SplitK)
    return fmt::format("{}: the honest computations sum directly", in.algorithm.name());
  if (overflow) return std::string("an exact value is past float32's range");
  return std::nullopt;
}

// The layer as a graph in float32 (conv [-> BatchNorm]); weights rounded to float32 as an
// engine given them would.
Graph layer_graph(const DiagnoseInput& in, const ref::ConvGeometry& g) {
  Graph gr;
  Node conv;
  conv.kind = Node::Kind::Conv;
  conv.geometry = g;
  conv.weight = *in.weights;
  conv.weight.dtype = DType::Float32;
  for (double& w : conv.weight.data) w = round_to(DType::Float32, w);
  conv.bias = in.conv_bias;
  for (double& b : conv.bias) b = round_to(DType::Float32, b);
  gr.nodes.push_back(std::move(conv));
  if (in.bn) {
    Node bn;
    bn.kind = Node::Kind::BatchNorm;
    bn.bn = *in.bn;
    bn.geometry = g;  // the channel of each output (evaluate.hpp)
    gr.nodes.push_back(std::move(bn));
  }
  return gr;
}

// Per channel, the fold errors of every recipe (the largest) and the unfused forms' 3.5 u.
struct FoldErrors {
  std::vector<double> theta, delta;
  double eta = 0;
};

FoldErrors fold_errors(const std::vector<Graph>& folded, std::size_t O, bool has_bn) {
  FoldErrors fe{std::vector<double>(O, has_bn ? 3.5 * 0x1p-24 * (1 + 0x1p-20) : 0.0), std::vector<double>(O, 0.0)};
  for (const Graph& f : folded)
    if (f.nodes[0].fold) widen_fold_errors(*f.nodes[0].fold, fe.theta, fe.delta, fe.eta);
  return fe;
}

// The statistic's per-output inputs from the exact layer (channel_bias.hpp's z, d, y*, A, M).
struct BandArrays {
  std::vector<double> ystar, z, d, A, M, wstar, wunfused;
};

BandArrays band_arrays(const DiagnoseInput& in, const Layer& L, const AffineModel& given, const Graph& gr,
                       const FoldErrors& fe) {
  BandArrays b;
  const std::size_t n = L.c.size(), O = static_cast<std::size_t>(L.C);
  const std::size_t pc = in.weights->data.size() / O;
  const double k = L.k, gk = k * 0x1p-24 / (1 - k * 0x1p-24);
  for (auto* v : {&b.ystar, &b.z, &b.d, &b.A, &b.M}) v->resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t o = L.channel(i, false);
    const ld a = given.identity ? 1.0L : given.a[o], bias = L.bias.empty() ? 0.0L : static_cast<ld>(L.bias[o]);
    const ld ys = given.identity ? L.c[i] : (L.c[i] - given.m[o]) * a + given.beta[o];
    const ld bs = given.identity ? bias : (bias - given.m[o]) * a + given.beta[o];
    b.ystar[i] = static_cast<double>(ys);
    b.z[i] = static_cast<double>((L.c[i] - bias) * a);
    b.d[i] = in.observed.data[i] - b.ystar[i];
    b.A[i] = (std::fabs(static_cast<double>(a)) * L.A[i] * (1 + fe.theta[o]) * (1 + fe.delta[o]) +
              std::fabs(static_cast<double>(bs))) *
             (1 + 0x1p-40);
    b.M[i] = (b.A[i] + gk * b.A[i]) * (1 + 0x1p-40);
  }
  // w* = w a exactly in double (to 2^-53); an unfused computation's weights: its float32 w times a.
  b.wstar.resize(in.weights->data.size());
  b.wunfused.resize(b.wstar.size());
  for (std::size_t j = 0; j < b.wstar.size(); ++j) {
    const double a = given.identity ? 1.0 : static_cast<double>(given.a[j / pc]);
    b.wstar[j] = in.weights->data[j] * a;
    b.wunfused[j] = gr.nodes[0].weight.data[j] * a;
  }
  return b;
}

DiagnoseBand::Channel band_channel(const ChannelBias& cb, std::size_t o) {
  return DiagnoseBand::Channel{static_cast<std::int64_t>(o),
                               cb.outputs,
                               cb.rho * 1e6,
                               cb.estimated_threshold * 1e6,
                               cb.honest_rms * 1e6,
                               cb.allowance * 1e6,
                               std::fabs(cb.rho) / cb.estimated_threshold};
}

// The channels' verdicts summed up: beyond the band (worst first), the worst, the floor.
void summarise(const std::vector<ChannelBias>& cbs, DiagnoseBand& band) {
  std::vector<double> bands;
  const auto worse = [](const DiagnoseBand::Channel& a, const DiagnoseBand::Channel& b) {
    return (std::isnan(a.ratio) && !std::isnan(b.ratio)) || a.ratio > b.ratio;
  };
  for (std::size_t o = 0; o < cbs.size(); ++o) {
    if (!cbs[o].tested) continue;
    ++band.tested;
    bands.push_back(cbs[o].estimated_threshold * 1e6);
    const DiagnoseBand::Channel ch = band_channel(cbs[o], o);
    if (cbs[o].beyond_estimate()) band.beyond.push_back(ch);
    if (!band.worst || worse(ch, *band.worst)) band.worst = ch;
  }
  std::stable_sort(band.beyond.begin(), band.beyond.end(), worse);
  if (bands.empty()) return;
  std::sort(bands.begin(), bands.end());
  band.band_median_ppm = bands[bands.size() / 2];
  band.band_max_ppm = bands.back();
}

}  // namespace

DiagnoseBand diagnose_band(const DiagnoseInput& in, const std::optional<ref::ConvGeometry>& g, const Layer& L,
                           const AffineModel& given, bool overflow) {
  DiagnoseBand band;
  band.not_computed = no_band(in, g, L, overflow);
  if (band.not_computed) return band;
  const Graph gr = layer_graph(in, *g);
  std::vector<Graph> graphs;
  if (in.bn)
    for (const Recipe r : all_recipes()) graphs.push_back(fold_batchnorm(gr, r, in.ref));
  const FoldErrors fe = fold_errors(graphs, static_cast<std::size_t>(L.C), in.bn.has_value());
  graphs.push_back(gr);  // the unfused layer (or the plain conv)
  const BandArrays b = band_arrays(in, L, given, gr, fe);
  ChannelBiasInput ci;
  ci.geometry = *g;
  ci.x = &in.x.data;
  ci.w_star = &b.wstar;
  ci.z = &b.z;
  ci.d = &b.d;
  ci.ystar = &b.ystar;
  ci.magnitude = &b.A;
  ci.partial = &b.M;
  ci.theta = fe.theta;
  ci.delta = fe.delta;
  ci.eta = fe.eta;
  ci.roundings = L.k;
  ci.alpha = kBandAlpha;
  ci.bound_holds = false;
  ci.threads = in.ref.threads;
  const HonestSamples hs = honest_samples(graphs, in.x.data, {kBandSamples, 0, 0, in.ref.threads});
  for (std::size_t m = 0; m < hs.y.size(); ++m) {
    ci.samples.push_back(&hs.y[m]);
    const std::size_t gi = hs.graph[m];
    ci.sample_weights.push_back(graphs[gi].nodes[0].fold ? &graphs[gi].nodes[0].weight.data : &b.wunfused);
  }
  band.samples = kBandSamples;
  band.alpha = kBandAlpha;
  summarise(channel_bias(ci), band);
  return band;
}

}  // namespace foldcheck
