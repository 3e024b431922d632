#pragma once
// One validation of BatchNorm parameters for every reader that takes them (case files,
// --bn .npz archives, ONNX BatchNormalization nodes), so each bad value gets the same
// message whichever way it came in.
//
// Contract: check_bn_params throws InputError "WHAT: ..." unless gamma, beta, mean and
// var each hold `channels` values (channels >= 1), every value is finite, every variance
// is >= 0 and eps is finite and > 0. With var >= 0 and eps > 0, var + eps > 0 in exact
// arithmetic and in every rounding of it, so the fold's 1/sqrt(var + eps) is finite
// except by overflow, which the bounds handle.
#include <cstddef>
#include <string>

#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reference/layer.hpp"

namespace foldcheck {

void check_bn_params(const ref::BnParams& bn, std::size_t channels, const std::string& what);

// check_bn_params for parameters already rounded to T (an infinity there means a value
// past T's range: refused), and then 1/sqrt(var + eps) as the folds compute it: var + eps
// in T's arithmetic type with eps converted to it, or to float32 as most recipes keep it
// (recipes.cpp), must be > 0 and finite for every
// channel (past the range, 1/sqrt(inf) = 0 in every recipe while the exact scale is not). eps > 0 in double does not give that: 1e-50 is 0 in float32, and with a zero
// variance the fold would divide by zero.
void check_bn_params_in(const ref::BnParams& bn, std::size_t channels, DType t, const std::string& what);

// A finite x that T cannot hold (it rounds to an infinity), as a message fragment
// ("70000{at} is past float16's range (largest finite 65504)"); "" when T holds x or x is
// not finite (NaN and infinities are refused by their own checks, first_nonfinite).
std::string past_range(double x, DType t, const std::string& at = "");

// The first value of v past T's range, as past_range with " at index I", or "".
std::string first_overflow(const std::vector<double>& v, DType t);

// The first NaN or infinity of v, as a message fragment ("NaN at index 3"), or "".
std::string first_nonfinite(const std::vector<double>& v);

}  // namespace foldcheck
