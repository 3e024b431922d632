// The pooling ops: MaxPool, AveragePool (2-D, with auto_pad, dilations, ceil_mode and
// count_include_pad) and GlobalAveragePool. Averages sum sequentially in T and divide once.
// Kernel contract: op_registry.hpp.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "ops_common.hpp"

namespace foldcheck::ops {
namespace {

// A 2-D pooling node's windows on an input of shape xs (auto_pad resolved, output dims checked).
struct PoolGeometry {
  std::int64_t N = 0, C = 0, H = 0, W = 0, KH = 1, KW = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  std::int64_t pt = 0, pl = 0, pb = 0, pr = 0, OH = 0, OW = 0;
  bool include_pad = false;
  // Calls f(input flat index) for each in-bounds position of output (nc, oh, ow)'s window, in
  // order, and returns the count the average divides by.
  template <class F>
  std::int64_t window(std::int64_t nc, std::int64_t oh, std::int64_t ow, F f) const {
    std::int64_t count = 0;
    for (std::int64_t kh = 0; kh < KH; ++kh)
      for (std::int64_t kw = 0; kw < KW; ++kw) {
        const std::int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
        if (!(ih >= 0 && ih < H && iw >= 0 && iw < W)) {
          if (include_pad && ih < H + pb && iw < W + pr) ++count;
          continue;
        }
        f(static_cast<std::size_t>((nc * H + ih) * W + iw));
        ++count;
      }
    return count;
  }
};

PoolGeometry pool_geometry(const ModelNode& n, const Shape& xs, const std::string& at_) {
  if (xs.size() != 4) throw InputError(at_ + ": only 2-D pooling (4-D tensors)");
  const auto ks = n.ints_attr("kernel_shape"), s = n.ints_attr("strides"), pads = n.ints_attr("pads"), d = n.ints_attr("dilations");
  auto at = [](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t def) { return v.size() > i ? v[i] : def; };
  PoolGeometry p{xs[0],       xs[1],       xs[2],       xs[3],          at(ks, 0, 1),   at(ks, 1, 1),   at(s, 0, 1),
                 at(s, 1, 1), at(d, 0, 1), at(d, 1, 1), at(pads, 0, 0), at(pads, 1, 0), at(pads, 2, 0), at(pads, 3, 0)};
  const std::string ap = n.string_attr("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    same_padding(ap, p.H, p.KH, p.sh, p.dh, p.pt, p.pb);
    same_padding(ap, p.W, p.KW, p.sw, p.dw, p.pl, p.pr);
  }
  const bool ceil_mode = n.int_attr("ceil_mode", 0) != 0;
  p.include_pad = n.int_attr("count_include_pad", 0) != 0;
  // (in + pads - dilated kernel) / stride + 1, rounded up with ceil_mode; checked, >= 1.
  auto out_dim = [&](std::int64_t in, std::int64_t k, std::int64_t st, std::int64_t di, std::int64_t b, std::int64_t e, const char* axis) {
    const std::int64_t span = checked_add(checked_add(in, checked_add(b, e, at_), at_),
                                          -checked_add(checked_mul(k - 1, di, at_), 1, at_), at_);
    if (span < 0) return positive_dim(0, at_, axis);
    return positive_dim((ceil_mode ? checked_add(span, st - 1, at_) / st : span / st) + 1, at_, axis);
  };
  p.OH = out_dim(p.H, p.KH, p.sh, p.dh, p.pt, p.pb, "height");
  p.OW = out_dim(p.W, p.KW, p.sw, p.dw, p.pl, p.pr, "width");
  return p;
}

template <class T>
void pool(OpRun<T>& run, const ModelNode& n, std::size_t idx, bool max) {
  const Tensor& x = run.get(n.inputs.at(0), where(n, idx));
  const PoolGeometry p = pool_geometry(n, x.shape, where(n, idx));
  Tensor y = alloc({p.N, p.C, p.OH, p.OW}, where(n, idx));
  for (std::int64_t nc = 0; nc < p.N * p.C; ++nc)
    for (std::int64_t oh = 0; oh < p.OH; ++oh)
      for (std::int64_t ow = 0; ow < p.OW; ++ow) {
        T acc = max ? -std::numeric_limits<T>::infinity() : T(0);
        const std::int64_t count = p.window(nc, oh, ow, [&](std::size_t i) {
          const T v = static_cast<T>(x.data[i]);
          acc = max ? std::max(acc, v) : acc + v;
        });
        if (!max) acc = count ? acc / static_cast<T>(count) : T(0);
        y.data[static_cast<std::size_t>((nc * p.OH + oh) * p.OW + ow)] = static_cast<double>(acc);
      }
  run.put(n, std::move(y));
}

template <class T>
void max_pool(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  pool(run, n, i, true);
}

template <class T>
void average_pool(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  pool(run, n, i, false);
}

// The mean over every axis from 2, per (batch, channel).
template <class T>
void global_average_pool(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  const Tensor& x = run.get(n.inputs.at(0), where(n, i));
  const std::int64_t NC = prod(x.shape, 0, 2), HW = prod(x.shape, 2);
  Tensor y;
  y.shape = x.shape;
  for (std::size_t k = 2; k < y.shape.size(); ++k) y.shape[k] = 1;
  y.data.resize(static_cast<std::size_t>(NC));
  for (std::int64_t c = 0; c < NC; ++c) {
    T acc = 0;
    for (std::int64_t k = 0; k < HW; ++k) acc = acc + static_cast<T>(x.data[static_cast<std::size_t>(c * HW + k)]);
    y.data[static_cast<std::size_t>(c)] = static_cast<double>(static_cast<T>(acc / static_cast<T>(HW)));
  }
  run.put(n, std::move(y));
}

// Transposed derivatives (op_registry.hpp's Vjp): MaxPool routes each output's cotangent to
// its window's first largest input (the kernel's std::max keeps the first), AveragePool spreads
// it over the window divided by the count, GlobalAveragePool over the plane divided by its size.
void pool_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx, bool max) {
  if (!gx[0]) return;
  const Tensor& x = *a.inputs[0];
  const PoolGeometry p = pool_geometry(a.node, x.shape, where(a.node, a.index));
  const std::size_t nx = x.data.size(), ny = a.output->data.size();
  std::vector<std::size_t> at;
  for (std::int64_t nc = 0; nc < p.N * p.C; ++nc)
    for (std::int64_t oh = 0; oh < p.OH; ++oh)
      for (std::int64_t ow = 0; ow < p.OW; ++ow) {
        const std::size_t o = static_cast<std::size_t>((nc * p.OH + oh) * p.OW + ow);
        at.clear();
        const std::int64_t count = p.window(nc, oh, ow, [&](std::size_t i) {
          if (!max) at.push_back(i);
          else if (at.empty() || x.data[i] > x.data[at[0]]) at.assign(1, i);
        });
        const double f = max ? 1.0 : count ? 1.0 / static_cast<double>(count) : 0.0;
        for (std::size_t s = 0; s < a.slices; ++s)
          for (const std::size_t i : at) (*gx[0])[s * nx + i] += gy[s * ny + o] * f;
      }
}
void max_pool_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  pool_vjp(a, gy, gx, true);
}
void average_pool_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  pool_vjp(a, gy, gx, false);
}
void global_average_pool_vjp(const VjpArgs& a, const std::vector<double>& gy,
                             const std::vector<std::vector<double>*>& gx) {
  if (!gx[0]) return;
  const Tensor& x = *a.inputs[0];
  const std::int64_t NC = prod(x.shape, 0, 2), HW = prod(x.shape, 2);
  const std::size_t nx = x.data.size(), ny = static_cast<std::size_t>(NC);
  for (std::size_t s = 0; s < a.slices; ++s)
    for (std::int64_t c = 0; c < NC; ++c)
      for (std::int64_t k = 0; k < HW; ++k)
        (*gx[0])[s * nx + static_cast<std::size_t>(c * HW + k)] +=
            gy[s * ny + static_cast<std::size_t>(c)] / static_cast<double>(HW);
}

}  // namespace

OpTable pool_ops() {
  return {
      {"MaxPool",
       {.attributes = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"},
        .arity = {1, 1, 1, 2},
        .kernel = {&max_pool<float>, &max_pool<double>},
        .spatial = Spatial::Pool,
        .vjp = &max_pool_vjp}},
      {"AveragePool",
       {.attributes = {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"},
        .arity = {1, 1, 1, 1},
        .kernel = {&average_pool<float>, &average_pool<double>},
        .spatial = Spatial::Pool,
        .vjp = &average_pool_vjp}},
      {"GlobalAveragePool",
       {.attributes = {},
        .arity = {1, 1, 1, 1},
        .kernel = {&global_average_pool<float>, &global_average_pool<double>},
        .vjp = &global_average_pool_vjp}},
  };
}

}  // namespace foldcheck::ops
