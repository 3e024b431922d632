// One layer of an engine's run against the certified reference (engine_layers.hpp).
#include "engine_layers.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/channel_bias.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fft_bound.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/layer/honest_samples.hpp"
#include "foldcheck/layer/winograd_bound.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck {
namespace {

// The bounds of every recipe in `recipes`, element by element the largest: valid for an
// engine that folded by any of them. Per channel, the fold's common and per-weight relative
// errors (channel_bias.hpp), also the largest.
struct PathBounds {
  std::vector<double> det, prob, theta, delta, bias_err;
  std::vector<double> abs_xw;  // per output, >= sum |x w'| of every recipe's stored weights
  double eta = 0;
  std::string formula;
};

// Each recipe's fold of the layer, made once for the bounds and the honest samples (the
// unfused graph itself when the engine kept the BatchNorm).
std::vector<Graph> folded_graphs(const Graph& g, const LayerOutputCheck& c) {
  if (c.unfused) return {g};
  std::vector<Graph> r;
  for (const Recipe rc : c.recipes) r.push_back(fold_batchnorm(g, rc, c.ref, c.arith));
  return r;
}

PathBounds path_bounds(const std::vector<Graph>& folded, const ref::LayerResult& exact, const LayerOutputCheck& c,
                       const std::vector<double>& x) {
  const Graph& g = folded.front();
  PathBounds pb;
  const std::size_t O = static_cast<std::size_t>(g.nodes[0].geometry.O);
  pb.theta.assign(O, 0.0);
  pb.delta.assign(O, 0.0);
  pb.bias_err.assign(O, 0.0);
  pb.abs_xw.assign(exact.y.size(), 0.0);
  Policy pol;  // sequential: no term passes through more roundings in any order of a direct conv
  pol.threads = c.ref.threads;
  if (c.algorithm.kind == ConvAlgorithmKind::Winograd2 && winograd_applies(g.nodes[0].geometry))
    pol.order = Order{Accumulation::Winograd};
  for (const Graph& fused : folded) {
    const BoundReport br = error_bounds(fused, exact, pol, c.confidence, &x);
    if (pb.det.empty()) {
      pb.det = br.bound;
      pb.prob = br.probabilistic;
      pb.formula = br.formula;
    }
    for (std::size_t i = 0; i < pb.det.size(); ++i) {
      pb.det[i] = std::max(pb.det[i], br.bound[i]);
      pb.prob[i] = std::max(pb.prob[i], br.probabilistic[i]);
    }
    for (std::size_t i = 0; i < pb.abs_xw.size(); ++i) {
      const std::size_t o = g.nodes[0].geometry.output_channel(i);
      const FoldInfo* f = fused.nodes[0].fold ? &*fused.nodes[0].fold : nullptr;
      const double s =
          f ? (f->scale[o].mag() + f->weight_alpha[o]) * exact.abs_sum[i] + f->weight_eta * exact.abs_x_sum[i]
            : exact.abs_sum[i];
      pb.abs_xw[i] = std::max(pb.abs_xw[i], round_up(s));
    }
    if (!fused.nodes[0].fold) continue;  // unfused: no fold
    const FoldInfo& fi = *fused.nodes[0].fold;
    widen_fold_errors(fi, pb.theta, pb.delta, pb.eta);
    for (std::size_t o = 0; o < O; ++o)
      pb.bias_err[o] = std::max(pb.bias_err[o], fi.bias[o].e + (fi.has_post_add ? fi.post_add[o].e : 0.0));
  }
  return pb;
}

// How far an engine's stored folded weights may lie from the recipe's, relative (conv_extra):
// 2^-18 for float32 weights (diagnose_replay.hpp's kFoldDelta: every recipe with an exact or
// refined rsqrt); with a narrower weight storage the engine may round to the other neighbour
// of the recipe's value, 2 u of that type.
double engine_fold_delta(const LayerOutputCheck& c) {
  if (c.arith.weight_dtype && *c.arith.weight_dtype != DType::Float32)
    return 2 * info(*c.arith.weight_dtype).unit_roundoff;
  return 0x1p-18;
}

// The engine's algorithm where it applies to this layer: a Conv's (a Gemm or MatMul is a dot
// product per output), Winograd's 3x3 stride-1 convs, the FFT's stride-1 ones; elsewhere the
// engine computed a direct sum.
ConvAlgorithm applied_algorithm(const LayerOutputCheck& c, const ref::ConvGeometry& g) {
  const ConvAlgorithm& a = c.algorithm;
  if (c.model->nodes[c.pair->layer].op != "Conv") return {};
  const bool unit = g.stride_h == 1 && g.stride_w == 1 && g.dil_h == 1 && g.dil_w == 1;
  if (a.winograd_tile() && !winograd_applies(g)) return {};
  if (a.kind == ConvAlgorithmKind::FFT && !unit) return {};
  return a;
}

// The FFT's normwise bound per output (fft_bound.hpp) on magnitudes S + |b'|; FFT convolutions
// transform in float32, so another arithmetic is not bounded.
std::vector<double> fft_extra(const LayerOutputCheck& c, const Node& conv, const std::vector<double>& bias,
                              const std::vector<double>& x, const std::vector<double>& S) {
  if (c.arithmetic.kind != ConvArithmeticKind::Float32)
    throw NoLayerBound("an FFT convolution is bounded in float32 only (FFT convolutions transform in float32)");
  const ref::ConvGeometry& g = conv.geometry;
  std::vector<long double> cmag(S.size());
  for (std::size_t i = 0; i < S.size(); ++i)
    cmag[i] = static_cast<long double>(S[i]) + std::fabs(bias[g.output_channel(i)]);
  std::vector<double> E = fft_bound(g, x, conv.weight.data, bias, cmag).E;
  for (double& e : E) e = round_up(e * (1 + engine_fold_delta(c)));
  return E;
}

// The arithmetic's general bound per output (general_conv_bound) on magnitudes M (Winograd's
// W, which has the bias; else sum|x w'| taken engine_fold_delta larger, plus |b'|: the bias is
// added in the arithmetic too, torch.autocast converts it); gb made for the k roundings per output.
std::vector<double> arithmetic_extra(const LayerOutputCheck& c, const GeneralConvBound& gb, const Node& conv,
                                     const std::vector<double>& bias, const std::vector<double>& x,
                                     const std::vector<double>& M, bool winograd) {
  const ref::ConvGeometry& g = conv.geometry;
  const std::vector<double> uf =
      gb.underflow_per_channel(conv.weight.data, static_cast<std::size_t>(g.terms_per_output()), x);
  const double delta = engine_fold_delta(c);
  std::vector<double> E(M.size());
  for (std::size_t i = 0; i < M.size(); ++i) {
    const std::size_t o = g.output_channel(i);
    const double m = winograd ? M[i] : M[i] * (1 + delta) + std::fabs(bias[o]);
    E[i] = round_up(gb.factor * m + uf[o] + gb.accumulator_eta);
  }
  return E;
}

// The conv's own error of the algorithm and arithmetic beyond a direct float32 sum, per
// output, for one recipe's conv `fg` (engine_layers.hpp states the terms); `formula` says which.
// Winograd's W, the FFT's norms and S are of the recipe's stored weights; the engine's own
// fold lies within engine_fold_delta of them relative, so each is taken that much larger.
std::vector<double> conv_extra(const LayerOutputCheck& c, const Graph& fg, const std::vector<double>& x,
                               const std::vector<double>& S, std::string& formula) {
  const Node& conv = fg.nodes[0];
  const ref::ConvGeometry& g = conv.geometry;
  const ConvAlgorithm alg = applied_algorithm(c, g);
  std::vector<double> bias = conv.bias;
  bias.resize(static_cast<std::size_t>(g.O), 0.0);
  if (alg.kind == ConvAlgorithmKind::FFT) {
    formula = "; plus the FFT's normwise bound per output plane (fft_bound.hpp)";
    return fft_extra(c, conv, bias, x, S);
  }
  formula.clear();
  std::vector<double> E(S.size(), 0.0);
  const std::vector<double>* M = &S;
  double k = static_cast<double>(g.terms_per_output()) + (conv.bias.empty() ? 0.0 : 1.0);
  const bool f32 = c.arithmetic.kind == ConvArithmeticKind::Float32;
  WinogradBound wb;
  if (const int m = alg.winograd_tile()) {
    wb = winograd_bound(g, x, conv.weight.data, bias, m,
                        alg.onednn_points() ? WinogradPoints::OneDnn : WinogradPoints::Lavin);
    for (double& w : wb.W) w = round_up(w * (1 + engine_fold_delta(c)));
    M = &wb.W;
    k = wb.roundings;
    if (f32 && m > 2)  // F(2x2): the order's own bound (evaluate.hpp)
      for (std::size_t i = 0; i < E.size(); ++i) E[i] = gamma_k(k, 0x1p-24) * wb.W[i];
    formula = fmt::format("; plus Winograd F({0}x{0},3x3){2}: gamma_N W, N = {1}", m, static_cast<long>(k),
                          alg.onednn_points() ? " with oneDNN's points" : "");
  }
  if (f32) return E;
  const std::optional<GeneralConvBound> gb = general_conv_bound(c.arithmetic, k);
  if (!gb)
    throw NoLayerBound(fmt::format("{}: gamma_k of its accumulation is undefined for k = {} terms per output",
                                   c.arithmetic.description(), static_cast<long>(k)));
  formula += fmt::format("; plus {}: the general bound {:.3g} {} + its underflow terms", c.arithmetic.description(),
                         gb->factor, alg.winograd_tile() ? "W" : "sum|x w'|");
  return arithmetic_extra(c, *gb, conv, bias, x, *M, alg.winograd_tile() != 0);
}

// Adds the algorithm's and arithmetic's part to the bounds (the largest over the recipes; an
// unfused conv's error times the BatchNorm's |scale|).
void add_conv_extra(const LayerOutputCheck& c, const std::vector<Graph>& folded, const std::vector<double>& x,
                    PathBounds& pb) {
  const bool direct = c.algorithm.kind == ConvAlgorithmKind::Direct || c.algorithm.kind == ConvAlgorithmKind::SplitK;
  if (direct && c.arithmetic.kind == ConvArithmeticKind::Float32) return;
  std::vector<double> extra(pb.det.size(), 0.0);
  std::string formula;
  for (const Graph& fg : folded) {
    const std::vector<double> E = conv_extra(c, fg, x, pb.abs_xw, formula);
    const ref::ConvGeometry& g = fg.nodes[0].geometry;
    for (std::size_t i = 0; i < E.size(); ++i) {
      double e = E[i];
      if (!fg.nodes[0].fold && fg.nodes.size() > 1 && fg.nodes[1].kind == Node::Kind::BatchNorm) {
        const ref::BnParams& bn = fg.nodes[1].bn;
        const std::size_t o = g.output_channel(i);
        e *= std::fabs(bn.gamma[o]) / std::sqrt(bn.var[o] + bn.eps) * (1 + 0x1p-20);
      }
      extra[i] = std::max(extra[i], round_up(e));
    }
  }
  for (std::size_t i = 0; i < extra.size(); ++i) {
    pb.det[i] = round_up(pb.det[i] + extra[i]);
    pb.prob[i] = round_up(pb.prob[i] + extra[i]);
  }
  pb.formula += formula;
}

// An engine computing in a 16-bit operand format (bf16, fp16: TensorRT's and ONNX Runtime's
// fp16 modes, torch.autocast) may store the layer's output in it: when every output value is
// one of the format's values, each is taken as the format's rounding of the computed value,
// |fl16(v) - v| <= u16 |v| + eta16 with |v| <= |y*| + E: u16 (|y*| + E) + eta16 added.
void add_narrow_storage(const LayerOutputCheck& c, const ref::LayerResult& exact, PathBounds& pb) {
  if (!stored_in_16_bits(c.arithmetic, c.y.data)) return;
  const std::optional<OperandFormat> f = c.arithmetic.storage_format();
  for (std::size_t i = 0; i < pb.det.size(); ++i) {
    const auto a = exact.y.approx(i);
    const double y = std::fabs(a.hi + a.lo);
    pb.det[i] = round_up(pb.det[i] + f->u() * (y + pb.det[i]) + f->eta());
    pb.prob[i] = round_up(pb.prob[i] + f->u() * (y + pb.prob[i]) + f->eta());
  }
  pb.formula +=
      fmt::format("; its outputs stored in the 16-bit operand format: + u (|y*| + E) + eta, u = 2^-{}", f->precision);
}

double activate(const FusedActivation& a, double v) { return a.op.empty() ? v : std::clamp(v, a.lo, a.hi); }

// Whether output i of an activated layer is in the activation's linear part for every value
// within its bound (the channel statistic uses only those: elsewhere the clamp hides d_i).
bool linear_part(const FusedActivation& a, double y, double bound) { return y - bound > a.lo && y + bound < a.hi; }

void check_shapes(const LayerOutputCheck& c, const Shape& want, const std::string& where) {
  if (c.y.shape != want)
    throw InputError(fmt::format("{}: the engine's output of layer {} has shape {}, the layer on its input gives {}", where,
                                 c.pair->name, shape_string(c.y.shape), shape_string(want)));
}

// The channel statistic's summary: its counts, the worst channel and the thresholds' spreads.
EngineChannels channel_summary(const std::vector<ChannelBias>& cb) {
  EngineChannels ch;
  std::vector<double> thr, est;
  std::int64_t worst = -1;
  double worst_ratio = 0;
  for (std::size_t o = 0; o < cb.size(); ++o) {
    if (!cb[o].tested) continue;
    ++ch.tested;
    thr.push_back(cb[o].threshold);
    est.push_back(cb[o].estimated_threshold);
    if (cb[o].beyond()) ++ch.beyond_bound;
    else if (cb[o].beyond_estimate()) ++ch.beyond_estimate;
    // The worst: the largest ratio, a NaN one (a channel holding a NaN output) above all, the
    // first of those kept (a later finite ratio does not displace a NaN).
    const double q = std::fabs(cb[o].rho) / cb[o].estimated_threshold;
    if (worst < 0 || (std::isnan(q) && !std::isnan(worst_ratio)) || q > worst_ratio) {
      worst = static_cast<std::int64_t>(o);
      worst_ratio = q;
    }
  }
  if (worst < 0) return ch;
  std::sort(thr.begin(), thr.end());
  std::sort(est.begin(), est.end());
  const ChannelBias& w = cb[static_cast<std::size_t>(worst)];
  ch.worst = EngineWorstChannel{.channel = worst,
                                .rho_ppm = w.rho * 1e6,
                                .threshold_ppm = w.threshold * 1e6,
                                .estimated_threshold_ppm = w.estimated_threshold * 1e6,
                                .allowance_ppm = w.allowance * 1e6,
                                .honest_rms_ppm = w.honest_rms * 1e6,
                                .ratio_to_estimate = worst_ratio,
                                .outputs = w.outputs};
  auto spread = [](const std::vector<double>& v) {
    return PpmSpread{v.front() * 1e6, v[v.size() / 2] * 1e6, v.back() * 1e6};
  };
  ch.threshold_ppm = spread(thr);
  ch.estimated_threshold_ppm = spread(est);
  return ch;
}

// The channel statistic (channel_bias.hpp) on the outputs in the activation's linear part,
// with the honest computations' drift.
std::vector<ChannelBias> channel_statistic(const LayerOutputCheck& c, const Graph& g, const std::vector<Graph>& folded,
                                           const std::vector<double>& xv,
                                           const ref::LayerResult& exact, const std::vector<double>& ystar,
                                           const PathBounds& pb) {
  const Node& conv = g.nodes[0];
  const ref::ConvGeometry& geo = conv.geometry;
  ref::Options ro = c.ref;
  ro.formats = ref::format_bit(ref::kFloat32);
  const std::size_t n = ystar.size();
  const std::int64_t pc = geo.terms_per_output();
  const ref::ValueArray wstar = ref::fold_weights(conv.weight.data, pc, g.nodes[1].bn, ro);
  std::vector<double> ws(wstar.size()), z(n), d(n), A(n), M(n);
  const double k = accumulation_roundings(Order{}, geo, true), gk = k * 0x1p-24 / (1 - k * 0x1p-24);
  for (std::size_t j = 0; j < ws.size(); ++j) ws[j] = wstar.approx(j).hi + wstar.approx(j).lo;
  std::vector<char> use(n, 1);
  const ref::BnParams& bn = g.nodes[1].bn;
  std::vector<double> bstar(static_cast<std::size_t>(geo.O)), tabs(bstar.size());
  for (std::size_t o = 0; o < bstar.size(); ++o) {
    const ref::Value bv = ref::fold_bias(conv.bias.empty() ? 0.0 : conv.bias[o], bn.gamma[o], bn.beta[o], bn.mean[o], bn.var[o], bn.eps, ro);
    bstar[o] = bv.approx.hi + bv.approx.lo;
    tabs[o] = std::fabs(ref::fold_scale(bn.gamma[o], bn.var[o], bn.eps, ro).approx.hi);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t o = geo.output_channel(i);
    z[i] = ystar[i] - bstar[o];
    d[i] = c.y.data[i] - ystar[i];
    // A_i >= sum |w'_k x_ik| + |b'|: |w'| <= |w*| (1 + theta)(1 + delta) + eta, the original
    // sum |w x| times |t| (w* = w t), with a little margin for t's own rounding to double.
    const double a0 = tabs[o] * exact.abs_sum[i] + std::fabs(bstar[o]);
    A[i] = (tabs[o] * exact.abs_sum[i] * (1 + pb.theta[o]) * (1 + pb.delta[o]) + pb.eta * exact.abs_x_sum[i] +
            std::fabs(bstar[o]) + pb.bias_err[o]) * (1 + 0x1p-40);
    // M_i (channel_bias.hpp): the engine's exact sum is within A_i - a0 of y*.
    M[i] = (std::min(A[i], (A[i] + std::fabs(ystar[i]) + (A[i] - a0)) / 2) + gk * A[i]) * (1 + 0x1p-40);
    use[i] = c.activation.op.empty() || linear_part(c.activation, ystar[i], pb.det[i]);
  }
  ChannelBiasInput in;
  in.geometry = geo;
  in.x = &xv;
  in.w_star = &ws;
  in.z = &z;
  in.d = &d;
  in.ystar = &ystar;
  in.magnitude = &A;
  in.partial = &M;
  in.use = &use;
  in.theta = pb.theta;
  in.delta = pb.delta;
  in.eta = pb.eta;
  in.roundings = k;
  in.alpha = c.channel_alpha;
  in.threads = c.ref.threads;
  // K honest computations of the folded layer on x (layer/honest_samples.hpp); sample m
  // folds by recipe m mod R.
  const HonestSamples hs = honest_samples(folded, xv, {c.samples, c.seed, c.layer_index, c.ref.threads});
  for (std::size_t m = 0; m < hs.y.size(); ++m) {
    in.samples.push_back(&hs.y[m]);
    in.sample_weights.push_back(&folded[hs.graph[m]].nodes[0].weight.data);
  }
  return channel_bias(in);
}

// Why the channel statistic does not apply (it models float32 products of the folded weights
// summed directly), or none.
std::optional<std::string> no_channel_statistic(const LayerOutputCheck& c, const ref::ConvGeometry& g) {
  const ConvAlgorithm a = applied_algorithm(c, g);
  if (a.winograd_tile())
    return fmt::format("Winograd F({0}x{0},3x3): the statistic models a direct sum", a.winograd_tile());
  if (a.kind == ConvAlgorithmKind::FFT) return std::string("FFT: the statistic models a direct sum");
  if (c.arithmetic.kind != ConvArithmeticKind::Float32)
    return fmt::format("{}: the statistic models float32 products", c.arithmetic.name());
  if (c.unfused) return std::string("not folded: the statistic models a folded conv");
  return std::nullopt;
}

}  // namespace

void check_layer_outputs(const LayerOutputCheck& c, EngineLayer& layer, const std::string& where) {
  const Model& m = *c.model;
  const BnPair& p = *c.pair;
  const LayerParams lp = layer_params(m, p);
  Tensor x = c.x;
  // A Conv's input is N x C x H x W; a Gemm's or MatMul's rows x features, run as a 1 x 1
  // conv over its rows (pair_graph: the same products in the same order, then the bias).
  const ModelNode& layer_node = m.nodes[p.layer];
  const bool is_conv = layer_node.op == "Conv";
  if (is_conv ? x.shape.size() != 4 || lp.weight_shape.size() != 4 : x.shape.size() != 2)
    throw InputError(fmt::format("{}: the engine's input to layer {} has shape {}, not {}", where, p.name,
                                 shape_string(x.shape), is_conv ? "N x C x H x W" : "rows x features"));
  const Shape input_shape = x.shape;
  const Graph g = pair_graph(m, p, lp, x, DType::Float32);
  const ref::ConvGeometry& geo = g.nodes[0].geometry;
  if (is_conv && geo.C != lp.weight_shape[1] * geo.groups)
    throw InputError(fmt::format("{}: the engine's input to layer {} has {} channels, the layer takes {}", where, p.name,
                                 geo.C, lp.weight_shape[1] * geo.groups));
  check_shapes(c, layer_output_shape(layer_node, geo, input_shape), where);
  ref::Options ro = c.ref;
  ro.formats = ref::format_bit(ref::kFloat32);
  const Node& conv = g.nodes[0];
  const ref::LayerData L{geo, &x.data, &conv.weight.data, conv.bias.empty() ? nullptr : &conv.bias, &g.nodes[1].bn};
  const ref::LayerResult exact = ref::conv_bn(L, ro);
  const std::vector<Graph> folded = folded_graphs(g, c);
  PathBounds pb = path_bounds(folded, exact, c, x.data);
  add_conv_extra(c, folded, x.data, pb);
  add_narrow_storage(c, exact, pb);
  const std::size_t n = exact.y.size();
  // The reference in double (hi + lo: within 2^-53 relative, added to the bounds), activated.
  std::vector<double> ystar(n), yact(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = exact.y.approx(i);
    ystar[i] = a.hi + a.lo;
    yact[i] = activate(c.activation, ystar[i]);
    const double slack = 0x1p-53 * std::fabs(ystar[i]) + exact.y[i].radius;
    pb.det[i] += slack;
    pb.prob[i] += slack;
  }
  const ref::ValueArray refv = c.activation.op.empty() ? exact.y : approximate_values(yact, DType::Float32);
  layer.outputs = compare(c.y.data, refv, DType::Float32, &pb.det, &pb.prob);
  if (only_general_bound(c.arithmetic, applied_algorithm(c, geo)))
    layer.outputs_detail.too_wide = fmt::format(
        "the only bound that applies is the general bound of {} on Winograd's transforms: too wide to see a wrong "
        "channel, so outputs within it pass nothing (diagnose says the same); judge the layer with the algorithm "
        "alone or in float32",
        c.arithmetic.name());
  if (const std::optional<std::string> why = no_channel_statistic(c, geo)) {
    layer.outputs_detail.bound = pb.formula;
    layer.outputs_detail.activation = c.activation.op;
    layer.outputs_detail.channels.not_computed = why;
    return;
  }
  const std::vector<ChannelBias> cb = channel_statistic(c, g, folded, x.data, exact, ystar, pb);
  EngineOutputsDetail& d = layer.outputs_detail;
  d.bound = pb.formula;
  d.bound_recipes.emplace();
  for (const Recipe r : c.recipes) d.bound_recipes->push_back(name(r));
  d.activation = c.activation.op;
  d.terms_per_output = geo.terms_per_output();
  d.channels = channel_summary(cb);
}

}  // namespace foldcheck
