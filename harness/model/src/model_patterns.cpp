// Layer -> BatchNormalization pairs and their parameters (model_patterns.hpp).
#include <numeric>
#include <utility>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/model/model_patterns.hpp"

namespace foldcheck {
namespace {

bool foldable_op(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "Gemm" || op == "MatMul";
}

// ONNX Runtime's Conv + activation (com.microsoft:FusedConv): a Conv's inputs, attributes
// and standard OIHW weight layout, then the activation its `activation` attribute names.
bool is_fused_conv(const ModelNode& n) { return n.op == "FusedConv" && n.domain == "com.microsoft"; }

// Whether `n` is the ONNX operator `op`: the same name in another domain is another op
// (and loading checks input counts of the default domain's ops only).
bool is_onnx_op(const ModelNode& n, const char* op) {
  return n.op == op && (n.domain.empty() || n.domain == "ai.onnx");
}

// Why the layer node cannot take a fold ("" if it can): its weight must be an initializer,
// and a Gemm must be a plain Y = A B' (+ C).
std::string layer_problem(const Model& m, const ModelNode& n) {
  if (n.inputs.size() < 2 || !m.initializer(n.inputs[1])) return n.op + " weight is not a floating initializer";
  // No output channel to fold into (and every per-channel division below is by a dimension).
  if (m.initializer(n.inputs[1])->data.empty())
    return fmt::format("{} weight {} has no elements (shape {})", n.op, n.inputs[1],
                       shape_string(m.initializer(n.inputs[1])->shape));
  if (n.op == "Gemm" && (n.float_attr("alpha", 1.0) != 1.0 || n.float_attr("beta", 1.0) != 1.0))
    return "Gemm with alpha or beta != 1";
  if (n.inputs.size() > 2 && !n.inputs[2].empty() && !m.initializer(n.inputs[2]))
    return n.op + " bias is not an initializer";
  return "";
}

// Weight regrouped output-channel-major, and the layer's bias.
struct Regrouped {
  std::int64_t channels = 0, per_channel = 0;
  std::vector<double> weight;
  std::vector<std::size_t> index;
  std::vector<double> bias;
  DType dtype = DType::Float32;
  Shape shape;
};

// A MatMul's bias, which ONNX writes as a separate Add of a constant (a Linear exported without
// Gemm, or a fold written so): the constant when that Add is the MatMul's only consumer and the
// constant holds one value per output channel ([N] or [1, N], broadcast over the rows); else
// none (the layer adds no bias).
std::vector<double> matmul_bias(const Model& m, const ModelNode& n, std::int64_t channels) {
  if (n.outputs.empty() || m.is_graph_output(n.outputs[0])) return {};
  const std::vector<std::size_t> users = m.consumers_of(n.outputs[0]);
  if (users.size() != 1) return {};
  const ModelNode& add = m.nodes[users[0]];
  if (add.op != "Add" || add.inputs.size() != 2) return {};
  const Tensor* b = m.initializer(add.inputs[0] == n.outputs[0] ? add.inputs[1] : add.inputs[0]);
  const bool per_channel =
      b && !b->shape.empty() && b->shape.back() == channels && static_cast<std::int64_t>(b->data.size()) == channels;
  return per_channel ? b->data : std::vector<double>{};
}

Regrouped regroup(const Model& m, const ModelNode& n, bool with_index) {
  const std::string problem = layer_problem(m, n);
  if (!problem.empty())  // the file and the node (by its weight when it has no name)
    throw InputError(fmt::format("{}: node {} ({}): {}", m.path,
                                 !n.name.empty() || n.inputs.size() < 2 ? n.name : "with weight " + n.inputs[1], n.op,
                                 problem));
  const Tensor& w = *m.initializer(n.inputs[1]);
  Regrouped r;
  r.dtype = w.dtype;
  r.shape = w.shape;
  const Shape& s = w.shape;
  auto need_rank = [&](std::size_t lo, std::size_t hi) {
    if (s.size() < lo || s.size() > hi)
      throw InputError(fmt::format("node {} ({}): weight {} has shape {}", n.name, n.op, n.inputs[1], shape_string(s)));
  };
  if (n.op == "Conv" || is_fused_conv(n)) {
    need_rank(3, 5);
    r.channels = s[0];
    r.per_channel = element_count(s) / s[0];
    if (with_index) {
      r.index.resize(w.data.size());
      std::iota(r.index.begin(), r.index.end(), std::size_t{0});
    }
    r.weight = w.data;  // already output-major: a copy (every float64 run of a model takes it)
  } else if (n.op == "ConvTranspose") {
    need_rank(3, 5);
    const std::int64_t g = n.int_attr("group", 1), cin = s[0], opg = s[1], kk = element_count(s) / (s[0] * s[1]);
    if (g <= 0 || cin % g)
      throw InputError(
          fmt::format("node {}: ConvTranspose group {} does not divide {} input channels", n.name, g, cin));
    const std::int64_t cpg = cin / g;
    r.channels = opg * g;
    r.per_channel = cpg * kk;
    for (std::int64_t o = 0; o < r.channels; ++o) {
      const std::int64_t gi = o / opg, j = o % opg;
      for (std::int64_t c = 0; c < cpg; ++c)
        for (std::int64_t q = 0; q < kk; ++q)
          r.index.push_back(static_cast<std::size_t>(((gi * cpg + c) * opg + j) * kk + q));
    }
  } else {  // Gemm, MatMul: 2-D weight
    need_rank(2, 2);
    const bool trans = n.op == "Gemm" && n.int_attr("transB", 0) != 0;  // B is N x K
    const std::int64_t N = trans ? s[0] : s[1], K = trans ? s[1] : s[0];
    r.channels = N;
    r.per_channel = K;
    for (std::int64_t o = 0; o < N; ++o)
      for (std::int64_t k = 0; k < K; ++k) r.index.push_back(static_cast<std::size_t>(trans ? o * K + k : k * N + o));
  }
  if (r.weight.empty()) {
    r.weight.reserve(r.index.size());
    for (const std::size_t i : r.index) r.weight.push_back(w.data[i]);
  }
  if (n.op != "MatMul" && n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const Tensor& b = *m.initializer(n.inputs[2]);
    // A Gemm's C broadcasts (ONNX's unidirectional broadcasting): one value is every channel's.
    if (n.op == "Gemm" && b.size() == 1 && r.channels > 1)
      r.bias.assign(static_cast<std::size_t>(r.channels), b.data[0]);
    else if (b.size() != r.channels)
      throw InputError(fmt::format("node {}: bias {} has {} values for {} output channels", n.name, n.inputs[2],
                                   b.size(), r.channels));
    else r.bias = b.data;
  }
  if (n.op == "MatMul") r.bias = matmul_bias(m, n, r.channels);
  return r;
}

std::string layer_name(const Model& m, std::size_t layer) {
  const ModelNode& n = m.nodes[layer];
  if (!n.name.empty()) return n.name;
  return n.inputs.size() > 1 ? n.inputs[1] : fmt::format("{}#{}", n.op, layer);
}

}  // namespace

bool foldable_layer(const Model& m, const ModelNode& n) {
  return ((foldable_op(n.op) && (n.domain.empty() || n.domain == "ai.onnx")) || is_fused_conv(n)) &&
         n.inputs.size() >= 2 && m.initializer(n.inputs[1]) != nullptr;
}

BnPatterns find_bn_pairs(const Model& m) {
  BnPatterns out;
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& bn = m.nodes[i];
    if (!is_onnx_op(bn, "BatchNormalization")) continue;
    const std::string bn_name = bn.name.empty() ? fmt::format("BatchNormalization#{}", i) : bn.name;
    auto unpaired = [&](const std::string& why) { out.unpaired.push_back({i, bn_name, why}); };
    if (bn.int_attr("training_mode", 0) != 0) {
      unpaired("training_mode = 1 (batch statistics): not foldable");
      continue;
    }
    if (bn.inputs.size() < 5 || bn.outputs.empty()) {
      unpaired("fewer than 5 inputs");
      continue;
    }
    bool params = true;
    for (std::size_t k = 1; k < 5; ++k) params = params && m.initializer(bn.inputs[k]) != nullptr;
    if (!params) {
      unpaired("a BatchNormalization parameter is not an initializer");
      continue;
    }
    // Walk back through Identity nodes; every value on the way must feed only the next node.
    std::vector<std::size_t> through;
    std::string value = bn.inputs[0];
    std::string why;
    std::optional<std::size_t> prod;
    while (true) {
      if (m.consumers_of(value).size() != 1 || m.is_graph_output(value)) {
        why = fmt::format("value {} has other uses than this BatchNormalization", value);
        break;
      }
      prod = m.producer_of(value);
      if (!prod) {
        why = fmt::format("input {} is not produced by a node", value);
        break;
      }
      if (!is_onnx_op(m.nodes[*prod], "Identity")) break;
      through.insert(through.begin(), *prod);
      value = m.nodes[*prod].inputs.at(0);
    }
    if (!why.empty()) {
      unpaired(why);
      continue;
    }
    const ModelNode& layer = m.nodes[*prod];
    if (!foldable_op(layer.op) || !is_onnx_op(layer, layer.op.c_str())) {
      unpaired(fmt::format("input comes from {} ({}), not a Conv/ConvTranspose/Gemm/MatMul", layer.name, layer.op));
      continue;
    }
    if (const std::string problem = layer_problem(m, layer); !problem.empty()) {
      out.unpaired.push_back({i, bn_name, problem, true});
      continue;
    }
    out.pairs.push_back({*prod, i, through, layer_name(m, *prod), layer.op});
  }
  return out;
}

LayerParams layer_params(const Model& m, const BnPair& p, bool with_index) {
  LayerParams lp = layer_params_of_node(m, p.layer, with_index);
  const ModelNode& bn = m.nodes[p.bn];
  const auto channel_vector = [&](std::size_t k) {
    const Tensor& t = *m.initializer(bn.inputs[k]);
    if (t.size() != lp.channels)
      throw InputError(fmt::format("BatchNormalization {}: {} has {} values for {} channels of {}", bn.name,
                                   bn.inputs[k], t.size(), lp.channels, p.name));
    return t.data;
  };
  lp.bn.gamma = channel_vector(1);
  lp.bn.beta = channel_vector(2);
  lp.bn.mean = channel_vector(3);
  lp.bn.var = channel_vector(4);
  lp.bn.eps = static_cast<double>(static_cast<float>(bn.float_attr("epsilon", 1e-5)));  // an ONNX float attribute
  check_bn_params(lp.bn, static_cast<std::size_t>(lp.channels),
                  m.path + ": BatchNormalization " + (bn.name.empty() ? p.name : bn.name));
  if (const std::string bad = first_nonfinite(lp.weight); !bad.empty())
    throw InputError(fmt::format("{}: {} {}: weight {} has {}", m.path, m.nodes[p.layer].op, p.name,
                                 m.nodes[p.layer].inputs[1], bad));
  return lp;
}

std::optional<std::size_t> batchnorm_after(const Model& m, std::size_t layer) {
  if (m.nodes.at(layer).op == "FusedConv") return std::nullopt;
  std::vector<std::string> values{m.nodes[layer].outputs.at(0)};
  while (!values.empty()) {
    const std::string v = values.back();
    values.pop_back();
    for (const std::size_t c : m.consumers_of(v)) {
      const ModelNode& n = m.nodes[c];
      if (n.op == "BatchNormalization") return c;
      if (n.op == "Identity" && !n.outputs.empty()) values.push_back(n.outputs[0]);
    }
  }
  return std::nullopt;
}

std::optional<std::size_t> matmul_bias_add(const Model& m, const ModelNode& add) {
  if (!is_onnx_op(add, "Add") || add.inputs.size() != 2) return std::nullopt;
  for (const std::string& v : add.inputs)
    if (const std::optional<std::size_t> p = m.producer_of(v)) {
      const ModelNode& n = m.nodes[*p];
      if (n.op == "MatMul" && foldable_layer(m, n) && !matmul_bias(m, n, output_major_weight_shape(m, n).at(0)).empty())
        return p;
    }
  return std::nullopt;
}

Shape output_major_weight_shape(const Model& m, const ModelNode& n) {
  Shape s = m.initializer(n.inputs.at(1))->shape;
  const bool k_by_n = n.op == "MatMul" || (n.op == "Gemm" && n.int_attr("transB", 0) == 0);
  if (k_by_n && s.size() == 2) std::swap(s[0], s[1]);
  return s;
}

LayerParams layer_params_of_node(const Model& other, std::size_t layer, bool with_index) {
  Regrouped r = regroup(other, other.nodes.at(layer), with_index);
  LayerParams lp;
  lp.dtype = r.dtype;
  lp.weight_shape = r.shape;
  lp.channels = r.channels;
  lp.per_channel = r.per_channel;
  lp.weight = std::move(r.weight);
  lp.index = std::move(r.index);
  lp.bias = std::move(r.bias);
  return lp;
}

}  // namespace foldcheck
