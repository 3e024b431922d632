// The row kernels of the level the reference runs (conv_rows.hpp).
#include <string>

#include "conv_rows.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace foldcheck::detail {

const RowKernels& row_kernels() {
  static const RowKernels k = [] {
    const std::string level = ref::isa_level();  // checked against the CPU there
    return level == "v4" ? rows_v4::kernels() : level == "v3" ? rows_v3::kernels() : rows_base::kernels();
  }();
  return k;
}

void sequential_row_f32(const ref::ConvGeometry& g, const float* x, const float* wo, const float* bias, std::int64_t n,
                        std::int64_t o, std::int64_t oh, float* acc) {
  row_kernels().f32(g, x, wo, bias, n, o, oh, acc);
}

void sequential_row_f64(const ref::ConvGeometry& g, const double* x, const double* wo, const double* bias,
                        std::int64_t n, std::int64_t o, std::int64_t oh, double* acc) {
  row_kernels().f64(g, x, wo, bias, n, o, oh, acc);
}

}  // namespace foldcheck::detail
