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

template <class T>
void pool(OpRun<T>& run, const ModelNode& n, std::size_t idx, bool max) {
  const Tensor& x = run.get(n.inputs.at(0), where(n, idx));
  if (x.shape.size() != 4) throw InputError(where(n, idx) + ": only 2-D pooling (4-D tensors)");
  const auto ks = n.ints_attr("kernel_shape"), s = n.ints_attr("strides"), pads = n.ints_attr("pads"), d = n.ints_attr("dilations");
  auto at = [](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t def) { return v.size() > i ? v[i] : def; };
  const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const std::int64_t KH = at(ks, 0, 1), KW = at(ks, 1, 1), sh = at(s, 0, 1), sw = at(s, 1, 1), dh = at(d, 0, 1), dw = at(d, 1, 1);
  std::int64_t pt = at(pads, 0, 0), pl = at(pads, 1, 0), pb = at(pads, 2, 0), pr = at(pads, 3, 0);
  const std::string ap = n.string_attr("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    same_padding(ap, H, KH, sh, dh, pt, pb);
    same_padding(ap, W, KW, sw, dw, pl, pr);
  }
  const bool ceil_mode = n.int_attr("ceil_mode", 0) != 0, include_pad = n.int_attr("count_include_pad", 0) != 0;
  const std::string at_ = where(n, idx);
  // (in + pads - dilated kernel) / stride + 1, rounded up with ceil_mode; checked, >= 1.
  auto out_dim = [&](std::int64_t in, std::int64_t k, std::int64_t st, std::int64_t di, std::int64_t b, std::int64_t e, const char* axis) {
    const std::int64_t span = checked_add(checked_add(in, checked_add(b, e, at_), at_),
                                          -checked_add(checked_mul(k - 1, di, at_), 1, at_), at_);
    if (span < 0) return positive_dim(0, at_, axis);
    return positive_dim((ceil_mode ? checked_add(span, st - 1, at_) / st : span / st) + 1, at_, axis);
  };
  const std::int64_t OH = out_dim(H, KH, sh, dh, pt, pb, "height"), OW = out_dim(W, KW, sw, dw, pl, pr, "width");
  Tensor y = alloc({N, C, OH, OW}, at_);
  for (std::int64_t nc = 0; nc < N * C; ++nc)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        T acc = max ? -std::numeric_limits<T>::infinity() : T(0);
        std::int64_t count = 0;
        for (std::int64_t kh = 0; kh < KH; ++kh)
          for (std::int64_t kw = 0; kw < KW; ++kw) {
            const std::int64_t ih = oh * sh - pt + kh * dh, iw = ow * sw - pl + kw * dw;
            const bool inside = ih >= 0 && ih < H && iw >= 0 && iw < W;
            if (!inside) {
              if (!max && include_pad && ih < H + pb && iw < W + pr) ++count;
              continue;
            }
            const T v = static_cast<T>(x.data[static_cast<std::size_t>((nc * H + ih) * W + iw)]);
            if (max) acc = std::max(acc, v);
            else acc = acc + v;
            ++count;
          }
        if (!max) acc = count ? acc / static_cast<T>(count) : T(0);
        y.data[static_cast<std::size_t>((nc * OH + oh) * OW + ow)] = static_cast<double>(acc);
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

}  // namespace

OpTable pool_ops() {
  return {
      {"MaxPool",
       {.attributes = {"auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"},
        .arity = {1, 1, 1, 2},
        .kernel = {&max_pool<float>, &max_pool<double>},
        .spatial = Spatial::Pool}},
      {"AveragePool",
       {.attributes = {"auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads", "strides"},
        .arity = {1, 1, 1, 1},
        .kernel = {&average_pool<float>, &average_pool<double>},
        .spatial = Spatial::Pool}},
      {"GlobalAveragePool",
       {.attributes = {}, .arity = {1, 1, 1, 1}, .kernel = {&global_average_pool<float>, &global_average_pool<double>}}},
  };
}

}  // namespace foldcheck::ops
