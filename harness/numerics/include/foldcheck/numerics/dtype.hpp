#pragma once
// Storage types foldcheck compares, their parameters, rounding into them, and ULPs.
//
// Contract: a value "of dtype T" is held in a double that T represents exactly (every
// format here is a subset of binary64). round_to(T, x) is correctly rounded (to nearest,
// ties to even, with T's subnormals and overflow). ulp(T, x) is the spacing of T at the
// real x given as a double-double, floored at T's smallest subnormal spacing.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "foldcheck/reference/formats.hpp"

namespace foldcheck {

enum class DType { Float64, Float32, Float16, BFloat16 };

struct DTypeInfo {
  DType dtype;
  const char* name;
  int precision;  // p
  int emin, emax;
  double unit_roundoff;  // u = 2^-p
  double min_subnormal;  // 2^(emin - p + 1): spacing in the subnormal range
  double underflow_eta;  // 2^(emin - p): bound on the absolute error of an underflowing product
  double max_finite;
  DType arithmetic;  // type the engines compute in: float64 for float64, else float32
  const ref::Format* format;
};

const DTypeInfo& info(DType t);
DType dtype_from_name(std::string_view name);  // throws InputError listing the valid names
inline const char* name(DType t) { return info(t).name; }

// Correctly rounded conversion of a double to T (ties to even).
double round_to(DType t, double x);
// round_to on every value (inline for float64 and float32: the weights of every run of a model).
void round_all(DType t, std::vector<double>& v);
bool representable(DType t, double x);

// The 16-bit storage formats' bit patterns: value of a pattern (exact), and the pattern of
// a value of the format (x must be representable: round_to first).
double from_bits(DType t, std::uint16_t bits);  // t: Float16 or BFloat16
std::uint16_t to_bits(DType t, double x);

// Spacing of T at the real hi + lo (a double-double, |lo| <= ulp(hi)/2).
double ulp(DType t, double hi, double lo = 0.0);

}  // namespace foldcheck
