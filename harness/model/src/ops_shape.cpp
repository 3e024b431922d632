// The ops that move values without arithmetic: Identity, Flatten, Reshape, Squeeze,
// Unsqueeze, Concat, Pad (constant) and Constant. Their outputs are their inputs' values
// (Pad's fill rounded to the run's dtype), in new shapes computed in checked arithmetic.
// Kernel contract: op_registry.hpp.
#include <algorithm>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/limits.hpp"
#include "ops_common.hpp"

namespace foldcheck::ops {
namespace {

template <class T>
void identity(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  run.put(n, run.get(n.inputs.at(0), where(n, i)));
}

template <class T>
void flatten(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  Tensor y = run.get(n.inputs.at(0), where(n, i));
  std::int64_t axis = n.int_attr("axis", 1);
  if (axis < 0) axis += static_cast<std::int64_t>(y.shape.size());
  if (axis < 0 || axis > static_cast<std::int64_t>(y.shape.size()))
    throw InputError(fmt::format("{}: axis {} is out of range for rank {}", where(n, i), n.int_attr("axis", 1), y.shape.size()));
  y.shape = {prod(y.shape, 0, static_cast<std::size_t>(axis)), prod(y.shape, static_cast<std::size_t>(axis))};
  run.put(n, std::move(y));
}

// Reshape's output shape from the `target` input, as the ONNX spec defines it: 0 copies
// the input's dimension (allowzero = 0; it must exist) or is 0 (allowzero = 1, then no
// -1 with it); at most one -1, inferred; every other value >= 0; the element count kept.
// Products in checked arithmetic, so a target wrapping around 2^64 is refused by name.
Shape reshape_target(const ModelNode& n, const std::string& at, const Shape& in, std::vector<std::int64_t> s) {
  const bool allowzero = n.int_attr("allowzero", 0) != 0;
  const std::int64_t have = prod(in);
  std::int64_t known = 1, infer = -1;
  for (std::size_t k = 0; k < s.size(); ++k) {
    if (s[k] == 0 && !allowzero) {
      if (k >= in.size())
        throw InputError(fmt::format("{}: target {} copies dimension {} (0), which the input {} does not have", at,
                                     shape_string(s), k, shape_string(in)));
      s[k] = in[k];
    }
    if (s[k] == -1) {
      if (infer >= 0 || (allowzero && std::count(s.begin(), s.end(), 0)))
        throw InputError(fmt::format("{}: target {} has more than one -1, or a -1 with a 0 under allowzero", at, shape_string(s)));
      infer = static_cast<std::int64_t>(k);
    } else if (s[k] < 0) {
      throw InputError(fmt::format("{}: target {} has a negative dimension {}", at, shape_string(s), s[k]));
    } else {
      known = checked_mul(known, s[k], at);
    }
  }
  if (infer >= 0) {
    if (known == 0 || have % known)
      throw InputError(fmt::format("{}: cannot reshape {} to {}", at, shape_string(in), shape_string(s)));
    s[static_cast<std::size_t>(infer)] = have / known;
  } else if (known != have) {
    throw InputError(fmt::format("{}: cannot reshape {} to {}", at, shape_string(in), shape_string(s)));
  }
  return s;
}

template <class T>
void reshape(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  Tensor y = run.get(n.inputs.at(0), where(n, i));
  y.shape = reshape_target(n, where(n, i), y.shape, run.ints(n.inputs.at(1), where(n, i)));
  run.put(n, std::move(y));
}

// Squeeze drops the listed axes of size 1 (all of them when none are listed); Unsqueeze
// inserts axes of size 1. Axes from the attribute (before opset 13) or the second input.
template <class T>
void squeeze_or_unsqueeze(OpRun<T>& run, const ModelNode& n, std::size_t i, bool squeeze) {
  Tensor y = run.get(n.inputs.at(0), where(n, i));
  std::vector<std::int64_t> axes = n.ints_attr("axes");
  if (axes.empty() && n.inputs.size() > 1) axes = run.ints(n.inputs[1], where(n, i));
  const std::int64_t rank = static_cast<std::int64_t>(y.shape.size()) + (!squeeze ? static_cast<std::int64_t>(axes.size()) : 0);
  for (auto& a : axes) {
    const std::int64_t given = a;
    a = a < 0 ? a + rank : a;
    if (a < 0 || a >= rank) throw InputError(fmt::format("{}: axis {} is out of range for rank {}", where(n, i), given, rank));
  }
  std::sort(axes.begin(), axes.end());
  if (std::adjacent_find(axes.begin(), axes.end()) != axes.end()) throw InputError(where(n, i) + ": repeated axes");
  if (squeeze) {
    Shape s;
    for (std::size_t k = 0; k < y.shape.size(); ++k) {
      const bool drop = axes.empty() ? y.shape[k] == 1 : std::binary_search(axes.begin(), axes.end(), static_cast<std::int64_t>(k));
      if (drop && y.shape[k] != 1)
        throw InputError(fmt::format("{}: axis {} of {} has size {}, not 1: it cannot be squeezed", where(n, i), k,
                                     shape_string(y.shape), y.shape[k]));
      if (!drop) s.push_back(y.shape[k]);
    }
    y.shape = s;
  } else {
    for (const auto a : axes) y.shape.insert(y.shape.begin() + a, 1);
  }
  run.put(n, std::move(y));
}
template <class T>
void squeeze(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  squeeze_or_unsqueeze(run, n, i, true);
}
template <class T>
void unsqueeze(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  squeeze_or_unsqueeze(run, n, i, false);
}

template <class T>
void concat(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  std::vector<const Tensor*> parts;
  for (const auto& in : n.inputs) parts.push_back(&run.get(in, where(n, i)));
  std::int64_t axis = n.int_attr("axis", 0);
  const std::int64_t rank = static_cast<std::int64_t>(parts.at(0)->shape.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    throw InputError(fmt::format("{}: axis {} is out of range for rank {}", where(n, i), n.int_attr("axis", 0), rank));
  for (const Tensor* p : parts)
    for (std::int64_t d = 0; d < rank; ++d)
      if (static_cast<std::int64_t>(p->shape.size()) != rank || (d != axis && p->shape[static_cast<std::size_t>(d)] != parts[0]->shape[static_cast<std::size_t>(d)]))
        throw InputError(fmt::format("{}: input shapes {} and {} do not concatenate on axis {}", where(n, i),
                                     shape_string(parts[0]->shape), shape_string(p->shape), axis));
  Shape ys = parts[0]->shape;
  ys[static_cast<std::size_t>(axis)] = 0;
  for (const Tensor* p : parts) ys[static_cast<std::size_t>(axis)] = checked_add(ys[static_cast<std::size_t>(axis)], p->shape[static_cast<std::size_t>(axis)], where(n, i));
  // Checked before the copy: a chain of self-Concats doubles at every node.
  run.check_room(static_cast<std::uint64_t>(checked_element_count(ys, where(n, i) + ": output")));
  Tensor y;
  y.shape = ys;
  y.data.reserve(static_cast<std::size_t>(prod(ys)));
  const std::int64_t outer = prod(y.shape, 0, static_cast<std::size_t>(axis));
  for (std::int64_t o = 0; o < outer; ++o)
    for (const Tensor* p : parts) {
      const std::int64_t chunk = prod(p->shape, static_cast<std::size_t>(axis));
      y.data.insert(y.data.end(), p->data.begin() + o * chunk, p->data.begin() + (o + 1) * chunk);
    }
  run.put(n, std::move(y));
}

// Constant padding: pads (begin of every axis, then end; negative crops) from the
// attribute before opset 11, from the inputs from it, with the fill value.
template <class T>
void pad(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  const Tensor& x = run.get(n.inputs.at(0), where(n, i));
  if (n.string_attr("mode", "constant") != "constant") throw InputError(where(n, i) + ": only constant padding");
  std::vector<std::int64_t> pads = n.ints_attr("pads");
  double value = n.float_attr("value", 0.0);
  if (run.model().opset >= 11) {
    pads = run.ints(n.inputs.at(1), where(n, i));
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) value = run.scalar(n.inputs[2], where(n, i));
  }
  const std::size_t rank = x.shape.size();
  if (pads.size() != 2 * rank)
    throw InputError(fmt::format("{}: {} pads for a tensor of rank {} (needs {})", where(n, i), pads.size(), rank, 2 * rank));
  Shape ys = x.shape;
  for (std::size_t k = 0; k < rank; ++k) {
    ys[k] = checked_add(ys[k], checked_add(pads[k], pads[k + rank], where(n, i)), where(n, i));
    if (ys[k] < 0)
      throw InputError(fmt::format("{}: pads {} and {} crop axis {} of {} by more than it holds", where(n, i), pads[k],
                                   pads[k + rank], k, shape_string(x.shape)));
  }
  Tensor y = alloc(ys, where(n, i), run.r(value));
  for (std::int64_t k = 0; k < x.size(); ++k) {
    std::int64_t rem = k, idx = 0, mul = 1;
    std::vector<std::int64_t> coord(rank);
    for (std::size_t d = rank; d-- > 0;) {
      coord[d] = rem % x.shape[d];
      rem /= x.shape[d];
    }
    for (std::size_t d = rank; d-- > 0;) {
      const std::int64_t c = coord[d] + pads[d];
      if (c < 0 || c >= y.shape[d]) { idx = -1; break; }
      idx += c * mul;
      mul *= y.shape[d];
    }
    if (idx >= 0) y.data[static_cast<std::size_t>(idx)] = x.data[static_cast<std::size_t>(k)];
  }
  run.put(n, std::move(y));
}

// The value of the node's one value attribute, held as given (integers as exact doubles).
template <class T>
void constant(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  Tensor y;
  if (const Attribute* a = n.attr("value"); a && a->kind == Attribute::Kind::Tensor) y = a->t;
  else if (const Attribute* f = n.attr("value_float")) y = Tensor{{}, {f->f}, DType::Float32};
  else if (const Attribute* fs = n.attr("value_floats")) y = Tensor{{static_cast<std::int64_t>(fs->floats.size())}, fs->floats, DType::Float32};
  else if (const Attribute* iv = n.attr("value_int")) y = Tensor{{}, {static_cast<double>(iv->i)}, DType::Float64};
  else if (const Attribute* is = n.attr("value_ints")) {
    y.shape = {static_cast<std::int64_t>(is->ints.size())};
    for (const auto v : is->ints) y.data.push_back(static_cast<double>(v));
  } else throw InputError(where(n, i) + ": unsupported Constant attribute");
  run.put_as_given(n, std::move(y));
}

// Transposed derivatives (op_registry.hpp's Vjp). A reshape keeps the elements in order: the
// cotangent passes as it is.
void same_elements_vjp(const VjpArgs&, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  if (!gx[0]) return;
  for (std::size_t k = 0; k < gy.size(); ++k) (*gx[0])[k] += gy[k];
}

// Concat: each input's cotangent is its chunk of every outer block.
void concat_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  const std::int64_t rank = static_cast<std::int64_t>(a.output->shape.size());
  std::int64_t axis = a.node.int_attr("axis", 0);
  if (axis < 0) axis += rank;
  const std::size_t n = a.output->data.size();
  const std::int64_t outer = prod(a.output->shape, 0, static_cast<std::size_t>(axis));
  for (std::size_t s = 0; s < a.slices; ++s) {
    std::size_t at = s * n;
    for (std::int64_t o = 0; o < outer; ++o)
      for (std::size_t k = 0; k < a.inputs.size(); ++k) {
        const std::size_t chunk = static_cast<std::size_t>(prod(a.inputs[k]->shape, static_cast<std::size_t>(axis)));
        if (gx[k]) {
          const std::size_t base = s * a.inputs[k]->data.size() + static_cast<std::size_t>(o) * chunk;
          for (std::size_t j = 0; j < chunk; ++j) (*gx[k])[base + j] += gy[at + j];
        }
        at += chunk;
      }
  }
}

}  // namespace

OpTable shape_ops() {
  return {
      {"Identity",
       {.attributes = {},
        .arity = {1, 1, 1, 1},
        .kernel = {&identity<float>, &identity<double>},
        .passes_type = true,
        .vjp = &same_elements_vjp}},
      {"Flatten",
       {.attributes = {"axis"},
        .arity = {1, 1, 1, 1},
        .kernel = {&flatten<float>, &flatten<double>},
        .passes_type = true,
        .vjp = &same_elements_vjp}},
      {"Reshape",
       {.attributes = {"allowzero"},
        .arity = {2, 1, 2, 1},
        .kernel = {&reshape<float>, &reshape<double>},
        .integer_inputs = {1},
        .passes_type = true,
        .vjp = &same_elements_vjp}},
      {"Squeeze",
       {.attributes = {"axes"},
        .arity = {1, 1, 2, 1},
        .kernel = {&squeeze<float>, &squeeze<double>},
        .integer_inputs = {1},
        .passes_type = true,
        .moved = MovedToInputs{13, {"axes"}, 1, 2},
        .vjp = &same_elements_vjp}},
      {"Unsqueeze",
       {.attributes = {"axes"},
        .arity = {1, 1, 2, 1},
        .kernel = {&unsqueeze<float>, &unsqueeze<double>},
        .integer_inputs = {1},
        .passes_type = true,
        .moved = MovedToInputs{13, {"axes"}, 1, 2},
        .vjp = &same_elements_vjp}},
      {"Concat",
       {.attributes = {"axis"},
        .arity = {1, 1, kAny, kAny},
        .kernel = {&concat<float>, &concat<double>},
        .passes_type = true,
        .vjp = &concat_vjp}},
      {"Pad",
       {.attributes = {"mode", "pads", "value"},
        .arity = {1, 1, 4, 1},
        .kernel = {&pad<float>, &pad<double>},
        .integer_inputs = {1, 3},
        .moved = MovedToInputs{11, {"pads", "value"}, 1, 4}}},  // axes: a 4th input from opset 18
      {"Constant",
       {.attributes = {"value", "value_float", "value_floats", "value_int", "value_ints"},
        .arity = {0, 1, 0, 1},
        .kernel = {&constant<float>, &constant<double>}}},
  };
}

}  // namespace foldcheck::ops
