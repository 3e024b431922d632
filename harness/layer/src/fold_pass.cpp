#include "foldcheck/layer/fold_pass.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/layer_math.hpp"
#include "foldcheck/numerics/narrow.hpp"

namespace foldcheck {
namespace {

// The recipe's chain in the float number type A of arithmetic `arith` (float, double, or
// Narrow for a 16-bit arithmetic), each value stored as the engine stores it.
template <class A>
void fold_float(const std::vector<double>& w, std::int64_t per_channel, const std::vector<double>& conv_bias,
                const ref::BnParams& bn, DType dtype, DType wdtype, DType arith, Recipe r, const Arithmetic& ar,
                FoldedParams& out) {
  const std::size_t O = bn.gamma.size();
  out.weight.resize(w.size());
  out.bias.resize(O);
  if (r == Recipe::Tvm && !conv_bias.empty()) out.post_add.resize(O);  // TVM keeps the shift as an add
  for (std::size_t o = 0; o < O; ++o) {
    const FoldScalars<A> f = fold_scalars(r, fold_inputs<A>(bn, o, conv_bias, r, arith), ar);
    for (std::int64_t i = 0; i < per_channel; ++i) {
      const std::size_t k = o * per_channel + i;
      const A prod = static_cast<A>(w[k]) * f.scale;
      out.weight[k] = round_to(wdtype, static_cast<double>(prod));
    }
    out.bias[o] = round_to(dtype, static_cast<double>(f.bias));
    if (f.has_post_add) out.post_add[o] = round_to(dtype, static_cast<double>(f.post_add));
  }
}

void fold_float_in(DType arith, const std::vector<double>& w, std::int64_t per_channel,
                   const std::vector<double>& conv_bias, const ref::BnParams& bn, DType dtype, DType wdtype, Recipe r,
                   const Arithmetic& ar, FoldedParams& out) {
  switch (arith) {
    case DType::Float64: return fold_float<double>(w, per_channel, conv_bias, bn, dtype, wdtype, arith, r, ar, out);
    case DType::Float32: return fold_float<float>(w, per_channel, conv_bias, bn, dtype, wdtype, arith, r, ar, out);
    case DType::Float16:
      return fold_float<Narrow<DType::Float16>>(w, per_channel, conv_bias, bn, dtype, wdtype, arith, r, ar, out);
    case DType::BFloat16:
      return fold_float<Narrow<DType::BFloat16>>(w, per_channel, conv_bias, bn, dtype, wdtype, arith, r, ar, out);
  }
}

// The arithmetic of the fold: ar.fold_dtype, else the storage type's. Every value of the
// storage type must be one of the arithmetic's (the chain's inputs are taken as exact).
DType fold_arithmetic(DType dtype, const Arithmetic& ar) {
  const DTypeInfo& si = info(dtype);
  const DTypeInfo& ai = info(ar.fold_dtype.value_or(si.arithmetic));
  if (ai.precision < si.precision || ai.emin > si.emin || ai.emax < si.emax)
    throw InputError(std::string("a fold computed in ") + ai.name + " cannot take " + si.name + " parameters");
  return ai.dtype;
}

// Channel o's fold scalars in bounded arithmetic, or UnboundedFold when the chain may divide
// by zero there (Bounded's division throws std::domain_error).
FoldScalars<Bounded> bounded_scalars(Recipe r, const ref::BnParams& bn, std::size_t o,
                                     const std::vector<double>& conv_bias, DType arith, const Arithmetic& ar) {
  try {
    return fold_scalars(r, fold_inputs<Bounded>(bn, o, conv_bias, r, arith), ar);
  } catch (const std::domain_error&) {
    throw UnboundedFold(fmt::format(
        "the {} fold in {} arithmetic divides by sqrt(var + eps) of channel {} (var {:g}, eps {:g}), which may "
        "round to zero there: its fold is infinite or NaN, and no rounding bound holds",
        name(r), name(arith), o, bn.var[o], bn.eps));
  }
}

}  // namespace

FoldedParams fold_parameters(const std::vector<double>& w, std::int64_t per_channel,
                             const std::vector<double>& conv_bias, const ref::BnParams& bn, DType dtype,
                             Recipe r, const ref::Options& opts, const Arithmetic& ar) {
  const std::size_t O = bn.gamma.size();
  if (static_cast<std::int64_t>(w.size()) != static_cast<std::int64_t>(O) * per_channel)
    throw InputError("weights have " + std::to_string(w.size()) + " elements, expected " +
                     std::to_string(O) + " channels x " + std::to_string(per_channel));
  const DTypeInfo& si = info(dtype);
  const DType wdtype = ar.weight_dtype.value_or(dtype);
  const DTypeInfo& wi = info(wdtype);  // storage of the folded weights
  if (wi.unit_roundoff < si.unit_roundoff)
    throw InputError(std::string("folded weights in ") + wi.name + " are wider than the model's " + si.name);
  const DType arith = fold_arithmetic(dtype, ar);
  const double au = operation_roundoff(arith), aeta = operation_eta(arith);  // per operation (bounded.hpp)
  FoldedParams out;
  FoldInfo& fi = out.info;
  fi.recipe = r;
  fi.scale.resize(O);
  fi.bias.resize(O);
  fi.post_add.resize(O);
  fi.weight_alpha.resize(O);

  if (r == Recipe::Exact) {
    out.weight.resize(w.size());
    out.bias.resize(O);
    fi.weight_eta = wi.underflow_eta;
    ref::Options wo = opts;  // the batched certified fold, bit-identical to ref::fold_weight per weight
    wo.formats = ref::format_bit(*wi.format);
    const ref::ValueArray folded = ref::fold_weights(w, per_channel, bn, wo);
    for (std::size_t k = 0; k < w.size(); ++k) out.weight[k] = folded.rounded_to(k, *wi.format);
    for (std::size_t o = 0; o < O; ++o) {
      const ref::Value t = ref::fold_scale(bn.gamma[o], bn.var[o], bn.eps, opts);
      fi.scale[o] = Bounded::exact(t.approx.hi, si.arithmetic);
      fi.scale[o].v += t.approx.lo;
      // |RN_S(w t) - w t| <= u_S |w t| + eta_S
      fi.weight_alpha[o] = round_up(wi.unit_roundoff * std::fabs(t.approx.hi) * (1 + 0x1p-50));
      const double b = conv_bias.empty() ? 0.0 : conv_bias[o];
      const ref::Value bv = ref::fold_bias(b, bn.gamma[o], bn.beta[o], bn.mean[o], bn.var[o], bn.eps, opts);
      out.bias[o] = bv.rounded_to(*si.format);
      Bounded bb = Bounded::exact(bv.approx.hi, si.arithmetic);
      bb.v += bv.approx.lo;
      bb.e = round_up(si.unit_roundoff * bb.mag() + si.underflow_eta);
      fi.bias[o] = bb;
    }
    return out;
  }

  fold_float_in(arith, w, per_channel, conv_bias, bn, dtype, wdtype, r, ar, out);

  // The same operation chain in bounded arithmetic.
  fi.weight_eta = aeta;
  if (wi.unit_roundoff > au) fi.weight_eta = round_up(aeta * (1 + wi.unit_roundoff) + wi.underflow_eta);
  for (std::size_t o = 0; o < O; ++o) {
    const FoldScalars<Bounded> f = bounded_scalars(r, bn, o, conv_bias, arith, ar);
    fi.scale[o] = f.scale;
    const double t = f.scale.mag();
    // w' = RN_A(w * t_hat): |w' - w t| <= |w| (e_t + u_A (|t| + e_t)) + eta_A, then storage.
    double alpha = round_up(f.scale.e + au * (t + f.scale.e) + 0x1p-62 * t);
    if (wi.unit_roundoff > au) alpha = round_up(alpha + wi.unit_roundoff * (t + alpha));
    fi.weight_alpha[o] = alpha;
    fi.bias[o] = f.bias.stored_as(dtype);
    if (f.has_post_add) {
      fi.post_add[o] = f.post_add.stored_as(dtype);
      fi.has_post_add = true;
    }
  }
  return out;
}

Graph fold_batchnorm(const Graph& g, Recipe recipe, const ref::Options& opts, const Arithmetic& ar) {
  Graph out;
  out.dtype = g.dtype;
  bool folded = false;
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.kind == Node::Kind::Conv && i + 1 < g.nodes.size() && g.nodes[i + 1].kind == Node::Kind::BatchNorm) {
      const Node& bn = g.nodes[i + 1];
      const std::int64_t per_channel = n.geometry.terms_per_output();
      FoldedParams fp = fold_parameters(n.weight.data, per_channel, n.bias, bn.bn, g.dtype, recipe, opts, ar);
      Node conv = n;
      conv.name = n.name + "+" + bn.name + "(" + name(recipe) + ")";
      conv.weight.data = fp.weight;
      conv.weight.dtype = ar.weight_dtype.value_or(g.dtype);
      conv.bias = fp.bias;
      conv.original_bias = n.bias;
      conv.fold = fp.info;
      out.nodes.push_back(conv);
      if (fp.info.has_post_add) {
        Node add;
        add.kind = Node::Kind::ChannelAdd;
        add.name = bn.name + ".shift";
        add.geometry = n.geometry;
        add.bias = fp.post_add;
        out.nodes.push_back(add);
      }
      folded = true;
      ++i;
      continue;
    }
    out.nodes.push_back(n);
  }
  if (!folded) throw InputError("graph has no Conv -> BatchNorm pair to fold");
  return out;
}

void widen_fold_errors(const FoldInfo& fi, std::vector<double>& theta, std::vector<double>& delta, double& eta) {
  for (std::size_t o = 0; o < theta.size(); ++o) {
    const double t = fi.scale[o].mag();
    if (!(t > 0)) continue;  // a zero scale: every folded weight is 0 (no common factor)
    theta[o] = std::max(theta[o], fi.scale[o].e / t);
    delta[o] = std::max(delta[o], (fi.weight_alpha[o] - fi.scale[o].e) / t);
  }
  eta = std::max(eta, fi.weight_eta);
}

}  // namespace foldcheck
