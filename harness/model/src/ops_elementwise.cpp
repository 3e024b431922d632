// The element-wise ops: activations (Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish,
// Clip) and the broadcasting arithmetic (Add, Sub, Mul, Div). Each rounds once per
// operation (HardSigmoid and HardSwish once per multiply, add and product; Sigmoid is
// evaluated in double and rounded once). Kernel contract: op_registry.hpp.
#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "ops_common.hpp"

namespace foldcheck::ops {
namespace {

// Numpy broadcasting of two shapes.
Shape broadcast_shape(const Shape& a, const Shape& b, const std::string& where) {
  const std::size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const std::int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1)
      throw InputError(fmt::format("{}: shapes {} and {} do not broadcast", where, shape_string(a), shape_string(b)));
    out[i] = x == 1 ? y : x;  // NumPy's rule: 1 stretches to the other, even to 0 (max() made [0] x [1] one element)
  }
  return out;
}

// Index into a tensor of shape s broadcast to `out` for the flat output index i.
struct Broadcaster {
  Shape out;
  std::vector<std::int64_t> stride;  // per out dim (0 where broadcast)
  Broadcaster(const Shape& o, const Shape& s) : out(o), stride(o.size(), 0) {
    std::int64_t st = 1;
    for (std::size_t k = 0; k < s.size(); ++k) {
      const std::size_t d = s.size() - 1 - k, od = o.size() - 1 - k;
      stride[od] = s[d] == 1 ? 0 : st;
      st *= s[d];
    }
  }
  std::int64_t operator()(std::int64_t i) const {
    std::int64_t idx = 0;
    for (std::size_t d = out.size(); d-- > 0;) {
      idx += (i % out[d]) * stride[d];
      i /= out[d];
    }
    return idx;
  }
};

// y = f(x) element by element.
template <class T, class F>
void unary(OpRun<T>& run, const ModelNode& n, F f) {
  Tensor y = run.get(n.inputs.at(0), n.op);
  for (double& v : y.data) v = f(v);
  run.put(n, std::move(y));
}

// y = f(a, b) with NumPy broadcasting, both operands rounded to the run's dtype.
template <class T, class F>
void binary(OpRun<T>& run, const ModelNode& n, std::size_t i, F f) {
  const Tensor a = run.get(n.inputs.at(0), where(n, i)), b = run.get(n.inputs.at(1), where(n, i));
  Tensor y = alloc(broadcast_shape(a.shape, b.shape, where(n, i)), where(n, i));
  const Broadcaster ba(y.shape, a.shape), bb(y.shape, b.shape);
  for (std::int64_t k = 0; k < static_cast<std::int64_t>(y.data.size()); ++k)
    y.data[static_cast<std::size_t>(k)] = f(static_cast<T>(round_to(run.dt(), a.data[static_cast<std::size_t>(ba(k))])),
                                            static_cast<T>(round_to(run.dt(), b.data[static_cast<std::size_t>(bb(k))])));
  run.put(n, std::move(y));
}

template <class T>
void relu(OpRun<T>& run, const ModelNode& n, std::size_t) {
  unary(run, n, [](double v) { return v > 0 ? v : 0.0; });
}

template <class T>
void leaky_relu(OpRun<T>& run, const ModelNode& n, std::size_t) {
  const T a = static_cast<T>(n.float_attr("alpha", 0.01));
  unary(run, n, [&](double v) { return v >= 0 ? v : static_cast<double>(a * static_cast<T>(v)); });
}

template <class T>
void sigmoid(OpRun<T>& run, const ModelNode& n, std::size_t) {
  unary(run, n, [&](double v) { return run.r(1.0 / (1.0 + std::exp(-v))); });
}

// HardSigmoid max(0, min(1, alpha x + beta)); HardSwish x times it with alpha = 1/6, beta = 0.5.
template <class T>
void hard(OpRun<T>& run, const ModelNode& n, bool swish) {
  const T a = static_cast<T>(swish ? 1.0 / 6 : n.float_attr("alpha", 0.2));
  const T b = static_cast<T>(swish ? 0.5 : n.float_attr("beta", 0.5));
  unary(run, n, [&](double v) {
    const T h = std::max(T(0), std::min(T(1), static_cast<T>(a * static_cast<T>(v)) + b));
    return static_cast<double>(swish ? static_cast<T>(v) * h : h);
  });
}
template <class T>
void hard_sigmoid(OpRun<T>& run, const ModelNode& n, std::size_t) {
  hard(run, n, false);
}
template <class T>
void hard_swish(OpRun<T>& run, const ModelNode& n, std::size_t) {
  hard(run, n, true);
}

// Clip: min and max are attributes before opset 11, optional scalar inputs from it.
template <class T>
void clip(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  double lo = -HUGE_VAL, hi = HUGE_VAL;
  if (run.model().opset < 11) {
    lo = n.float_attr("min", lo);
    hi = n.float_attr("max", hi);
  } else {
    if (n.inputs.size() > 1 && !n.inputs[1].empty()) lo = run.scalar(n.inputs[1], where(n, i));
    if (n.inputs.size() > 2 && !n.inputs[2].empty()) hi = run.scalar(n.inputs[2], where(n, i));
  }
  unary(run, n, [&](double v) { return std::min(std::max(v, lo), hi); });
}

template <class T>
void add(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  binary(run, n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a + b)); });
}
template <class T>
void subtract(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  binary(run, n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a - b)); });
}
template <class T>
void multiply(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  binary(run, n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a * b)); });
}
template <class T>
void divide(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  binary(run, n, i, [](T a, T b) { return static_cast<double>(static_cast<T>(a / b)); });
}

// Transposed derivatives (op_registry.hpp's Vjp) at the run's values: y' = f'(x) per element.
template <class D>
void unary_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx, D d) {
  if (!gx[0]) return;
  const std::vector<double>& x = a.inputs[0]->data;
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; ++i) {
    const double f = d(x[i], a.output->data[i]);
    if (f == 0) continue;
    for (std::size_t s = 0; s < a.slices; ++s) (*gx[0])[s * n + i] += gy[s * n + i] * f;
  }
}

void relu_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  unary_vjp(a, gy, gx, [](double x, double) { return x > 0 ? 1.0 : 0.0; });
}
void leaky_relu_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  const double al = a.node.float_attr("alpha", 0.01);
  unary_vjp(a, gy, gx, [&](double x, double) { return x >= 0 ? 1.0 : al; });
}
void sigmoid_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  unary_vjp(a, gy, gx, [](double, double y) { return y * (1 - y); });
}
void hard_sigmoid_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  const double al = a.node.float_attr("alpha", 0.2), be = a.node.float_attr("beta", 0.5);
  unary_vjp(a, gy, gx, [&](double x, double) { return al * x + be > 0 && al * x + be < 1 ? al : 0.0; });
}
void hard_swish_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  unary_vjp(a, gy, gx, [](double x, double) {
    const double h = x / 6 + 0.5;
    return h <= 0 ? 0.0 : h >= 1 ? 1.0 : h + x / 6;
  });
}
void clip_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  double lo = -HUGE_VAL, hi = HUGE_VAL;
  if (a.opset < 11) {
    lo = a.node.float_attr("min", lo);
    hi = a.node.float_attr("max", hi);
  } else {
    if (a.inputs.size() > 1 && a.inputs[1]) lo = a.inputs[1]->data.at(0);
    if (a.inputs.size() > 2 && a.inputs[2]) hi = a.inputs[2]->data.at(0);
  }
  unary_vjp(a, gy, gx, [&](double x, double) { return x > lo && x < hi ? 1.0 : 0.0; });
}

// A broadcasting binary op: d(a, b) gives (dy/da, dy/db) at an element; each operand's
// cotangent sums over the elements it was broadcast to.
template <class D>
void binary_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx, D d) {
  const Tensor &A = *a.inputs[0], &B = *a.inputs[1];
  const Broadcaster ba(a.output->shape, A.shape), bb(a.output->shape, B.shape);
  const std::size_t n = a.output->data.size(), na = A.data.size(), nb = B.data.size();
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t ia = static_cast<std::size_t>(ba(static_cast<std::int64_t>(k)));
    const std::size_t ib = static_cast<std::size_t>(bb(static_cast<std::int64_t>(k)));
    const auto [da, db] = d(A.data[ia], B.data[ib]);
    for (std::size_t s = 0; s < a.slices; ++s) {
      if (gx[0]) (*gx[0])[s * na + ia] += gy[s * n + k] * da;
      if (gx[1]) (*gx[1])[s * nb + ib] += gy[s * n + k] * db;
    }
  }
}

void add_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  binary_vjp(a, gy, gx, [](double, double) { return std::pair{1.0, 1.0}; });
}
void sub_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  binary_vjp(a, gy, gx, [](double, double) { return std::pair{1.0, -1.0}; });
}
void mul_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  binary_vjp(a, gy, gx, [](double x, double y) { return std::pair{y, x}; });
}
void div_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  binary_vjp(a, gy, gx, [](double x, double y) { return std::pair{1 / y, -x / (y * y)}; });
}

}  // namespace

OpTable elementwise_ops() {
  const OpArity one{1, 1, 1, 1}, two{2, 1, 2, 1};
  return {
      {"Relu", {.attributes = {}, .arity = one, .kernel = {&relu<float>, &relu<double>}, .vjp = &relu_vjp}},
      {"LeakyRelu",
       {.attributes = {"alpha"},
        .arity = one,
        .kernel = {&leaky_relu<float>, &leaky_relu<double>},
        .vjp = &leaky_relu_vjp}},
      {"Sigmoid", {.attributes = {}, .arity = one, .kernel = {&sigmoid<float>, &sigmoid<double>}, .vjp = &sigmoid_vjp}},
      {"HardSigmoid",
       {.attributes = {"alpha", "beta"},
        .arity = one,
        .kernel = {&hard_sigmoid<float>, &hard_sigmoid<double>},
        .vjp = &hard_sigmoid_vjp}},
      {"HardSwish",
       {.attributes = {}, .arity = one, .kernel = {&hard_swish<float>, &hard_swish<double>}, .vjp = &hard_swish_vjp}},
      {"Clip",
       {.attributes = {"min", "max"},
        .arity = {1, 1, 3, 1},
        .kernel = {&clip<float>, &clip<double>},
        .moved = MovedToInputs{11, {"min", "max"}, 1, 3},
        .vjp = &clip_vjp}},
      {"Add", {.attributes = {}, .arity = two, .kernel = {&add<float>, &add<double>}, .vjp = &add_vjp}},
      {"Sub", {.attributes = {}, .arity = two, .kernel = {&subtract<float>, &subtract<double>}, .vjp = &sub_vjp}},
      {"Mul", {.attributes = {}, .arity = two, .kernel = {&multiply<float>, &multiply<double>}, .vjp = &mul_vjp}},
      {"Div", {.attributes = {}, .arity = two, .kernel = {&divide<float>, &divide<double>}, .vjp = &div_vjp}},
  };
}

}  // namespace foldcheck::ops
