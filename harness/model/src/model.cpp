// The model IR's queries (model.hpp); loading is onnx_model.cpp.
#include <algorithm>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/model/model.hpp"

namespace foldcheck {

const Attribute* ModelNode::attr(const std::string& key) const {
  const auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}
namespace {
// The attribute `key` if it has kind `k`; null if absent; InputError if it has another kind.
const Attribute* typed(const ModelNode& n, const std::string& key, Attribute::Kind k) {
  const Attribute* a = n.attr(key);
  if (a && a->kind != k)
    throw InputError(fmt::format("{}{}: attribute '{}' is {}; the op takes {}", n.op, n.name.empty() ? "" : " (" + n.name + ")",
                                 key, kind_name(a->kind), kind_name(k)));
  return a;
}
}  // namespace

const char* kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Int: return "INT";
    case Attribute::Kind::Float: return "FLOAT";
    case Attribute::Kind::String: return "STRING";
    case Attribute::Kind::Ints: return "INTS";
    case Attribute::Kind::Floats: return "FLOATS";
    case Attribute::Kind::Tensor: return "TENSOR";
    default: return "a kind foldcheck does not read (GRAPH, SPARSE_TENSOR, TYPE_PROTO or UNDEFINED)";
  }
}

std::int64_t ModelNode::int_attr(const std::string& key, std::int64_t fallback) const {
  const Attribute* a = typed(*this, key, Attribute::Kind::Int);
  return a ? a->i : fallback;
}
double ModelNode::float_attr(const std::string& key, double fallback) const {
  const Attribute* a = typed(*this, key, Attribute::Kind::Float);
  return a ? a->f : fallback;
}
std::vector<std::int64_t> ModelNode::ints_attr(const std::string& key) const {
  const Attribute* a = typed(*this, key, Attribute::Kind::Ints);
  return a ? a->ints : std::vector<std::int64_t>{};
}
std::string ModelNode::string_attr(const std::string& key, const std::string& fallback) const {
  const Attribute* a = typed(*this, key, Attribute::Kind::String);
  return a ? a->s : fallback;
}

// From the ONNX operator specs (onnx/defs/*/defs.cc), for every op foldcheck reads.
std::optional<Attribute::Kind> expected_attribute_kind(const std::string& op, const std::string& key) {
  using K = Attribute::Kind;
  static const std::map<std::string, K> spatial{{"auto_pad", K::String}, {"dilations", K::Ints}, {"group", K::Int},
                                                {"kernel_shape", K::Ints}, {"pads", K::Ints},  {"strides", K::Ints},
                                                {"output_padding", K::Ints}, {"output_shape", K::Ints},
                                                {"ceil_mode", K::Int}, {"count_include_pad", K::Int},
                                                {"storage_order", K::Int}};
  static const std::map<std::string, std::map<std::string, K>> ops{
      {"LeakyRelu", {{"alpha", K::Float}}},
      {"HardSigmoid", {{"alpha", K::Float}, {"beta", K::Float}}},
      {"Clip", {{"min", K::Float}, {"max", K::Float}}},
      {"Gemm", {{"alpha", K::Float}, {"beta", K::Float}, {"transA", K::Int}, {"transB", K::Int}}},
      {"BatchNormalization", {{"epsilon", K::Float}, {"momentum", K::Float}, {"training_mode", K::Int},
                              {"spatial", K::Int}, {"is_test", K::Int}, {"consumed_inputs", K::Ints}}},
      {"Flatten", {{"axis", K::Int}}},
      {"Reshape", {{"allowzero", K::Int}, {"shape", K::Ints}}},
      {"Squeeze", {{"axes", K::Ints}}},
      {"Unsqueeze", {{"axes", K::Ints}}},
      {"Concat", {{"axis", K::Int}}},
      {"Pad", {{"mode", K::String}, {"pads", K::Ints}, {"value", K::Float}}},
      {"Constant", {{"value", K::Tensor}, {"value_float", K::Float}, {"value_floats", K::Floats}, {"value_int", K::Int},
                    {"value_ints", K::Ints}, {"value_string", K::String}}},
      {"Softmax", {{"axis", K::Int}}},
      {"Elu", {{"alpha", K::Float}}},
      {"Selu", {{"alpha", K::Float}, {"gamma", K::Float}}},
  };
  if (op == "Conv" || op == "ConvTranspose" || op == "MaxPool" || op == "AveragePool" || op == "LpPool") {
    const auto it = spatial.find(key);
    return it == spatial.end() ? std::nullopt : std::optional<K>(it->second);
  }
  const auto o = ops.find(op);
  if (o == ops.end()) return std::nullopt;
  const auto it = o->second.find(key);
  return it == o->second.end() ? std::nullopt : std::optional<K>(it->second);
}

const std::string& Model::resolve(const std::string& name) const {
  const auto a = aliases.find(name);
  return a == aliases.end() ? name : a->second;
}

const Tensor* Model::initializer(const std::string& name) const {
  const auto it = initializers.find(resolve(name));
  return it == initializers.end() ? nullptr : &it->second;
}

const std::vector<std::int64_t>* Model::int_initializer(const std::string& name, Shape* shape) const {
  const std::string& k = resolve(name);
  const auto it = int_inits.find(k);
  if (it == int_inits.end()) return nullptr;
  if (shape) *shape = int_init_shapes.at(k);
  return &it->second;
}

Tensor& Model::own_initializer(const std::string& name) {
  if (const auto a = aliases.find(name); a != aliases.end()) {
    const Tensor copy = initializers.at(a->second);
    aliases.erase(a);
    std::string unused = name + "#aliased";
    while (defines(unused) || producer_of(unused)) unused += "#";
    for (ModelNode& n : nodes)
      for (std::string& out : n.outputs)
        if (out == name) out = unused;
    return initializers[name] = copy;
  }
  return initializers.at(name);
}

bool Model::defines(const std::string& name) const {
  return initializer(name) || int_initializer(name) ||
         std::any_of(inputs.begin(), inputs.end(), [&](const ValueInfo& v) { return v.name == name; });
}

std::optional<std::size_t> Model::producer_of(const std::string& name) const {
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (std::find(nodes[i].outputs.begin(), nodes[i].outputs.end(), name) != nodes[i].outputs.end()) return i;
  return std::nullopt;
}

std::vector<std::size_t> Model::consumers_of(const std::string& name) const {
  std::vector<std::size_t> r;
  for (std::size_t i = 0; i < nodes.size(); ++i)
    if (std::find(nodes[i].inputs.begin(), nodes[i].inputs.end(), name) != nodes[i].inputs.end()) r.push_back(i);
  return r;
}

bool Model::is_graph_output(const std::string& name) const {
  return std::any_of(outputs.begin(), outputs.end(), [&](const ValueInfo& v) { return v.name == name; });
}

namespace {

// "Conv at node 3 (conv1)".
std::string node_at(const ModelNode& n, std::size_t i) {
  return fmt::format("{} at node {}{}", n.op, i, n.name.empty() ? "" : " (" + n.name + ")");
}

// The node index computing each value; InputError for a value computed twice or a node
// output that is also a graph input or an initializer (ONNX graphs are single-assignment).
std::map<std::string, std::size_t> producers(const Model& m) {
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    for (const std::string& out : m.nodes[i].outputs) {
      if (out.empty()) continue;
      if (const auto [it, fresh] = at.emplace(out, i); !fresh)
        throw InputError(fmt::format("{}: {}: output '{}' is already computed by {}", m.path, node_at(m.nodes[i], i), out,
                                     node_at(m.nodes[it->second], it->second)));
      if (std::any_of(m.inputs.begin(), m.inputs.end(), [&](const ValueInfo& v) { return v.name == out; }))
        throw InputError(fmt::format("{}: {}: output '{}' is also a graph input", m.path, node_at(m.nodes[i], i), out));
      if (m.initializers.count(out) || m.int_inits.count(out))
        throw InputError(fmt::format("{}: {}: output '{}' is also an initializer", m.path, node_at(m.nodes[i], i), out));
    }
  return at;
}

}  // namespace

void check_graph(const Model& m) {
  const std::map<std::string, std::size_t> at = producers(m);
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    for (const std::string& in : m.nodes[i].inputs) {
      if (in.empty()) continue;
      const auto p = at.find(in);
      if (p != at.end() && p->second >= i)
        throw InputError(fmt::format("{}: {}: input '{}' is computed by {}, which does not come before it (a cycle, or "
                                     "nodes not in topological order)",
                                     m.path, node_at(m.nodes[i], i), in, node_at(m.nodes[p->second], p->second)));
      if (p == at.end() && !m.defines(in) && m.unread_inits.count(in))
        throw InputError(fmt::format("{}: {}: input '{}' is an initializer of type {}, which foldcheck does not read",
                                     m.path, node_at(m.nodes[i], i), in, m.unread_inits.at(in)));
      if (p == at.end() && !m.defines(in))
        throw InputError(fmt::format("{}: {}: input '{}' is not defined (no graph input, initializer or earlier node "
                                     "computes it)",
                                     m.path, node_at(m.nodes[i], i), in));
    }
  for (const ValueInfo& v : m.outputs)
    if (!at.count(v.name) && !m.defines(v.name))
      throw InputError(fmt::format("{}: graph output '{}' is not computed by any node", m.path, v.name));
}

}  // namespace foldcheck
