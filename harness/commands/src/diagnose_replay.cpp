// diagnose's replays of a conv in another arithmetic (diagnose_replay.hpp).
#include "diagnose_replay.hpp"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>
#include <tuple>

#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"
#include "foldcheck/reference/formats.hpp"

namespace foldcheck {
namespace {

using diagnosis::Layer;
using diagnosis::ld;

constexpr double kFoldDelta = 0x1p-18;  // an engine's folded weight: within delta |w a| (header)

// v rounded to float32 as an engine holds it (overflowing to an infinity: a cast would be
// undefined past float32's range).
double f32(double v) { return ref::round_to_format(v, 0.0, ref::kFloat32); }

ExactConv exact_conv_computed(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                              const std::vector<double>* bias, const ref::Options& opts, DType dtype) {
  ref::LayerData d;
  d.geometry = g;
  d.x = &x;
  d.w = &w;
  d.bias = bias;
  ref::Options ro = opts;
  ro.formats = ref::format_bit(*info(dtype).format);  // float32 data: the fast path
  const ref::LayerResult r = ref::conv_bn(d, ro);
  ExactConv e;
  e.c.resize(r.y.size());
  for (std::size_t i = 0; i < r.y.size(); ++i) e.c[i] = static_cast<ld>(r.y[i].approx.hi) + r.y[i].approx.lo;
  e.A = r.abs_sum;
  return e;
}

}  // namespace

// The cache's entries: the operands and options each exact conv was computed from, matched
// exactly (bisect's runs: a handful of layers, each a few megabytes).
struct ExactConvCache {
  struct Entry {
    ref::ConvGeometry g;
    std::vector<double> x, w, bias;
    bool has_bias = false;
    decltype(ref::Options::precision) precision = 0;
    DType dtype = DType::Float32;
    ExactConv e;
  };
  std::mutex m;
  std::vector<Entry> entries;
  static bool same(const ref::ConvGeometry& a, const ref::ConvGeometry& b) {
    return std::tie(a.N, a.C, a.H, a.W, a.O, a.KH, a.KW, a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.pad_bottom,
                    a.pad_right, a.dil_h, a.dil_w,
                    a.groups) == std::tie(b.N, b.C, b.H, b.W, b.O, b.KH, b.KW, b.stride_h, b.stride_w, b.pad_top,
                                          b.pad_left, b.pad_bottom, b.pad_right, b.dil_h, b.dil_w, b.groups);
  }
  ExactConv get(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                const std::vector<double>* bias, const ref::Options& opts, DType dtype) {
    const std::lock_guard<std::mutex> lock(m);
    for (const Entry& en : entries)
      if (same(en.g, g) && en.dtype == dtype && en.precision == opts.precision && en.has_bias == (bias != nullptr) &&
          (!bias || en.bias == *bias) && en.w == w && en.x == x)
        return en.e;
    Entry en{g,
             x,
             w,
             bias ? *bias : std::vector<double>{},
             bias != nullptr,
             opts.precision,
             dtype,
             exact_conv_computed(g, x, w, bias, opts, dtype)};
    entries.push_back(std::move(en));
    return entries.back().e;
  }
};

std::shared_ptr<ExactConvCache> make_exact_conv_cache() { return std::make_shared<ExactConvCache>(); }

ExactConv exact_conv(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                     const std::vector<double>* bias, const ref::Options& opts, DType dtype, ExactConvCache* cache) {
  if (cache) return cache->get(g, x, w, bias, opts, dtype);
  return exact_conv_computed(g, x, w, bias, opts, dtype);
}

namespace {

// Every value converted; false when one overflows the operand format.
bool convert_all(const std::vector<double>& v, const OperandFormat& f, OperandConversion c, std::vector<double>& out) {
  out.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i)
    // An engine converts its float32 operands: a wider value becomes float32 first.
    if (out[i] = convert(f32(v[i]), f, c); !std::isfinite(out[i])) return false;
  return true;
}

// The unfused replay's conv: bf16x3 sums the three products of the split operands (three
// exact convs, 3k terms); the others one conv of the converted operands.
std::optional<ExactConv> converted_conv(const DiagnoseInput& in, const ref::ConvGeometry& g, const ConvArithmetic& a,
                                        OperandConversion cv, const std::vector<double>& w,
                                        const std::vector<double>* bias, DType dtype) {
  if (!a.split()) {
    std::vector<double> xc, wc;
    if (!convert_all(in.x.data, *a.operands(), cv, xc) || !convert_all(w, *a.operands(), cv, wc)) return std::nullopt;
    return exact_conv(g, xc, wc, bias, in.ref, dtype, in.exact_cache.get());
  }
  const auto split_all = [](const std::vector<double>& v, std::vector<double>& hi, std::vector<double>& lo) {
    hi.resize(v.size());
    lo.resize(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      const SplitOperand s = split_bf16(f32(v[i]));
      if (!std::isfinite(s.hi)) return false;  // past bf16's range (within float32's last half-ulp)
      hi[i] = s.hi;
      lo[i] = s.lo;
    }
    return true;
  };
  std::vector<double> xh, xl, wh, wl;
  if (!split_all(in.x.data, xh, xl) || !split_all(w, wh, wl)) return std::nullopt;
  ExactConv sum = exact_conv(g, xh, wh, bias, in.ref, dtype, in.exact_cache.get());
  for (const auto& [xp, wp] : {std::pair{&xh, &wl}, std::pair{&xl, &wh}}) {
    const ExactConv part = exact_conv(g, *xp, *wp, nullptr, in.ref, dtype, in.exact_cache.get());
    for (std::size_t i = 0; i < sum.c.size(); ++i) {
      sum.c[i] += part.c[i];
      sum.A[i] += part.A[i];
    }
  }
  return sum;
}

// A replay's Layer: the base's shapes and bias, the replayed conv, the arithmetic's sums.
Layer replay_layer(const Layer& base, ExactConv e, const ConvArithmetic& a, double k) {
  Layer L;
  L.dtype = base.dtype;
  L.N = base.N;
  L.C = base.C;
  L.plane = base.plane;
  L.has_conv = true;
  L.bias = base.bias;
  L.c = std::move(e.c);
  L.A = std::move(e.A);
  L.k = k;
  set_accumulator(L, a);
  return L;
}

}  // namespace

void set_accumulator(Layer& L, const ConvArithmetic& a) {
  L.u_acc = a.accumulate_u();
  if (const std::optional<OperandFormat> f = a.narrow_accumulator()) {
    L.eta_acc = f->eta();
    L.acc_max = std::ldexp(2.0 - std::ldexp(1.0, 1 - f->precision), f->emax);
  }
}

namespace {

struct FoldedWeights {
  std::vector<double> w;  // the replay's converted folded weights
  std::vector<double> d;  // per weight: how far an engine's may be from it (0: the same)
};

// w' = fl32(w fl32(a)) converted; d_j where a fold within delta may convert elsewhere.
std::optional<FoldedWeights> folded_weights(const DiagnoseInput& in, const diagnosis::AffineModel& given,
                                            const OperandFormat& f, OperandConversion cv) {
  const std::vector<double>& w = in.weights->data;
  const std::size_t per = w.size() / given.a.size();
  FoldedWeights fw;
  fw.w.resize(w.size());
  fw.d.assign(w.size(), 0.0);
  for (std::size_t j = 0; j < w.size(); ++j) {
    const ld a = given.a[j / per];
    const double wa = static_cast<double>(static_cast<ld>(w[j]) * a);
    const double t = f32(static_cast<double>(a));
    fw.w[j] = convert(f32(w[j] * t), f, cv);
    const double lo = convert(wa * (1 - kFoldDelta - 0x1p-50), f, cv),
                 hi = convert(wa * (1 + kFoldDelta + 0x1p-50), f, cv);
    if (!std::isfinite(fw.w[j]) || !std::isfinite(lo) || !std::isfinite(hi)) return std::nullopt;
    fw.d[j] = std::max(std::fabs(lo - fw.w[j]), std::fabs(hi - fw.w[j]));
  }
  return fw;
}

// sum_j d_j |x^_j| over each output's window, for the weights with d_j > 0 (a handful).
std::vector<double> uncertain_terms(const ref::ConvGeometry& g, const std::vector<double>& xc,
                                    const std::vector<double>& d) {
  std::vector<double> out(static_cast<std::size_t>(g.output_size()), 0.0);
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, OH = g.OH(), OW = g.OW();
  for (std::size_t j = 0; j < d.size(); ++j) {
    if (d[j] == 0) continue;
    const std::int64_t jj = static_cast<std::int64_t>(j), kw = jj % g.KW, kh = (jj / g.KW) % g.KH;
    const std::int64_t ci = (jj / (g.KW * g.KH)) % cg, o = jj / (g.KW * g.KH * cg), c = (o / og) * cg + ci;
    for (std::int64_t n = 0; n < g.N; ++n)
      for (std::int64_t oh = 0; oh < OH; ++oh) {
        const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
        if (ih < 0 || ih >= g.H) continue;
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
          if (iw < 0 || iw >= g.W) continue;
          const double xv = std::fabs(xc[static_cast<std::size_t>(((n * g.C + c) * g.H + ih) * g.W + iw)]);
          out[static_cast<std::size_t>(((n * g.O + o) * OH + oh) * OW + ow)] += d[j] * xv;
        }
      }
  }
  for (double& v : out) v = round_up(v);
  return out;
}

// The folded replay (header): c = conv(x^, w'^) + b', identity model.
std::optional<Replay> folded_replay(const DiagnoseInput& in, const ref::ConvGeometry& g, const Layer& base,
                                    const diagnosis::AffineModel& given, const ConvArithmetic& a,
                                    OperandConversion cv) {
  const OperandFormat f = *a.operands();
  std::vector<double> xc;
  if (!convert_all(in.x.data, f, cv, xc)) return std::nullopt;
  const std::optional<FoldedWeights> fw = folded_weights(in, given, f, cv);
  if (!fw) return std::nullopt;
  Replay r;
  r.L = replay_layer(base, exact_conv(g, xc, fw->w, nullptr, in.ref, base.dtype, in.exact_cache.get()), a,
                     static_cast<double>(g.terms_per_output()) + 1);
  r.L.bias.clear();
  r.L.extra = uncertain_terms(g, xc, fw->d);
  const double u = 0x1p-24, g8 = gamma_k(8, u);
  for (std::size_t i = 0; i < r.L.c.size(); ++i) {
    const std::size_t o = base.channel(i, false);
    const ld b = base.bias.empty() ? 0.0L : static_cast<ld>(base.bias[o]);
    const ld bp = (b - given.m[o]) * given.a[o] + given.beta[o];
    r.L.c[i] += bp;
    r.L.A[i] = round_up(r.L.A[i] + static_cast<double>(std::fabs(bp)));
    const double mag =
        static_cast<double>(std::fabs(given.a[o]) * (std::fabs(b) + std::fabs(given.m[o])) + std::fabs(given.beta[o]));
    r.L.extra[i] = round_up(r.L.extra[i] + g8 * mag + 0x1p-60 * static_cast<double>(std::fabs(bp)));
  }
  r.model = diagnosis::plain_conv(static_cast<std::size_t>(base.C));
  r.folded = true;
  return r;
}

// The folded bias b' = (b - mean) a + beta per channel, as an engine computes it in float32, and
// how far an engine's own b' may be from the exact one: gamma_8(u) (|a| (|b| + |mean|) + |beta|),
// the fold's bound (header).
struct FoldedBias {
  std::vector<double> value, slack;
};
FoldedBias folded_bias(const Layer& base, const diagnosis::AffineModel& given) {
  FoldedBias b;
  const double g8 = gamma_k(8, 0x1p-24);
  for (std::size_t o = 0; o < given.a.size(); ++o) {
    const ld cb = base.bias.empty() ? 0.0L : static_cast<ld>(base.bias[o]);
    b.value.push_back(f32(static_cast<double>((cb - given.m[o]) * given.a[o] + given.beta[o])));
    b.slack.push_back(g8 * static_cast<double>(std::fabs(given.a[o]) * (std::fabs(cb) + std::fabs(given.m[o])) +
                                               std::fabs(given.beta[o])));
  }
  return b;
}

// A bf16 or fp16 engine may convert the bias too (torch.autocast, .half()); TF32 keeps it in
// float32. The conv is linear in its bias, so the replay with the bias converted by the same
// rule is the same conv plus (b^ - b) per channel: a sibling replay, no conv of its own. A bias
// known only within `slack` (a folded one) may convert to a neighbour: each element's extra
// error gains the largest distance d_b between the conversions of b -+ slack and the replay's.
std::optional<Replay> bias_converted(const Replay& r, const std::vector<double>& bias, const std::vector<double>& slack,
                                     const ConvArithmetic& a, OperandConversion cv) {
  if (bias.empty() || a.kind == ConvArithmeticKind::TF32 || !a.operands()) return std::nullopt;
  const OperandFormat f = *a.operands();
  Replay b = r;
  if (!slack.empty() && b.L.extra.empty()) b.L.extra.assign(b.L.c.size(), 0.0);
  for (std::size_t i = 0; i < b.L.c.size(); ++i) {
    const std::size_t o = b.L.channel(i, false);
    const double v = bias[o], cvt = convert(v, f, cv);
    b.L.c[i] += static_cast<ld>(cvt) - static_cast<ld>(v);
    if (slack.empty()) continue;
    const double e = slack[o] * (1 + 0x1p-40);
    const double d = std::max(std::fabs(convert(v - e, f, cv) - cvt), std::fabs(convert(v + e, f, cv) - cvt));
    b.L.extra[i] = round_up(b.L.extra[i] + d);
  }
  b.name += ", bias converted";
  return b;
}

// An output whose every value is a value of a 16-bit operand format came from an engine that
// stores its activations in it (torch.autocast): its conv output too, before the BatchNorm.
bool stored_in_operands(const Tensor& observed, const ConvArithmetic& a) { return stored_in_16_bits(a, observed.data); }

// The unfused replay with its conv output rounded to the operand format before the BatchNorm.
Replay conv_output_stored(const Replay& r, const OperandFormat& f) {
  Replay s = r;
  s.L.c_store_u = f.u();
  s.L.c_store_eta = f.eta();
  s.name += ", conv output stored";
  return s;
}

}  // namespace

std::vector<Replay> replays(const DiagnoseInput& in, const ref::ConvGeometry& g, const Layer& base,
                            const diagnosis::AffineModel& given, const ConvArithmetic& a) {
  std::vector<Replay> out;
  const bool stored = stored_in_operands(in.observed, a) && in.observed.dtype != DType::Float16 &&
                      in.observed.dtype != DType::BFloat16;  // a 16-bit observation charges its own storage
  const double k_unit = static_cast<double>(g.terms_per_output()) * (a.split() ? 3 : 1);
  for (const OperandConversion cv : a.conversions()) {
    const std::string label = std::string(a.name()) + (a.split() ? " split" : " " + std::string(name(cv)));
    if (std::optional<ExactConv> e = converted_conv(in, g, a, cv, in.weights->data,
                                                    in.conv_bias.empty() ? nullptr : &in.conv_bias, base.dtype)) {
      Replay r;
      r.L = replay_layer(base, std::move(*e), a, k_unit + (in.conv_bias.empty() ? 0 : 1));
      if (r.L.u_acc * r.L.k < 1) {  // gamma_k needs k u < 1
        r.name = label;
        r.arithmetic = a;
        r.conversion = cv;
        r.model = given;
        std::vector<Replay> found;
        if (std::optional<Replay> b = bias_converted(r, in.conv_bias, {}, a, cv)) found.push_back(std::move(*b));
        found.push_back(std::move(r));
        for (Replay& x : found) {
          if (stored) out.push_back(conv_output_stored(x, *a.operands()));
          out.push_back(std::move(x));
        }
      }
    }
    if (!in.bn || a.split()) continue;
    if (std::optional<Replay> f = folded_replay(in, g, base, given, a, cv); f && f->L.u_acc * f->L.k < 1) {
      f->name = label + ", folded";
      f->arithmetic = a;
      f->conversion = cv;
      const FoldedBias fb = folded_bias(base, given);
      if (std::optional<Replay> b = bias_converted(*f, fb.value, fb.slack, a, cv)) out.push_back(std::move(*b));
      out.push_back(std::move(*f));
    }
  }
  return out;
}

std::optional<diagnosis::Layer> general_bound_layer(const DiagnoseInput& in, const Layer& base,
                                                    const ConvArithmetic& a) {
  const std::optional<GeneralConvBound> gb = general_conv_bound(a, base.k);
  if (!gb) return std::nullopt;
  Layer L = base;
  L.operand_factor = gb->factor;
  if (!in.weights) return L;
  const std::vector<double> uf =
      gb->underflow_per_channel(in.weights->data, in.weights->data.size() / static_cast<std::size_t>(base.C),
                                in.x.data);
  L.conv_err.resize(L.c.size(), 0.0);
  for (std::size_t i = 0; i < L.c.size(); ++i) L.conv_err[i] = round_up(L.conv_err[i] + uf[L.channel(i, false)]);
  return L;
}

}  // namespace foldcheck
