// The model IR's queries (model.hpp); loading is onnx_model.cpp.
#include <algorithm>

#include <fmt/format.h>

#include "foldcheck/errors.hpp"
#include "foldcheck/model.hpp"

namespace foldcheck {

const Attribute* ModelNode::attr(const std::string& key) const {
  const auto it = attributes.find(key);
  return it == attributes.end() ? nullptr : &it->second;
}
std::int64_t ModelNode::int_attr(const std::string& key, std::int64_t fallback) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::Int ? a->i : fallback;
}
double ModelNode::float_attr(const std::string& key, double fallback) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::Float ? a->f : fallback;
}
std::vector<std::int64_t> ModelNode::ints_attr(const std::string& key) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::Ints ? a->ints : std::vector<std::int64_t>{};
}
std::string ModelNode::string_attr(const std::string& key, const std::string& fallback) const {
  const Attribute* a = attr(key);
  return a && a->kind == Attribute::Kind::String ? a->s : fallback;
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
// output that is also a graph input (ONNX graphs are single-assignment).
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
