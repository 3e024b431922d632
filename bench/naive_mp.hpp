#pragma once
// The naive multiprecision reference: every multiply-add of the conv, and the BatchNorm,
// in Boost.Multiprecision cpp_bin_float_50 (what a reference costs without exploiting
// exact float32 products), for the outputs of channels [o0, o1).
#include <cstdint>
#include <vector>

#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck::bench {

// Returns the outputs rounded to float32; runs the channels over `threads` threads.
std::vector<float> naive_mp_conv_bn(const ref::ConvGeometry& g, const std::vector<double>& x,
                                    const std::vector<double>& w, const ref::BnParams& bn, std::int64_t o0,
                                    std::int64_t o1, unsigned threads);

}  // namespace foldcheck::bench
