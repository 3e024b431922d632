#include "foldcheck/reference/conv_bn_reference.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>

#include "foldcheck/reference/dd_arith.hpp"
#include "fast_conv.hpp"

namespace foldcheck::ref {
namespace {

bool all_float32(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(),
                     [](double d) { return static_cast<double>(static_cast<float>(d)) == d || std::isnan(d); });
}

// scale = gamma / sqrt(var + eps) as an enclosure at precision p.
void scale_interval(Interval& s, double gamma, double var, double eps) {
  const long p = s.precision();
  Interval t(p, var), e(p, eps), g(p, gamma);
  add(t, t, e);
  if (mpfr_sgn(t.lo()) <= 0) throw std::domain_error("var + eps <= 0");
  sqrt(t, t);
  div(s, g, t);
}

// y = (c - mean)·scale + beta on an enclosure c of the conv output.
void bn_interval(Interval& y, const Interval& c, double gamma, double beta, double mean, double var,
                 double eps) {
  const long p = y.precision();
  Interval s(p), m(p, mean), b(p, beta);
  scale_interval(s, gamma, var, eps);
  sub(y, c, m);
  mul(y, y, s);
  add(y, y, b);
}

// Whether every real in [y - r, y + r] (y = yh + yl) rounds to the same value of format f,
// and which. v = round(y); the reals that round to v form the open cell between the
// midpoints with v's neighbours, at distances `below` and `above` (half a spacing; half of
// that toward zero from a power of two, where the spacing halves; half the smallest
// subnormal around zero). The interval is certified when it lies strictly inside the
// cell: d - r > -below and d + r < above with d = y - v. yh - v is exact (Sterbenz: v is
// yh's rounding, within a factor of 2, or 0); adding yl rounds once (<= 2^-53 |d|), and the
// margin 2^-50 (|d| + r) on r covers that and the two comparisons' subtractions. Inf and
// double subnormal results are left to the multiprecision path.
bool certify_cell(double yh, double yl, double r, const Format& f, double& out) {
  // For binary32 the hardware conversion of yh serves as v: if the test below passes, y
  // lies in v's cell, so v is y's rounding too (and it fails otherwise).
  const double v = f.precision == kFloat32.precision && f.emin == kFloat32.emin
                       ? static_cast<double>(static_cast<float>(yh))
                       : round_to_format(yh, yl, f);
  if (!std::isfinite(v)) return false;
  double below, above;
  if (v == 0.0) {
    below = above = std::ldexp(1.0, f.emin - f.precision);
  } else {
    const std::uint64_t bits = std::bit_cast<std::uint64_t>(v);
    const int biased = static_cast<int>((bits >> 52) & 0x7ff);
    if (biased == 0) return false;
    const int e = biased - 1023;
    const int q = std::max(e, f.emin) - (f.precision - 1);
    const double half = std::bit_cast<double>(static_cast<std::uint64_t>(q - 1 + 1023) << 52);
    const bool pow2 = (bits & ((std::uint64_t{1} << 52) - 1)) == 0 && e > f.emin;
    const double toward_zero = pow2 ? half / 2 : half;
    below = v > 0 ? toward_zero : half;
    above = v > 0 ? half : toward_zero;
  }
  const double d = (yh - v) + yl;
  const double m = r + 0x1p-50 * (std::fabs(d) + r);
  if (!(d - m > -below && d + m < above)) return false;
  out = v;
  return true;
}

// The fast path's per-channel data: the BatchNorm scale as a double-double with a
// certified radius (from a 256-bit interval), and mean, beta.
struct FastChannel {
  dd::DD t;
  double t_rad = 0;
};

// Scratch for one thread: the exact products of one output window.
struct Window {
  std::vector<MpNumber> terms;
  std::vector<mpfr_ptr> ptrs;
  std::size_t n = 0;
  double abs_sum = 0.0, abs_x_sum = 0.0;
};

class ConvBnEvaluator {
 public:
  ConvBnEvaluator(const LayerData& layer, const Options& opts) : L(layer), g(layer.geometry), opts(opts) {
    validate();
    fast_products = all_float32(*L.x) && all_float32(*L.w);
    product_precision = fast_products ? 53 : 106;
  }

  LayerResult run() {
    LayerResult r;
    const std::int64_t total = g.output_size();
    r.y.resize(total);
    r.conv.resize(total);
    r.conv_radius.resize(total);
    r.abs_sum.resize(total);
    r.abs_x_sum.resize(total);
    // The fast path: float32 data, and no float64 rounding to certify (its enclosure is
    // about 2^-40 relative: enough for float32 and narrower, never for float64).
    use_fast = opts.fast && fast_products && !(opts.formats & format_bit(kFloat64)) && (!L.bias || all_float32(*L.bias));
    if (use_fast) {
      // Per-layer factors (each product below also picks up one rounding, covered by the
      // (1 + 2^-50) margins): gamma_K = K u / (1 - K u) with u = 2^-53.
      const double K = static_cast<double>(g.terms_per_output()), u = 0x1p-53;
      const double gam = K * u / (1 - K * u) * (1 + 0x1p-50);
      abs_factor = 1 / (1 - gam) * (1 + 0x1p-50);
      radius_factor = gam * abs_factor * (1 + 0x1p-50);
      abs_x_factor = 1.0 + (K + 1) * 0x1p-52;
      detail::conv_sums(g, *L.x, *L.w, opts.threads, sums);
      if (L.bn) {
        channels.resize(static_cast<std::size_t>(g.O));
        for (std::int64_t o = 0; o < g.O; ++o) {
          Interval t(256);
          scale_interval(t, L.bn->gamma[o], L.bn->var[o], L.bn->eps);
          const DoubleDouble m = midpoint(t);
          channels[o].t = {m.hi, m.lo};
          channels[o].t_rad = radius_of(t, m);
        }
      }
    }
    unsigned nt = opts.threads ? opts.threads : std::max(1u, std::thread::hardware_concurrency());
    nt = static_cast<unsigned>(std::min<std::int64_t>(nt, g.O));
    std::vector<std::int64_t> esc(nt, 0), fast(nt, 0), fall(nt, 0);
    std::vector<long> maxp(nt, 0);
    std::vector<std::exception_ptr> errors(nt);
    auto worker = [&](unsigned t) {
      try {
        for (std::int64_t o = t; o < g.O; o += nt) channel(o, r, esc[t], maxp[t], fast[t], fall[t]);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    };
    std::vector<std::thread> threads;
    for (unsigned t = 1; t < nt; ++t) threads.emplace_back(worker, t);
    worker(0);
    for (auto& th : threads) th.join();
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    for (unsigned t = 0; t < nt; ++t) {
      r.escalations += esc[t];
      r.fast_certified += fast[t];
      r.fallbacks += fall[t];
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
    }
  }

  // Gather the exact products of output (n, o, oh, ow) into `win`, in (c, kh, kw) order,
  // skipping padded positions (they contribute exact zeros).
  void gather(Window& win, std::int64_t n, std::int64_t o, std::int64_t oh, std::int64_t ow) const {
    const std::int64_t cg = g.C / g.groups, og = g.O / g.groups;
    const std::int64_t c0 = (o / og) * cg;
    win.n = 0;
    double abs_sum = 0.0, abs_x = 0.0;
    for (std::int64_t ci = 0; ci < cg; ++ci) {
      for (std::int64_t kh = 0; kh < g.KH; ++kh) {
        const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
        if (ih < 0 || ih >= g.H) continue;
        for (std::int64_t kw = 0; kw < g.KW; ++kw) {
          const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
          if (iw < 0 || iw >= g.W) continue;
          const double xv = (*L.x)[((n * g.C + c0 + ci) * g.H + ih) * g.W + iw];
          const double wv = (*L.w)[((o * cg + ci) * g.KH + kh) * g.KW + kw];
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
        }
      }
    }
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

  // The fast path for one channel: enclosures of every output (fast_conv.hpp), then
  // each output is certified if both ends of its enclosure round alike in every
  // requested format; the others are marked for the multiprecision path.
  void fast_channel(std::int64_t o, LayerResult& r, std::vector<char>& certified) const {
    const std::int64_t plane = g.OH() * g.OW();
    detail::ChannelAffine ch;
    ch.bias = L.bias ? (*L.bias)[o] : 0.0;
    if (L.bn) {
      ch.has_bn = true;
      ch.t_hi = channels[o].t.hi;
      ch.t_lo = channels[o].t.lo;
      ch.t_rad = channels[o].t_rad;
      ch.mean = L.bn->mean[o];
      ch.beta = L.bn->beta[o];
    }
    std::vector<double> yh(plane), yl(plane), rad(plane);
    certified.assign(static_cast<std::size_t>(g.N * plane), 0);
    for (std::int64_t n = 0; n < g.N; ++n) {
      const std::size_t base = static_cast<std::size_t>((n * g.O + o) * plane);
      detail::enclose_channel(&sums.s[base], &sums.a[base], static_cast<std::size_t>(plane), ch, radius_factor, yh.data(),
                              yl.data(), rad.data(), &r.conv[base], &r.conv_radius[base]);
      for (std::int64_t p = 0; p < plane; ++p) {
        const std::size_t idx = base + static_cast<std::size_t>(p);
        r.abs_sum[idx] = sums.a[idx] * abs_factor;  // a / (1 - gamma_K), rounded up
        r.abs_x_sum[idx] = sums.ax[idx] * abs_x_factor;
        Value& v = r.y[idx];
        bool ok = true;
        for (std::size_t f = 0; f < kNumFormats && ok; ++f) {
          if (!(opts.formats & (1u << f))) {
            v.rounded[f] = std::numeric_limits<double>::quiet_NaN();
            continue;
          }
          double c = 0;
          ok = certify_cell(yh[p], yl[p], rad[p], kFormats[f], c);
          v.rounded[f] = c == 0.0 ? 0.0 : c;
        }
        if (!ok) continue;
        v.approx = DoubleDouble{yh[p], yl[p]};
        v.radius = rad[p];
        v.certified = opts.formats;
        v.precision_used = 0;
        certified[static_cast<std::size_t>(n * plane + p)] = 1;
      }
    }
  }

  void channel(std::int64_t o, LayerResult& r, std::int64_t& escalations, long& maxp, std::int64_t& fast,
               std::int64_t& fallbacks) const {
    // The multiprecision scratch is built on first use (the fast path rarely needs it).
    Window win;
    std::optional<Interval> yi;
    auto prepare = [&] {
      if (yi) return;
      const std::size_t cap = static_cast<std::size_t>(g.terms_per_output()) + 1;
      win.terms.reserve(cap);
      for (std::size_t i = 0; i < cap; ++i) win.terms.emplace_back(product_precision);
      for (auto& t : win.terms) win.ptrs.push_back(t.get());
      yi.emplace(opts.precision);
    };
    const std::int64_t OH = g.OH(), OW = g.OW();
    std::vector<char> certified;
    if (use_fast) fast_channel(o, r, certified);
    for (std::int64_t n = 0; n < g.N; ++n) {
      for (std::int64_t oh = 0; oh < OH; ++oh) {
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const std::int64_t idx = ((n * g.O + o) * OH + oh) * OW + ow;
          if (use_fast) {
            if (certified[static_cast<std::size_t>((n * OH + oh) * OW + ow)]) {
              ++fast;
              continue;
            }
            ++fallbacks;
          }
          prepare();
          Interval& y = *yi;
          gather(win, n, o, oh, ow);
          r.abs_sum[idx] = win.abs_sum;
          r.abs_x_sum[idx] = win.abs_x_sum;
          enclose(y, win, o, opts.precision, &r.conv[idx]);
          r.conv_radius[idx] = std::fabs(r.conv[idx]) * 0x1p-53 * (1 + 0x1p-50) + 0x1p-1074;
          Value v;
          if (!try_certify(y, v, opts.formats)) {
            ++escalations;
            v = certify([&](Interval& out, long p) { enclose(out, win, o, p); },
                        Options{opts.precision * 2, opts.max_precision, 1, opts.formats, false});
          }
          maxp = std::max(maxp, v.precision_used);
          r.y[idx] = v;
        }
      }
    }
  }

  const LayerData& L;
  const ConvGeometry& g;
  Options opts;
  bool fast_products = true;
  long product_precision = 53;
  bool use_fast = false;
  double abs_factor = 1, radius_factor = 0, abs_x_factor = 1;
  detail::ConvSums sums;
  std::vector<FastChannel> channels;
};

}  // namespace

LayerResult conv_bn(const LayerData& layer, const Options& opts) {
  return ConvBnEvaluator(layer, opts).run();
}

Value fold_scale(double gamma, double var, double eps, const Options& opts) {
  return certify([&](Interval& s, long) { scale_interval(s, gamma, var, eps); }, opts);
}

Value fold_weight(double w, double gamma, double var, double eps, const Options& opts) {
  return certify(
      [&](Interval& out, long p) {
        Interval s(p), wi(p, w);
        scale_interval(s, gamma, var, eps);
        mul(out, wi, s);
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

}  // namespace foldcheck::ref
