// Which ONNX ops and attributes the model runner implements (model_run.hpp:
// check_supported). A node the runner would compute differently from the ONNX spec must be
// refused by name, never run with an attribute silently ignored: an ignored ceil_mode or
// spatial = 0 would be a wrong reference, and every verdict after it meaningless.
#include <map>
#include <set>
#include <string>

#include <fmt/format.h>

#include "foldcheck/errors.hpp"
#include "foldcheck/model_run.hpp"

namespace foldcheck {
namespace {

using Names = std::set<std::string>;

// Every op the runner computes, with the attributes it reads. An attribute not listed is
// refused even when it is set to its default: it means an opset or extension foldcheck
// does not model.
const std::map<std::string, Names>& supported_ops() {
  static const std::map<std::string, Names> ops{
      {"Identity", {}},
      {"Relu", {}},
      {"LeakyRelu", {"alpha"}},
      {"Sigmoid", {}},
      {"HardSigmoid", {"alpha", "beta"}},
      {"HardSwish", {}},
      {"Clip", {"min", "max"}},
      {"Add", {}},
      {"Sub", {}},
      {"Mul", {}},
      {"Div", {}},
      {"Conv", {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"}},
      {"ConvTranspose", {"dilations", "group", "kernel_shape", "output_padding", "pads", "strides"}},
      {"Gemm", {"alpha", "beta", "transA", "transB"}},
      {"MatMul", {}},
      {"BatchNormalization", {"epsilon", "momentum", "training_mode", "spatial", "is_test"}},
      {"MaxPool", {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"}},
      {"AveragePool", {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"}},
      {"GlobalAveragePool", {}},
      {"Flatten", {"axis"}},
      {"Reshape", {"allowzero"}},
      {"Squeeze", {"axes"}},
      {"Unsqueeze", {"axes"}},
      {"Concat", {"axis"}},
      {"Pad", {"mode", "pads", "value"}},
      {"Constant", {"value", "value_float", "value_floats", "value_int", "value_ints"}},
  };
  return ops;
}

// "Conv at node 3 (conv1)": the op, the node's index in the file and its name if it has one.
std::string node_name(const ModelNode& n, std::size_t i) {
  return fmt::format("{} at node {}{}", n.op, i, n.name.empty() ? "" : " (" + n.name + ")");
}

// Non-default values the runner does not implement; "" if the node is fine.
std::string unsupported_value(const Model& m, const ModelNode& n) {
  const std::string ap = n.string_attr("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    return fmt::format("auto_pad '{}' is not an ONNX auto_pad value", ap);
  for (const char* k : {"strides", "dilations"})
    for (const auto v : n.ints_attr(k))
      if (v < 1) return fmt::format("{} must be >= 1 (got {})", k, v);
  for (const auto v : n.ints_attr("pads"))
    if (v < 0) return fmt::format("negative pads ({}) are not supported", v);
  if (n.op == "BatchNormalization") {
    if (n.int_attr("training_mode", 0) != 0) return "training_mode = 1 (batch statistics) is not an inference BatchNorm";
    if (n.int_attr("spatial", 1) != 1) return "spatial = 0 (statistics per activation, not per channel) is not supported";
    if (n.outputs.size() > 1) return "the running-statistics outputs of a training BatchNorm are not supported";
  }
  if (n.op == "MaxPool" && n.outputs.size() > 1) return "the Indices output is not supported";
  if ((n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div") && n.inputs.size() != 2)
    return "needs exactly two inputs";
  if (n.op == "Pad" && n.string_attr("mode", "constant") != "constant")
    return fmt::format("mode '{}' is not supported (only constant padding)", n.string_attr("mode", ""));
  if (n.op == "Conv" && n.inputs.size() > 1)
    if (const Tensor* w = m.initializer(n.inputs[1]); w && n.attr("kernel_shape")) {
      const auto ks = n.ints_attr("kernel_shape");
      if (w->shape.size() < 2 || ks != std::vector<std::int64_t>(w->shape.begin() + 2, w->shape.end()))
        return fmt::format("kernel_shape does not match the weight's shape {}", shape_string(w->shape));
    }
  return "";
}

}  // namespace

void check_supported(const Model& m) {
  const auto& ops = supported_ops();
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    if (!n.domain.empty() && n.domain != "ai.onnx")
      throw InputError(fmt::format("unsupported op {}::{}: foldcheck runs only default-domain ONNX ops",
                                   n.domain, node_name(n, i)));
    const auto it = ops.find(n.op);
    if (it == ops.end())
      throw InputError(fmt::format("unsupported op {}: the model runner does not implement it", node_name(n, i)));
    for (const auto& [key, a] : n.attributes)
      if (!it->second.count(key))
        throw InputError(fmt::format("{}: attribute '{}' is not supported", node_name(n, i), key));
    if (const std::string why = unsupported_value(m, n); !why.empty())
      throw InputError(fmt::format("{}: {}", node_name(n, i), why));
  }
}

}  // namespace foldcheck
