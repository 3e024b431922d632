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

#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck {

void check_bn_params(const ref::BnParams& bn, std::size_t channels, const std::string& what);

// The first NaN or infinity of v, as a message fragment ("NaN at index 3"), or "".
std::string first_nonfinite(const std::vector<double>& v);

}  // namespace foldcheck
