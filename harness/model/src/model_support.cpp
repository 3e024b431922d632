// Which ONNX ops and attributes the model runner implements (model_run.hpp:
// check_supported), read from the op registry (op_registry.hpp: every op the runner
// computes, the attributes it reads, its arity and type rules). A node the runner would
// compute differently from the ONNX spec must be refused by name, never run with an
// attribute silently ignored: an ignored ceil_mode or spatial = 0 would be a wrong
// reference, and every verdict after it meaningless.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>
#include <string>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/model/model_run.hpp"
#include "op_registry.hpp"

namespace foldcheck {
namespace {

// The registry's entry of a default-domain op the runner computes; null otherwise (another
// domain, or an op it does not implement).
const ops::OpEntry* entry(const ModelNode& n) {
  return n.domain.empty() || n.domain == "ai.onnx" ? ops::find_op(n.op) : nullptr;
}

// "Conv at node 3 (conv1)": the op, the node's index in the file and its name if it has one.
std::string node_name(const ModelNode& n, std::size_t i) {
  return fmt::format("{} at node {}{}", n.op, i, n.name.empty() ? "" : " (" + n.name + ")");
}

ops::Spatial spatial(const ModelNode& n) {
  const ops::OpEntry* e = ops::find_op(n.op);
  return e ? e->spatial : ops::Spatial::None;
}
bool is_pool(const ModelNode& n) { return spatial(n) == ops::Spatial::Pool; }
bool is_conv(const ModelNode& n) { return spatial(n) == ops::Spatial::Conv; }

// The spatial attributes of a 2-D conv or pooling node against the ONNX spec: two strides,
// dilations, kernel dims and output paddings, four pads, each in its range, group >= 1,
// a pooling kernel given and each pad smaller than it. "" if they are fine.
std::string spatial_error(const ModelNode& n) {
  for (const char* k : {"strides", "dilations", "kernel_shape", "output_padding"})
    if (n.attr(k) && n.ints_attr(k).size() != 2)
      return fmt::format("{} has {} values; a 2-D {} needs 2", k, n.ints_attr(k).size(), n.op);
  if (n.attr("pads") && n.ints_attr("pads").size() != 4)
    return fmt::format("pads has {} values; a 2-D {} needs 4", n.ints_attr("pads").size(), n.op);
  for (const auto v : n.ints_attr("kernel_shape"))
    if (v < 1) return fmt::format("kernel_shape must be >= 1 (got {})", v);
  if (is_conv(n) && n.int_attr("group", 1) < 1) return fmt::format("group must be >= 1 (got {})", n.int_attr("group", 1));
  if (n.op == "ConvTranspose") {
    const auto op = n.ints_attr("output_padding"), s = n.ints_attr("strides"), d = n.ints_attr("dilations");
    for (std::size_t k = 0; k < op.size(); ++k) {
      const std::int64_t limit = std::max(k < s.size() ? s[k] : 1, k < d.size() ? d[k] : 1);
      if (op[k] < 0 || op[k] >= limit)
        return fmt::format("output_padding {} must be >= 0 and smaller than the stride or dilation ({})", op[k], limit);
    }
  }
  if (is_pool(n)) {
    const auto ks = n.ints_attr("kernel_shape"), pads = n.ints_attr("pads");
    if (ks.empty()) return "kernel_shape is required";
    for (std::size_t k = 0; k < pads.size(); ++k)
      if (pads[k] >= ks[k % 2]) return fmt::format("pad {} is not smaller than the kernel ({})", pads[k], ks[k % 2]);
  }
  return "";
}

// An attribute that must be 0 or 1.
std::string flag_error(const ModelNode& n, const char* key) {
  const std::int64_t v = n.int_attr(key, 0);
  return v == 0 || v == 1 ? "" : fmt::format("{} must be 0 or 1 (got {})", key, v);
}

// Attributes that became inputs in a later opset (the entry's `moved`: Clip min/max at 11,
// Pad pads/value at 11, Squeeze/Unsqueeze axes at 13): at the model's opset, exactly one of
// the two forms is read; the other is refused, never silently ignored.
std::string opset_form_error(const Model& m, const ModelNode& n) {
  const ops::OpEntry* e = ops::find_op(n.op);
  if (!e || !e->moved) return "";
  const ops::MovedToInputs& mv = *e->moved;
  const bool after = m.opset >= mv.since;
  for (const char* a : mv.attrs)
    if (after && n.attr(a))
      return fmt::format("attribute '{}' is an input from opset {} (the model is opset {})", a, mv.since, m.opset);
  // Pad's axes, a 4th input, came at opset 18.
  const std::size_t max_in = !after ? mv.max_inputs_before : n.op == "Pad" && m.opset < 18 ? 3 : mv.max_inputs_after;
  if (n.inputs.size() > max_in)
    return fmt::format("{} inputs; at opset {} the op takes at most {}", n.inputs.size(), m.opset, max_in);
  if (!after && n.op == "Pad" && !n.attr("pads")) return "attribute 'pads' is required before opset 11";
  if (!after && n.op == "Unsqueeze" && !n.attr("axes")) return "attribute 'axes' is required before opset 13";
  if (after && n.op == "Unsqueeze" && (n.inputs.size() < 2 || n.inputs[1].empty())) return "the axes input is required";
  if (after && n.op == "Pad" && (n.inputs.size() < 2 || n.inputs[1].empty())) return "the pads input is required";
  return "";
}

// Per-op attribute values against the ONNX spec (those not covered above); "" if fine.
std::string op_attribute_error(const ModelNode& n) {
  if (n.op == "Gemm") {
    for (const char* k : {"transA", "transB"})
      if (const std::string e = flag_error(n, k); !e.empty()) return e;
    for (const char* k : {"alpha", "beta"})
      if (!std::isfinite(n.float_attr(k, 1.0))) return fmt::format("{} must be finite (got {})", k, n.float_attr(k, 1.0));
  }
  for (const char* k : {"ceil_mode", "count_include_pad", "storage_order", "allowzero"})
    if (const std::string e = flag_error(n, k); !e.empty()) return e;
  if (n.op == "BatchNormalization" && n.attr("is_test") && n.int_attr("is_test", 1) != 1)
    return "is_test = 0 (training) is not an inference BatchNorm";
  if (n.op == "Concat" && !n.attr("axis")) return "attribute 'axis' is required";
  if (n.op == "Constant" && n.attributes.size() != 1)
    return fmt::format("needs exactly one value attribute (has {})", n.attributes.size());
  for (const char* k : {"alpha", "beta"})
    if ((n.op == "LeakyRelu" || n.op == "HardSigmoid") && !std::isfinite(n.float_attr(k, 0.0)))
      return fmt::format("{} must be finite", k);
  return "";
}

// Non-default values the runner does not implement; "" if the node is fine.
std::string unsupported_value(const ModelNode& n) {
  for (const auto v : n.ints_attr("pads"))
    if (v < 0) return fmt::format("negative pads ({}) are not supported", v);
  if (n.op == "BatchNormalization") {
    if (n.int_attr("training_mode", 0) != 0) return "training_mode = 1 (batch statistics) is not an inference BatchNorm";
    if (n.int_attr("spatial", 1) != 1) return "spatial = 0 (statistics per activation, not per channel) is not supported";
    if (std::count_if(n.outputs.begin() + 1, n.outputs.end(), [](const std::string& o) { return !o.empty(); }) > 0)
      return "the running-statistics outputs of a training BatchNorm are not supported";
  }
  if (n.op == "MaxPool" && n.outputs.size() > 1) return "the Indices output is not supported";
  if ((n.op == "Add" || n.op == "Sub" || n.op == "Mul" || n.op == "Div") && n.inputs.size() != 2)
    return "needs exactly two inputs";
  if (n.op == "Pad" && n.inputs.size() > 3 && !n.inputs[3].empty()) return "the axes input (opset 18) is not supported";
  if (n.op == "Pad" && n.string_attr("mode", "constant") != "constant")
    return fmt::format("mode '{}' is not supported (only constant padding)", n.string_attr("mode", ""));
  return "";
}

// The spec's own rules for a conv's or pool's geometry: auto_pad one of its four values,
// strides and dilations >= 1, pads >= 0, a kernel_shape that is the weight's. A model that
// breaks them is invalid (exit 2), not one foldcheck merely cannot run.
std::string geometry_error(const Model& m, const ModelNode& n) {
  const std::string ap = n.string_attr("auto_pad", "NOTSET");
  if (ap != "NOTSET" && ap != "SAME_UPPER" && ap != "SAME_LOWER" && ap != "VALID")
    return fmt::format("auto_pad '{}' is not an ONNX auto_pad value", ap);
  for (const char* k : {"strides", "dilations"})
    for (const auto v : n.ints_attr(k))
      if (v < 1) return fmt::format("{} must be >= 1 (got {})", k, v);
  for (const auto v : n.ints_attr("pads"))
    if (v < 0) return fmt::format("pads must be >= 0 (got {})", v);
  if (ap != "NOTSET" && n.attr("pads")) return fmt::format("auto_pad {} and explicit pads cannot be used together", ap);
  if (is_conv(n) && n.inputs.size() > 1 && n.attr("kernel_shape"))
    if (const Tensor* w = m.initializer(n.inputs[1])) {
      const auto ks = n.ints_attr("kernel_shape");
      if (w->shape.size() < 2 || ks != std::vector<std::int64_t>(w->shape.begin() + 2, w->shape.end()))
        return fmt::format("kernel_shape {} does not match the weight's shape {}", shape_string(ks), shape_string(w->shape));
    }
  return "";
}

// At most as many inputs and outputs as the op's spec lists (the entry's arity: a
// GlobalAveragePool with two inputs, a Relu with two outputs): min counts are checked when
// the model is loaded.
std::string arity_error(const ModelNode& n) {
  const ops::OpEntry* e = ops::find_op(n.op);
  if (!e) return "";
  if (n.inputs.size() > e->arity.max_inputs)
    return fmt::format("{} inputs; the op takes at most {}", n.inputs.size(), e->arity.max_inputs);
  if (n.outputs.size() > e->arity.max_outputs)
    return fmt::format("{} outputs; the op has at most {}", n.outputs.size(), e->arity.max_outputs);
  return "";
}

// What the ONNX spec says about the node's attributes (not what foldcheck implements).
std::string spec_error(const Model& m, const ModelNode& n) {
  if (std::string e = arity_error(n); !e.empty()) return e;
  if (is_conv(n) || is_pool(n)) {
    if (std::string e = spatial_error(n); !e.empty()) return e;
    if (std::string e = geometry_error(m, n); !e.empty()) return e;
  }
  if (std::string e = opset_form_error(m, n); !e.empty()) return e;
  return op_attribute_error(n);
}

// The element type of every value, and the ONNX type constraints of the ops the runner
// computes. The runner holds every tensor as doubles, so an INT64 or BOOL tensor given to
// Add would be added as if it were floating point, and a DOUBLE one added to a FLOAT one
// as if ONNX allowed it: ONNX requires one floating type T for an op's data inputs (Add's
// two, Conv's X, W and B, ...) and INT64 for shapes, pads and axes, so such a model is
// refused, never run. Types the table cannot tell (an unknown op's output, a graph input
// whose type the file leaves out) are "" and pass: the runner refuses what it cannot
// compute. BatchNormalization follows its opset: one T before 15; from 15, X is T, scale
// and B share T1, mean and var share T2.
bool is_floating(const std::string& t) { return t == "FLOAT" || t == "DOUBLE" || t == "FLOAT16" || t == "BFLOAT16"; }

std::string dtype_type(DType d) {
  switch (d) {
    case DType::Float64: return "DOUBLE";
    case DType::Float16: return "FLOAT16";
    case DType::BFloat16: return "BFLOAT16";
    default: return "FLOAT";
  }
}

std::string constant_type(const ModelNode& n) {
  if (const Attribute* a = n.attr("value"); a && a->kind == Attribute::Kind::Tensor) return a->elem_type;
  if (n.attr("value_int") || n.attr("value_ints")) return "INT64";
  if (n.attr("value_float") || n.attr("value_floats")) return "FLOAT";
  return "";
}

// Input k of the op holds INT64 values (shape, pads, axes; the entry's integer_inputs).
bool integer_input(const ops::OpEntry& e, std::size_t k) {
  return std::find(e.integer_inputs.begin(), e.integer_inputs.end(), k) != e.integer_inputs.end();
}

void check_value_types(const Model& m) {
  std::map<std::string, std::string> type;
  for (const auto& [k, t] : m.initializers) type[k] = dtype_type(t.dtype);
  for (const auto& [k, v] : m.int_inits) type[k] = m.int_init_type.count(k) ? m.int_init_type.at(k) : "";
  for (const ValueInfo& v : m.inputs) type[v.name] = v.elem_type;
  const auto of = [&](const std::string& name) {
    const auto it = type.find(m.resolve(name));
    return it == type.end() ? std::string() : it->second;
  };
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    const ops::OpEntry* e = entry(n);
    const bool known = e != nullptr;
    std::string out = known && n.op == "Constant" ? constant_type(n) : "";
    std::string first, first_scale, first_stats;  // the first typed data input, which every other must match
    std::size_t first_at = SIZE_MAX;
    for (std::size_t k = 0; known && k < n.inputs.size(); ++k) {
      if (n.inputs[k].empty()) continue;
      const std::string t = of(n.inputs[k]);
      if (t.empty()) continue;
      if (integer_input(*e, k)) {
        if (t != "INT64")
          throw InputError(fmt::format("{}: input '{}' has type {}; the op takes INT64 there", node_name(n, i),
                                       n.inputs[k], t));
        Shape shape;  // shapes, pads and axes are lists: 1-D
        if (m.int_initializer(n.inputs[k], &shape) && shape.size() != 1)
          throw InputError(fmt::format("{}: input '{}' has shape {}; the op takes a 1-D tensor there", node_name(n, i),
                                       n.inputs[k], shape_string(shape)));
        continue;
      }
      if (!e->passes_type && !is_floating(t))
        throw InputError(fmt::format("{}: input '{}' has type {}; foldcheck runs {} on floating-point tensors only",
                                     node_name(n, i), n.inputs[k], t, n.op));
      // BatchNormalization from opset 15: X is T, scale and B are T1, mean and var T2.
      const bool bn15 = n.op == "BatchNormalization" && m.opset >= 15;
      std::string& same = !bn15 || k == 0 ? first : k <= 2 ? first_scale : first_stats;
      if (same.empty()) {
        same = t;
        if (&same == &first) first_at = k;
      } else if (t != same) {
        throw InputError(fmt::format("{}: input '{}' has type {} but input '{}' has {}; {} takes one type {} for them{}",
                                     node_name(n, i), n.inputs[k], t, n.inputs[!bn15 ? first_at : k <= 2 ? 1 : 3], same, n.op,
                                     !bn15 || k == 0 ? "T" : k <= 2 ? "T1" : "T2",
                                     n.op == "BatchNormalization" && !bn15 ? " (different types from opset 15)" : ""));
      }
    }
    if (known && n.op != "Constant") out = of(n.inputs.empty() ? std::string() : n.inputs[0]);
    for (const std::string& o : n.outputs)
      if (!o.empty()) type[o] = out;
  }
}

}  // namespace

void check_attributes(const Model& m) {
  for (std::size_t i = 0; i < m.nodes.size(); ++i)
    if (m.nodes[i].domain.empty() || m.nodes[i].domain == "ai.onnx")
      if (const std::string why = spec_error(m, m.nodes[i]); !why.empty())
        throw InputError(fmt::format("{}: {}", node_name(m.nodes[i], i), why));
  check_value_types(m);
}

void check_supported(const Model& m) {
  check_graph(m);
  check_attributes(m);
  for (std::size_t i = 0; i < m.nodes.size(); ++i) {
    const ModelNode& n = m.nodes[i];
    if (!n.domain.empty() && n.domain != "ai.onnx")
      throw InputError(fmt::format("unsupported op {}::{}: foldcheck runs only default-domain ONNX ops",
                                   n.domain, node_name(n, i)));
    const ops::OpEntry* e = ops::find_op(n.op);
    if (!e) throw InputError(fmt::format("unsupported op {}: the model runner does not implement it", node_name(n, i)));
    for (const auto& [key, a] : n.attributes)
      if (!e->attributes.count(key))
        throw InputError(fmt::format("{}: attribute '{}' is not supported", node_name(n, i), key));
    if (const std::string why = unsupported_value(n); !why.empty())
      throw InputError(fmt::format("{}: {}", node_name(n, i), why));
  }
}

}  // namespace foldcheck
