// Running a model end to end (model_run.hpp): the driver. It walks the graph in file
// order, runs each layer -> BatchNorm pair as one unit (ops_batchnorm.cpp) and every other
// node through the op registry (op_registry.hpp: the kernels live in ops_FAMILY.cpp), calls
// after_node and progress, and frees each value once its last reader has run.
#include "foldcheck/model/model_run.hpp"

#include <cmath>
#include <random>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "op_registry.hpp"
#include "ops_common.hpp"

namespace foldcheck {
namespace {

template <class T>
class Exec : public ops::OpRun<T> {
 public:
  Exec(const Model& m, const BnPatterns& pairs, const ModelRunOptions& o) : ops::OpRun<T>(m, o), pairs_(pairs) {}

  std::map<std::string, Tensor> run(const std::map<std::string, Tensor>& inputs) {
    for (const auto& [k, v] : inputs) {
      env_[k] = v;
      held_ += v.data.size();
    }
    std::map<std::size_t, const BnPair*> at_layer;
    std::set<std::size_t> skip;
    for (const BnPair& p : pairs_.pairs) {
      at_layer[p.layer] = &p;
      skip.insert(p.bn);
      for (const std::size_t i : p.through) skip.insert(i);
    }
    // Remaining uses of each value, to free activations once consumed.
    std::map<std::string, int> uses;
    for (const ModelNode& n : m_.nodes)
      for (const auto& in : n.inputs) ++uses[in];
    for (std::size_t i = 0; i < m_.nodes.size(); ++i) {
      const ModelNode& n = m_.nodes[i];
      // An Identity of an initializer is an alias of it (Model::aliases): get() finds it
      // there, so it is neither run nor copied (300 of them were 300 copies).
      const bool alias = n.op == "Identity" && n.outputs.size() == 1 && m_.aliases.count(n.outputs[0]);
      if (!skip.count(i) && !alias) {
        if (const auto it = at_layer.find(i); it != at_layer.end()) pair(*it->second);
        else node(n, i);
      }
      for (const auto& in : n.inputs)
        if (--uses[in] == 0 && !m_.is_graph_output(in) && !o_.keep.count(in) && !inputs.count(in)) this->drop(in);
      // Values nothing reads (dangling outputs, e.g. 300 unused Identities) are freed at once.
      for (const auto& out : n.outputs)
        if (!uses.count(out) && !m_.is_graph_output(out) && !o_.keep.count(out)) this->drop(out);
      if (o_.progress) o_.progress(i + 1, m_.nodes.size());
    }
    std::map<std::string, Tensor> out;
    for (const ValueInfo& v : m_.outputs) out[v.name] = this->get(v.name, "graph output");
    for (const std::string& k : o_.keep)
      if (env_.count(k)) out[k] = env_[k];
    return out;
  }

 private:
  using ops::OpRun<T>::m_;
  using ops::OpRun<T>::o_;
  using ops::OpRun<T>::env_;
  using ops::OpRun<T>::held_;

  // A layer -> BatchNorm pair: one unit, reported once with the BatchNorm's index.
  void pair(const BnPair& p) {
    const ModelNode& n = m_.nodes[p.layer];
    ops::run_pair(*this, p);
    if (o_.after_node) o_.after_node(p.bn, {&this->get(n.inputs.at(0), n.op)}, env_.at(m_.nodes[p.bn].outputs.at(0)));
  }

  // Any other node: its op's kernel (op_registry.hpp).
  void node(const ModelNode& n, std::size_t i) {
    if (!n.domain.empty() && n.domain != "ai.onnx") throw InputError(fmt::format("unsupported op {}::{} at node {}", n.domain, n.op, i));
    const ops::OpEntry* op = ops::find_op(n.op);
    if (!op) throw InputError(fmt::format("unsupported op {} at node {}{}", n.op, i, n.name.empty() ? "" : " (" + n.name + ")"));
    op->kernel.run(static_cast<ops::OpRun<T>&>(*this), n, i);
    if (o_.after_node && n.op != "Constant") {
      std::vector<const Tensor*> ins;
      for (const auto& in : n.inputs) ins.push_back(in.empty() ? nullptr : &this->get(in, ops::where(n, i)));
      o_.after_node(i, ins, env_.at(n.outputs.at(0)));
    }
  }

  const BnPatterns& pairs_;
};

// How many of the graph's declared batches x holds along its first dimension (1: as declared).
std::int64_t batch_factor(const ValueInfo& vi, const Tensor& x) {
  if (vi.shape.empty() || x.shape.empty() || vi.shape[0] < 1 || x.shape[0] <= vi.shape[0] || x.shape[0] % vi.shape[0])
    return 1;
  return x.shape[0] / vi.shape[0];
}

}  // namespace

std::string batch_output_mismatch(const Model& m, const Tensor& x, const Tensor& y) {
  const std::int64_t k = batch_factor(m.inputs.at(0), x);
  if (k == 1) return "";
  const ValueInfo& vo = m.outputs.at(0);
  const std::int64_t declared = !vo.shape.empty() && vo.shape[0] >= 1 ? vo.shape[0] : m.inputs[0].shape[0];
  if (!y.shape.empty() && y.shape[0] == k * declared) return "";
  return fmt::format(
      "a batch of {} inputs (shape {}) gave the output {} the shape {}, not {} along its first "
      "dimension: the model mixes or fixes its batch; give one input at a time",
      k, shape_string(x.shape), vo.name, shape_string(y.shape), k * declared);
}

Tensor model_input(const Model& m, const std::optional<std::string>& input, std::uint64_t seed, DType dt, Batch batch) {
  if (m.inputs.size() != 1)
    throw InputError(fmt::format("{}: {} graph inputs; model runs take models with one input", m.path, m.inputs.size()));
  const ValueInfo& vi = m.inputs[0];
  Tensor x;
  if (input) {
    x = read_npy(*input);
    if (x.data.empty()) throw InputError(fmt::format("{}: empty tensor (shape {})", *input, shape_string(x.shape)));
    if (const std::string bad = first_nonfinite(x.data); !bad.empty()) throw InputError(*input + ": input has " + bad);
    // The runs compute in dt: an input that is not a dt value would be rounded first,
    // and the comparison would not be of the values the other engine saw.
    for (std::size_t k = 0; k < x.data.size(); ++k)
      if (round_to(dt, x.data[k]) != x.data[k])
        throw InputError(fmt::format("{}: {} value {:.17g} at index {} is not a {} value (foldcheck's runs "
                                     "compute in {}{}: save the input as {})",
                                     *input, name(x.dtype), x.data[k], k, name(dt), name(dt),
                                     dt == DType::Float32 ? ", whatever the model's types" : "", name(dt)));
  } else {
    x.shape = vi.shape;
    for (std::size_t k = 0; k < x.shape.size(); ++k)
      if (x.shape[k] < 0) {
        if (k != 0) throw InputError(fmt::format(fmt::runtime("input {} has an unknown dimension {}: give " + field("input")), vi.name, k));
        x.shape[k] = 1;
      }
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd;
    x.data.resize(static_cast<std::size_t>(checked_element_count(x.shape, "input " + vi.name)));
    for (double& v : x.data) v = round_to(dt, nd(rng));
  }
  x.dtype = dt;
  if (x.shape.size() != vi.shape.size())
    throw InputError(fmt::format("{}: shape {}, the model's input {} is {}", input ? *input : std::string("input"), shape_string(x.shape), vi.name, shape_string(vi.shape)));
  const bool batched = batch == Batch::Free && batch_factor(vi, x) > 1;
  for (std::size_t k = batched ? 1 : 0; k < x.shape.size(); ++k)
    if (vi.shape[k] >= 0 && vi.shape[k] != x.shape[k])
      throw InputError(
          fmt::format("{}: shape {}, the model's input {} is {}{}", input ? *input : std::string("input"),
                      shape_string(x.shape), vi.name, shape_string(vi.shape),
                      batch == Batch::Free && vi.shape[0] >= 1
                          ? fmt::format(" (or a batch of them: a multiple of {} along the first dimension)",
                                        vi.shape[0])
                          : ""));
  return x;
}

Tensor magnitude(const Model& m, std::size_t node, const std::map<std::string, Tensor>& inputs) {
  // The node alone in a model of its own, every floating value replaced by its absolute
  // value, run in float64 by the same op code as every run.
  const ModelNode& n = m.nodes.at(node);
  Model sub;
  sub.path = m.path;
  sub.opset = m.opset;
  sub.nodes = {n};
  std::map<std::string, Tensor> abs_inputs;
  for (const std::string& in : n.inputs) {
    if (in.empty()) continue;
    if (const Tensor* t = m.initializer(in)) {
      Tensor a = *t;
      for (double& v : a.data) v = std::fabs(v);
      sub.initializers[in] = std::move(a);
    } else if (Shape shape; const auto* ints = m.int_initializer(in, &shape)) {
      sub.int_inits[in] = *ints;
      sub.int_init_shapes[in] = shape;
    } else {
      Tensor a = inputs.at(in);
      for (double& v : a.data) v = std::fabs(v);
      abs_inputs[in] = std::move(a);
      sub.inputs.push_back(ValueInfo{in, abs_inputs[in].shape, std::nullopt, ""});
    }
  }
  sub.outputs.push_back(ValueInfo{n.outputs.at(0), {}, std::nullopt, ""});
  ModelRunOptions o;
  o.dtype = DType::Float64;
  return run_model(sub, BnPatterns{}, abs_inputs, o).at(n.outputs.at(0));
}

Tensor linear_response(const Model& m, std::size_t node, const Tensor& dx) {
  const ModelNode& n = m.nodes.at(node);
  Model sub;
  sub.path = m.path;
  sub.opset = m.opset;
  sub.nodes = {n};
  if (sub.nodes[0].inputs.size() > 2) sub.nodes[0].inputs.resize(2);  // without the bias (Conv, Gemm's C)
  for (const std::string& in : sub.nodes[0].inputs) {
    if (in.empty() || in == n.inputs[0]) continue;
    if (const Tensor* t = m.initializer(in)) sub.initializers[in] = *t;
    else if (Shape shape; const auto* ints = m.int_initializer(in, &shape)) {
      sub.int_inits[in] = *ints;
      sub.int_init_shapes[in] = shape;
    } else {
      throw std::logic_error("linear_response: " + n.op + " " + n.name + " has a second input that is not a parameter");
    }
  }
  sub.inputs.push_back(ValueInfo{n.inputs[0], dx.shape, std::nullopt, ""});
  sub.outputs.push_back(ValueInfo{n.outputs.at(0), {}, std::nullopt, ""});
  ModelRunOptions o;
  o.dtype = DType::Float64;
  o.policy.threads = 1;
  return run_model(sub, BnPatterns{}, {{n.inputs[0], dx}}, o).at(n.outputs.at(0));
}

std::map<std::string, Tensor> run_model(const Model& m, const BnPatterns& pairs, const std::map<std::string, Tensor>& inputs,
                                        const ModelRunOptions& opts) {
  check_supported(m);  // and check_graph: valid single-assignment graph in topological order
  if (opts.dtype == DType::Float64) return Exec<double>(m, pairs, opts).run(inputs);
  if (opts.dtype != DType::Float32) throw InputError("model runs are float32 or float64");
  return Exec<float>(m, pairs, opts).run(inputs);
}

}  // namespace foldcheck
