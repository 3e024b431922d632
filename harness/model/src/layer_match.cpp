// Layers matched by data flow (layer_match.hpp).
#include "foldcheck/model/layer_match.hpp"

#include <algorithm>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/model/model_patterns.hpp"

namespace foldcheck {
namespace {

const std::set<std::string> kPassThrough{"BatchNormalization", "Identity", "Dropout", "Relu", "LeakyRelu", "Clip",
                                         "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Flatten", "Reshape",
                                         "Squeeze", "Unsqueeze"};
const std::set<std::string> kCommutative{"Add", "Mul", "Sum", "Max", "Min", "Mean"};

bool default_domain(const ModelNode& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// An op of another domain is refused by name, except ONNX Runtime's FusedConv (a Conv).
void check_domains(const Model& m) {
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    if (default_domain(n) || (n.domain == "com.microsoft" && n.op == "FusedConv")) continue;
    const std::string why = n.domain == "com.microsoft.nchwc" && n.op == "Conv"
                                ? "blocked weight layout, not supported"
                                : "an op of a domain foldcheck does not implement";
    throw InputError(fmt::format("{}: {}:{} at node {}{}: {} (foldcheck reads ONNX ops and com.microsoft:FusedConv; "
                                 "ONNX Runtime writes these at its `all` level: save the model at `basic` or `extended`)",
                                 m.path, n.domain, n.op, i, n.name.empty() ? "" : " (" + n.name + ")", why));
  }
}

// A signature of fixed size: the 64-bit FNV-1a hash of its description (the op, its weight
// shape and group, its inputs' signatures), in hex. Nesting the descriptions themselves would
// double their length at every residual Add (both branches carry the whole prefix): 2^16
// times the stem's for ResNet-50. A collision (probability ~n^2 / 2^64) could only merge two
// layers' groups, which the counts and the names then check.
std::string digest(const std::string& text) {
  std::uint64_t h = 1469598103934665603ull;
  for (const unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

// Every value's signature, the nodes in file (topological) order; a layer's in `layer`.
struct Signatures {
  std::map<std::string, std::string> value;
  std::map<std::size_t, std::string> layer;
};

std::string input_signature(const Signatures& s, const Model& m, const std::string& v) {
  if (v.empty()) return "-";
  if (const auto it = s.value.find(v); it != s.value.end()) return it->second;
  if (const Tensor* t = m.initializer(v)) return "const" + shape_string(t->shape);
  Shape shape;
  if (m.int_initializer(v, &shape)) return "iconst" + shape_string(shape);
  return "?";
}

Signatures signatures(const Model& m) {
  Signatures s;
  for (std::size_t k = 0; k < m.inputs.size(); ++k) s.value[m.inputs[k].name] = fmt::format("in{}", k);
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    std::vector<std::string> in;
    for (const std::string& v : n.inputs) in.push_back(input_signature(s, m, v));
    std::string sig;
    if (foldable_layer(m, n)) {
      // FusedConv is a Conv; MatMul and Gemm are one linear layer (a fold may write either).
      const std::string op = n.op == "FusedConv" ? "Conv" : n.op == "MatMul" ? "Gemm" : n.op;
      sig = digest(fmt::format("{}{}g{}({})", op, shape_string(output_major_weight_shape(m, n)), n.int_attr("group", 1),
                               in.at(0)));
      s.layer[i] = sig;
    } else if (default_domain(n) && kPassThrough.count(n.op) && !in.empty()) {
      sig = in[0];
    } else if (const std::optional<std::size_t> layer = matmul_bias_add(m, n)) {  // the layer's own bias
      sig = input_signature(s, m, m.nodes[*layer].outputs.at(0));
    } else {
      if (default_domain(n) && kCommutative.count(n.op)) std::sort(in.begin(), in.end());
      sig = digest(n.domain + ":" + n.op + "(" + fmt::format("{}", fmt::join(in, ",")) + ")");
    }
    for (std::size_t k = 0; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) s.value[n.outputs[k]] = k == 0 ? sig : digest(fmt::format("{}#{}", sig, k));
  }
  return s;
}

std::string layer_name(const Model& m, std::size_t i) {
  const ModelNode& n = m.nodes[i];
  return n.name.empty() ? fmt::format("{} at node {}", n.op, i) : n.name;
}

// Layers sharing one signature: paired by node name, all of them, or ambiguous.
void pair_by_name(const Model& a, const std::vector<std::size_t>& as, const Model& b, const std::vector<std::size_t>& bs,
                  std::map<std::size_t, std::size_t>& out) {
  std::map<std::size_t, std::size_t> paired;
  std::set<std::size_t> used;
  for (const std::size_t i : as)
    for (const std::size_t j : bs)
      if (!a.nodes[i].name.empty() && a.nodes[i].name == b.nodes[j].name && !used.count(j)) {
        paired[i] = j;
        used.insert(j);
        break;
      }
  if (paired.size() != as.size())
    throw InputError(fmt::format("cannot match {} to {}: the correspondence is ambiguous: {} layers ({}, ...) have the "
                                 "same place in the data flow, op and weight shape, and their node names do not pair them",
                                 b.path, a.path, as.size(), layer_name(a, as[0])));
  out.insert(paired.begin(), paired.end());
}

}  // namespace

std::map<std::size_t, std::size_t> match_layers(const Model& original, const Model& observed) {
  check_domains(original);
  check_domains(observed);
  const Signatures sa = signatures(original), sb = signatures(observed);
  std::map<std::string, std::vector<std::size_t>> ga, gb;
  for (const auto& [i, sig] : sa.layer) ga[sig].push_back(i);
  for (const auto& [j, sig] : sb.layer) gb[sig].push_back(j);
  auto missing = [&](const Model& in, std::size_t i) {
    return InputError(fmt::format("cannot match {} to {}: layer {} ({} {}) of {} has no counterpart in the other model at "
                                  "the same place in the data flow (folding neither adds, removes nor moves layers)",
                                  observed.path, original.path, layer_name(in, i), in.nodes[i].op,
                                  shape_string(in.initializer(in.nodes[i].inputs[1])->shape), in.path));
  };
  std::map<std::size_t, std::size_t> m;
  for (const auto& [sig, as] : ga) {
    const auto it = gb.find(sig);
    if (it == gb.end() || it->second.size() < as.size()) throw missing(original, as[it == gb.end() ? 0 : it->second.size()]);
    if (it->second.size() > as.size()) throw missing(observed, it->second[as.size()]);
    if (as.size() == 1) m[as[0]] = it->second[0];
    else pair_by_name(original, as, observed, it->second, m);
  }
  for (const auto& [sig, bs] : gb)
    if (!ga.count(sig)) throw missing(observed, bs[0]);
  return m;
}

}  // namespace foldcheck
