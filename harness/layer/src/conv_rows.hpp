#pragma once
// The sequential-order conv, one output row at a time, vectorised across the row's
// pixels: bit-identical to conv_output() with Accumulation::Sequential and no FMA,
// because every pixel (lane) performs the same operations in the same order — each
// in-bounds product rounded, then added to its accumulator; padded positions are
// skipped (not added as zeros, which could turn an accumulated -0 into +0). Internal.
//
// Built once per x86-64 level (conv_rows.cpp with -march=x86-64-v4, -v3 and the baseline,
// each into its own namespace, as the reference's kernels are); conv_rows_select.cpp runs the
// level the reference runs (ref::isa_level(): the best the CPU has, or FOLDCHECK_ISA's), so
// one variable sets every kernel's level. No level contracts a multiply and an add into an
// FMA (-ffp-contract=off everywhere): every level gives the same bits.
#include <cstdint>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck::detail {

// acc[0..OW) for output row (n, o, oh): x NCHW, wo channel o's weights, bias or nullptr.
void sequential_row_f32(const ref::ConvGeometry& g, const float* x, const float* wo, const float* bias, std::int64_t n,
                        std::int64_t o, std::int64_t oh, float* acc);
void sequential_row_f64(const ref::ConvGeometry& g, const double* x, const double* wo, const double* bias,
                        std::int64_t n, std::int64_t o, std::int64_t oh, double* acc);

// One level's kernels (the functions above, at that level).
struct RowKernels {
  void (*f32)(const ref::ConvGeometry&, const float*, const float*, const float*, std::int64_t, std::int64_t,
              std::int64_t, float*);
  void (*f64)(const ref::ConvGeometry&, const double*, const double*, const double*, std::int64_t, std::int64_t,
              std::int64_t, double*);
};
namespace rows_v4 {
RowKernels kernels();
}
namespace rows_v3 {
RowKernels kernels();
}
namespace rows_base {
RowKernels kernels();
}

}  // namespace foldcheck::detail
