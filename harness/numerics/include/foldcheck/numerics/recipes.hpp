#pragma once
// BatchNorm fold recipes: each engine's exact operation order, as templates over the
// number type so the same code computes the float result (N = float or double) and its
// rigorous error bound (N = Bounded). One source of truth per recipe.
//
// Every recipe yields, per output channel, a weight multiplier `scale` (folded weight =
// w · scale, one multiply, in the arithmetic type), the folded conv `bias`, and for TVM
// with a conv bias a separate `post_add` that the engine adds after the conv.
// Sources (checked against each engine's code):
//   pytorch       torch/nn/utils/fusion.py fuse_conv_bn_weights:
//                   r = rsqrt(var + eps); w' = w * (gamma * r); b' = (b - mean) * r * gamma + beta
//                 CPU rsqrt is 1/sqrt (Vectorized<float>::rsqrt divides 1 by sqrt), modelled so.
//                 eps (a Python float) enters the add in the tensor's type.
//   tvm           relay SimplifyInference: scale = (1 / sqrt(var + float(eps))) * gamma,
//                 shift = (-mean) * scale + beta; FoldScaleAxis folds scale into the weights
//                 (w * scale) and, through a conv bias_add, b * scale; the shift stays an add.
//   onnxruntime   core/optimizer/conv_bn_fusion.cc: var += float(eps); var = sqrt(var);
//                 s = gamma / var; W *= s; with bias: ((b - mean) * s) + beta, else beta - mean * s.
//   onnxoptimizer passes/fuse_bn_into_conv.h: eps held as float (even for double tensors);
//                 s = gamma / sqrt(var + eps); W *= s; b' = ((b_or_0 - mean) * s) + beta.
//   exact         the correctly rounded exact fold (the reference), one rounding per value.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/numerics/num_ops.hpp"

namespace foldcheck {

enum class Recipe { PyTorch, Tvm, OnnxRuntime, OnnxOptimizer, Exact };

const std::vector<Recipe>& all_recipes();
const char* name(Recipe r);
Recipe recipe_from_name(std::string_view n);  // throws InputError
std::string describe(Recipe r);               // the operation chain in one line

// A recipe run with every fold operation rounded to fold_dtype (Arithmetic::fold_dtype)
// has its own label: "pytorch", "pytorch (float16 arithmetic)".
std::string recipe_label(Recipe r, std::optional<DType> fold_dtype);
// The fold arithmetics an observed fold stored in t is scored in: t's arithmetic (unset),
// and for a 16-bit t also t itself, where PyTorch's fusers compute on a .half() or
// .bfloat16() module (narrow.hpp). Neither contains the other's results.
std::vector<std::optional<DType>> observed_fold_arithmetics(DType t);
// The recipe an observation is attributed to, among candidates (worst ratio to the bound,
// whether scored in a 16-bit fold arithmetic): the closest of those in the model's own
// arithmetic if one explains it (ratio <= 1), else the closest of all. A 16-bit arithmetic's
// bound is ~4 times wider, so the smallest ratio alone would credit it with folds made in
// float32. Returns an index; 0 for no candidates.
struct FitCandidate {
  double worst_ratio;
  bool narrow_arithmetic;
};
std::size_t closest_fit(const std::vector<FitCandidate>& c);

template <class N>
struct FoldInputs {
  N gamma, beta, mean, var, eps, conv_bias, one, zero;
  bool has_conv_bias = false;
};

template <class N>
struct FoldScalars {
  N scale, bias, post_add;
  bool has_post_add = false;
};

// Whether the recipe converts eps through float32 before use (true for TVM, ONNX
// Runtime and onnxoptimizer, whose eps is a float attribute or cast); PyTorch uses eps
// in the tensor's type.
bool eps_through_float32(Recipe r);

// The recipe's operations, each in its attribution stage (arithmetic.hpp), in the
// variant's arithmetic (fma contracts the bias chain's multiply-adds; fast rsqrt replaces
// 1/sqrt and division by sqrt).
template <class N>
FoldScalars<N> fold_scalars(Recipe r, const FoldInputs<N>& in, const Arithmetic& ar) {
  FoldScalars<N> f;
  using std::sqrt;
  N a;
  {
    StageScope<N> st(Stage::VarEps);
    a = in.var + in.eps;
  }
  const N b = in.has_conv_bias ? in.conv_bias : in.zero;
  switch (r) {
    case Recipe::PyTorch: {
      const N rs = rsqrt_op(a, ar);
      {
        StageScope<N> st(Stage::Scale);
        f.scale = in.gamma * rs;
      }
      StageScope<N> st(Stage::Bias);
      f.bias = madd(N((b - in.mean) * rs), in.gamma, in.beta, ar.fma);
      break;
    }
    case Recipe::Tvm: {
      const N rs = inv_sqrt(a, ar);
      N s;
      {
        StageScope<N> st(Stage::Scale);
        s = rs * in.gamma;
      }
      f.scale = s;
      StageScope<N> st(Stage::Bias);
      const N shift = madd(N(-in.mean), s, in.beta, ar.fma);
      if (in.has_conv_bias) {
        f.bias = in.conv_bias * s;
        f.post_add = shift;
        f.has_post_add = true;
      } else {
        f.bias = shift;
      }
      break;
    }
    case Recipe::OnnxRuntime:
    case Recipe::OnnxOptimizer: {
      const N s = div_sqrt(in.gamma, a, ar, Stage::Scale);
      f.scale = s;
      StageScope<N> st(Stage::Bias);
      if (r == Recipe::OnnxRuntime && !in.has_conv_bias) f.bias = madd(N(-in.mean), s, in.beta, ar.fma);
      else f.bias = madd(N(b - in.mean), s, in.beta, ar.fma);
      break;
    }
    case Recipe::Exact:
      break;  // computed by the reference, not by float arithmetic
  }
  return f;
}

}  // namespace foldcheck
