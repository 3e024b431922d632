// A quantized conv+BN layer: reference, integer and fake-quant paths (quant_layer.hpp).
#include "foldcheck/quant/quant_layer.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/numerics/histogram.hpp"
#include "foldcheck/base/envelope.hpp"

namespace foldcheck {

using json = nlohmann::json;

namespace {

// acc * (m.hi + m.lo) as a double-double (|acc| < 2^53): to ~2^-102 relative.
ref::DoubleDouble times(double acc, const ref::DoubleDouble& m) {
  const ref::dd::DD p = ref::dd::times_dd({acc, 0.0}, {m.hi, m.lo});
  return {p.hi, p.lo};
}

struct PathStats {
  std::int64_t matches = 0, expected_flips = 0, unexpected = 0;
  std::int64_t worst_index = -1;
  std::int64_t worst_diff = 0;
  std::vector<std::int64_t> diffs;  // q_path - q_ref per element
};

json path_json(const PathStats& s, const std::string& bound) {
  // Histogram of the integer differences, in LSBs.
  std::map<std::int64_t, std::int64_t> h;
  for (const std::int64_t d : s.diffs) ++h[d];
  json hist = json::object();
  for (const auto& [d, c] : h) hist[std::to_string(d)] = c;
  return {{"matches", s.matches},
          {"expected_flips", s.expected_flips},
          {"unexpected", s.unexpected},
          {"lsb_histogram", hist},
          {"worst_index", s.worst_index},
          {"bound", bound},
          {"verdict", s.unexpected ? "UNEXPECTED" : "EXPECTED"}};
}

// q with per_channel off: the input and output are quantized per tensor.
QuantSpec per_tensor_spec(const QuantSpec& q) {
  QuantSpec per_tensor = q;
  per_tensor.per_channel = false;
  return per_tensor;
}

// The folded conv's bias (zeros if none), TVM's separate channel shift added to it in float32.
std::vector<double> folded_bias(const Graph& folded) {
  const Node& conv = folded.nodes[0];
  const std::int64_t O = conv.geometry.O;
  std::vector<double> bias = conv.bias.empty() ? std::vector<double>(static_cast<std::size_t>(O), 0.0) : conv.bias;
  if (folded.nodes.size() > 1 && folded.nodes[1].kind == Node::Kind::ChannelAdd)  // TVM's separate shift: part of the bias
    for (std::size_t o = 0; o < bias.size(); ++o) bias[o] = static_cast<float>(bias[o] + folded.nodes[1].bias[o]);
  return bias;
}

// The layer's scales and integers: weights per tensor or channel, input per tensor, bias int32 at s_x s_w.
struct QuantInts {
  std::vector<double> sw;  // weight scales: one, or one per output channel
  double sx = 0;           // the input's scale
  bool per_channel = false;
  std::int64_t per = 0;    // weights per output channel
  std::vector<std::int64_t> qw, qx, qb;
  double s_w(std::int64_t o) const { return per_channel ? sw[static_cast<std::size_t>(o)] : sw[0]; }
};

QuantInts quantize_layer(const Node& conv, const std::vector<double>& input, const std::vector<double>& bias,
                         const QuantSpec& q) {
  QuantInts z;
  const std::int64_t O = conv.geometry.O;
  z.per = conv.geometry.terms_per_output();
  z.per_channel = q.per_channel;
  z.sw = quant_scales(conv.weight.data, z.per, q);
  z.sx = quant_scales(input, 1, per_tensor_spec(q))[0];
  z.qw.resize(conv.weight.data.size());
  z.qx.resize(input.size());
  z.qb.resize(static_cast<std::size_t>(O));
  for (std::size_t i = 0; i < z.qw.size(); ++i) z.qw[i] = quantize_value(conv.weight.data[i], z.s_w(static_cast<std::int64_t>(i) / z.per), q);
  for (std::size_t i = 0; i < z.qx.size(); ++i) z.qx[i] = quantize_value(input[i], z.sx, q);
  QuantSpec bias_spec = q;
  bias_spec.bits = 32;
  for (std::int64_t o = 0; o < O; ++o) z.qb[static_cast<std::size_t>(o)] = quantize_value(bias[static_cast<std::size_t>(o)], z.sx * z.s_w(o), bias_spec);
  return z;
}

// Per output: the exact integer accumulation, and the magnitude sum |q_w q_x| the float path's bound needs.
struct Accumulated {
  std::vector<double> acc, mag;
};

Accumulated accumulate(const ref::ConvGeometry& g, const QuantInts& z) {
  const std::int64_t O = g.O, OH = g.OH(), OW = g.OW();
  const std::size_t n_out = static_cast<std::size_t>(g.output_size());
  Accumulated r{std::vector<double>(n_out), std::vector<double>(n_out)};
  for (std::int64_t nn = 0; nn < g.N; ++nn)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          std::int64_t a = z.qb[static_cast<std::size_t>(o)], m = 0;
          ref::for_each_window_term(g, nn, o, oh, ow, [&](std::size_t xi, std::size_t wi) {
            const std::int64_t t = z.qw[wi] * z.qx[xi];
            a += t;
            m += t < 0 ? -t : t;
          });
          const std::size_t k = static_cast<std::size_t>(((nn * O + o) * OH + oh) * OW + ow);
          r.acc[k] = static_cast<double>(a);  // |a| < 2^53 for any int8/int16 layer of sane size
          r.mag[k] = static_cast<double>(m);
        }
  return r;
}

// The output channel of flat output index k.
std::int64_t channel_of(const ref::ConvGeometry& g, std::size_t k) {
  return (static_cast<std::int64_t>(k) / (g.OH() * g.OW())) % g.O;
}

// Output scale from max |y|, y = acc s_x s_w (per tensor).
double output_scale(const ref::ConvGeometry& g, const std::vector<double>& acc, const QuantInts& z, const QuantSpec& q) {
  std::vector<double> y_approx(acc.size());
  for (std::size_t k = 0; k < acc.size(); ++k) y_approx[k] = acc[k] * z.sx * z.s_w(channel_of(g, k));
  return quant_scales(y_approx, 1, per_tensor_spec(q))[0];
}

// The fake-quant path: the conv of the dequantized weights, bias and input, in float32.
struct FakeQuant {
  Node conv;             // its dequantized weights and bias
  std::vector<double> y;  // its outputs
};

FakeQuant fake_quant(const Node& conv, const QuantInts& z, unsigned threads) {
  const std::int64_t O = conv.geometry.O;
  Graph fq;
  fq.dtype = DType::Float32;
  Node fc = conv;
  fc.fold.reset();
  for (std::size_t i = 0; i < z.qw.size(); ++i) fc.weight.data[i] = static_cast<double>(z.qw[i]) * z.s_w(static_cast<std::int64_t>(i) / z.per);
  fc.bias.assign(static_cast<std::size_t>(O), 0.0);
  for (std::int64_t o = 0; o < O; ++o) fc.bias[static_cast<std::size_t>(o)] = static_cast<float>(static_cast<double>(z.qb[static_cast<std::size_t>(o)]) * z.sx * z.s_w(o));
  fq.nodes = {fc};
  std::vector<double> xq(z.qx.size());
  for (std::size_t i = 0; i < z.qx.size(); ++i) xq[i] = static_cast<double>(z.qx[i]) * z.sx;
  Policy pol;
  pol.threads = threads;
  std::vector<double> yf = evaluate(fq, xq, pol);
  return {std::move(fc), std::move(yf)};
}

// Both paths scored against the reference, and the fake-quant path's error before quantization.
struct Scores {
  PathStats fake, integer;
  Histogram pre = Histogram::for_ulp();
  double pre_max = 0;
  std::int64_t informative = 0;  // outputs whose exact quantized value is not 0
};

// A path's integer `got` for output k against the reference r: a match, an EXPECTED flip
// (one step, the tie toward `got` within bound_value of the exact value) or UNEXPECTED.
void score(PathStats& s, std::int64_t got, double bound_value, const ExactQuant& r, double sy, std::size_t k) {
  const std::int64_t diff = got - r.q;
  s.diffs.push_back(diff);
  if (diff == 0) {
    ++s.matches;
    return;
  }
  const double toward = diff > 0 ? 0.5 - r.offset : 0.5 + r.offset;  // steps to the tie toward `got`
  const bool ok = (diff == 1 || diff == -1) && toward * sy <= bound_value;
  (ok ? s.expected_flips : s.unexpected) += 1;
  if (std::llabs(diff) > std::llabs(s.worst_diff)) {
    s.worst_diff = diff;
    s.worst_index = static_cast<std::int64_t>(k);
  }
}

Scores score_outputs(const ref::ConvGeometry& g, const QuantInts& z, const Accumulated& a, const FakeQuant& fq, double sy,
                     const QuantSpec& q) {
  const double u = 0x1p-24, gk = gamma_k(static_cast<double>(z.per + 1), u);
  Scores sc;
  sc.pre.unit = "lsb";
  for (std::size_t k = 0; k < a.acc.size(); ++k) {
    const std::int64_t o = channel_of(g, k);
    const std::size_t ou = static_cast<std::size_t>(o);
    const ref::DoubleDouble m = exact_product(z.sx, z.s_w(o));  // s_x s_w exactly
    const ref::DoubleDouble y = times(a.acc[k], m);
    const ExactQuant r = quantize_exact(y, sy, q);
    if (r.q != 0) ++sc.informative;
    // fake-quant: float32 value, its bound in value units
    const double bias_err = std::fabs(fq.conv.bias[ou] - static_cast<double>(z.qb[ou]) * m.hi);
    const double bound_f = gk * (a.mag[k] * m.hi + std::fabs(fq.conv.bias[ou])) + bias_err;
    const double e_lsb = (fq.y[k] - y.hi - y.lo) / sy;
    sc.pre.add(e_lsb);
    sc.pre_max = std::max(sc.pre_max, std::fabs(e_lsb));
    // integer: M = fl32(s_x s_w / s_y); acc * M exactly; |M - M_exact| <= 2^-24 M
    const double M = static_cast<float>(m.hi / sy);
    const ref::DoubleDouble yi = exact_product(a.acc[k], M);
    const double bound_i = std::fabs(a.acc[k]) * std::fabs(M - (m.hi + m.lo) / sy) + std::fabs(a.acc[k]) * M * 0x1p-52;
    score(sc.fake, quantize_value(fq.y[k], sy, q), bound_f, r, sy, k);
    score(sc.integer, quantize_exact(yi, 1.0, q).q, bound_i, r, sy, k);
  }
  return sc;
}

// What the result lists: the case, fold, spec, scales and both paths.
json layer_json(const CaseSpec& spec, const QuantSpec& q, Recipe fold, const QuantInts& z, double sy, std::size_t n_out,
                const Scores& sc) {
  json pre_json = to_json(sc.pre);
  json out = result_envelope("quant-check");
  out.update(json{{"mode", "layer"},
           {"case", {{"name", spec.name}, {"path", spec.path}, {"seed", spec.seed}}},
           {"fold", name(fold)},
           {"spec",
            {{"bits", q.bits}, {"per_channel", q.per_channel}, {"pow2", q.pow2}, {"rounding", name(q.rounding)}, {"qmax", q.qmax()}}},
           {"scales", {{"input", z.sx}, {"output", sy}, {"weights", z.sw}}},
           {"outputs", n_out},
           {"fake_quant", path_json(sc.fake, "gamma_{n+1}(sum|x^ w^| + |b^|) + the bias's float32 rounding (Higham 3.1)")},
           {"integer", path_json(sc.integer, "|acc| |M - s_x s_w / s_y| (the float32 multiplier's rounding)")},
           {"fake_quant_error_lsb", {{"max_abs", sc.pre_max}, {"histogram", pre_json}}}});
  return out;
}

QuantPathCounts counts(const PathStats& s) { return {s.matches, s.expected_flips, s.unexpected}; }

// The folded weights themselves: each recipe's integers against the quantized exact fold.
QuantCheckResult weights_check(const CaseData& d, const QuantSpec& q, const ref::Options& opts) {
  QuantCheckInput wi;
  wi.weights = d.graph.nodes[0].weight;
  wi.bn = d.graph.nodes[1].bn;
  wi.spec = q;
  wi.ref = opts;
  return quant_check(wi);
}

// The three paths of the layer and their scores (quant_layer.hpp); the weights are checked apart.
QuantLayerResult layer_paths(const CaseData& d, const CaseSpec& spec, const QuantSpec& q, Recipe fold, const ref::Options& opts) {
  const Graph folded = fold_batchnorm(d.graph, fold, opts);
  const Node& conv = folded.nodes[0];
  const ref::ConvGeometry& g = conv.geometry;
  const QuantInts z = quantize_layer(conv, d.input, folded_bias(folded), q);
  const Accumulated a = accumulate(g, z);
  const double sy = output_scale(g, a.acc, z, q);
  const FakeQuant fq = fake_quant(conv, z, opts.threads);
  const Scores sc = score_outputs(g, z, a, fq, sy, q);
  QuantLayerResult r;
  r.detail = layer_json(spec, q, fold, z, sy, a.acc.size(), sc);
  r.fake_quant = counts(sc.fake);
  r.integer = counts(sc.integer);
  r.informative = sc.informative;
  return r;
}

}  // namespace

Verdict QuantLayerResult::verdict() const {
  return judgement::of_check(
      {.failed = fake_quant.unexpected > 0 || integer.unexpected > 0, .informative = informative > 0});
}

json QuantLayerResult::to_json() const {
  json out = detail;
  out["weights"] = weights.weights_summary();
  out["verdict"] = name(verdict());
  return out;
}

QuantLayerResult quantized_layer(const CaseSpec& spec, const QuantSpec& q, Recipe fold, const ref::Options& opts) {
  const CaseData d = materialize(spec, DType::Float32);
  QuantLayerResult r = layer_paths(d, spec, q, fold, opts);  // its integers and scores freed before the weights' check
  r.weights = weights_check(d, q, opts);
  return r;
}

}  // namespace foldcheck
