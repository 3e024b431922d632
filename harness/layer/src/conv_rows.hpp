#pragma once
// The sequential-order conv, one output row at a time, vectorised across the row's
// pixels: bit-identical to conv_output() with Accumulation::Sequential and no FMA,
// because every pixel (lane) performs the same operations in the same order — each
// in-bounds product rounded, then added to its accumulator; padded positions are
// skipped (not added as zeros, which could turn an accumulated -0 into +0). Internal.
#include <cstdint>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck::detail {

// acc[0..OW) for output row (n, o, oh): x NCHW, wo channel o's weights, bias or nullptr.
void sequential_row_f32(const ref::ConvGeometry& g, const float* x, const float* wo, const float* bias, std::int64_t n,
                        std::int64_t o, std::int64_t oh, float* acc);
void sequential_row_f64(const ref::ConvGeometry& g, const double* x, const double* wo, const double* bias,
                        std::int64_t n, std::int64_t o, std::int64_t oh, double* acc);

}  // namespace foldcheck::detail
