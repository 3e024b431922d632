#pragma once
// Binary floating-point formats the reference rounds to, and correct rounding into them.
//
// Contract: round_to_format(x, f) returns the value of f nearest to the real x (ties to
// even), with f's subnormals and overflow to ±Inf, as a double (every format here is a
// subset of binary64, so the double holds it exactly). Zero keeps the sign of x.
#include <array>
#include <cstddef>
#include <mpfr.h>

namespace foldcheck::ref {

struct Format {
  const char* name;
  int precision;  // p: significand bits including the hidden bit
  int emin;       // exponent of the smallest normal number: 2^emin
  int emax;       // exponent of the largest binade: max finite = (2 - 2^(1-p)) * 2^emax
};

inline constexpr Format kFloat64{"float64", 53, -1022, 1023};
inline constexpr Format kFloat32{"float32", 24, -126, 127};
inline constexpr Format kFloat16{"float16", 11, -14, 15};
inline constexpr Format kBFloat16{"bfloat16", 8, -126, 127};

// Index order used by every per-format array in the reference.
inline constexpr std::array<Format, 4> kFormats{kFloat64, kFloat32, kFloat16, kBFloat16};
inline constexpr std::size_t kNumFormats = kFormats.size();

// Correctly rounded (to nearest, ties to even) conversion of an MPFR number to format f.
double round_to_format(mpfr_srcptr x, const Format& f);
// The same for the double-double hi + lo (normalized: |lo| <= ulp(hi)/2); lo only matters
// when hi is exactly halfway between two values of f. Zero keeps hi's sign.
double round_to_format(double hi, double lo, const Format& f);

}  // namespace foldcheck::ref
