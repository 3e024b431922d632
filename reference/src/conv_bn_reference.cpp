#include "foldcheck/reference/conv_bn_reference.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>

#include "foldcheck/reference/dd_arith.hpp"
#include "fast_conv.hpp"
#include "parallel.hpp"

namespace foldcheck::ref {
namespace {


// scale = gamma / sqrt(var + eps) as an enclosure at precision p.
// sqrt(var + eps), at r's precision.
void root_interval(Interval& r, double var, double eps) {
  add(r, Interval(r.precision(), var), Interval(r.precision(), eps));
  if (mpfr_sgn(r.lo()) <= 0) throw std::domain_error("var + eps <= 0");
  sqrt(r, r);
}

void scale_interval(Interval& s, double gamma, double var, double eps) {
  Interval t(s.precision());
  root_interval(t, var, eps);
  div(s, Interval(s.precision(), gamma), t);
}

// y = ((c - mean)·gamma) / sqrt(var + eps) + beta on an enclosure c of the conv output.
// The order makes every value that is a rounding tie exact (a point interval, which
// certify() always certifies): if y is a dyadic rational m (a tie of some format is one),
// sqrt(var + eps) = (c - mean)·gamma / (m - beta) is rational, hence dyadic (var + eps is),
// so the subtraction, product, square root and quotient are all exact at a high enough
// precision. With the scale gamma / sqrt(var + eps) formed first, a non-dyadic scale (e.g.
// -7/12) leaves an interval around the tie at every precision: certify() never ends.
void bn_interval(Interval& y, const Interval& c, double gamma, double beta, double mean, double var,
                 double eps) {
  const long p = y.precision();
  Interval m(p, mean), b(p, beta), g(p, gamma), root(p);
  root_interval(root, var, eps);
  sub(y, c, m);
  mul(y, y, g);
  div(y, y, root);
  add(y, y, b);
}

// Scratch for one thread: the exact products of one output window.
struct Window {
  std::vector<MpNumber> terms;
  std::vector<mpfr_ptr> ptrs;
  std::size_t n = 0;
  double abs_sum = 0.0, abs_x_sum = 0.0;
};

// The BatchNorm scale gamma / sqrt(var + eps) as a double-double t with |t - scale| <= rad,
// from a 128-bit interval (its width, ~2^-126 relative, and the double-double's own
// 2^-107 both sit in rad).
struct ScaleEnclosure {
  dd::DD t;
  double rad = 0;
};
ScaleEnclosure scale_enclosure(double gamma, double var, double eps) {
  Interval s(128);
  scale_interval(s, gamma, var, eps);
  const DoubleDouble m = midpoint(s);
  return {{m.hi, m.lo}, radius_of(s, m)};
}

using detail::parallel;
using detail::thread_count;

class ConvBnEvaluator {
 public:
  ConvBnEvaluator(const LayerData& layer, const Options& opts) : L(layer), g(layer.geometry), opts(opts) {
    validate();
    fast_products = detail::all_float32(*L.x, opts.threads) && detail::all_float32(*L.w, opts.threads);
    product_precision = fast_products ? 53 : 106;
  }

  LayerResult run() {
    LayerResult r;
    const std::int64_t total = g.output_size();
    if (opts.bound_data) {
      r.conv.resize(total);
      r.conv_radius.resize(total);
      r.abs_sum.resize(total);
      r.abs_x_sum.resize(total);
    }
    unsigned nt = thread_count(opts.threads, static_cast<std::size_t>(total));
    // The fast path: float32 data, and no float64 rounding to certify (its enclosure is
    // about 2^-40 relative: enough for float32 and narrower, never for float64).
    const bool use_fast = opts.fast && fast_products && !(opts.formats & format_bit(kFloat64)) &&
                          (!L.bias || detail::all_float32(*L.bias)) && detail::fast_panel_fits(g);
    // The fast path writes binary64 approximations (a narrow array, widened for the
    // multiprecision path's 106-bit ones if any output needs it).
    r.y = ValueArray(static_cast<std::size_t>(total), opts.formats, use_fast ? ValueArray::kNarrow : ValueArray::kWide);
    std::vector<std::int64_t> slow;
    if (use_fast) {
      detail::FastLayer f;
      f.g = &g;
      f.x = L.x;
      f.w = L.w;
      f.formats = opts.formats;
      f.threads = nt;
      // Per-layer factors (each product below also picks up one rounding, covered by the
      // (1 + 2^-50) margins): gamma_K = K u / (1 - K u) with u = 2^-53.
      const double K = static_cast<double>(g.terms_per_output()), u = 0x1p-53;
      const double gam = K * u / (1 - K * u) * (1 + 0x1p-50);
      f.abs_factor = 1 / (1 - gam) * (1 + 0x1p-50);
      f.radius_factor = gam * f.abs_factor * (1 + 0x1p-50);
      f.gamma = gam;
      f.abs_x_factor = 1.0 + (K + 1) * 0x1p-52;
      f.channel = [this](std::int64_t o) { return fast_channel(o); };
      detail::FastOut out{&r.y};
      if (opts.bound_data) out = {&r.y, r.conv.data(), r.conv_radius.data(), r.abs_sum.data(), r.abs_x_sum.data()};
      detail::FastResult fr = detail::fast_conv_bn(f, out);
      slow = std::move(fr.uncertified);
      r.fast_certified = total - static_cast<std::int64_t>(slow.size());
      r.compensated = fr.compensated;
      r.fallbacks = static_cast<std::int64_t>(slow.size());
    } else {
      slow.resize(static_cast<std::size_t>(total));
      for (std::int64_t i = 0; i < total; ++i) slow[static_cast<std::size_t>(i)] = i;
    }
    // The multiprecision path for the outputs the fast path did not certify (or all).
    if (!slow.empty()) r.y.widen();
    nt = thread_count(opts.threads, slow.size());
    std::vector<std::int64_t> esc(nt, 0);
    std::vector<long> maxp(nt, 0);
    if (!slow.empty()) parallel(nt, [&](unsigned t) {
      Window win = make_window();
      Interval yi(opts.precision);
      for (std::size_t k = t; k < slow.size(); k += nt) exact_output(slow[k], r, win, yi, esc[t], maxp[t]);
    });
    for (unsigned t = 0; t < nt; ++t) {
      r.escalations += esc[t];
      r.max_precision_used = std::max(r.max_precision_used, maxp[t]);
    }
    return r;
  }

 private:
  void validate() const {
    if (!L.x || !L.w) throw std::invalid_argument("reference: missing input or weights");
    if (g.groups <= 0 || g.C % g.groups || g.O % g.groups)
      throw std::invalid_argument("reference: channels not divisible by groups");
    if (g.OH() <= 0 || g.OW() <= 0) throw std::invalid_argument("reference: empty output");
    if (static_cast<std::int64_t>(L.x->size()) != g.N * g.C * g.H * g.W)
      throw std::invalid_argument("reference: input size does not match geometry");
    if (static_cast<std::int64_t>(L.w->size()) != g.O * g.terms_per_output())
      throw std::invalid_argument("reference: weight size does not match geometry");
    if (L.bias && static_cast<std::int64_t>(L.bias->size()) != g.O)
      throw std::invalid_argument("reference: bias size does not match output channels");
    if (L.bn) {
      const auto O = static_cast<std::size_t>(g.O);
      if (L.bn->gamma.size() != O || L.bn->beta.size() != O || L.bn->mean.size() != O || L.bn->var.size() != O)
        throw std::invalid_argument("reference: BatchNorm parameter size does not match output channels");
      // var + eps of two doubles has the sign of its rounded sum (0 only if exactly 0).
      for (std::size_t o = 0; o < O; ++o)
        if (!(L.bn->var[o] + L.bn->eps > 0)) throw std::domain_error("var + eps <= 0");
    }
  }

  // Gather the exact products of output (n, o, oh, ow) into `win`, in (c, kh, kw) order,
  // skipping padded positions (they contribute exact zeros).
  void gather(Window& win, std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow) const {
    win.n = 0;
    double abs_sum = 0.0, abs_x = 0.0;
    for_each_window_term(g, n, o, oh, ow, [&](std::size_t xi, std::size_t wi) {
      const double xv = (*L.x)[xi], wv = (*L.w)[wi];
      mpfr_ptr t = win.terms[win.n].get();
      if (fast_products) {
        mpfr_set_d(t, xv * wv, MPFR_RNDN);  // exact: see the header comment
      } else {
        mpfr_set_d(t, xv, MPFR_RNDN);
        mpfr_mul_d(t, t, wv, MPFR_RNDN);  // exact at 106 bits
      }
      abs_sum += std::fabs(xv * wv);
      abs_x += std::fabs(xv);
      ++win.n;
    });
    if (L.bias) mpfr_set_d(win.terms[win.n++].get(), (*L.bias)[o], MPFR_RNDN);
    // Sums of non-negative doubles: relative error below (1+2^-53)^n - 1 <= n·2^-52
    // for n·2^-53 < 1/2; inflate to an upper bound.
    const double inflate = 1.0 + static_cast<double>(win.n + 1) * 0x1p-52;
    win.abs_sum = abs_sum * inflate;
    win.abs_x_sum = abs_x * inflate;
  }

  // Enclose output channel o's value for the window at precision p. If conv_out is given,
  // it also receives the window's sum (conv + bias) rounded to double, from the same sum.
  void enclose(Interval& y, Window& win, std::int64_t o, long p, double* conv_out = nullptr) const {
    Interval c(p);
    MpNumber s(p);
    const int ternary = mpfr_sum(s.get(), win.ptrs.data(), win.n, MPFR_RNDN);
    if (conv_out) *conv_out = s.to_double();
    c.set_from_ternary(s.get(), ternary);
    if (L.bn)
      bn_interval(y, c, L.bn->gamma[o], L.bn->beta[o], L.bn->mean[o], L.bn->var[o], L.bn->eps);
    else {
      mpfr_set(y.lo(), c.lo(), MPFR_RNDD);
      mpfr_set(y.hi(), c.hi(), MPFR_RNDU);
    }
  }

  // The fast path's data for channel o: the BatchNorm scale enclosure (its radius far below
  // the ~2^-100 the second tier needs) and the other parameters. Does not throw for a
  // validated layer (validate() has checked var + eps > 0).
  detail::ChannelAffine fast_channel(std::int64_t o) const {
    detail::ChannelAffine c;
    c.bias = L.bias ? (*L.bias)[o] : 0.0;
    if (!L.bn) return c;
    const ScaleEnclosure s = scale_enclosure(L.bn->gamma[o], L.bn->var[o], L.bn->eps);
    c.has_bn = true;
    c.t_hi = s.t.hi;
    c.t_lo = s.t.lo;
    c.t_rad = s.rad;
    c.mean = L.bn->mean[o];
    c.beta = L.bn->beta[o];
    return c;
  }

  Window make_window() const {
    Window win;
    const std::size_t cap = static_cast<std::size_t>(g.terms_per_output()) + 1;
    win.terms.reserve(cap);
    for (std::size_t i = 0; i < cap; ++i) win.terms.emplace_back(product_precision);
    for (auto& t : win.terms) win.ptrs.push_back(t.get());
    return win;
  }

  // Output idx (NCHW) on the multiprecision path: its exact products, one correctly rounded
  // long sum (mpfr_sum), the BatchNorm in interval arithmetic; precision doubled until
  // every requested format certifies.
  void exact_output(std::int64_t idx, LayerResult& r, Window& win, Interval& y, std::int64_t& escalations,
                    long& maxp) const {
    const auto [n, o, oh, ow] = output_index(g, idx);
    gather(win, n, o, oh, ow);
    double conv = 0;
    enclose(y, win, o, opts.precision, &conv);
    if (opts.bound_data) {
      r.abs_sum[idx] = win.abs_sum;
      r.abs_x_sum[idx] = win.abs_x_sum;
      r.conv[idx] = conv;
      r.conv_radius[idx] = std::fabs(conv) * 0x1p-53 * (1 + 0x1p-50) + 0x1p-1074;
    }
    Value v;
    if (!try_certify(y, v, opts.formats)) {
      ++escalations;
      const std::int64_t channel = o;  // a structured binding cannot be captured before C++20 in clang 14
      v = certify([&](Interval& out, long p) { enclose(out, win, channel, p); },
                  Options{opts.precision * 2, opts.max_precision, 1, opts.formats, false});
    }
    maxp = std::max(maxp, v.precision_used);
    r.y.set(static_cast<std::size_t>(idx), v);
  }

  const LayerData& L;
  const ConvGeometry& g;
  Options opts;
  bool fast_products = true;
  long product_precision = 53;
};

}  // namespace

LayerResult conv_bn(const LayerData& layer, const Options& opts) {
  return ConvBnEvaluator(layer, opts).run();
}

Value fold_scale(double gamma, double var, double eps, const Options& opts) {
  return certify([&](Interval& s, long) { scale_interval(s, gamma, var, eps); }, opts);
}

// (w·gamma) / sqrt(var + eps): the order that makes a tie exact (bn_interval).
Value fold_weight(double w, double gamma, double var, double eps, const Options& opts) {
  return certify(
      [&](Interval& out, long p) {
        Interval wg(p, w), root(p);
        mul(wg, wg, Interval(p, gamma));
        root_interval(root, var, eps);
        div(out, wg, root);
      },
      opts);
}

Value fold_bias(double b, double gamma, double beta, double mean, double var, double eps,
                const Options& opts) {
  return certify(
      [&](Interval& out, long p) {
        Interval c(p, b);
        bn_interval(out, c, gamma, beta, mean, var, eps);
      },
      opts);
}

ValueArray fold_weights(const std::vector<double>& w, std::int64_t per_channel, const BnParams& bn,
                        const Options& opts) {
  if (per_channel <= 0 || w.size() % static_cast<std::size_t>(per_channel))
    throw std::invalid_argument("fold_weights: weight count not a multiple of per_channel");
  const std::size_t channels = w.size() / static_cast<std::size_t>(per_channel);
  if (bn.gamma.size() != channels || bn.var.size() != channels)
    throw std::invalid_argument("fold_weights: BatchNorm parameter size does not match the channels");
  ValueArray out(w.size(), opts.formats);
  const unsigned nt = thread_count(opts.threads, channels);
  parallel(nt, [&](unsigned t) {
    for (std::size_t o = t; o < channels; o += nt) {
      const ScaleEnclosure sc = scale_enclosure(bn.gamma[o], bn.var[o], bn.eps);
      const dd::DD& scale = sc.t;
      const double srad = sc.rad;
      for (std::size_t k = o * static_cast<std::size_t>(per_channel); k < (o + 1) * static_cast<std::size_t>(per_channel); ++k) {
        // p = w * scale in double-double: |p - w * scale| <= kOpRel |p|; the scale's
        // radius adds |w| srad; the factor and the last term cover evaluating r itself.
        const dd::DD p = dd::times_dd(dd::DD{w[k], 0.0}, scale);
        const double r0 = dd::kOpRel * dd::mag(p) + std::fabs(w[k]) * srad;
        const double r = r0 * (1 + 0x1p-40) + 0x1p-1070;
        Value v;
        v.rounded.fill(std::numeric_limits<double>::quiet_NaN());
        if (std::isfinite(w[k]) && detail::certify_cells(p.hi, p.lo, r, opts.formats, v.rounded)) {
          v.approx = {p.hi, p.lo};
          v.radius = r;
          v.certified = opts.formats;
        } else {
          v = fold_weight(w[k], bn.gamma[o], bn.var[o], bn.eps, opts);
        }
        out.set(k, v);
      }
    }
  });
  return out;
}

}  // namespace foldcheck::ref
