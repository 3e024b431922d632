// The layer ops: Conv (foldcheck's conv path, evaluate.hpp), ConvTranspose, Gemm and MatMul
// (sequential accumulation over k, then the bias), and how a Conv, Gemm or MatMul becomes a
// graph Conv node (conv_geometry, layer_as_conv, layer_output_shape; model_run.hpp).
// Kernel contract: op_registry.hpp.
#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/limits.hpp"
#include "ops_common.hpp"

namespace foldcheck::ops {
namespace {

// ConvTranspose over [N, C, H, W] with weight [C, O/group, KH, KW]: every shape and
// attribute checked (group divides C, the weight fits, output dims >= 1 with checked
// arithmetic, the element limit) before the output is allocated.
template <class T>
Tensor conv_transpose(OpRun<T>& run, const ModelNode& n, const std::string& at_, const Tensor& x, const Tensor& w,
                      const std::vector<double>& bias) {
  if (x.shape.size() != 4 || w.shape.size() != 4)
    throw InputError(fmt::format("{}: only 2-D convs (4-D input and weight), got {} and {}", at_, shape_string(x.shape),
                                 shape_string(w.shape)));
  const std::int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const std::int64_t g = n.int_attr("group", 1);
  if (g < 1 || C % g || w.shape[0] != C || w.shape[1] < 1 || w.shape[2] < 1 || w.shape[3] < 1)
    throw InputError(fmt::format("{}: weight {} does not fit input {} with group {}", at_, shape_string(w.shape),
                                 shape_string(x.shape), g));
  const std::int64_t opg = w.shape[1], O = checked_mul(opg, g, at_), cpg = C / g, KH = w.shape[2], KW = w.shape[3];
  auto at = [&](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t d) { return v.size() > i ? v[i] : d; };
  const auto s = n.ints_attr("strides"), d = n.ints_attr("dilations"), pads = n.ints_attr("pads"),
             op = n.ints_attr("output_padding");
  const std::int64_t sh = at(s, 0, 1), sw = at(s, 1, 1), dh = at(d, 0, 1), dw = at(d, 1, 1);
  const std::int64_t pt = at(pads, 0, 0), pl = at(pads, 1, 0), pb = at(pads, 2, 0), pr = at(pads, 3, 0);
  // sh * (H - 1) + output_padding + (KH - 1) * dh + 1 - pads, checked.
  auto out_dim = [&](std::int64_t s_, std::int64_t in, std::int64_t opad, std::int64_t k, std::int64_t d_,
                     std::int64_t b, std::int64_t e) {
    std::int64_t v = checked_mul(s_, in - 1, at_);
    v = checked_add(v, checked_add(opad, checked_add(checked_mul(k - 1, d_, at_), 1, at_), at_), at_);
    return checked_add(v, -checked_add(b, e, at_), at_);
  };
  const std::int64_t OH = positive_dim(out_dim(sh, H, at(op, 0, 0), KH, dh, pt, pb), at_, "height");
  const std::int64_t OW = positive_dim(out_dim(sw, W, at(op, 1, 0), KW, dw, pl, pr), at_, "width");
  Tensor y = alloc({N, O, OH, OW}, at_);
  for (std::int64_t nn = 0; nn < N; ++nn)
    for (std::int64_t o = 0; o < O; ++o) {
      const std::int64_t gi = o / opg, j = o % opg;
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          T acc = 0;
          for (std::int64_t c = 0; c < cpg; ++c)
            for (std::int64_t kh = 0; kh < KH; ++kh) {
              const std::int64_t th = oh + pt - kh * dh;
              if (th < 0 || th % sh) continue;
              const std::int64_t ih = th / sh;
              if (ih >= H) continue;
              for (std::int64_t kw = 0; kw < KW; ++kw) {
                const std::int64_t tw = ow + pl - kw * dw;
                if (tw < 0 || tw % sw) continue;
                const std::int64_t iw = tw / sw;
                if (iw >= W) continue;
                const std::int64_t ci = gi * cpg + c;
                acc = acc + static_cast<T>(x.data[static_cast<std::size_t>(((nn * C + ci) * H + ih) * W + iw)]) *
                                static_cast<T>(
                                    round_to(run.dt(),
                                             w.data[static_cast<std::size_t>(((ci * opg + j) * KH + kh) * KW + kw)]));
              }
            }
          if (!bias.empty()) acc = acc + static_cast<T>(round_to(run.dt(), bias[static_cast<std::size_t>(o)]));
          y.data[static_cast<std::size_t>(((nn * O + o) * OH + oh) * OW + ow)] = static_cast<double>(acc);
        }
    }
  return y;
}

}  // namespace

// Gemm / MatMul / ConvTranspose with explicit parameters (bias per output channel or empty).
// Gemm computes alpha * (A' B') + beta * C as the spec defines: the product accumulated
// sequentially over k, times alpha (rounded once, skipped when alpha = 1), plus beta * C
// (rounded once, skipped when beta = 1). `at` names the node in messages.
template <class T>
Tensor linear(OpRun<T>& run, const ModelNode& n, const std::string& at, const Tensor& x, const Tensor& w,
              const std::vector<double>& bias) {
  if (n.op == "ConvTranspose") return conv_transpose(run, n, at, x, w, bias);
  const bool transA = n.op == "Gemm" && n.int_attr("transA", 0) != 0,
             transB = n.op == "Gemm" && n.int_attr("transB", 0) != 0;
  const T alpha = static_cast<T>(n.op == "Gemm" ? n.float_attr("alpha", 1.0) : 1.0);
  const T beta = static_cast<T>(n.op == "Gemm" ? n.float_attr("beta", 1.0) : 1.0);
  if (w.shape.size() != 2)
    throw InputError(fmt::format("{}: only 2-D weights are supported, got {}", at, shape_string(w.shape)));
  const std::int64_t K = transB ? w.shape[1] : w.shape[0], N = transB ? w.shape[0] : w.shape[1];
  if (K < 1) throw InputError(fmt::format("{}: the weight {} is empty", at, shape_string(w.shape)));
  std::int64_t M;
  if (n.op == "Gemm") {
    if (x.shape.size() != 2) throw InputError(fmt::format("{}: input must be 2-D, got {}", at, shape_string(x.shape)));
    M = transA ? x.shape[1] : x.shape[0];
    if ((transA ? x.shape[0] : x.shape[1]) != K)
      throw InputError(fmt::format("{}: inner dimensions differ (input {}, weight {})", at, shape_string(x.shape),
                                   shape_string(w.shape)));
  } else {
    if (x.shape.empty() || x.shape.back() != K)
      throw InputError(fmt::format("{}: inner dimensions differ (input {}, weight {})", at, shape_string(x.shape),
                                   shape_string(w.shape)));
    M = prod(x.shape) / K;
  }
  Shape ys = n.op == "Gemm" ? Shape{M, N} : x.shape;
  if (n.op != "Gemm") ys.back() = N;
  Tensor y = alloc(ys, at);
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      T acc = 0;
      for (std::int64_t k = 0; k < K; ++k) {
        const T a = static_cast<T>(x.data[static_cast<std::size_t>(transA ? k * M + i : i * K + k)]);
        const T b =
            static_cast<T>(round_to(run.dt(), w.data[static_cast<std::size_t>(transB ? j * K + k : k * N + j)]));
        acc = acc + a * b;
      }
      if (alpha != T(1)) acc = alpha * acc;
      if (!bias.empty()) {
        const T c = static_cast<T>(round_to(run.dt(), bias[static_cast<std::size_t>(j)]));
        acc = acc + (beta != T(1) ? static_cast<T>(beta * c) : c);
      }
      y.data[static_cast<std::size_t>(i * N + j)] = static_cast<double>(acc);
    }
  return y;
}

template Tensor linear(OpRun<float>&, const ModelNode&, const std::string&, const Tensor&, const Tensor&,
                       const std::vector<double>&);
template Tensor linear(OpRun<double>&, const ModelNode&, const std::string&, const Tensor&, const Tensor&,
                       const std::vector<double>&);

namespace {

// Conv through foldcheck's conv path, as a one-node graph.
template <class T>
void conv(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  Tensor x = run.get(n.inputs.at(0), where(n, i));
  const Shape xs = x.shape;
  Graph g;
  g.dtype = run.dt();
  g.nodes = {layer_as_conv(run.model(), i, layer_params_of_node(run.model(), i, false), x, run.dt())};
  Tensor y;
  y.shape = layer_output_shape(n, g.nodes[0].geometry, xs);
  y.data = evaluate(g, x.data, run.options().policy);
  run.put(n, std::move(y));
}

// ConvTranspose, Gemm and MatMul with the node's own weight and bias (per output channel).
template <class T>
void linear_node(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  const std::string& op = n.op;
  const Tensor& x = run.get(n.inputs.at(0), where(n, i));
  const Tensor& w = run.get(n.inputs.at(1), where(n, i));
  std::vector<double> bias;
  if (w.shape.size() != (op == "ConvTranspose" ? 4u : 2u))
    throw InputError(fmt::format("{}: weight {} has rank {}; the op needs {}", where(n, i), shape_string(w.shape),
                                 w.shape.size(), op == "ConvTranspose" ? 4 : 2));
  if (op != "MatMul" && n.inputs.size() > 2 && !n.inputs[2].empty()) {
    bias = run.get(n.inputs[2], where(n, i)).data;
    const std::int64_t N =
        op == "Gemm" ? (n.int_attr("transB", 0) ? w.shape[0] : w.shape[1]) : w.shape[1] * n.int_attr("group", 1);
    if (static_cast<std::int64_t>(bias.size()) != N)
      throw InputError(where(n, i) + ": only a per-output-channel bias is supported");
  }
  run.put(n, linear(run, n, where(n, i), x, w, bias));
}

// A parameter input that is a computed value (a product of two activations): its own
// cotangent is not modelled, so the band is not computed (the driver names the op).
void refuse_activation_weight(const VjpArgs& a, const std::vector<std::vector<double>*>& gx) {
  for (std::size_t k = 1; k < gx.size(); ++k)
    if (gx[k])
      throw InputError(where(a.node, a.index) +
                       ": its weight is computed, not a parameter; the band's derivative "
                       "models layers with constant weights");
}

void conv_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  refuse_activation_weight(a, gx);
  if (!gx[0]) return;
  const ref::ConvGeometry g = conv_geometry(a.node, a.inputs[0]->shape, a.inputs[1]->shape);
  const std::vector<double> d = conv_input_cotangent(g, a.inputs[1]->data, gy, a.slices, a.threads);
  for (std::size_t k = 0; k < d.size(); ++k) (*gx[0])[k] += d[k];
}

// Gemm (alpha A' B' + beta C; A' = A or A^T, B' = B or B^T) and MatMul (rows of X times W):
// the first input's cotangent, alpha gY B'^T (transposed back for transA).
void gemm_vjp(const VjpArgs& a, const std::vector<double>& gy, const std::vector<std::vector<double>*>& gx) {
  refuse_activation_weight(a, gx);
  if (!gx[0]) return;
  const ModelNode& n = a.node;
  const bool gemm = n.op == "Gemm", transA = gemm && n.int_attr("transA", 0) != 0,
             transB = gemm && n.int_attr("transB", 0) != 0;
  const double alpha = gemm ? n.float_attr("alpha", 1.0) : 1.0;
  const Tensor &x = *a.inputs[0], &w = *a.inputs[1];
  const std::int64_t K = transB ? w.shape[1] : w.shape[0], N = transB ? w.shape[0] : w.shape[1];
  const std::int64_t M = prod(x.shape) / K;
  const std::size_t nx = x.data.size(), ny = a.output->data.size();
  for (std::size_t s = 0; s < a.slices; ++s)
    for (std::int64_t i = 0; i < M; ++i)
      for (std::int64_t k = 0; k < K; ++k) {
        double acc = 0;
        for (std::int64_t j = 0; j < N; ++j)
          acc += gy[s * ny + static_cast<std::size_t>(i * N + j)] *
                 w.data[static_cast<std::size_t>(transB ? j * K + k : k * N + j)];
        (*gx[0])[s * nx + static_cast<std::size_t>(transA ? k * M + i : i * K + k)] += alpha * acc;
      }
}

}  // namespace

std::vector<double> conv_input_cotangent(const ref::ConvGeometry& g, const std::vector<double>& w,
                                         const std::vector<double>& gy, std::size_t slices, unsigned threads) {
  const std::int64_t N = g.N * static_cast<std::int64_t>(slices), OH = g.OH(), OW = g.OW();
  const std::int64_t Hu = (OH - 1) * g.stride_h + 1, Wu = (OW - 1) * g.stride_w + 1;
  std::vector<double> up(static_cast<std::size_t>(N * g.O * Hu * Wu), 0.0);
  for (std::int64_t nco = 0; nco < N * g.O; ++nco)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow)
        up[static_cast<std::size_t>((nco * Hu + oh * g.stride_h) * Wu + ow * g.stride_w)] =
            gy[static_cast<std::size_t>((nco * OH + oh) * OW + ow)];
  ref::ConvGeometry t = g;
  t.N = N, t.C = g.O, t.H = Hu, t.W = Wu, t.O = g.C, t.stride_h = t.stride_w = 1;
  t.pad_top = g.dil_h * (g.KH - 1) - g.pad_top;
  t.pad_left = g.dil_w * (g.KW - 1) - g.pad_left;
  t.pad_bottom = g.H - Hu - t.pad_top + g.dil_h * (g.KH - 1);
  t.pad_right = g.W - Wu - t.pad_left + g.dil_w * (g.KW - 1);
  if (t.pad_top < 0 || t.pad_left < 0 || t.pad_bottom < 0 || t.pad_right < 0)
    throw InputError("a conv padded by more than its dilated kernel: the band's derivative does not model it");
  const std::int64_t cg = g.C / g.groups, og = g.O / g.groups, kk = g.KH * g.KW;
  Node conv;
  conv.geometry = t;
  conv.weight.shape = {t.O, og, g.KH, g.KW};
  conv.weight.data.resize(w.size());
  for (std::int64_t gr = 0; gr < g.groups; ++gr)
    for (std::int64_t o = 0; o < og; ++o)
      for (std::int64_t c = 0; c < cg; ++c)
        for (std::int64_t k = 0; k < kk; ++k)
          conv.weight.data[static_cast<std::size_t>(((gr * cg + c) * og + o) * kk + (kk - 1 - k))] =
              w[static_cast<std::size_t>(((gr * og + o) * cg + c) * kk + k)];
  Graph graph;
  graph.nodes = {conv};
  Policy pol;
  pol.threads = threads;
  return evaluate(graph, up, pol);
}

OpTable conv_ops() {
  const Kernel linear_kernel{&linear_node<float>, &linear_node<double>};
  return {
      {"Conv",
       {.attributes = {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"},
        .arity = {2, 1, 3, 1},
        .kernel = {&conv<float>, &conv<double>},
        .spatial = Spatial::Conv,
        .vjp = &conv_vjp}},
      {"ConvTranspose",
       {.attributes = {"dilations", "group", "kernel_shape", "output_padding", "pads", "strides"},
        .arity = {2, 1, 3, 1},
        .kernel = linear_kernel,
        .spatial = Spatial::Conv}},
      {"Gemm",
       {.attributes = {"alpha", "beta", "transA", "transB"},
        .arity = {2, 1, 3, 1},
        .kernel = linear_kernel,
        .vjp = &gemm_vjp}},
      {"MatMul", {.attributes = {}, .arity = {2, 1, 2, 1}, .kernel = linear_kernel, .vjp = &gemm_vjp}},
  };
}

}  // namespace foldcheck::ops

namespace foldcheck {

using ops::checked_add;
using ops::checked_mul;
using ops::positive_dim;
using ops::same_padding;

ref::ConvGeometry conv_geometry(const ModelNode& n, const Shape& xs, const Shape& ws) {
  if (xs.size() != 4 || ws.size() != 4)
    throw InputError(
        fmt::format("Conv {}: only 2-D convs (4-D tensors) are supported, input {}", n.name, shape_string(xs)));
  auto at = [](const std::vector<std::int64_t>& v, std::size_t i, std::int64_t d) { return v.size() > i ? v[i] : d; };
  ref::ConvGeometry g = ref::conv_sizes(xs, ws);
  g.groups = n.int_attr("group", 1);
  const auto s = n.ints_attr("strides"), d = n.ints_attr("dilations"), p = n.ints_attr("pads");
  g.stride_h = at(s, 0, 1);
  g.stride_w = at(s, 1, 1);
  g.dil_h = at(d, 0, 1);
  g.dil_w = at(d, 1, 1);
  g.pad_top = at(p, 0, 0);
  g.pad_left = at(p, 1, 0);
  g.pad_bottom = at(p, 2, 0);
  g.pad_right = at(p, 3, 0);
  const std::string ap = n.string_attr("auto_pad", "NOTSET");
  if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
    same_padding(ap, g.H, g.KH, g.stride_h, g.dil_h, g.pad_top, g.pad_bottom);
    same_padding(ap, g.W, g.KW, g.stride_w, g.dil_w, g.pad_left, g.pad_right);
  } else if (ap == "VALID") {
    g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 0;
  }
  const std::string who = "Conv " + n.name;
  if (g.groups <= 0 || g.C % g.groups || checked_mul(ws[1], g.groups, who) != g.C || g.O < 1 || g.KH < 1 || g.KW < 1)
    throw InputError(fmt::format("Conv {}: weight {} does not fit input {} with group {}", n.name, shape_string(ws),
                                 shape_string(xs), g.groups));
  // The output: (in + pads - dilated kernel) / stride + 1 >= 1, in checked arithmetic.
  auto out = [&](std::int64_t in, std::int64_t b, std::int64_t e, std::int64_t k, std::int64_t d, std::int64_t st,
                 const char* axis) {
    const std::int64_t span = checked_add(checked_add(in, checked_add(b, e, who), who),
                                          -checked_add(checked_mul(k - 1, d, who), 1, who), who);
    return positive_dim(span < 0 ? 0 : span / st + 1, who, axis);
  };
  (void)checked_element_count({g.N, g.O, out(g.H, g.pad_top, g.pad_bottom, g.KH, g.dil_h, g.stride_h, "height"),
                               out(g.W, g.pad_left, g.pad_right, g.KW, g.dil_w, g.stride_w, "width")},
                              who + ": output");
  return g;
}

Node layer_as_conv(const Model& m, std::size_t layer, LayerParams lp, Tensor& x, DType dt) {
  const ModelNode& node = m.nodes[layer];
  Node c;
  c.kind = Node::Kind::Conv;
  c.name = node.name;
  c.bias = std::move(lp.bias);
  round_all(dt, c.bias);  // parameters in the run's dtype
  if (node.op == "Conv") {
    c.geometry = conv_geometry(node, x.shape, lp.weight_shape);
    c.weight = Tensor{lp.weight_shape, std::move(lp.weight), dt};
  } else if (node.op == "Gemm" || node.op == "MatMul") {
    const std::int64_t K = lp.per_channel;
    if (x.shape.empty() || x.size() % K)
      throw InputError(
          fmt::format("{} {}: input {} does not match K = {}", node.op, node.name, shape_string(x.shape), K));
    const std::int64_t M = x.size() / K;
    if (node.op == "Gemm" && node.int_attr("transA", 0) != 0) {  // x is K x M: rows are its columns
      std::vector<double> t(x.data.size());
      for (std::int64_t i = 0; i < M; ++i)
        for (std::int64_t k = 0; k < K; ++k)
          t[static_cast<std::size_t>(i * K + k)] = x.data[static_cast<std::size_t>(k * M + i)];
      x.data = std::move(t);
    }
    x.shape = {M, K, 1, 1};
    c.geometry.N = M;
    c.geometry.C = K;
    c.geometry.O = lp.channels;
    c.weight = Tensor{{lp.channels, K, 1, 1}, std::move(lp.weight), dt};
  } else {
    throw InputError(fmt::format("{} {}: not a Conv, Gemm or MatMul", node.op, node.name));
  }
  round_all(dt, c.weight.data);
  return c;
}

Shape layer_output_shape(const ModelNode& layer, const ref::ConvGeometry& g, const Shape& input_shape) {
  if (layer.op == "Conv") return {g.N, g.O, g.OH(), g.OW()};
  if (layer.op == "Gemm") return {g.N, g.O};
  Shape s = input_shape;  // MatMul: [..., K] -> [..., O]
  s.back() = g.O;
  return s;
}

}  // namespace foldcheck
