#include "foldcheck/numerics/dtype.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "foldcheck/base/errors.hpp"

namespace foldcheck {
namespace {

DTypeInfo make(DType t, DType arith, const ref::Format& f) {
  DTypeInfo i{};
  i.dtype = t;
  i.name = f.name;
  i.precision = f.precision;
  i.emin = f.emin;
  i.emax = f.emax;
  i.unit_roundoff = std::ldexp(1.0, -f.precision);
  i.min_subnormal = std::ldexp(1.0, f.emin - f.precision + 1);
  i.underflow_eta = std::ldexp(1.0, f.emin - f.precision);
  i.max_finite = std::ldexp(2.0 - std::ldexp(1.0, 1 - f.precision), f.emax);
  i.arithmetic = arith;
  i.format = &f;
  return i;
}

const DTypeInfo kInfos[] = {
    make(DType::Float64, DType::Float64, ref::kFloat64),
    make(DType::Float32, DType::Float32, ref::kFloat32),
    make(DType::Float16, DType::Float32, ref::kFloat16),
    make(DType::BFloat16, DType::Float32, ref::kBFloat16),
};

}  // namespace

const DTypeInfo& info(DType t) { return kInfos[static_cast<int>(t)]; }

DType dtype_from_name(std::string_view n) {
  for (const auto& i : kInfos)
    if (n == i.name) return i.dtype;
  if (n == "f64" || n == "double") return DType::Float64;
  if (n == "f32" || n == "float") return DType::Float32;
  if (n == "f16" || n == "half") return DType::Float16;
  if (n == "bf16") return DType::BFloat16;
  throw InputError("unknown dtype '" + std::string(n) + "' (expected float64, float32, float16 or bfloat16)");
}

// Same method as ref::round_to_format, in binary64: with q the exponent of ulp_T(x),
// x·2^-q is exact (a power-of-two scaling of a double that stays normal, since
// q >= emin - p + 1 >= -1074 and |x·2^-q| < 2^p), nearbyint rounds it to an integer
// ties-to-even (default rounding mode), and m·2^q is exact.
double round_to(DType t, double x) {
  if (t == DType::Float64 || !std::isfinite(x) || x == 0.0) return x;
  // IEEE 754 conversion to binary32 is correctly rounded (to nearest, ties to even, with
  // subnormals and overflow to Inf) in the default rounding mode.
  if (t == DType::Float32) return static_cast<double>(static_cast<float>(x));
  return ref::round_to_format(x, 0.0, *info(t).format);  // the reference's rounding
}

void round_all(DType t, std::vector<double>& v) {
  if (t == DType::Float64) return;
  if (t == DType::Float32) {
    for (double& x : v) x = static_cast<double>(static_cast<float>(x));  // round_to's, for every x
    return;
  }
  for (double& x : v) x = round_to(t, x);
}

bool representable(DType t, double x) { return std::isnan(x) || round_to(t, x) == x; }

double ulp(DType t, double hi, double lo) {
  const DTypeInfo& i = info(t);
  if (hi == 0.0 || !std::isfinite(hi))
    return std::isfinite(hi) ? i.min_subnormal : std::ldexp(1.0, i.emax - i.precision + 1);
  int e = std::ilogb(hi);
  // hi a power of two and lo pulling |x| below it: x is in the binade below.
  if (std::fabs(hi) == std::ldexp(1.0, e) && lo != 0.0 && std::signbit(lo) != std::signbit(hi)) --e;
  e = std::min(e, i.emax);
  return std::ldexp(1.0, std::max(e, i.emin) - i.precision + 1);
}

#if defined(__clang__) && __clang_major__ < 15
// clang 14 (the fuzz build) has no _Float16 on x86-64: binary16 by its fields. Both are
// exact: every binary16 value is a double, and to_bits takes representable values.
namespace {
double half_value(std::uint16_t b) {
  const int e = (b >> 10) & 0x1f, m = b & 0x3ff;
  const double v = e == 0x1f ? (m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity())
                   : e == 0  ? std::ldexp(m, -24)
                             : std::ldexp(m + 1024, e - 25);
  return (b & 0x8000) ? -v : v;
}
std::uint16_t half_bits(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (std::isnan(a)) return 0x7e00;
  if (std::isinf(a)) return sign | 0x7c00;
  if (a < 0x1p-14) return sign | static_cast<std::uint16_t>(std::ldexp(a, 24));  // subnormal (or zero)
  int e;
  const double f = std::frexp(a, &e);  // a = f 2^e, f in [1/2, 1)
  return sign | static_cast<std::uint16_t>(((e + 14) << 10) | (static_cast<int>(std::ldexp(f, 11)) - 1024));
}
}  // namespace
#endif

double from_bits(DType t, std::uint16_t bits) {
  if (t == DType::BFloat16) return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16));
  if (t != DType::Float16) throw std::invalid_argument("from_bits: a 16-bit format expected");
#if defined(__clang__) && __clang_major__ < 15
  return half_value(bits);
#else
  return static_cast<double>(std::bit_cast<_Float16>(bits));
#endif
}

std::uint16_t to_bits(DType t, double x) {
  if (t == DType::BFloat16)
    return static_cast<std::uint16_t>(std::bit_cast<std::uint32_t>(static_cast<float>(x)) >> 16);
  if (t != DType::Float16) throw std::invalid_argument("to_bits: a 16-bit format expected");
#if defined(__clang__) && __clang_major__ < 15
  return half_bits(x);
#else
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
#endif
}

}  // namespace foldcheck
