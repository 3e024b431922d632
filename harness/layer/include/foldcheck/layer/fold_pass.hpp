#pragma once
// The fold pass: rewrite Conv -> BatchNorm into Conv(w', b') [-> ChannelAdd(shift)] with a
// named engine recipe, computing w' and b' in the engine's arithmetic (float32 for
// float32/float16/bfloat16 storage, float64 for float64) and storing them in the graph's
// dtype; or, for Recipe::Exact, the correctly rounded exact fold from the reference.
// The rewritten Conv carries FoldInfo with the exact fold and its a-priori error bound.
#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/graph.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck {

// Throws InputError if the graph has no Conv -> BatchNorm pair.
// The Arithmetic's fma and fast rsqrt apply to the recipe's operations; its weight_dtype
// (if set) stores the folded weights (must not be wider than the graph's dtype); its
// fold_dtype (if set) is the type every fold operation rounds to (narrow.hpp for 16-bit
// types; must hold every value of the graph's dtype).
Graph fold_batchnorm(const Graph& g, Recipe recipe, const ref::Options& opts, const Arithmetic& ar = {});

// A fold's per-channel relative errors as the channel statistic models them (channel_bias.hpp):
// the common error theta of the channel's multiplier t (e / |t|) and each weight's own delta
// ((alpha - e) / |t|), each widened to the largest of `theta`/`delta` and this fold's, and its
// underflow eta into `eta`. A channel whose t is 0 (every folded weight 0) is left as it is.
void widen_fold_errors(const FoldInfo& fi, std::vector<double>& theta, std::vector<double>& delta, double& eta);

// Folded weights and biases of one recipe on raw parameters, without a graph:
// the weights of output channel o are w[o*per_channel .. (o+1)*per_channel).
struct FoldedParams {
  std::vector<double> weight, bias;  // weight in ar.weight_dtype (default dtype), bias in dtype
  std::vector<double> post_add;      // in dtype; TVM with a conv bias only (else empty)
  FoldInfo info;
};
// Throws UnboundedFold when a recipe's chain in its arithmetic may divide by zero.
FoldedParams fold_parameters(const std::vector<double>& w, std::int64_t per_channel,
                             const std::vector<double>& conv_bias, const ref::BnParams& bn, DType dtype,
                             Recipe recipe, const ref::Options& opts, const Arithmetic& ar = {});

// A recipe's fold in an arithmetic where some channel's var + eps may round to zero (a tiny
// eps with var 0 in a 16-bit arithmetic: 1e-9 is below float16's smallest subnormal), so its
// chain divides by a quantity whose bound includes zero: the float fold is infinite or NaN, and
// no rounding bound holds (Bounded's division refuses). Callers that try every recipe
// (explain, the fold check, diagnose) leave that recipe out; one asked for it reports this.
struct UnboundedFold : InputError {
  using InputError::InputError;
};

}  // namespace foldcheck
