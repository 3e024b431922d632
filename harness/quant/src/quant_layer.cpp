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

}  // namespace

json quantized_layer(const CaseSpec& spec, const QuantSpec& q, Recipe fold, const ref::Options& opts) {
  const CaseData d = materialize(spec, DType::Float32);
  const Graph folded = fold_batchnorm(d.graph, fold, opts);
  const Node& conv = folded.nodes[0];
  const ref::ConvGeometry& g = conv.geometry;
  const std::int64_t O = g.O, per = g.terms_per_output();
  std::vector<double> bias = conv.bias.empty() ? std::vector<double>(static_cast<std::size_t>(O), 0.0) : conv.bias;
  if (folded.nodes.size() > 1 && folded.nodes[1].kind == Node::Kind::ChannelAdd)  // TVM's separate shift: part of the bias
    for (std::size_t o = 0; o < bias.size(); ++o) bias[o] = static_cast<float>(bias[o] + folded.nodes[1].bias[o]);

  // Scales and integers: weights per tensor or channel, input per tensor, bias int32 at s_x s_w.
  const std::vector<double> sw = quant_scales(conv.weight.data, per, q);
  QuantSpec per_tensor = q;
  per_tensor.per_channel = false;
  const double sx = quant_scales(d.input, 1, per_tensor)[0];
  auto s_w = [&](std::int64_t o) { return q.per_channel ? sw[static_cast<std::size_t>(o)] : sw[0]; };
  std::vector<std::int64_t> qw(conv.weight.data.size()), qx(d.input.size()), qb(static_cast<std::size_t>(O));
  for (std::size_t i = 0; i < qw.size(); ++i) qw[i] = quantize_value(conv.weight.data[i], s_w(static_cast<std::int64_t>(i) / per), q);
  for (std::size_t i = 0; i < qx.size(); ++i) qx[i] = quantize_value(d.input[i], sx, q);
  QuantSpec bias_spec = q;
  bias_spec.bits = 32;
  for (std::int64_t o = 0; o < O; ++o) qb[static_cast<std::size_t>(o)] = quantize_value(bias[static_cast<std::size_t>(o)], sx * s_w(o), bias_spec);

  // Exact integer accumulation, and the magnitudes the float path's bound needs.
  const std::int64_t OH = g.OH(), OW = g.OW();
  const std::size_t n_out = static_cast<std::size_t>(g.output_size());
  std::vector<double> acc(n_out), mag(n_out);
  for (std::int64_t nn = 0; nn < g.N; ++nn)
    for (std::int64_t o = 0; o < O; ++o)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          std::int64_t a = qb[static_cast<std::size_t>(o)], m = 0;
          ref::for_each_window_term(g, nn, o, oh, ow, [&](std::size_t xi, std::size_t wi) {
            const std::int64_t t = qw[wi] * qx[xi];
            a += t;
            m += t < 0 ? -t : t;
          });
          const std::size_t k = static_cast<std::size_t>(((nn * O + o) * OH + oh) * OW + ow);
          acc[k] = static_cast<double>(a);  // |a| < 2^53 for any int8/int16 layer of sane size
          mag[k] = static_cast<double>(m);
        }
  // Output scale from max |y|, y = acc s_x s_w (per tensor).
  std::vector<double> y_approx(n_out);
  for (std::size_t k = 0; k < n_out; ++k) y_approx[k] = acc[k] * sx * s_w((static_cast<std::int64_t>(k) / (OH * OW)) % O);
  const double sy = quant_scales(y_approx, 1, per_tensor)[0];

  // The three paths.
  Graph fq;  // fake-quant: the conv of dequantized values in float32
  fq.dtype = DType::Float32;
  Node fc = conv;
  fc.fold.reset();
  for (std::size_t i = 0; i < qw.size(); ++i) fc.weight.data[i] = static_cast<double>(qw[i]) * s_w(static_cast<std::int64_t>(i) / per);
  fc.bias.assign(static_cast<std::size_t>(O), 0.0);
  for (std::int64_t o = 0; o < O; ++o) fc.bias[static_cast<std::size_t>(o)] = static_cast<float>(static_cast<double>(qb[static_cast<std::size_t>(o)]) * sx * s_w(o));
  fq.nodes = {fc};
  std::vector<double> xq(qx.size());
  for (std::size_t i = 0; i < qx.size(); ++i) xq[i] = static_cast<double>(qx[i]) * sx;
  Policy pol;
  pol.threads = opts.threads;
  const std::vector<double> yf = evaluate(fq, xq, pol);
  const double u = 0x1p-24, gk = gamma_k(static_cast<double>(per + 1), u);

  PathStats fake, integer;
  Histogram pre = Histogram::for_ulp();
  pre.unit = "lsb";
  double pre_max = 0;
  std::int64_t informative = 0;  // outputs whose exact quantized value is not 0
  for (std::size_t k = 0; k < n_out; ++k) {
    const std::int64_t o = (static_cast<std::int64_t>(k) / (OH * OW)) % O;
    const ref::DoubleDouble m = exact_product(sx, s_w(o));  // s_x s_w exactly
    const ref::DoubleDouble y = times(acc[k], m);
    const ExactQuant r = quantize_exact(y, sy, q);
    if (r.q != 0) ++informative;
    // fake-quant: float32 value, its bound in value units
    const double bias_err = std::fabs(fc.bias[static_cast<std::size_t>(o)] - static_cast<double>(qb[static_cast<std::size_t>(o)]) * m.hi);
    const double bound_f = gk * (mag[k] * m.hi + std::fabs(fc.bias[static_cast<std::size_t>(o)])) + bias_err;
    const double e_lsb = (yf[k] - y.hi - y.lo) / sy;
    pre.add(e_lsb);
    pre_max = std::max(pre_max, std::fabs(e_lsb));
    // integer: M = fl32(s_x s_w / s_y); acc * M exactly; |M - M_exact| <= 2^-24 M
    const double M = static_cast<float>(m.hi / sy);
    const ref::DoubleDouble yi = exact_product(acc[k], M);
    const double bound_i = std::fabs(acc[k]) * std::fabs(M - (m.hi + m.lo) / sy) + std::fabs(acc[k]) * M * 0x1p-52;
    auto score = [&](PathStats& s, std::int64_t got, double bound_value) {
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
    };
    score(fake, quantize_value(yf[k], sy, q), bound_f);
    score(integer, quantize_exact(yi, 1.0, q).q, bound_i);
  }
  json pre_json = to_json(pre);
  json out = result_envelope("quant-check");
  out.update(json{{"mode", "layer"},
           {"case", {{"name", spec.name}, {"path", spec.path}, {"seed", spec.seed}}},
           {"fold", name(fold)},
           {"spec",
            {{"bits", q.bits}, {"per_channel", q.per_channel}, {"pow2", q.pow2}, {"rounding", name(q.rounding)}, {"qmax", q.qmax()}}},
           {"scales", {{"input", sx}, {"output", sy}, {"weights", sw}}},
           {"outputs", n_out},
           {"fake_quant", path_json(fake, "gamma_{n+1}(sum|x^ w^| + |b^|) + the bias's float32 rounding (Higham 3.1)")},
           {"integer", path_json(integer, "|acc| |M - s_x s_w / s_y| (the float32 multiplier's rounding)")},
           {"fake_quant_error_lsb", {{"max_abs", pre_max}, {"histogram", pre_json}}}});
  const bool bad = fake.unexpected || integer.unexpected;
  // Nothing compared is never a pass: when every exact quantized output is 0, any scale or
  // fold would have matched.
  out["verdict"] = bad ? "UNEXPECTED" : informative == 0 ? "MISTRUSTED" : "EXPECTED";
  return out;
}

}  // namespace foldcheck
