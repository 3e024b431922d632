// The calibrated band of a model's outputs (output_band.hpp).
#include "foldcheck/model/output_band.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include <boost/math/distributions/students_t.hpp>
#include <boost/random/normal_distribution.hpp>
#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/model/model_run.hpp"
#include "op_registry.hpp"
#include "ops_common.hpp"

namespace foldcheck {
namespace {

// A layer whose channels are directions: a layer -> BatchNorm pair, or a Conv without one.
struct Unit {
  std::size_t node = 0;           // the layer node
  const BnPair* pair = nullptr;   // null: an unpaired Conv
  std::string name, out;          // its name and its output value (the BatchNorm's for a pair)
  std::vector<double> shift;      // per channel: the output's constant part b'_c
  std::vector<double> scale;      // a pair's gamma / sqrt(var + eps), per channel
  std::vector<double> beta, var;  // a pair's BatchNorm (the eps direction)
  double eps = 0;
};

std::set<std::size_t> skipped(const BnPatterns& pairs) {
  std::set<std::size_t> s;
  for (const BnPair& p : pairs.pairs) {
    s.insert(p.bn);
    s.insert(p.through.begin(), p.through.end());
  }
  return s;
}

// The first node the reverse pass cannot take (no transposed derivative), or none.
std::optional<std::string> no_derivative(const Model& m, const BnPatterns& pairs) {
  const std::set<std::size_t> skip = skipped(pairs);
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    if (skip.contains(i) || n.op == "Constant" || (n.op == "Identity" && m.aliases.contains(n.outputs.at(0)))) continue;
    const ops::OpEntry* e = ops::find_op(n.op);
    if (!e || !e->vjp) return fmt::format("{} has no derivative in foldcheck's reverse pass", ops::where(n, i));
  }
  if (m.outputs.size() != 1) return std::string("the band takes models with one output");
  return std::nullopt;
}

std::vector<Unit> units(const Model& m, const BnPatterns& pairs) {
  std::vector<Unit> u;
  std::set<std::size_t> paired;
  for (const BnPair& p : pairs.pairs) {
    paired.insert(p.layer);
    const LayerParams lp = layer_params(m, p);
    Unit x;
    x.node = p.layer, x.pair = &p, x.name = p.name, x.out = m.nodes[p.bn].outputs.at(0);
    for (std::size_t c = 0; c < lp.bn.gamma.size(); ++c) {
      const double a = lp.bn.gamma[c] / std::sqrt(lp.bn.var[c] + lp.bn.eps);
      x.scale.push_back(a);
      x.shift.push_back(((lp.bias.empty() ? 0.0 : lp.bias[c]) - lp.bn.mean[c]) * a + lp.bn.beta[c]);
    }
    x.beta = lp.bn.beta;
    x.var = lp.bn.var;
    x.eps = lp.bn.eps;
    u.push_back(std::move(x));
  }
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    if (n.op != "Conv" || paired.contains(i)) continue;
    Unit x;
    x.node = i, x.name = n.name.empty() ? n.outputs.at(0) : n.name, x.out = n.outputs.at(0);
    if (n.inputs.size() > 2 && !n.inputs[2].empty())
      if (const Tensor* b = m.initializer(n.inputs[2])) x.shift = b->data;
    u.push_back(std::move(x));
  }
  return u;
}

// The K honest float32 runs' kinds: unfused (both BatchNorm forms) and folded by each recipe,
// every conv summed sequentially (the fast kernels: blocked, pairwise and fma orders cost 15x
// more per run here) from the bias or with it added last, its input channels in order (run 0)
// or permuted by a seed of the run's own.
ModelRunOptions honest_kind(std::size_t k, std::uint64_t seed, unsigned threads) {
  static const struct {
    bool fused;
    Recipe recipe;
    bool bias_first, scale_shift;
  } kinds[] = {{false, Recipe::PyTorch, false, false},   {true, Recipe::PyTorch, false, false},
               {true, Recipe::OnnxRuntime, true, false}, {false, Recipe::PyTorch, true, true},
               {true, Recipe::Tvm, false, false},        {true, Recipe::OnnxOptimizer, true, false},
               {false, Recipe::PyTorch, false, true},    {true, Recipe::Exact, false, false}};
  const auto& kd = kinds[k % std::size(kinds)];
  ModelRunOptions o;
  o.dtype = DType::Float32;
  o.fused = kd.fused;
  o.recipe = kd.recipe;
  o.policy.order.bias_first = kd.bias_first;
  o.policy.bn_form = kd.scale_shift ? BnForm::ScaleShift : BnForm::Textbook;
  o.policy.permute = k == 0 ? 0 : (seed * 0x9e3779b97f4a7c15ULL + k) | 1;
  o.policy.threads = threads;
  o.ref.threads = threads;
  return o;
}

// The reverse pass: `slices` cotangents of the model's output taken back through every node;
// each unit's output cotangent recorded in at[unit].
class Reverse {
 public:
  Reverse(const Model& m, const BnPatterns& pairs, const std::map<std::string, Tensor>& values, std::size_t slices,
          unsigned threads)
      : m_(m), pairs_(pairs), values_(values), slices_(slices), threads_(threads) {}

  std::vector<std::vector<double>> run(std::vector<double> gy, const std::vector<Unit>& us) {
    std::map<std::size_t, std::size_t> unit_at;
    for (std::size_t k = 0; k < us.size(); ++k) unit_at[us[k].node] = k;
    std::map<std::size_t, const BnPair*> pair_at;
    for (const BnPair& p : pairs_.pairs) pair_at[p.layer] = &p;
    const std::set<std::size_t> skip = skipped(pairs_);
    std::vector<std::vector<double>> at(us.size());
    cot_[m_.outputs[0].name] = std::move(gy);
    for (std::size_t i = m_.nodes.size(); i-- > 0;) {
      const ModelNode& n = m_.nodes[i];
      if (skip.contains(i) || n.op == "Constant") continue;  // a Constant's value is a parameter
      const auto pit = pair_at.find(i);
      const std::string out = pit != pair_at.end() ? m_.nodes[pit->second->bn].outputs.at(0) : n.outputs.at(0);
      const auto c = cot_.find(out);
      if (c == cot_.end()) continue;
      std::vector<double> g = std::move(c->second);
      cot_.erase(c);
      const auto u = unit_at.find(i);
      if (u != unit_at.end()) at[u->second] = g;
      if (pit != pair_at.end()) scale_by_bn(*pit->second, us[u->second].scale, g);  // every pair is a unit
      back(n, i, out, g);
    }
    return at;
  }

 private:
  const Tensor& value(const std::string& name) const {
    if (const Tensor* t = m_.initializer(name)) return *t;
    return values_.at(name);
  }

  // A pair's cotangent at the BatchNorm's output, taken to the layer's: times its scale a_c.
  void scale_by_bn(const BnPair& p, const std::vector<double>& a, std::vector<double>& g) const {
    const Shape& ys = values_.at(m_.nodes[p.bn].outputs.at(0)).shape;
    const std::int64_t C = ys.size() > 1 ? ys[1] : 1, inner = ops::prod(ys, 2);
    const std::size_t n = g.size() / slices_;
    for (std::size_t i = 0; i < n; ++i) {
      const double ai = a[static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % C)];
      for (std::size_t s = 0; s < slices_; ++s) g[s * n + i] *= ai;
    }
  }

  // Node i's transposed derivative applied to g (its output `out`'s cotangent), added to its
  // computed inputs' cotangents.
  void back(const ModelNode& n, std::size_t i, const std::string& out, const std::vector<double>& g) {
    ops::VjpArgs a{n, i, m_.opset, {}, &values_.at(out), slices_, threads_};
    std::vector<std::vector<double>*> gx;
    for (const std::string& in : n.inputs) {
      const bool computed =
          !in.empty() && !m_.initializer(in) && !m_.int_initializer(in) && values_.contains(in) &&
          !std::any_of(m_.inputs.begin(), m_.inputs.end(), [&](const ValueInfo& v) { return v.name == in; });
      a.inputs.push_back(in.empty() || m_.int_initializer(in) ? nullptr : &value(in));
      std::vector<double>* slot = nullptr;
      if (computed) {
        std::vector<double>& c = cot_[in];
        c.resize(values_.at(in).data.size() * slices_, 0.0);
        slot = &c;
      }
      gx.push_back(slot);
    }
    const ops::OpEntry* e = ops::find_op(n.op);
    if (!e || !e->vjp) throw InputError(ops::where(n, i) + " has no derivative in foldcheck's reverse pass");
    e->vjp(a, g, gx);
  }

  const Model& m_;
  const BnPatterns& pairs_;
  const std::map<std::string, Tensor>& values_;
  std::size_t slices_;
  unsigned threads_;
  std::map<std::string, std::vector<double>> cot_;
};

// Projections of every slice on every direction of unit u: channels first, then (a pair) eps.
std::vector<std::vector<double>> projections(const Unit& u, const Tensor& y, const std::vector<double>& g,
                                             std::size_t slices) {
  const std::int64_t C = y.shape.size() > 1 ? y.shape[1] : 1, inner = ops::prod(y.shape, 2);
  const std::size_t n = y.data.size(), D = static_cast<std::size_t>(C) + (u.pair ? 1 : 0);
  std::vector<std::vector<double>> p(D, std::vector<double>(slices, 0.0));
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = static_cast<std::size_t>((static_cast<std::int64_t>(i) / inner) % C);
    const double v = y.data[i] - (u.shift.empty() ? 0.0 : u.shift[c]);
    const double ve = u.pair ? -u.eps * (y.data[i] - u.beta[c]) / (2 * (u.var[c] + u.eps)) : 0.0;
    for (std::size_t s = 0; s < slices; ++s) {
      p[c][s] += v * g[s * n + i];
      if (u.pair) p[D - 1][s] += ve * g[s * n + i];
    }
  }
  return p;
}

// One direction's band from its projections: slice 0 observed, 1..K honest, then R probes.
BandDirection direction(const Unit& u, std::int64_t channel, const std::vector<double>& p, std::size_t K,
                        double quantile) {
  double m2 = 0, largest = 0, size2 = 0;
  for (std::size_t k = 1; k <= K; ++k) {
    m2 += p[k] * p[k];
    largest = std::max(largest, std::fabs(p[k]));
  }
  for (std::size_t r = K + 1; r < p.size(); ++r) size2 += p[r] * p[r];
  size2 /= static_cast<double>(p.size() - K - 1);
  BandDirection d{u.name, channel, p[0], largest + quantile * std::sqrt(m2 / static_cast<double>(K))};
  d.ratio = std::fabs(d.n) / d.band;
  d.rho = size2 > 0 ? d.n / size2 : 0.0;
  d.floor = size2 > 0 ? d.band / size2 : HUGE_VAL;
  return d;
}

// The slices' output errors: observed, the honest runs', then standard normal probes.
std::vector<double> output_slices(const Model& m, const BnPatterns& pairs, const Tensor& x, const Tensor& ref,
                                  const std::vector<double>& observed, const OutputBandOptions& o) {
  const std::size_t n = ref.data.size();
  std::vector<double> g((1 + o.samples + o.probes) * n);
  for (std::size_t i = 0; i < n; ++i) g[i] = observed[i] - ref.data[i];
  for (std::size_t k = 0; k < o.samples; ++k) {
    if (o.progress) o.progress(fmt::format("band: honest float32 run {}/{}", k + 1, o.samples));
    const Tensor y =
        run_model(m, pairs, {{m.inputs[0].name, x}}, honest_kind(k, o.seed, o.threads)).at(m.outputs[0].name);
    for (std::size_t i = 0; i < n; ++i) g[(1 + k) * n + i] = y.data[i] - ref.data[i];
  }
  std::mt19937_64 rng(o.seed ^ 0x6a09e667f3bcc909ULL);
  boost::random::normal_distribution<double> nd;  // the same values on every platform
  for (std::size_t i = (1 + o.samples) * n; i < g.size(); ++i) g[i] = nd(rng);
  return g;
}

void summarise(std::vector<BandDirection>& all, OutputBand& r) {
  std::vector<double> floors;
  for (const BandDirection& d : all) {
    if (d.channel >= 0 && std::isfinite(d.floor)) floors.push_back(d.floor);
    if (!r.worst || d.ratio > r.worst->ratio || (std::isnan(d.ratio) && !std::isnan(r.worst->ratio))) r.worst = d;
    if (!(d.ratio <= 1)) ++r.beyond_count;
  }
  std::stable_sort(all.begin(), all.end(),
                   [](const BandDirection& a, const BandDirection& b) { return a.ratio > b.ratio; });
  for (const BandDirection& d : all)
    if (!(d.ratio <= 1) && r.beyond.size() < 16) r.beyond.push_back(d);
  std::sort(floors.begin(), floors.end());
  if (!floors.empty()) {
    r.floor_median = floors[floors.size() / 2];
    r.floor_p90 = floors[floors.size() * 9 / 10];
  }
}

}  // namespace

namespace {

// The model with direction d moved by (1 + h): a unit's channel's weights (the folded weights'
// part of its output, v), or its BatchNorm's eps.
Model moved(const Model& m, const Unit& u, std::int64_t channel, double h) {
  Model mm = m;
  if (channel < 0) {
    Attribute& a = mm.nodes[u.pair->bn].attributes["epsilon"];
    a.kind = Attribute::Kind::Float;
    a.f = u.eps * (1 + h);
    return mm;
  }
  const std::string& name = m.nodes[u.node].inputs.at(1);
  Tensor& w = mm.own_initializer(name);
  if (u.pair) {
    const LayerParams lp = layer_params(m, *u.pair);
    const std::size_t per = static_cast<std::size_t>(lp.per_channel);
    for (std::size_t k = 0; k < per; ++k) w.data[lp.index[static_cast<std::size_t>(channel) * per + k]] *= 1 + h;
  } else {
    const std::size_t per = w.data.size() / static_cast<std::size_t>(w.shape.at(0));
    for (std::size_t k = 0; k < per; ++k) w.data[static_cast<std::size_t>(channel) * per + k] *= 1 + h;
  }
  return mm;
}

// |J v|^2 of a named direction by a float64 run of the moved model (forward difference, h =
// 2^-20: its O(h) error is 1e-6 relative, the run's rounding 2^-53 / h = 1e-10; eps: 2^-12), in place of the
// probes' estimate (whose relative error is sqrt(2/R), 35% at R = 16); rho and floor with it.
void exact_size(const Model& m, const BnPatterns& pairs, const Unit& u, const Tensor& x, const Tensor& ref,
                BandDirection& d, unsigned threads) {
  // eps is read through float32 (2^-24 relative): its step is 2^-12, taken as it rounds.
  const double h = d.channel < 0 ? static_cast<float>(u.eps * (1 + 0x1p-12)) / static_cast<float>(u.eps) - 1 : 0x1p-20;
  ModelRunOptions f64;
  f64.dtype = DType::Float64;
  f64.policy.threads = f64.ref.threads = threads;
  const Model mm = moved(m, u, d.channel, h);
  const Tensor y = run_model(mm, find_bn_pairs(mm), {{m.inputs[0].name, x}}, f64).at(m.outputs[0].name);
  double size2 = 0;
  for (std::size_t i = 0; i < y.data.size(); ++i)
    size2 += (y.data[i] - ref.data[i]) / h * ((y.data[i] - ref.data[i]) / h);
  if (!(size2 > 0)) return;
  d.rho = d.n / size2;
  d.floor = d.band / size2;
}

// The slices g of the output's cotangent projected on every unit's directions (channels, then a
// pair's eps): per unit (empty: not on a path to the output), per direction, per slice.
std::vector<std::vector<std::vector<double>>> project(const Model& m, const BnPatterns& pairs,
                                                      const std::vector<Unit>& us, const Tensor& x,
                                                      std::vector<double> g, std::size_t slices, unsigned threads) {
  ModelRunOptions f64;
  f64.dtype = DType::Float64;
  f64.policy.threads = f64.ref.threads = threads;
  for (const ModelNode& n : m.nodes) f64.keep.insert(n.outputs.begin(), n.outputs.end());
  std::map<std::string, Tensor> values = run_model(m, pairs, {{m.inputs[0].name, x}}, f64);
  values[m.inputs[0].name] = x;
  const std::vector<std::vector<double>> at = Reverse(m, pairs, values, slices, threads).run(std::move(g), us);
  std::vector<std::vector<std::vector<double>>> proj(us.size());
  for (std::size_t k = 0; k < us.size(); ++k)
    if (!at[k].empty()) proj[k] = projections(us[k], values.at(us[k].out), at[k], slices);
  return proj;
}

std::int64_t channel_of(const Unit& u, std::size_t d, std::size_t directions) {
  return d + 1 == directions && u.pair ? -1 : static_cast<std::int64_t>(d);
}

}  // namespace

std::vector<DirectionProjection> project_cotangent(const Model& m, const BnPatterns& pairs, const Tensor& x,
                                                   const std::vector<double>& g, unsigned threads) {
  if (const auto why = no_derivative(m, pairs)) throw InputError(*why);
  const std::vector<Unit> us = units(m, pairs);
  const auto proj = project(m, pairs, us, x, g, 1, threads);
  std::vector<DirectionProjection> r;
  for (std::size_t k = 0; k < us.size(); ++k)
    for (std::size_t d = 0; d < proj[k].size(); ++d)
      r.push_back({us[k].name, channel_of(us[k], d, proj[k].size()), proj[k][d][0]});
  return r;
}

OutputBand output_band(const Model& m, const BnPatterns& pairs, const Tensor& x, const Tensor& reference,
                       const std::vector<double>& observed, const OutputBandOptions& o) {
  OutputBand r;
  r.not_computed = no_derivative(m, pairs);
  const std::vector<Unit> us = r.not_computed ? std::vector<Unit>{} : units(m, pairs);
  if (!r.not_computed && us.empty()) r.not_computed = "the model has no conv or foldable layer";
  if (r.not_computed) return r;
  try {
    const std::size_t B = 1 + o.samples + o.probes;
    std::vector<double> g = output_slices(m, pairs, x, reference, observed, o);
    if (o.progress) o.progress("band: reverse pass");
    const auto proj = project(m, pairs, us, x, std::move(g), B, o.threads);
    std::size_t D = 0;
    for (const auto& pu : proj)
      for (const std::vector<double>& p : pu)
        D += std::any_of(p.begin() + 1 + static_cast<std::ptrdiff_t>(o.samples), p.end(),
                         [](double v) { return v != 0; });
    r.samples = o.samples;
    r.probes = o.probes;
    r.directions = D;
    r.alpha = o.alpha;
    r.alpha_direction = o.alpha / static_cast<double>(std::max<std::size_t>(D, 1));
    r.quantile = boost::math::quantile(
        boost::math::complement(boost::math::students_t(static_cast<double>(o.samples)), r.alpha_direction / 2));
    std::vector<BandDirection> all;
    for (std::size_t k = 0; k < us.size(); ++k)
      for (std::size_t d = 0; d < proj[k].size(); ++d) {
        const BandDirection bd =
            direction(us[k], channel_of(us[k], d, proj[k].size()), proj[k][d], o.samples, r.quantile);
        // A direction no output moves along (a channel a ReLU zeroes everywhere): not tested.
        if (std::isfinite(bd.floor)) all.push_back(bd);
      }
    summarise(all, r);
    // The named directions' sizes exactly: the worst and the first 4 beyond the band.
    const auto unit_named = [&](const std::string& name) {
      return std::find_if(us.begin(), us.end(), [&](const Unit& u) { return u.name == name; });
    };
    std::vector<BandDirection*> named;
    if (r.worst) named.push_back(&*r.worst);
    for (std::size_t i = 0; i < std::min<std::size_t>(r.beyond.size(), 4); ++i) named.push_back(&r.beyond[i]);
    for (BandDirection* d : named)
      if (const auto it = unit_named(d->layer); it != us.end()) exact_size(m, pairs, *it, x, reference, *d, o.threads);
  } catch (const InputError& e) {
    r = OutputBand{};
    r.not_computed = e.what();
  }
  return r;
}

}  // namespace foldcheck
