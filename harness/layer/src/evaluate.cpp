#include "foldcheck/layer/evaluate.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <thread>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/layer_math.hpp"
#include "conv_kernels.hpp"
#include "conv_rows.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck {

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

// The stored value of an accumulator in storage type s: exact, with no rounding to do, when
// s is the arithmetic type A itself (round_to would return it unchanged).
template <class A>
bool stored_as_is(DType s) {
  return (std::is_same_v<A, float> && s == DType::Float32) || (std::is_same_v<A, double> && s == DType::Float64);
}
template <class A>
double stored(DType s, A v) {
  return stored_as_is<A>(s) ? static_cast<double>(v) : round_to(s, static_cast<double>(v));
}

template <class A>
std::vector<double> conv_float(const Node& node, const std::vector<double>& xin, DType s, const Policy& p) {
  const ref::ConvGeometry& g = node.geometry;
  const std::vector<A> w(node.weight.data.begin(), node.weight.data.end());
  const std::vector<A> bias(node.bias.begin(), node.bias.end());
  const bool sequential = p.order.kind == Accumulation::Sequential && !p.arith.fma;
  if (sequential) {
    // The channel-lane kernels where they apply, else the row kernels below (conv_rows.hpp):
    // the same operations per output. Their level is chosen here, so that a FOLDCHECK_ISA
    // the CPU lacks throws here, not in a worker thread.
    (void)ref::isa_level();
    if (std::vector<double> y; detail::conv_lanes(g, xin, w, bias, p.threads, y, p.order.bias_first)) {
      if (!stored_as_is<A>(s))
        for (double& v : y) v = round_to(s, v);
      return y;
    }
  }
  const std::vector<A> x(xin.begin(), xin.end());
  auto bias_of = [&](std::int64_t o) -> const A* { return bias.empty() ? nullptr : &bias[o]; };
  const std::int64_t OH = g.OH(), OW = g.OW(), cg = g.C / g.groups;
  std::vector<double> out(static_cast<std::size_t>(g.output_size()));
  const bool fma = p.arith.fma;
  if (p.order.kind == Accumulation::Winograd) {
    check_order(p.order, g);
    std::vector<A> U(static_cast<std::size_t>(g.O * cg * 16));
    for (std::int64_t k = 0; k < g.O * cg; ++k) detail::winograd_filter(&w[k * 9], &U[k * 16]);
    parallel_channels(g.O, p.threads, [&](std::int64_t o) {
      A tile[4];
      for (std::int64_t n = 0; n < g.N; ++n)
        for (std::int64_t oh = 0; oh < OH; oh += 2)
          for (std::int64_t ow = 0; ow < OW; ow += 2) {
            detail::winograd_tile(g, x.data(), &U[o * cg * 16], bias_of(o), fma, n, o, oh, ow, tile);
            for (int i = 0; i < 2 && oh + i < OH; ++i)
              for (int j = 0; j < 2 && ow + j < OW; ++j)
                out[((n * g.O + o) * OH + oh + i) * OW + ow + j] = stored(s, tile[i * 2 + j]);
          }
    });
    return out;
  }
  if (sequential && !p.order.bias_first) {  // the row kernels add the bias last
    parallel_channels(g.O, p.threads, [&](std::int64_t o) {
      std::vector<A> acc(static_cast<std::size_t>(OW));
      for (std::int64_t n = 0; n < g.N; ++n)
        for (std::int64_t oh = 0; oh < OH; ++oh) {
          if constexpr (std::is_same_v<A, float>)
            detail::sequential_row_f32(g, x.data(), &w[o * g.terms_per_output()], bias_of(o), n, o, oh, acc.data());
          else
            detail::sequential_row_f64(g, x.data(), &w[o * g.terms_per_output()], bias_of(o), n, o, oh, acc.data());
          for (std::int64_t ow = 0; ow < OW; ++ow)
            out[((n * g.O + o) * OH + oh) * OW + ow] = stored(s, acc[ow]);
        }
    });
    return out;
  }
  parallel_channels(g.O, p.threads, [&](std::int64_t o) {
    std::vector<A> prods(static_cast<std::size_t>(g.terms_per_output()));
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const A acc = detail::conv_output(g, x.data(), &w[o * g.terms_per_output()], bias_of(o), p.order, fma, n, o,
                                            oh, ow, prods.data());
          out[((n * g.O + o) * OH + oh) * OW + ow] = stored(s, acc);
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
    if (node.kind == Node::Kind::BatchNorm) v = bn_apply<A>(static_cast<A>(x[i]), node.bn, o, p.bn_form, p.arith, arith);
    else v = static_cast<A>(x[i]) + static_cast<A>(node.bias[o]);
    out[i] = stored(s, v);
  }
  return out;
}

// One NaN for every NaN result. IEEE 754 leaves which NaN an operation on two NaNs returns
// to the implementation, and x86 returns its first operand's, so the order in which the
// compiler places the operands of a commutative add (which differs between the kernels'
// levels) would show in the sign bit: the stored result is the positive canonical quiet NaN
// (std::numeric_limits<double>::quiet_NaN()) instead, and every level and kernel gives the
// same bits.
void canonical_nans(std::vector<double>& v) {
  for (double& e : v)
    if (e != e) e = std::numeric_limits<double>::quiet_NaN();
}

// The conv's input channels permuted within each group (Policy::permute): its weights and x
// reordered alike, so the same products are summed in another order.
void permute_inputs(Node& conv, std::vector<double>& x, std::uint64_t seed) {
  const ref::ConvGeometry& geo = conv.geometry;
  const std::int64_t cg = geo.C / geo.groups, hw = geo.H * geo.W, khw = geo.KH * geo.KW;
  std::vector<std::int64_t> perm(static_cast<std::size_t>(cg));
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(perm.begin(), perm.end(), rng);
  const std::vector<double> w = conv.weight.data, x0 = x;
  std::vector<double>& wp = conv.weight.data;
  for (std::int64_t o = 0; o < geo.O; ++o)
    for (std::int64_t ci = 0; ci < cg; ++ci)
      std::copy_n(w.begin() + (o * cg + perm[ci]) * khw, khw, wp.begin() + (o * cg + ci) * khw);
  for (std::int64_t n = 0; n < geo.N; ++n)
    for (std::int64_t gr = 0; gr < geo.groups; ++gr)
      for (std::int64_t ci = 0; ci < cg; ++ci)
        std::copy_n(x0.begin() + ((n * geo.C) + gr * cg + perm[ci]) * hw, hw,
                    x.begin() + ((n * geo.C) + gr * cg + ci) * hw);
}

}  // namespace

std::vector<double> evaluate(const Graph& g, const std::vector<double>& x, const Policy& p) {
  const bool f64 = info(g.dtype).arithmetic == DType::Float64;
  if (g.nodes.empty()) return x;
  std::vector<double> cur;
  const std::vector<double>* in = &x;  // the first node reads x itself (no copy of the input)
  for (const Node& n : g.nodes) {
    if (n.kind == Node::Kind::Conv && (p.arith.conv_operands.operands() || p.permute)) {
      // The conv's input channels permuted, then its operands converted (Arithmetic::
      // conv_operands): its input and weights.
      Node cn = n;
      std::vector<double> xc = *in;
      if (p.permute) permute_inputs(cn, xc, p.permute);
      if (const std::optional<OperandFormat> f = p.arith.conv_operands.operands()) {
        for (double& v : cn.weight.data) v = std::isfinite(v) ? convert(v, *f, p.arith.conversion) : v;
        for (double& v : xc) v = std::isfinite(v) ? convert(v, *f, p.arith.conversion) : v;
      }
      cur = f64 ? conv_float<double>(cn, xc, g.dtype, p) : conv_float<float>(cn, xc, g.dtype, p);
    } else if (n.kind == Node::Kind::Conv) {
      cur = f64 ? conv_float<double>(n, *in, g.dtype, p) : conv_float<float>(n, *in, g.dtype, p);
    } else cur = f64 ? channelwise<double>(n, *in, g.dtype, p) : channelwise<float>(n, *in, g.dtype, p);
    canonical_nans(cur);
    in = &cur;
  }
  return cur;
}

double accumulation_roundings(const Order& o, const ref::ConvGeometry& g, bool has_bias) {
  const double b = has_bias ? 1.0 : 0.0;
  const std::int64_t n = std::max<std::int64_t>(g.terms_per_output(), 1);
  switch (o.kind) {
    case Accumulation::Sequential: return static_cast<double>(n) + b;
    case Accumulation::Pairwise: return std::ceil(std::log2(static_cast<double>(n))) + 1.0 + b;
    case Accumulation::Blocked: {
      const std::int64_t kb = std::min(o.block, n);
      return static_cast<double>(kb + (n + o.block - 1) / o.block) + b;
    }
    case Accumulation::Winograd: return static_cast<double>(g.C / g.groups) + 11.0 + b;
  }
  return 0;
}

std::vector<double> winograd_magnitudes(const ref::ConvGeometry& g, const std::vector<double>& x,
                                        const std::vector<double>& w) {
  // The transforms on absolute values: with |G| = [[1,0,0],[1/2,1/2,1/2],[1/2,1/2,1/2],[0,0,1]],
  // |B^T| and |A^T| (all entries 0 or 1), every "a - b" becomes "a + b". Evaluated in
  // double on non-negative numbers: each value carries relative error <= gamma_m(2^-53)
  // with m <= C/groups + 16, covered by the final factor.
  const std::int64_t OH = g.OH(), OW = g.OW(), cg = g.C / g.groups, og = g.O / g.groups;
  std::vector<double> ax(x.size()), U(static_cast<std::size_t>(g.O * cg * 16));
  for (std::size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
  for (std::int64_t k = 0; k < g.O * cg; ++k) {
    double ag[9];
    for (int i = 0; i < 9; ++i) ag[i] = std::fabs(w[k * 9 + i]);
    double S[4][3];
    for (int j = 0; j < 3; ++j) {
      S[0][j] = ag[j];
      S[1][j] = S[2][j] = ((ag[j] + ag[3 + j]) + ag[6 + j]) * 0.5;
      S[3][j] = ag[6 + j];
    }
    for (int i = 0; i < 4; ++i) {
      U[k * 16 + i * 4 + 0] = S[i][0];
      U[k * 16 + i * 4 + 1] = U[k * 16 + i * 4 + 2] = ((S[i][0] + S[i][1]) + S[i][2]) * 0.5;
      U[k * 16 + i * 4 + 3] = S[i][2];
    }
  }
  const double slack = 1.0 + static_cast<double>(cg + 24) * 0x1p-52;
  std::vector<double> out(static_cast<std::size_t>(g.output_size()));
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.O; ++o)
      for (std::int64_t oh = 0; oh < OH; oh += 2)
        for (std::int64_t ow = 0; ow < OW; ow += 2) {
          double M[16] = {};
          const std::int64_t c0 = (o / og) * cg;
          for (std::int64_t ci = 0; ci < cg; ++ci) {
            double d[4][4], T[4][4];
            for (int i = 0; i < 4; ++i)
              for (int j = 0; j < 4; ++j) {
                const std::int64_t ih = oh - g.pad_top + i, iw = ow - g.pad_left + j;
                d[i][j] = (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) ? 0.0 : ax[((n * g.C + c0 + ci) * g.H + ih) * g.W + iw];
              }
            for (int j = 0; j < 4; ++j) {
              T[0][j] = d[0][j] + d[2][j];
              T[1][j] = T[2][j] = d[1][j] + d[2][j];
              T[3][j] = d[1][j] + d[3][j];
            }
            const double* u = &U[(o * cg + ci) * 16];
            for (int i = 0; i < 4; ++i) {
              const double V[4] = {T[i][0] + T[i][2], T[i][1] + T[i][2], T[i][1] + T[i][2], T[i][1] + T[i][3]};
              for (int j = 0; j < 4; ++j) M[i * 4 + j] += u[i * 4 + j] * V[j];
            }
          }
          double Z[2][4];
          for (int j = 0; j < 4; ++j) {
            Z[0][j] = (M[j] + M[4 + j]) + M[8 + j];
            Z[1][j] = (M[4 + j] + M[8 + j]) + M[12 + j];
          }
          for (int i = 0; i < 2 && oh + i < OH; ++i) {
            const double y0 = (Z[i][0] + Z[i][1]) + Z[i][2], y1 = (Z[i][1] + Z[i][2]) + Z[i][3];
            out[((n * g.O + o) * OH + oh + i) * OW + ow] = y0 * slack;
            if (ow + 1 < OW) out[((n * g.O + o) * OH + oh + i) * OW + ow + 1] = y1 * slack;
          }
        }
  return out;
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
// of the accumulation can suffer, the number of rounding-error products the
// probabilistic union bound covers per output (n terms; Winograd: 324 C/groups, the
// monomials of one output: 9 M entries x C/groups x 9 filter x 4 data terms), and, for
// Winograd, W(|x|, |w|) per output. Checked once.
struct AccumulationModel {
  const Node* conv;
  std::int64_t n_terms;
  double k, union_terms;
  const DTypeInfo* arith;
  std::vector<double> winograd;  // empty unless Winograd
  // Converted conv operands (Arithmetic::conv_operands): the general bound, and its absolute
  // part per output channel (sum_ch |w| of the conv's weights, max |x|).
  std::optional<GeneralConvBound> general;
  std::vector<double> operand_underflow;  // per output channel
};

// The conversions' terms of Arithmetic::conv_operands (none for float32 operands).
void operand_terms(const Policy& p, const Node& conv, const std::vector<double>* x, AccumulationModel& m) {
  const ConvArithmetic& a = p.arith.conv_operands;
  if (!a.operands()) return;
  if (!x) throw std::invalid_argument("error bounds: converted operands need the input");
  m.general = general_conv_bound(a, static_cast<double>(m.n_terms));
  if (!m.general) throw InputError(std::string(a.name()) + ": no bound (gamma_k of its accumulation is undefined)");
  m.operand_underflow =
      m.general->underflow_per_channel(conv.weight.data, static_cast<std::size_t>(conv.geometry.terms_per_output()),
                                       *x);
}

// The conversions' part of a conv output's error: (2 e + e^2) M + gk (2 e + e^2) M (the sums'
// gk on sum|x^ w^| <= (1 + e)^2 M instead of M) + the absolute part; M = sum|x w| (or
// Winograd's W, which bounds it: the transforms run on the converted operands). gk: the path's
// own (deterministic or probabilistic) coefficient.
double operand_error(const AccumulationModel& m, double gk, double M, std::size_t o) {
  if (!m.general) return 0;
  return (m.general->relative(gk) - gk) * M + m.operand_underflow[o];
}

AccumulationModel accumulation_model(const Graph& g, const Policy& p, const std::vector<double>* x) {
  if (g.nodes.empty() || g.nodes.front().kind != Node::Kind::Conv)
    throw std::invalid_argument("error bounds: the graph must start with a Conv");
  const Node& conv = g.nodes.front();
  AccumulationModel m{&conv, conv.geometry.terms_per_output(),
                      accumulation_roundings(p.order, conv.geometry, !conv.bias.empty()), 0.0,
                      &info(info(g.dtype).arithmetic), {}};
  m.union_terms = static_cast<double>(m.n_terms);
  if (p.order.kind == Accumulation::Winograd) {
    if (!x) throw std::invalid_argument("error bounds: Winograd bounds need the input");
    check_order(p.order, conv.geometry);
    m.winograd = winograd_magnitudes(conv.geometry, *x, conv.weight.data);
    m.union_terms = 324.0 * static_cast<double>(conv.geometry.C / conv.geometry.groups);
  }
  operand_terms(p, conv, x, m);
  return m;
}

std::string formula(const Graph& g, const Policy& p, const AccumulationModel& m) {
  const std::string mag = m.winograd.empty() ? "sum|x w'|" : "W(|x|,|w'|)";
  return "|y - y*| <= gamma_k (" + mag + " + |b'|) + fold errors, then " +
         (g.nodes.size() > 1 ? "the BatchNorm/add chain" : "storage") +
         " in running-error form; k = " + std::to_string(static_cast<long>(m.k)) + " (" + p.order.label() +
         ", n = " + std::to_string(m.n_terms) + "), u = 2^" + std::to_string(-m.arith->precision) +
         (p.arith.label() == "default" ? "" : ", " + p.arith.label()) +
         (m.general ? "; operands converted (" + p.arith.conv_operands.description() + "): + (2e + e^2)(1 + gamma_k) " +
                          mag + " + their underflow, e = 2^" + std::to_string(static_cast<int>(std::log2(m.general->e)))
                    : "");
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
  const double underflow = m.union_terms * ai.underflow_eta;
  const bool wino = !m.winograd.empty();

  std::vector<std::vector<double>> bounds(coeffs.size(), std::vector<double>(exact.y.size()));
  for (std::size_t i = 0; i < exact.y.size(); ++i) {
    const std::size_t o = geo.output_channel(i);
    const double A = exact.abs_sum[i], X = exact.abs_x_sum[i];
    std::size_t c = 0;
    for (const double gk : coeffs) {
      Bounded y;
      if (conv.fold) {
        const FoldInfo& f = *conv.fold;
        const double t = f.scale[o].mag(), alpha = f.weight_alpha[o], eta = f.weight_eta;
        const Bounded& b = f.bias[o];
        // >= sum |x_i w'_i| of the stored weights (or their Winograd magnitude)
        const double abs_xw = wino ? m.winograd[i] : (t + alpha) * A + eta * X;
        // exact.conv is within conv_radius of the exact conv: carried as extra error of y.v.
        const double E = gk * (abs_xw + b.mag() + b.e) + alpha * A + eta * X + b.e + underflow * (1 + gk) +
                         (t + f.scale[o].e) * exact.conv_radius[i] + operand_error(m, gk, abs_xw, o);
        const long double dot = static_cast<long double>(exact.conv[i]) - (orig_bias.empty() ? 0.0L : orig_bias[o]);
        y = Bounded::with_error(0.0, round_up(E), ai.dtype);
        y.v = f.scale[o].v * dot + b.v;
      } else {
        const double E = gk * ((wino ? m.winograd[i] : A) + (has_bias ? std::fabs(conv.bias[o]) : 0.0)) +
                         underflow * (1 + gk) + exact.conv_radius[i] +
                         operand_error(m, gk, wino ? m.winograd[i] : A, o);
        y = Bounded::with_error(0.0, round_up(E), ai.dtype);
        y.v = static_cast<long double>(exact.conv[i]);
      }
      y = y.stored_as(s);
      for (std::size_t k = 1; k < g.nodes.size(); ++k) {
        const Node& n = g.nodes[k];
        if (n.kind == Node::Kind::BatchNorm) y = bn_apply<Bounded>(y, n.bn, o, p.bn_form, p.arith, ai.dtype);
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

BoundReport deterministic_bound(const Graph& g, const ref::LayerResult& exact, const Policy& p,
                                const std::vector<double>* x) {
  const AccumulationModel m = accumulation_model(g, p, x);
  BoundReport r;
  r.bound = std::move(bounds_with(g, exact, p, m, {gamma_k(m.k, m.arith->unit_roundoff)})[0]);
  r.formula = formula(g, p, m);
  return r;
}

BoundReport error_bounds(const Graph& g, const ref::LayerResult& exact, const Policy& p, double confidence,
                         const std::vector<double>* x) {
  if (!(confidence > 0 && confidence < 1)) throw std::invalid_argument("confidence must be in (0, 1)");
  const AccumulationModel m = accumulation_model(g, p, x);
  const double u = m.arith->unit_roundoff;
  BoundReport r;
  r.formula = formula(g, p, m);
  r.confidence = confidence;
  r.lambda = lambda_for(m.union_terms, static_cast<double>(std::max<std::size_t>(exact.y.size(), 1)), u, confidence);
  const double det = gamma_k(m.k, u);
  auto both = bounds_with(g, exact, p, m, {det, std::min(det, gamma_tilde(m.k, u, r.lambda))});
  r.bound = std::move(both[0]);
  r.probabilistic = std::move(both[1]);
  return r;
}

}  // namespace foldcheck
