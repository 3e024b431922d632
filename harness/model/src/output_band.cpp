// The calibrated band of a model's outputs (output_band.hpp).
#include "foldcheck/model/output_band.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>

#include <boost/math/distributions/students_t.hpp>
#include <boost/random/normal_distribution.hpp>
#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/task_pool.hpp"
#include "foldcheck/model/band_moderation.hpp"
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

// The K honest float32 runs' kinds: unfused (both BatchNorm forms) and folded by each engine's
// recipe (PyTorch, ONNX Runtime, onnxoptimizer, TVM),
// every conv summed sequentially (the fast kernels: blocked, pairwise and fma orders cost 15x
// more per run here) from the bias or with it added last, its input channels in order (run 0)
// or permuted by a seed of the run's own. Two kinds take 1/sqrt(var + eps) as TensorFlow does
// (Eigen's rsqrt: a 12-bit estimate and one Newton step): its BatchNorm, and the TFLite
// converter's fold (TVM's chain: scale = r * gamma, shift = beta - mean * scale). Each channel's
// scale then shrinks by 0 to 0.2 ppm: its spread is in the sample, its common part is taken out
// (scale_drift below).
ModelRunOptions honest_kind(std::size_t k, std::uint64_t seed, unsigned threads) {
  static const struct {
    bool fused;
    Recipe recipe;
    bool bias_first, scale_shift, fast_rsqrt;
  } kinds[] = {{false, Recipe::PyTorch, false, false, false},   {true, Recipe::PyTorch, false, false, false},
               {true, Recipe::OnnxRuntime, true, false, false}, {false, Recipe::PyTorch, true, true, false},
               {true, Recipe::Tvm, false, false, false},        {true, Recipe::OnnxOptimizer, true, false, false},
               {false, Recipe::PyTorch, false, true, true},     {true, Recipe::Tvm, true, false, true}};
  const auto& kd = kinds[k % std::size(kinds)];
  ModelRunOptions o;
  o.dtype = DType::Float32;
  o.fused = kd.fused;
  o.recipe = kd.recipe;
  o.policy.order.bias_first = kd.bias_first;
  o.policy.bn_form = kd.scale_shift ? BnForm::ScaleShift : BnForm::Textbook;
  if (kd.fast_rsqrt) o.policy.arith.newton_steps = 1;
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
    const ops::ChannelOf ch(values_.at(m_.nodes[p.bn].outputs.at(0)).shape);
    const std::size_t n = g.size() / slices_;
    for (std::size_t i = 0; i < n; ++i) {
      const double ai = a[ch(i)];
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
  const ops::ChannelOf ch(y.shape);
  const std::size_t n = y.data.size(), D = static_cast<std::size_t>(ch.C) + (u.pair ? 1 : 0);
  std::vector<std::vector<double>> p(D, std::vector<double>(slices, 0.0));
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = ch(i);
    const double v = y.data[i] - (u.shift.empty() ? 0.0 : u.shift[c]);
    const double ve = u.pair ? -u.eps * (y.data[i] - u.beta[c]) / (2 * (u.var[c] + u.eps)) : 0.0;
    for (std::size_t s = 0; s < slices; ++s) {
      p[c][s] += v * g[s * n + i];
      if (u.pair) p[D - 1][s] += ve * g[s * n + i];
    }
  }
  return p;
}

// A direction's honest mean square over the K runs (slices 1..K) and its size |J v|^2 from
// the R probes after them (E <r, J v>^2 = |J v|^2 for r standard normal).
double honest_s2(const std::vector<double>& p, std::size_t K) {
  double m2 = 0;
  for (std::size_t k = 1; k <= K; ++k) m2 += p[k] * p[k];
  return K ? m2 / static_cast<double>(K) : 0.0;
}

double probe_size2(const std::vector<double>& p, std::size_t K) {
  double size2 = 0;
  for (std::size_t r = K + 1; r < p.size(); ++r) size2 += p[r] * p[r];
  return p.size() > K + 1 ? size2 / static_cast<double>(p.size() - K - 1) : 0.0;
}

// One direction's band from its observed projection, its size |J v|^2 (probe_size2) and its
// honest variance (moderated: band_moderation.hpp) with the quantile of its t.
BandDirection direction(const Unit& u, std::int64_t channel, double observed, double size2, double var,
                        double quantile) {
  BandDirection d{u.name, channel, observed, quantile * std::sqrt(var)};
  d.ratio = std::fabs(d.n) / d.band;
  d.rho = size2 > 0 ? d.n / size2 : 0.0;
  d.floor = size2 > 0 ? d.band / size2 : HUGE_VAL;
  return d;
}

// A part of the batch: the items of one run of the model's declared batch.
struct Chunk {
  Tensor x, ref;
  std::vector<double> observed;
  std::size_t index = 0, count = 1;
};

// Rows [first, first + rows) of t along its first dimension.
Tensor rows_of(const Tensor& t, std::int64_t first, std::int64_t rows) {
  Tensor r = t;
  r.shape[0] = rows;
  const std::size_t per = t.data.size() / static_cast<std::size_t>(t.shape[0]);
  r.data.assign(t.data.begin() + static_cast<std::ptrdiff_t>(per * static_cast<std::size_t>(first)),
                t.data.begin() + static_cast<std::ptrdiff_t>(per * static_cast<std::size_t>(first + rows)));
  return r;
}

// The batch in runs of the model's declared batch (1 when the graph leaves it free): the
// reverse pass holds a cotangent of every live value for each of its 1 + K + R slices, so its
// memory follows the chunk, not the batch. Projections add over the chunks: each direction's
// evidence summed over the items (its signal grows with their number, honest noise as its root).
std::vector<Chunk> chunks(const Model& m, const Tensor& x, const Tensor& ref, const std::vector<double>& observed) {
  const std::int64_t declared = m.inputs[0].shape.empty() ? 0 : m.inputs[0].shape[0];
  const std::int64_t per = declared >= 1 ? declared : 1;
  const std::int64_t count = x.shape.empty() || x.shape[0] % per ? 1 : x.shape[0] / per;
  if (count <= 1 || ref.shape.empty() || ref.shape[0] % count) {
    return {Chunk{x, ref, observed, 0, 1}};
  }
  const std::int64_t out_rows = ref.shape[0] / count;
  const std::size_t out_per = ref.data.size() / static_cast<std::size_t>(count);
  std::vector<Chunk> r;
  for (std::int64_t c = 0; c < count; ++c) {
    const auto at = static_cast<std::ptrdiff_t>(out_per * static_cast<std::size_t>(c));
    std::vector<double> obs;  // empty when calibrating (no observed output)
    if (!observed.empty())
      obs.assign(observed.begin() + at, observed.begin() + at + static_cast<std::ptrdiff_t>(out_per));
    r.push_back(Chunk{rows_of(x, c * per, per), rows_of(ref, c * out_rows, out_rows), std::move(obs),
                      static_cast<std::size_t>(c), static_cast<std::size_t>(count)});
  }
  return r;
}

// The output errors of one chunk, slice by slice: the observed output's (slice 0; left 0 when
// calibrating alone: judge_band takes it through a pass of its own), the K honest runs', then
// standard normal probes (drawn anew for each chunk: the probes of the whole output are
// independent entries). The honest runs go side by side, one core each (their values do not
// depend on the thread count), in place of one run at a time on every core: a run's small
// layers and elementwise ops keep one core busy.
std::vector<double> output_slices(const Model& m, const BnPatterns& pairs, const Chunk& c, const OutputBandOptions& o) {
  const std::size_t n = c.ref.data.size();
  std::vector<double> g((1 + o.samples + o.probes) * n);
  for (std::size_t i = 0; i < c.observed.size() && i < n; ++i) g[i] = c.observed[i] - c.ref.data[i];
  const std::string items = c.count > 1 ? fmt::format(", input {}/{}", c.index + 1, c.count) : "";
  const unsigned cores = detail::thread_count(o.threads);
  const unsigned side = std::max(1u, std::min<unsigned>(cores, static_cast<unsigned>(o.samples)));
  const unsigned each = std::max(1u, cores / side);
  detail::run_tasks(
      o.samples, side,
      [&](std::size_t k) {
        const Tensor y =
            run_model(m, pairs, {{m.inputs[0].name, c.x}}, honest_kind(k, o.seed, each)).at(m.outputs[0].name);
        for (std::size_t i = 0; i < n; ++i) g[(1 + k) * n + i] = y.data[i] - c.ref.data[i];
      },
      [&](std::size_t, std::size_t done) {
        if (o.progress) o.progress(fmt::format("band: honest float32 runs {}/{}{}", done, o.samples, items));
      });
  std::mt19937_64 rng(o.seed ^ 0x6a09e667f3bcc909ULL ^ (c.index * 0x9e3779b97f4a7c15ULL));
  boost::random::normal_distribution<double> nd;  // the same values on every platform
  for (std::size_t i = (1 + o.samples) * n; i < g.size(); ++i) g[i] = nd(rng);
  return g;
}

// The drift every BatchNorm's scale takes when 1/sqrt(var + eps) is a hardware estimate refined
// by one Newton step (TensorFlow's BatchNorm and the TFLite converter's fold: Eigen's rsqrt):
// from y0 = r (1 + e0) the step gives r (1 - 1.5 e0^2 - 0.5 e0^3), a shrink in [0, 1.5 e^2 +
// 0.5 e^3] for |e0| <= e = 1.5 * 2^-12 (Intel's bound on rsqrtps), up to ~0.2 ppm per channel and
// on average ~0.01 ppm (measured: rsqrtps + one step on this project's AMD host, mean -0.0093 ppm;
// tf.math.rsqrt the same). Per channel far below rounding, but of one sign in every channel of
// every layer: it adds up along one output direction, which the honest runs' unbiased errors do
// not reach (one TFLite ResNet-18 output stood 1.05x beyond a channel's band for it). Its common
// part is a nuisance the band removes from the observed and the honest errors alike: the
// least-squares multiple mu of that direction, within [-kRsqrtShrink, 0] (what the arithmetic
// can produce; a bug's larger or upward drift stays), is taken out before the reverse pass. Each
// channel's own part (the spread of -1.5 e0^2 about its mean) is in the honest runs: two kinds
// compute their BatchNorms' scales so (honest_kind).
constexpr double kRsqrtEstimate = 1.5 * 0x1p-12;
constexpr double kRsqrtShrink =
    1.5 * kRsqrtEstimate * kRsqrtEstimate + 0.5 * kRsqrtEstimate * kRsqrtEstimate * kRsqrtEstimate;

// d = dy / d delta when every BatchNorm's output y moves by delta (y - beta_c) (its scale by a
// factor 1 + delta): central differences of two float64 runs of the chunk, delta = +-2^-20 (the
// model is piecewise linear in delta at this size but for kinks its outputs do not sit on;
// float64's rounding leaves ~1e-9 of d). Its own runs, not the caller's reference: d must not
// carry any difference between the two.
std::vector<double> scale_drift(const Model& m, const BnPatterns& pairs, const Chunk& c, unsigned threads) {
  constexpr double h = 0x1p-20;
  if (std::none_of(m.nodes.begin(), m.nodes.end(), [](const ModelNode& n) { return n.op == "BatchNormalization"; }))
    return {};  // no BatchNorm: no drift (remove_scale_drift leaves the slices)
  std::vector<double> y[2];
  for (int s = 0; s < 2; ++s) {
    const double delta = s ? -h : h;
    ModelRunOptions f64;
    f64.dtype = DType::Float64;
    f64.policy.threads = f64.ref.threads = threads;
    f64.after_node = [&](std::size_t i, const std::vector<const Tensor*>&, Tensor& out) {
      const ModelNode& n = m.nodes[i];
      if (n.op != "BatchNormalization" || n.inputs.size() < 3) return;
      const Tensor* beta = m.initializer(n.inputs[2]);
      const ops::ChannelOf ch(out.shape);
      if (!beta || beta->data.size() != static_cast<std::size_t>(ch.C)) return;
      for (std::size_t k = 0; k < out.data.size(); ++k) out.data[k] += delta * (out.data[k] - beta->data[ch(k)]);
    };
    y[s] = run_model(m, pairs, {{m.inputs[0].name, c.x}}, f64).at(m.outputs[0].name).data;
  }
  std::vector<double> d(y[0].size());
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = (y[0][i] - y[1][i]) / (2 * h);
  return d;
}

// Slices [0, count) of g (each d.size() long) less their multiple mu of d, mu the least-squares
// fit clamped to [-kRsqrtShrink, 0]; returns slice 0's mu.
double remove_scale_drift(std::vector<double>& g, const std::vector<double>& d, std::size_t count) {
  const std::size_t n = d.size();
  double dd = 0;
  for (const double v : d) dd += v * v;
  double first = 0;
  if (!(dd > 0) || !std::isfinite(dd)) return first;
  for (std::size_t s = 0; s < count && (s + 1) * n <= g.size(); ++s) {
    double ed = 0;
    for (std::size_t i = 0; i < n; ++i) ed += g[s * n + i] * d[i];
    if (!std::isfinite(ed)) continue;  // a non-finite output: nothing to fit (the clamp would say -0.2 ppm)
    const double mu = std::clamp(ed / dd, -kRsqrtShrink, 0.0);
    for (std::size_t i = 0; i < n; ++i) g[s * n + i] -= mu * d[i];
    if (s == 0) first = mu;
  }
  return first;
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
void exact_size(const Model& m, const Unit& u, const Tensor& x, const Tensor& ref, BandDirection& d, unsigned threads) {
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

// The direction the answer names, first in r.beyond and r.worst, its size exact. Beyond some
// band: of the directions beyond theirs, the one whose change alone explains most of the output
// error, the least-squares fit n^2 / |J v|^2 = n rho. The largest ratio to the band would name
// a direction correlated with the changed one whose band is narrower (one channel of an early
// layer scaled by 20 ppm moved 1,709 directions beyond their bands; the largest ratio, 5.8, was
// a channel of a later layer, the changed channel's 2.4, and it explained the error best). The
// probes' sizes (~35% at R = 16; the largest of many estimates are mostly underestimated sizes:
// the changed channel's was 9th of 1,709, the first's 3x its exact value) pick 16
// candidates, one float64 run each (only on a SUSPICIOUS output); exact sizes decide, and give
// the sizes of the next two shown. Within every band: the closest to its band, its size exact.
void name_first(const std::vector<BandDirection>& all, const std::function<void(BandDirection&)>& exact,
                OutputBand& r) {
  if (r.beyond_count == 0) {
    if (r.worst) exact(*r.worst);
    return;
  }
  std::vector<BandDirection> candidates;
  for (const BandDirection& d : all)
    if (!(d.ratio <= 1) && std::isfinite(d.n * d.rho)) candidates.push_back(d);
  const auto explains = [](const BandDirection& a, const BandDirection& b) { return a.n * a.rho > b.n * b.rho; };
  const std::size_t top = std::min<std::size_t>(candidates.size(), 16);
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(top), candidates.end(),
                    explains);
  candidates.resize(top);
  for (BandDirection& d : candidates) exact(d);
  if (candidates.empty()) return;
  const BandDirection best = *std::min_element(candidates.begin(), candidates.end(), explains);
  const auto same = [&](const BandDirection& d) { return d.layer == best.layer && d.channel == best.channel; };
  std::erase_if(r.beyond, same);
  r.beyond.insert(r.beyond.begin(), best);
  if (r.beyond.size() > 16) r.beyond.resize(16);
  for (std::size_t i = 1; i < std::min<std::size_t>(r.beyond.size(), 3); ++i) {
    const auto known = std::find_if(candidates.begin(), candidates.end(), [&](const BandDirection& d) {
      return d.layer == r.beyond[i].layer && d.channel == r.beyond[i].channel;
    });
    if (known != candidates.end()) r.beyond[i] = *known;  // its size already exact
    else exact(r.beyond[i]);
  }
  r.worst = best;
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
  // The slices in contiguous parts, one reverse pass each, side by side (a pass's elementwise
  // derivatives and projections run on one core; the slices are independent, so the figures
  // are those of one pass over all of them, for any thread count).
  const unsigned cores = detail::thread_count(threads);
  const std::size_t parts = std::max<std::size_t>(1, std::min<std::size_t>(cores, slices)), n = g.size() / slices;
  std::vector<std::vector<std::vector<std::vector<double>>>> part(parts);
  detail::run_tasks(
      parts, static_cast<unsigned>(parts),
      [&](std::size_t p) {
        const std::size_t s0 = slices * p / parts, s1 = slices * (p + 1) / parts;
        std::vector<double> gp(g.begin() + static_cast<std::ptrdiff_t>(s0 * n),
                               g.begin() + static_cast<std::ptrdiff_t>(s1 * n));
        const auto at = Reverse(m, pairs, values, s1 - s0, std::max(1u, cores / static_cast<unsigned>(parts)))
                            .run(std::move(gp), us);
        part[p].resize(us.size());
        for (std::size_t k = 0; k < us.size(); ++k)
          if (!at[k].empty()) part[p][k] = projections(us[k], values.at(us[k].out), at[k], s1 - s0);
      },
      [](std::size_t, std::size_t) {});
  std::vector<std::vector<std::vector<double>>> proj = std::move(part[0]);
  for (std::size_t p = 1; p < parts; ++p)
    for (std::size_t k = 0; k < us.size(); ++k)
      for (std::size_t d = 0; d < proj[k].size(); ++d)
        proj[k][d].insert(proj[k][d].end(), part[p][k][d].begin(), part[p][k][d].end());
  return proj;
}

// sum += part, entry by entry (a unit off the output's paths is empty in both).
void add_projections(std::vector<std::vector<std::vector<double>>>& sum,
                     const std::vector<std::vector<std::vector<double>>>& part) {
  if (sum.empty()) {
    sum = part;
    return;
  }
  for (std::size_t k = 0; k < sum.size(); ++k)
    for (std::size_t d = 0; d < sum[k].size(); ++d)
      for (std::size_t s = 0; s < sum[k][d].size(); ++s) sum[k][d][s] += part[k][d][s];
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

// The honest side of the band (output_band.hpp): the model's units and, per unit, direction
// and slice, the projections of the honest runs and probes (slice 0, the observed output's, 0).
struct BandHonest {
  std::vector<Unit> units;
  std::vector<std::vector<std::vector<double>>> proj;
  std::vector<std::vector<double>> drift;  // per chunk: scale_drift
  double observed_drift = 0;               // slice 0's removed drift, mean over the chunks
  std::size_t directions = 0;
};

namespace {

// calibrate_band, with the observed output's projections in slice 0 when `observed` is not
// empty (output_band: one reverse pass for the observed output and the honest side).
BandCalibration calibrate(const Model& m, const BnPatterns& pairs, const Tensor& x, const Tensor& reference,
                          const std::vector<double>& observed, const OutputBandOptions& o) {
  BandCalibration cal;
  cal.not_computed = no_derivative(m, pairs);
  auto h = std::make_shared<BandHonest>();
  if (!cal.not_computed) h->units = units(m, pairs);
  if (!cal.not_computed && h->units.empty()) cal.not_computed = "the model has no conv or foldable layer";
  if (!cal.not_computed && o.samples == 0) cal.not_computed = "no honest runs (samples 0)";
  if (cal.not_computed) return cal;
  try {
    const std::size_t B = 1 + o.samples + o.probes;
    for (const Chunk& c : chunks(m, x, reference, observed)) {
      std::vector<double> g = output_slices(m, pairs, c, o);
      h->drift.push_back(scale_drift(m, pairs, c, o.threads));
      h->observed_drift += remove_scale_drift(g, h->drift.back(), 1 + o.samples) / static_cast<double>(c.count);
      if (o.progress) o.progress("band: reverse pass");
      add_projections(h->proj, project(m, pairs, h->units, c.x, std::move(g), B, o.threads));
    }
    for (const auto& pu : h->proj)
      for (const std::vector<double>& p : pu)
        h->directions += std::any_of(p.begin() + 1 + static_cast<std::ptrdiff_t>(o.samples), p.end(),
                                     [](double v) { return v != 0; });
    cal.honest = std::move(h);
  } catch (const InputError& e) {
    cal.not_computed = e.what();
  }
  return cal;
}

// The observed output's projections on every direction, per unit and direction (one slice), and
// its removed BatchNorm-scale drift (mean over the chunks) in `drift`.
std::vector<std::vector<std::vector<double>>> observed_projections(const Model& m, const BnPatterns& pairs,
                                                                   const BandHonest& h, const Tensor& x,
                                                                   const Tensor& reference,
                                                                   const std::vector<double>& observed,
                                                                   unsigned threads, double& drift) {
  std::vector<std::vector<std::vector<double>>> proj;
  drift = 0;
  for (const Chunk& c : chunks(m, x, reference, observed)) {
    std::vector<double> e(c.ref.data.size());
    for (std::size_t i = 0; i < e.size(); ++i) e[i] = c.observed[i] - c.ref.data[i];
    drift += remove_scale_drift(e, h.drift.at(c.index), 1) / static_cast<double>(c.count);
    add_projections(proj, project(m, pairs, h.units, c.x, std::move(e), 1, threads));
  }
  return proj;
}

// Every direction's band and the observed output's place in it (slice 0 its projection), and
// the range of the t's degrees of freedom; alpha_d: the false alarm per direction.
std::vector<BandDirection> directions(const BandHonest& h, const std::vector<std::vector<std::vector<double>>>& seen,
                                      std::size_t samples, double alpha_d, OutputBand& r) {
  std::vector<BandDirection> all;
  std::map<double, double> quantiles;  // by degrees of freedom: one per unit, and t_K
  const auto quantile = [&](double dof) {
    const auto it = quantiles.find(dof);
    if (it != quantiles.end()) return it->second;
    return quantiles[dof] = boost::math::quantile(boost::math::complement(boost::math::students_t(dof), alpha_d / 2));
  };
  r.dof_min = HUGE_VAL, r.dof_max = 0;
  for (std::size_t k = 0; k < h.units.size(); ++k) {
    const std::size_t D = h.proj[k].size();
    std::vector<double> s2(D), size2(D);
    std::vector<bool> pooled(D);
    for (std::size_t d = 0; d < D; ++d) {
      s2[d] = honest_s2(h.proj[k][d], samples), size2[d] = probe_size2(h.proj[k][d], samples);
      pooled[d] = channel_of(h.units[k], d, D) >= 0;
    }
    const ModeratedVariance mv = moderate_variance(s2, size2, pooled, samples);
    for (std::size_t d = 0; d < D; ++d) {
      // A direction no output moves along (a channel a ReLU zeroes everywhere): not tested.
      if (!(size2[d] > 0)) continue;
      all.push_back(
          direction(h.units[k], channel_of(h.units[k], d, D), seen[k][d][0], size2[d], mv.var[d], quantile(mv.dof[d])));
      r.dof_min = std::min(r.dof_min, mv.dof[d]), r.dof_max = std::max(r.dof_max, mv.dof[d]);
    }
  }
  if (all.empty()) r.dof_min = 0;
  return all;
}

// The band of the observed output whose projections are `seen` (per unit, direction, slice 0).
OutputBand judge(const BandHonest& h, const std::vector<std::vector<std::vector<double>>>& seen, double drift,
                 const Model& m, const Tensor& x, const Tensor& reference, const OutputBandOptions& o) {
  OutputBand r;
  try {
    r.scale_drift = drift;
    r.samples = o.samples;
    r.probes = o.probes;
    r.directions = h.directions;
    r.alpha = o.alpha;
    r.alpha_direction = o.alpha / static_cast<double>(std::max<std::size_t>(h.directions, 1));
    std::vector<BandDirection> all = directions(h, seen, o.samples, r.alpha_direction, r);
    if (r.dof_min > 0)
      r.quantile =
          boost::math::quantile(boost::math::complement(boost::math::students_t(r.dof_min), r.alpha_direction / 2));
    summarise(all, r);
    const auto exact = [&](BandDirection& d) {
      const auto it = std::find_if(h.units.begin(), h.units.end(), [&](const Unit& u) { return u.name == d.layer; });
      if (it != h.units.end()) exact_size(m, *it, x, reference, d, o.threads);
    };
    name_first(all, exact, r);
  } catch (const InputError& e) {
    r = OutputBand{};
    r.not_computed = e.what();
  }
  return r;
}

}  // namespace

BandCalibration calibrate_band(const Model& m, const BnPatterns& pairs, const Tensor& x, const Tensor& reference,
                               const OutputBandOptions& o) {
  return calibrate(m, pairs, x, reference, {}, o);
}

OutputBand judge_band(const BandCalibration& cal, const Model& m, const BnPatterns& pairs, const Tensor& x,
                      const Tensor& reference, const std::vector<double>& observed, const OutputBandOptions& o) {
  if (cal.not_computed || !cal.honest) {
    OutputBand r;
    r.not_computed = cal.not_computed.value_or("no calibration");
    return r;
  }
  try {
    if (o.progress) o.progress("band: the observed output's reverse pass");
    double drift = 0;
    auto seen = observed_projections(m, pairs, *cal.honest, x, reference, observed, o.threads, drift);
    return judge(*cal.honest, seen, drift, m, x, reference, o);
  } catch (const InputError& e) {
    OutputBand r;
    r.not_computed = e.what();
    return r;
  }
}

// One reverse pass for the observed output and the honest side (the same figures as
// judge_band(calibrate_band(...)): slice 0 of the calibration's projections is the observed
// output's, taken through the same arithmetic as a pass of its own).
OutputBand output_band(const Model& m, const BnPatterns& pairs, const Tensor& x, const Tensor& reference,
                       const std::vector<double>& observed, const OutputBandOptions& o) {
  const BandCalibration cal = calibrate(m, pairs, x, reference, observed, o);
  if (cal.not_computed || !cal.honest) return judge_band(cal, m, pairs, x, reference, observed, o);
  return judge(*cal.honest, cal.honest->proj, cal.honest->observed_drift, m, x, reference, o);
}

}  // namespace foldcheck
