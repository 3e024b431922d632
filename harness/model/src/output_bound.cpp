// The Monte Carlo end-to-end output bound (output_bound.hpp).
#include "foldcheck/model/output_bound.hpp"

#include <cmath>
#include <optional>
#include <random>
#include <set>

#include <boost/random/normal_distribution.hpp>
#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/task_pool.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "ops_common.hpp"

namespace foldcheck {
namespace {

constexpr double kU = 0x1p-24;  // float32 unit roundoff: the engine's activations

// The standard normal draws of the perturbed runs: Boost.Random's ziggurat (Marsaglia & Tsang;
// exact N(0, 1) up to the double rounding of its tables), about 4x faster than libstdc++'s
// polar method, which spent a logarithm per pair of draws and took 45% of a perturbed run.
// The bound needs exact Gaussians (S^ = S chi^2_K / K, see the header), not merely mean zero
// and unit variance: a ziggurat is exact, unlike a sum of uniforms. Boost does not promise
// the same stream across its versions: a seed's bound is reproducible with Debian 12's Boost
// 1.74 (the committed baselines were made with it), and another version may move it within
// its sampling noise.
using Gaussian = boost::random::normal_distribution<double>;

using ops::ChannelOf;

// Per channel: the BatchNorm scale s = gamma / sqrt(var + eps) and the folded bias
// b' = beta + (b - mu) s (b: the layer's bias, 0 if none), in double (they only size bounds).
struct ChannelAffine {
  std::vector<double> s, folded_bias, centred;  // centred: |(b - mu) s|
};
ChannelAffine channel_affine(const ref::BnParams& bn, const std::vector<double>& bias) {
  ChannelAffine a;
  for (std::size_t c = 0; c < bn.gamma.size(); ++c) {
    const double s = bn.gamma[c] / std::sqrt(bn.var[c] + bn.eps);
    const double t = ((bias.empty() ? 0.0 : bias[c]) - bn.mean[c]) * s;
    a.s.push_back(s);
    a.centred.push_back(std::fabs(t));
    a.folded_bias.push_back(bn.beta[c] + t);
  }
  return a;
}

// The local error amplitudes b_i of every node output (see the header), from the
// unperturbed run's values.
class Amplitudes {
 public:
  Amplitudes(const Model& m, const BnPatterns& pairs, double storage_u, double storage_eta)
      : m_(m), us_(storage_u), eta_(storage_eta) {
    for (const BnPair& p : pairs.pairs) pair_of_bn_[p.bn] = &p;
  }

  // The run hook: records b for node `i`'s output.
  void record(std::size_t i, const std::vector<const Tensor*>& in, const Tensor& y) {
    const ModelNode& n = m_.nodes[i];
    std::vector<double> b(y.data.size(), 0.0);
    if (const auto it = pair_of_bn_.find(i); it != pair_of_bn_.end()) {
      const BnPair& p = *it->second;
      const LayerParams lp = layer_params(m_, p);
      const ChannelAffine a = channel_affine(lp.bn, lp.bias);
      const Tensor M = magnitude(m_, p.layer, {{m_.nodes[p.layer].inputs[0], *in.at(0)}});
      check_size(M, y, n);
      const double n1 = static_cast<double>(lp.per_channel + 1);
      const ChannelOf ch(y.shape);
      for (std::size_t k = 0; k < b.size(); ++k) {
        const std::size_t c = ch(k);
        const double acc = std::fabs(a.s[c]) * M.data[k] + std::fabs(a.folded_bias[c]);
        const double bn = std::fabs(y.data[k]) + std::fabs(lp.bn.beta[c]);
        b[k] = kU * std::sqrt(n1 * acc * acc + 3.0 * bn * bn);
        if (us_ > 0) {  // the BatchNorm's output stored, and an unfolded conv's output before it
          const double conv =
              us_ * (std::fabs(y.data[k]) + std::fabs(lp.bn.beta[c]) + std::fabs(a.s[c] * lp.bn.mean[c]));
          const double out = us_ * std::fabs(y.data[k]) + eta_;
          b[k] = std::sqrt(b[k] * b[k] + out * out + (conv + eta_) * (conv + eta_));
        }
      }
      amp_[i] = std::move(b);
      return;
    } else if (n.op == "Conv" || n.op == "ConvTranspose" || n.op == "Gemm" || n.op == "MatMul") {
      const Tensor M = magnitude(m_, i, named_inputs(n, in));
      check_size(M, y, n);
      const Tensor* w = in.size() > 1 ? in[1] : nullptr;
      const std::int64_t out_ch =
          y.shape.size() > 1 ? (n.op == "Conv" || n.op == "ConvTranspose" ? y.shape[1] : y.shape.back()) : 1;
      const double terms = w ? static_cast<double>(w->size() / std::max<std::int64_t>(out_ch, 1)) : 1.0;
      // MatMul of two activations: K is the shared dimension.
      const double k = n.op == "MatMul" && in.at(0)->shape.size() ? static_cast<double>(in.at(0)->shape.back()) : terms;
      for (std::size_t j = 0; j < b.size(); ++j) b[j] = std::sqrt(k + 1.0) * kU * M.data[j];
    } else if (n.op == "AveragePool" || n.op == "GlobalAveragePool") {
      const Tensor A = magnitude(m_, i, named_inputs(n, in));
      check_size(A, y, n);
      double k = 1;
      if (n.op == "GlobalAveragePool") {
        for (std::size_t d = 2; d < in.at(0)->shape.size(); ++d) k *= static_cast<double>(in.at(0)->shape[d]);
        k += 1;  // the multiply by 1/k an engine may use instead of the division
      } else {
        for (const auto v : n.ints_attr("kernel_shape")) k *= static_cast<double>(v);
      }
      for (std::size_t j = 0; j < b.size(); ++j) b[j] = std::sqrt(k + 1.0) * kU * A.data[j];
    } else if (n.op == "BatchNormalization") {
      const std::vector<double>& beta = in.at(2)->data;
      const ChannelOf ch(y.shape);
      for (std::size_t j = 0; j < b.size(); ++j)
        b[j] = std::sqrt(3.0) * kU * (std::fabs(y.data[j]) + std::fabs(beta[ch(j)]));
    } else if (n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div" || n.op == "LeakyRelu") {
      for (std::size_t j = 0; j < b.size(); ++j) b[j] = kU * std::fabs(y.data[j]);
    } else if (n.op == "Sigmoid") {
      for (std::size_t j = 0; j < b.size(); ++j) b[j] = 4.0 * kU * std::fabs(y.data[j]);
    } else if (n.op == "HardSigmoid" || n.op == "HardSwish") {
      const bool swish = n.op == "HardSwish";
      const double alpha = swish ? 1.0 / 6 : n.float_attr("alpha", 0.2), beta = swish ? 0.5 : n.float_attr("beta", 0.5);
      const Tensor& x = *in.at(0);
      for (std::size_t j = 0; j < b.size(); ++j) {
        const double h = kU * (2.0 * std::fabs(alpha * x.data[j]) + std::fabs(beta));
        b[j] = swish ? std::fabs(x.data[j]) * h + kU * std::fabs(y.data[j]) : h;
      }
    } else {
      amp_[i] = std::move(b);  // every other supported op is exact: b = 0
      return;
    }
    if (us_ > 0)  // a computed value, stored in the 16-bit type (absolutely eta below its normal range)
      for (std::size_t j = 0; j < b.size(); ++j) {
        const double st = us_ * std::fabs(y.data[j]) + eta_;
        b[j] = std::sqrt(b[j] * b[j] + st * st);
      }
    amp_[i] = std::move(b);
  }

  const std::vector<double>* of(std::size_t i) const {
    const auto it = amp_.find(i);
    return it == amp_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, Tensor> named_inputs(const ModelNode& n, const std::vector<const Tensor*>& in) const {
    std::map<std::string, Tensor> r;
    for (std::size_t k = 0; k < n.inputs.size(); ++k)
      if (!n.inputs[k].empty() && !m_.initializer(n.inputs[k]) && in.at(k)) r[n.inputs[k]] = *in[k];
    return r;
  }
  static void check_size(const Tensor& a, const Tensor& y, const ModelNode& n) {
    if (a.data.size() != y.data.size())
      throw std::logic_error(fmt::format("output bound: magnitude of {} {} has {} values, its output {}", n.op, n.name,
                                         a.data.size(), y.data.size()));
  }

  const Model& m_;
  double us_ = 0;   // u_s of 16-bit activations (0: float32)
  double eta_ = 0;  // their absolute error bound below the normal range, 2^(emin - p)
  std::map<std::size_t, const BnPair*> pair_of_bn_;
  std::map<std::size_t, std::vector<double>> amp_;
};

// The model with every fold rounding drawn (see the header): a copy whose pair weights,
// BatchNorm scales and pair BatchNorm shifts carry one perturbation each.
// With converted operands (u_op > 0), every layer's weights once more, and with 16-bit
// activations its bias and a pair's folded bias (the header's model).
void perturb_operands(const Model& m, const BnPatterns& pairs, const std::vector<ChannelAffine>& affine, double uop,
                      double eta, bool biases, Model& p, std::mt19937_64& rng) {
  Gaussian g;
  std::set<std::string> done;
  for (const ModelNode& n : m.nodes) {
    if (n.op != "Conv" && n.op != "ConvTranspose" && n.op != "Gemm" && n.op != "MatMul") continue;
    for (std::size_t k = 0; k < n.inputs.size() && k < 3; ++k) {
      const std::string& v = n.inputs[k];
      if (k == 0 || (k == 2 && !biases) || v.empty() || !m.initializer(v) || !done.insert(v).second) continue;
      for (double& x : p.own_initializer(v).data) x += g(rng) * (uop * std::fabs(x) + eta);
    }
  }
  if (!biases) return;
  for (std::size_t q = 0; q < pairs.pairs.size(); ++q) {
    const ChannelAffine& a = affine[q];
    Tensor& beta = p.own_initializer(m.nodes[pairs.pairs[q].bn].inputs[2]);
    for (std::size_t c = 0; c < beta.data.size(); ++c)
      beta.data[c] += g(rng) * (uop * std::fabs(a.folded_bias[c]) + eta);
  }
}

// Per pair, in the patterns' order: its ChannelAffine (the model's parameters: the same for
// every perturbed run, computed once).
std::vector<ChannelAffine> pair_affines(const Model& m, const BnPatterns& pairs) {
  std::vector<ChannelAffine> r;
  for (const BnPair& pr : pairs.pairs) {
    const LayerParams lp = layer_params(m, pr);
    r.push_back(channel_affine(lp.bn, lp.bias));
  }
  return r;
}

Model perturbed_parameters(const Model& m, const BnPatterns& pairs, const std::vector<ChannelAffine>& affine,
                           std::mt19937_64& rng) {
  Gaussian g;
  Model p = m;
  std::map<std::string, double> weight_u;  // BatchNorm gamma initializer -> u_w of its pair's weights
  for (std::size_t q = 0; q < pairs.pairs.size(); ++q) {
    const BnPair& pr = pairs.pairs[q];
    const ModelNode& layer = m.nodes[pr.layer];
    const ModelNode& bn = m.nodes[pr.bn];
    const Tensor& w0 = *m.initializer(layer.inputs[1]);
    const double uw = info(w0.dtype).unit_roundoff;
    weight_u[bn.inputs[1]] = uw;
    Tensor& w = p.own_initializer(layer.inputs[1]);
    for (double& v : w.data) v *= 1.0 + uw * g(rng);
    const ChannelAffine& a = affine[q];
    Tensor& beta = p.own_initializer(bn.inputs[2]);
    for (std::size_t c = 0; c < beta.data.size(); ++c)
      beta.data[c] += g(rng) * (3.0 * uw * a.centred[c] + uw * std::fabs(a.folded_bias[c]));
  }
  for (const ModelNode& n : m.nodes) {
    if (n.op != "BatchNormalization" || !m.initializer(n.inputs.at(1))) continue;
    const auto it = weight_u.find(n.inputs[1]);
    const double uw = it == weight_u.end() ? kU : std::max(kU, it->second);
    for (double& v : p.own_initializer(n.inputs[1]).data) v *= 1.0 + 4.0 * uw * g(rng);
  }
  return p;
}

// Each layer's own input conversion when activations stay float32 and operands are converted
// (TF32, bf16 or fp16 operands with float32 activations, the header's model): the conversion
// error dx = u_op |x| g of the layer's input, seen by that layer alone, enters its output as the
// layer's linear response to dx (times the BatchNorm's scale for a pair, which the run hook
// sees at the BatchNorm).
class InputConversion {
 public:
  InputConversion(const Model& m, const BnPatterns& pairs, double uop, double eta) : m_(m), uop_(uop), eta_(eta) {
    for (const BnPair& p : pairs.pairs) {
      const LayerParams lp = layer_params(m, p);
      pair_[p.bn] = {p.layer, channel_affine(lp.bn, lp.bias).s};
    }
  }

  void apply(std::size_t node, const Tensor& x, Tensor& y, Gaussian& g, std::mt19937_64& rng) const {
    std::size_t layer = node;
    const std::vector<double>* scale = nullptr;
    if (const auto it = pair_.find(node); it != pair_.end()) {
      layer = it->second.first;
      scale = &it->second.second;
    }
    const ModelNode& n = m_.nodes[layer];
    const bool linear = n.op == "Conv" || n.op == "ConvTranspose" || n.op == "Gemm" || n.op == "MatMul";
    if (!linear || n.inputs.size() < 2 || !m_.initializer(n.inputs[1])) return;
    Tensor dx = x;
    for (double& v : dx.data) v = (uop_ * std::fabs(v) + eta_) * g(rng);
    const Tensor r = linear_response(m_, layer, dx);
    if (r.data.size() != y.data.size())
      throw std::logic_error("output bound: the input conversion of " + n.op + " " + n.name + " has another size");
    const ChannelOf ch(y.shape);
    for (std::size_t j = 0; j < y.data.size(); ++j) y.data[j] += r.data[j] * (scale ? (*scale)[ch(j)] : 1.0);
  }

 private:
  const Model& m_;
  double uop_, eta_;  // the conversion's relative bound and its absolute one below the normal range
  std::map<std::size_t, std::pair<std::size_t, std::vector<double>>> pair_;  // BatchNorm -> (layer, scale)
};

// Perturbed run k (the header's model): its own seeded stream, drawn in node order.
std::map<std::string, Tensor> perturbed_run(const Model& m, const BnPatterns& pairs,
                                            const std::vector<ChannelAffine>& affine,
                                            const std::map<std::string, Tensor>& inputs, const OutputBoundOptions& opts,
                                            const Amplitudes& amp, const InputConversion* conversion, std::size_t k) {
  std::seed_seq seq{static_cast<std::uint32_t>(opts.seed), static_cast<std::uint32_t>(opts.seed >> 32),
                    static_cast<std::uint32_t>(k), 0x6f62u};
  std::mt19937_64 rng(seq);
  Model pm = perturbed_parameters(m, pairs, affine, rng);
  Gaussian g;
  std::map<std::string, Tensor> in = inputs;
  if (opts.operand_u > 0) {
    perturb_operands(m, pairs, affine, opts.operand_u, opts.operand_eta, opts.storage_u > 0, pm, rng);
    if (opts.storage_u > 0)  // 16-bit activations: the first layer converts the graph input
      for (auto& [name, t] : in)
        for (double& v : t.data) v += g(rng) * (opts.operand_u * std::fabs(v) + opts.operand_eta);
  }
  ModelRunOptions so;
  so.dtype = DType::Float64;
  so.policy.threads = 1;
  so.after_node = [&](std::size_t i, const std::vector<const Tensor*>& ins, Tensor& y) {
    if (conversion && !ins.empty() && ins[0]) conversion->apply(i, *ins[0], y, g, rng);
    if (const std::vector<double>* b = amp.of(i))
      for (std::size_t j = 0; j < y.data.size(); ++j)
        if ((*b)[j] != 0.0) y.data[j] += (*b)[j] * g(rng);
  };
  return run_model(pm, pairs, in, so);
}

}  // namespace

void output_bound_factors(double m, std::size_t samples, double confidence, double& lambda, double& inflation) {
  if (!(confidence > 0 && confidence < 1) || samples < 2 || !(m >= 1))
    throw InputError("output bound: needs a confidence in (0, 1), at least 2 samples and one output");
  const double alpha = (1.0 - confidence) / 2.0;  // per part, over all m outputs
  lambda = std::sqrt(2.0 * std::log(2.0 * m / alpha));
  // Largest x in (0, 1) with (K/2)(ln x + 1 - x) <= ln(alpha / m): f(x) = ln x + 1 - x
  // increases from -inf to 0 on (0, 1]; bisect on t = ln x, keeping f(e^lo) <= target.
  const double target = 2.0 / static_cast<double>(samples) * std::log(alpha / m);
  double lo = target - 1.0, hi = 0.0;  // f(e^t) < t + 1 <= target at t = target - 1
  for (int it = 0; it < 100; ++it) {
    const double mid = 0.5 * (lo + hi);
    (mid + 1.0 - std::exp(mid) <= target ? lo : hi) = mid;
  }
  inflation = std::exp(-0.5 * lo);  // sqrt(c) = sqrt(1 / x)
}

void set_end_to_end_arithmetic(const ConvArithmetic& a, bool stored16, OutputBoundOptions& o) {
  if (a.kind == ConvArithmeticKind::Float32) return;
  const std::optional<OperandFormat> f = a.operands();
  if (!f || a.split() || a.kind == ConvArithmeticKind::FP16Accumulate)
    throw InputError(fmt::format(fmt::runtime(field("arithmetic") +
                                              " {} is not modelled end to end (float32, tf32, bf16 and fp16 are); "
                                              "diagnose judges a layer in it"),
                                 a.name()));
  o.operand_u = f->u();
  o.operand_eta = f->eta();
  if (!stored16 || !a.storage_format()) return;  // float32 activations (tf32's always)
  o.storage_u = o.operand_u;
  o.storage_eta = o.operand_eta;
}

OutputBound output_bound(const Model& m, const BnPatterns& pairs, const std::map<std::string, Tensor>& inputs,
                         const OutputBoundOptions& opts) {
  OutputBound r;
  r.samples = opts.samples;
  r.seed = opts.seed;
  r.confidence = opts.confidence;
  ModelRunOptions ro;
  ro.dtype = DType::Float64;
  ro.policy.threads = opts.threads;

  // The unperturbed run records every local amplitude.
  Amplitudes amp(m, pairs, opts.storage_u, opts.storage_eta);
  ro.after_node = [&](std::size_t i, const std::vector<const Tensor*>& in, Tensor& y) { amp.record(i, in, y); };
  r.reference = run_model(m, pairs, inputs, ro);
  for (const ValueInfo& v : m.outputs) {
    r.sigma[v.name].assign(r.reference.at(v.name).data.size(), 0.0);
    r.outputs += r.reference.at(v.name).data.size();
  }
  output_bound_factors(static_cast<double>(r.outputs), opts.samples, opts.confidence, r.lambda, r.inflation);

  // K perturbed runs, each drawing in node order from its own seeded stream; samples run
  // in parallel (one core each) and their squared deviations are summed in sample order,
  // so the result does not depend on the thread count.
  std::vector<std::vector<double>> sq(opts.samples);
  std::optional<InputConversion> conversion;  // float32 activations with converted operands
  if (opts.operand_u > 0 && opts.storage_u == 0) conversion.emplace(m, pairs, opts.operand_u, opts.operand_eta);
  const std::vector<ChannelAffine> affine = pair_affines(m, pairs);
  auto sample = [&](std::size_t k) {
    const auto out = perturbed_run(m, pairs, affine, inputs, opts, amp, conversion ? &*conversion : nullptr, k);
    for (const ValueInfo& v : m.outputs) {
      const std::vector<double>& y = out.at(v.name).data;
      const std::vector<double>& y0 = r.reference.at(v.name).data;
      for (std::size_t j = 0; j < y.size(); ++j) sq[k].push_back((y[j] - y0[j]) * (y[j] - y0[j]));
    }
  };
  detail::run_tasks(opts.samples, opts.threads, sample, [&](std::size_t, std::size_t done) {
    if (opts.progress) opts.progress(done, opts.samples);
  });
  for (std::size_t k = 0; k < opts.samples; ++k) {
    std::size_t j = 0;
    for (const ValueInfo& v : m.outputs)
      for (double& s : r.sigma[v.name]) s += sq[k][j++];
  }
  const double factor = r.lambda * r.inflation * (1.0 + 0x1p-29);
  for (auto& [name, s] : r.sigma) {
    std::vector<double>& bd = r.bound[name];
    for (double& v : s) {
      v = std::sqrt(v / static_cast<double>(opts.samples));
      bd.push_back(factor * v);
    }
  }
  r.formula = fmt::format(
      "probabilistic, first order: |y - y_ref| <= lambda sqrt(c S_j) with S_j the variance proxy sum J^2 b^2 of every "
      "local rounding (Higham-Mary model: independent mean-zero roundings, any summation order, engine in float32{}), "
      "estimated by {} perturbed float64 runs (seed {}); lambda = {:.3f}, sqrt(c) = {:.3f} for {} outputs at "
      "confidence {}",
      opts.operand_u > 0 || opts.storage_u > 0
          ? fmt::format(" with operands converted at u_op = 2^{} and activations stored at u_s = 2^{}",
                        std::ilogb(opts.operand_u > 0 ? opts.operand_u : kU),
                        std::ilogb(opts.storage_u > 0 ? opts.storage_u : kU))
          : std::string(),
      opts.samples, opts.seed, r.lambda, r.inflation, r.outputs, opts.confidence);
  return r;
}

}  // namespace foldcheck
