#include "foldcheck/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "foldcheck/errors.hpp"
#include "foldcheck/layer_math.hpp"

namespace foldcheck {

const char* name(Accumulation a) { return a == Accumulation::Sequential ? "sequential" : "pairwise"; }

Accumulation accumulation_from_name(const std::string& n) {
  if (n == "sequential") return Accumulation::Sequential;
  if (n == "pairwise") return Accumulation::Pairwise;
  throw InputError("unknown accumulation order '" + n + "' (expected sequential or pairwise)");
}

namespace {

unsigned thread_count(unsigned requested, std::int64_t work_items) {
  unsigned t = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::max<std::int64_t>(1, std::min<std::int64_t>(t, work_items)));
}

// Run f(o) for o in [0, O) over threads; each o is independent, so results are the
// same for any thread count.
template <class F>
void parallel_channels(std::int64_t O, unsigned threads, F f) {
  const unsigned nt = thread_count(threads, O);
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < nt; ++t)
    pool.emplace_back([&, t] {
      for (std::int64_t o = t; o < O; o += nt) f(o);
    });
  for (std::int64_t o = 0; o < O; o += nt) f(o);
  for (auto& th : pool) th.join();
}

template <class A>
A pairwise_sum(const A* p, std::size_t n) {
  if (n == 1) return p[0];
  const std::size_t h = (n + 1) / 2;
  return pairwise_sum(p, h) + pairwise_sum(p + h, n - h);
}

template <class A>
std::vector<double> conv_float(const Node& node, const std::vector<double>& xin, DType s, const Policy& p) {
  const ref::ConvGeometry& g = node.geometry;
  const std::vector<A> x(xin.begin(), xin.end());
  const std::vector<A> w(node.weight.data.begin(), node.weight.data.end());
  const std::int64_t OH = g.OH(), OW = g.OW(), cg = g.C / g.groups, og = g.O / g.groups;
  std::vector<double> out(static_cast<std::size_t>(g.output_size()));
  const bool has_bias = !node.bias.empty();
  parallel_channels(g.O, p.threads, [&](std::int64_t o) {
    std::vector<A> prods(static_cast<std::size_t>(g.terms_per_output()));
    const std::int64_t c0 = (o / og) * cg;
    const A bias = has_bias ? static_cast<A>(node.bias[o]) : A(0);
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          A acc = 0;
          std::size_t k = 0;
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t kh = 0; kh < g.KH; ++kh) {
              const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
              if (ih < 0 || ih >= g.H) continue;
              const A* xrow = &x[((n * g.C + c0 + ci) * g.H + ih) * g.W];
              const A* wrow = &w[((o * cg + ci) * g.KH + kh) * g.KW];
              for (std::int64_t kw = 0; kw < g.KW; ++kw) {
                const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
                if (iw < 0 || iw >= g.W) continue;
                const A prod = xrow[iw] * wrow[kw];
                if (p.accumulation == Accumulation::Sequential) acc = acc + prod;
                else prods[k++] = prod;
              }
            }
          if (p.accumulation == Accumulation::Pairwise && k > 0) acc = pairwise_sum(prods.data(), k);
          if (has_bias) acc = acc + bias;
          out[((n * g.O + o) * OH + oh) * OW + ow] = round_to(s, static_cast<double>(acc));
        }
  });
  return out;
}

template <class A>
std::vector<double> channelwise(const Node& node, const std::vector<double>& x, DType s, const Policy& p) {
  const ref::ConvGeometry& g = node.geometry;
  const std::int64_t plane = g.OH() * g.OW();
  const DType arith = info(s).arithmetic;
  std::vector<double> out(x.size());
  for (std::int64_t i = 0; i < static_cast<std::int64_t>(x.size()); ++i) {
    const std::size_t o = static_cast<std::size_t>((i / plane) % g.O);
    A v;
    if (node.kind == Node::Kind::BatchNorm) v = bn_apply<A>(static_cast<A>(x[i]), node.bn, o, p.bn_form, arith);
    else v = static_cast<A>(x[i]) + static_cast<A>(node.bias[o]);
    out[i] = round_to(s, static_cast<double>(v));
  }
  return out;
}

}  // namespace

std::vector<double> evaluate(const Graph& g, const std::vector<double>& x, const Policy& p) {
  const bool f64 = info(g.dtype).arithmetic == DType::Float64;
  std::vector<double> cur = x;
  for (const Node& n : g.nodes) {
    if (n.kind == Node::Kind::Conv) cur = f64 ? conv_float<double>(n, cur, g.dtype, p) : conv_float<float>(n, cur, g.dtype, p);
    else cur = f64 ? channelwise<double>(n, cur, g.dtype, p) : channelwise<float>(n, cur, g.dtype, p);
  }
  return cur;
}

double accumulation_roundings(Accumulation a, std::int64_t n, bool has_bias) {
  const double b = has_bias ? 1.0 : 0.0;
  if (a == Accumulation::Sequential) return static_cast<double>(n) + b;
  return std::ceil(std::log2(static_cast<double>(std::max<std::int64_t>(n, 1)))) + 1.0 + b;
}

double gamma_tilde(double k, double u, double lambda) {
  return round_up(std::expm1(lambda * std::sqrt(k) * u + k * u * u / (1 - u)));
}

double lambda_for(double k, double n_outputs, double u, double confidence) {
  // 2 k exp(-lambda^2 (1-u)^2 / 2) <= (1 - confidence) / n_outputs
  return std::sqrt(2.0 * std::log(2.0 * k * n_outputs / (1.0 - confidence))) / (1.0 - u);
}

namespace {

// What every bound of a graph shares: its leading Conv, the number k of roundings a term
// of the accumulation can suffer, and the arithmetic's parameters. Checked once.
struct AccumulationModel {
  const Node* conv;
  std::int64_t n_terms;
  double k;
  const DTypeInfo* arith;
};

AccumulationModel accumulation_model(const Graph& g, const Policy& p) {
  if (g.nodes.empty() || g.nodes.front().kind != Node::Kind::Conv)
    throw std::invalid_argument("error bounds: the graph must start with a Conv");
  const Node& conv = g.nodes.front();
  const std::int64_t n = conv.geometry.terms_per_output();
  return {&conv, n, accumulation_roundings(p.accumulation, n, !conv.bias.empty()), &info(info(g.dtype).arithmetic)};
}

std::string formula(const Graph& g, const Policy& p, const AccumulationModel& m) {
  return std::string("|y - y*| <= gamma_k (sum|x w'| + |b'|) + fold errors, then ") +
         (g.nodes.size() > 1 ? "the BatchNorm/add chain" : "storage") + " in running-error form; k = " +
         std::to_string(static_cast<long>(m.k)) + " (" + name(p.accumulation) + ", n = " + std::to_string(m.n_terms) +
         "), u = 2^" + std::to_string(-m.arith->precision);
}

// Per-element bounds, one vector for each accumulation coefficient in `coeffs` (gamma_k
// for the deterministic bound, min(gamma_k, gt_k(lambda)) for the probabilistic one),
// computed in a single pass over the outputs.
std::vector<std::vector<double>> bounds_with(const Graph& g, const ref::LayerResult& exact, const Policy& p,
                                             const AccumulationModel& m, std::initializer_list<double> coeffs) {
  const Node& conv = *m.conv;
  const ref::ConvGeometry& geo = conv.geometry;
  const DType s = g.dtype;
  const DTypeInfo& ai = *m.arith;
  const bool has_bias = !conv.bias.empty();
  const std::vector<double>& orig_bias = conv.fold ? conv.original_bias : conv.bias;
  const std::int64_t plane = geo.OH() * geo.OW();
  const double underflow = static_cast<double>(m.n_terms) * ai.underflow_eta;

  std::vector<std::vector<double>> bounds(coeffs.size(), std::vector<double>(exact.y.size()));
  for (std::size_t i = 0; i < exact.y.size(); ++i) {
    const std::size_t o = static_cast<std::size_t>((static_cast<std::int64_t>(i) / plane) % geo.O);
    const double A = exact.abs_sum[i], X = exact.abs_x_sum[i];
    std::size_t c = 0;
    for (const double gk : coeffs) {
      Bounded y;
      if (conv.fold) {
        const FoldInfo& f = *conv.fold;
        const double t = f.scale[o].mag(), alpha = f.weight_alpha[o], eta = f.weight_eta;
        const Bounded& b = f.bias[o];
        const double abs_xw = (t + alpha) * A + eta * X;  // >= sum |x_i w'_i| of the stored weights
        const double E = gk * (abs_xw + b.mag() + b.e) + alpha * A + eta * X + b.e + underflow * (1 + gk);
        const long double dot = static_cast<long double>(exact.conv[i]) - (orig_bias.empty() ? 0.0L : orig_bias[o]);
        y = Bounded::with_error(0.0, round_up(E), ai.dtype);
        y.v = f.scale[o].v * dot + b.v;
      } else {
        const double E = gk * (A + (has_bias ? std::fabs(conv.bias[o]) : 0.0)) + underflow * (1 + gk);
        y = Bounded::with_error(0.0, round_up(E), ai.dtype);
        y.v = static_cast<long double>(exact.conv[i]);
      }
      y = y.stored_as(s);
      for (std::size_t k = 1; k < g.nodes.size(); ++k) {
        const Node& n = g.nodes[k];
        if (n.kind == Node::Kind::BatchNorm) y = bn_apply<Bounded>(y, n.bn, o, p.bn_form, ai.dtype);
        else if (n.kind == Node::Kind::ChannelAdd) y = y + conv.fold->post_add[o];
        else throw std::invalid_argument("error bounds: only Conv -> {BatchNorm, ChannelAdd} chains");
        y = y.stored_as(s);
      }
      bounds[c++][i] = y.e;
    }
  }
  return bounds;
}

}  // namespace

BoundReport deterministic_bound(const Graph& g, const ref::LayerResult& exact, const Policy& p) {
  const AccumulationModel m = accumulation_model(g, p);
  BoundReport r;
  r.bound = std::move(bounds_with(g, exact, p, m, {gamma_k(m.k, m.arith->unit_roundoff)})[0]);
  r.formula = formula(g, p, m);
  return r;
}

BoundReport error_bounds(const Graph& g, const ref::LayerResult& exact, const Policy& p, double confidence) {
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("confidence must be in (0, 1)");
  const AccumulationModel m = accumulation_model(g, p);
  const double u = m.arith->unit_roundoff;
  BoundReport r;
  r.formula = formula(g, p, m);
  r.confidence = confidence;
  r.lambda = lambda_for(m.k, static_cast<double>(std::max<std::size_t>(exact.y.size(), 1)), u, confidence);
  const double det = gamma_k(m.k, u);
  auto both = bounds_with(g, exact, p, m, {det, std::min(det, gamma_tilde(m.k, u, r.lambda))});
  r.bound = std::move(both[0]);
  r.probabilistic = std::move(both[1]);
  return r;
}

}  // namespace foldcheck
