// BatchNormalization (inference: the policy's BatchNorm form, per channel) and the
// layer -> BatchNormalization pair as one unit (model_run.hpp's contract): unfused, the
// layer then the BatchNorm; fused, the layer with the parameters folded by the recipe
// (fold_pass.hpp). Kernel contract: op_registry.hpp.
#include <cmath>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/layer/fold_pass.hpp"
#include "foldcheck/layer/layer_math.hpp"
#include "ops_common.hpp"

namespace foldcheck::ops {
namespace {

// y[i] = f(y[i], channel of i) over axis 1 (the channel of a tensor of rank < 2 is 0).
template <class F>
void channelwise(Tensor& y, F f) {
  const ChannelOf ch(y.shape);
  for (std::size_t i = 0; i < y.data.size(); ++i) y.data[i] = f(y.data[i], ch(i));
}

// The BatchNorm in the policy's form, computed in T.
template <class T>
void batchnorm(const OpRun<T>& run, Tensor& y, const ref::BnParams& bn) {
  const DType a = OpRun<T>::kF64 ? DType::Float64 : DType::Float32;
  const Policy& policy = run.options().policy;
  channelwise(y, [&](double v, std::size_t o) {
    return static_cast<double>(bn_apply<T>(static_cast<T>(v), bn, o, policy.bn_form, policy.arith, a));
  });
}

template <class T>
void batch_normalization(OpRun<T>& run, const ModelNode& n, std::size_t i) {
  if (n.int_attr("training_mode", 0))
    throw InputError(where(n, i) + ": training_mode = 1 is not an inference BatchNorm");
  Tensor y = run.get(n.inputs.at(0), where(n, i));
  ref::BnParams bn{run.get(n.inputs.at(1), where(n, i)).data, run.get(n.inputs.at(2), where(n, i)).data,
                   run.get(n.inputs.at(3), where(n, i)).data, run.get(n.inputs.at(4), where(n, i)).data,
                   static_cast<double>(static_cast<float>(n.float_attr("epsilon", 1e-5)))};
  check_bn_params(bn, bn.gamma.size(), where(n, i));
  if (y.shape.size() < 2 || y.shape[1] != static_cast<std::int64_t>(bn.gamma.size()))
    throw InputError(fmt::format("{}: input {} does not have {} channels (dimension 1), as the parameters do",
                                 where(n, i), shape_string(y.shape), bn.gamma.size()));
  batchnorm(run, y, bn);
  run.put(n, std::move(y));
}

// Transposed derivative (op_registry.hpp's Vjp): gx = gy gamma / sqrt(var + eps) per channel
// (eps as the kernel reads it, through float32).
void batch_normalization_vjp(const VjpArgs& a, const std::vector<double>& gy,
                             const std::vector<std::vector<double>*>& gx) {
  for (std::size_t k = 1; k < gx.size(); ++k)
    if (gx[k])
      throw InputError(where(a.node, a.index) +
                       ": its parameters are computed; the band's derivative models constant ones");
  if (!gx[0]) return;
  const double eps = static_cast<double>(static_cast<float>(a.node.float_attr("epsilon", 1e-5)));
  const std::vector<double>&g = a.inputs[1]->data, &v = a.inputs[4]->data;
  const ChannelOf ch(a.inputs[0]->shape);
  const std::size_t n = a.inputs[0]->data.size();
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t c = ch(i);
    const double f = g[c] / std::sqrt(v[c] + eps);
    for (std::size_t s = 0; s < a.slices; ++s) (*gx[0])[s * n + i] += gy[s * n + i] * f;
  }
}

}  // namespace

template <class T>
void run_pair(OpRun<T>& run, const BnPair& p) {
  const Model& m = run.model();
  const ModelRunOptions& o = run.options();
  const ModelNode& layer = m.nodes[p.layer];
  const ModelNode& bn = m.nodes[p.bn];
  LayerParams lp = layer_params(m, p, layer.op == "ConvTranspose");  // a Conv's index: the identity
  const Tensor& x = run.get(layer.inputs[0], layer.op);
  if (layer.op != "ConvTranspose") {
    Tensor xin = x;
    Graph g = pair_graph(m, p, std::move(lp), xin, run.dt());
    if (o.fused) g = fold_batchnorm(g, o.recipe, o.ref, o.policy.arith);
    Tensor y;
    y.shape = layer_output_shape(layer, g.nodes[0].geometry, x.shape);
    y.data = evaluate(g, xin.data, o.policy);
    run.put(bn, std::move(y));
    return;
  }
  // ConvTranspose: the layer with folded parameters, or the layer then BN.
  if (o.fused) {
    const FoldedParams fp =
        fold_parameters(lp.weight, lp.per_channel, lp.bias, lp.bn, lp.dtype, o.recipe, o.ref, o.policy.arith);
    Tensor w = *m.initializer(layer.inputs[1]);
    for (std::size_t k = 0; k < lp.index.size(); ++k) w.data[lp.index[k]] = fp.weight[k];
    Tensor y = linear(run, layer, where(layer, p.layer), x, w, fp.bias);
    if (!fp.post_add.empty()) channelwise(y, [&](double v, std::size_t c) { return run.r(v + fp.post_add[c]); });
    run.put(bn, std::move(y));
  } else {
    Tensor y = linear(run, layer, where(layer, p.layer), x, *m.initializer(layer.inputs[1]), lp.bias);
    batchnorm(run, y, lp.bn);
    run.put(bn, std::move(y));
  }
}

template void run_pair(OpRun<float>&, const BnPair&);
template void run_pair(OpRun<double>&, const BnPair&);

OpTable batchnorm_ops() {
  return {
      {"BatchNormalization",
       {.attributes = {"epsilon", "momentum", "training_mode", "spatial", "is_test"},
        .arity = {5, 1, 5, 5},
        .kernel = {&batch_normalization<float>, &batch_normalization<double>},
        .vjp = &batch_normalization_vjp}},
  };
}

}  // namespace foldcheck::ops

namespace foldcheck {

Graph pair_graph(const Model& m, const BnPair& p, LayerParams lp, Tensor& x, DType dt) {
  // BatchNormalization normalizes axis 1. A MatMul's output features are its last axis:
  // the same axis only for a 2-D input (then [rows, features]); from rank 3 the BatchNorm
  // scales MatMul rows, which no fold into the weights can do.
  if (m.nodes[p.layer].op == "MatMul" && x.shape.size() != 2)
    throw InputError(
        fmt::format("MatMul {} -> BatchNormalization: input of shape {} gives an output of rank {}, whose axis 1 "
                    "(which BatchNormalization normalizes) is not the MatMul's output features (its last "
                    "axis): not a foldable pair",
                    p.name, shape_string(x.shape), x.shape.size()));
  Graph g;
  g.dtype = dt;
  Node b;
  b.kind = Node::Kind::BatchNorm;
  b.bn = lp.bn;
  g.nodes = {layer_as_conv(m, p.layer, std::move(lp), x, dt), b};
  g.nodes[1].geometry = g.nodes[0].geometry;
  return g;
}

}  // namespace foldcheck
