#pragma once
// Per-channel scalar math shared by the float evaluation (N = float/double) and the
// bound evaluation (N = Bounded), so the bound always describes the very operation
// sequence that is executed.
#include <type_traits>

#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/layer/graph.hpp"
#include "foldcheck/numerics/num_ops.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/numerics/xnum.hpp"

namespace foldcheck {

// A parameter value (exactly representable in the storage type, hence in the arithmetic).
template <class N>
N param(double v, DType arith) {
  if constexpr (std::is_same_v<N, Bounded>) return Bounded::exact(v, arith);
  else return static_cast<N>(v);
}

// eps as an engine holds it: converted through float32 if `through_f32`, then to the
// arithmetic type (stage var_eps). The exact model uses eps itself (the framework's double).
template <class N>
N eps_value(double eps, bool through_f32, DType arith) {
  if constexpr (std::is_same_v<N, Bounded>) {
    const bool rounded = through_f32 || arith != DType::Float64;
    double err = rounded ? round_up(info(DType::Float32).unit_roundoff * std::fabs(eps)) : 0.0;
    // A 16-bit arithmetic (narrow.hpp) converts eps to its type, through float32: two
    // roundings, and an absolute one where eps is subnormal in the type.
    if (info(arith).arithmetic != arith) err = round_up(operation_roundoff(arith) * std::fabs(eps) + operation_eta(arith));
    return Bounded::with_error(eps, err, arith);
  } else if constexpr (std::is_same_v<N, XNum>) {
    StageScope<XNum> st(Stage::VarEps);
    if (xcontext().exact()) return XNum(eps);
    const double e = through_f32 ? static_cast<double>(static_cast<float>(eps)) : eps;
    return XNum(arith == DType::Float64 ? e : static_cast<double>(static_cast<float>(e)));
  } else {
    return through_f32 ? static_cast<N>(static_cast<float>(eps)) : static_cast<N>(eps);
  }
}

template <class N>
FoldInputs<N> fold_inputs(const ref::BnParams& bn, std::size_t o, const std::vector<double>& conv_bias, Recipe r,
                          DType arith) {
  FoldInputs<N> in;
  in.gamma = param<N>(bn.gamma[o], arith);
  in.beta = param<N>(bn.beta[o], arith);
  in.mean = param<N>(bn.mean[o], arith);
  in.var = param<N>(bn.var[o], arith);
  in.eps = eps_value<N>(bn.eps, eps_through_float32(r), arith);
  in.one = param<N>(1.0, arith);
  in.zero = param<N>(0.0, arith);
  in.has_conv_bias = !conv_bias.empty();
  in.conv_bias = param<N>(in.has_conv_bias ? conv_bias[o] : 0.0, arith);
  return in;
}

// v * scale + shift, the last step of both BatchNorm forms: the multiplication in stage
// scale and the addition in stage bias, or one contracted multiply-add (stage bias).
template <class N>
N scale_then_shift(const N& v, const N& scale, const N& shift, bool fma) {
  if (fma) {
    StageScope<N> st(Stage::Bias);
    return madd(v, scale, shift, true);
  }
  N p;
  {
    StageScope<N> st(Stage::Scale);
    p = v * scale;
  }
  StageScope<N> st(Stage::Bias);
  return p + shift;
}

// Inference BatchNorm of one value x in channel o (see BnForm), each operation in its
// attribution stage: var + eps (var_eps); sqrt and the division or reciprocal (rsqrt);
// the multiplications by gamma or by the scale (scale); x - mean, beta - mean*a and
// + beta (bias; a contracted multiply-add counts there too).
template <class N>
N bn_apply(const N& x, const ref::BnParams& bn, std::size_t o, BnForm form, const Arithmetic& ar, DType arith) {
  const N gamma = param<N>(bn.gamma[o], arith), beta = param<N>(bn.beta[o], arith);
  const N mean = param<N>(bn.mean[o], arith), var = param<N>(bn.var[o], arith);
  const N eps = eps_value<N>(bn.eps, false, arith);
  N a;
  {
    StageScope<N> st(Stage::VarEps);
    a = var + eps;
  }
  if (form == BnForm::Textbook) {
    N d;
    {
      StageScope<N> st(Stage::Bias);
      d = x - mean;
    }
    return scale_then_shift(div_sqrt(d, a, ar, Stage::Scale), gamma, beta, ar.fma);
  }
  const N r = inv_sqrt(a, ar);
  N s, shift;
  {
    StageScope<N> st(Stage::Scale);
    s = r * gamma;
  }
  {
    StageScope<N> st(Stage::Bias);
    shift = madd(N(-mean), s, beta, ar.fma);
  }
  return scale_then_shift(x, s, shift, ar.fma);
}

}  // namespace foldcheck
