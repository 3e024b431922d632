// The model IR's queries (model.hpp); loading is onnx_model.cpp.
#include <algorithm>

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

const Tensor* Model::initializer(const std::string& name) const {
  const auto it = initializers.find(name);
  return it == initializers.end() ? nullptr : &it->second;
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

}  // namespace foldcheck
