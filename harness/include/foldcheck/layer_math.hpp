#pragma once
// Per-channel scalar math shared by the float evaluation (N = float/double) and the
// bound evaluation (N = Bounded), so the bound always describes the very operation
// sequence that is executed.
#include <type_traits>

#include "foldcheck/bounded.hpp"
#include "foldcheck/graph.hpp"
#include "foldcheck/recipes.hpp"

namespace foldcheck {

// A parameter value (exactly representable in the storage type, hence in the arithmetic).
template <class N>
N param(double v, DType arith) {
  if constexpr (std::is_same_v<N, Bounded>) return Bounded::exact(v, arith);
  else return static_cast<N>(v);
}

// eps as an engine holds it: converted through float32 if `through_f32`, then to the
// arithmetic type. The exact model uses eps itself (the framework's double value).
template <class N>
N eps_value(double eps, bool through_f32, DType arith) {
  if constexpr (std::is_same_v<N, Bounded>) {
    const bool rounded = through_f32 || arith != DType::Float64;
    return Bounded::with_error(eps, rounded ? round_up(info(DType::Float32).unit_roundoff * std::fabs(eps)) : 0.0,
                               arith);
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

// Inference BatchNorm of one value x in channel o (see BnForm).
template <class N>
N bn_apply(const N& x, const ref::BnParams& bn, std::size_t o, BnForm form, DType arith) {
  using std::sqrt;
  const N gamma = param<N>(bn.gamma[o], arith), beta = param<N>(bn.beta[o], arith);
  const N mean = param<N>(bn.mean[o], arith), var = param<N>(bn.var[o], arith);
  const N eps = eps_value<N>(bn.eps, false, arith);
  if (form == BnForm::Textbook) return ((x - mean) / sqrt(var + eps)) * gamma + beta;
  const N a = (param<N>(1.0, arith) / sqrt(var + eps)) * gamma;
  return x * a + (beta - mean * a);
}

}  // namespace foldcheck
