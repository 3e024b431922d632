#pragma once
// Symmetric integer quantization of (folded) weights, as Graffitist and most int8 flows do:
// q = clamp(round(x / s), -qmax, qmax), qmax = 2^(bits-1) - 1, per tensor or per output
// channel, with scales from max|x| (s = max|x| / qmax) or given, optionally rounded up to a
// power of two (s = 2^ceil(log2(max|x| / qmax)), Graffitist's choice: x / s is then exact).
//
// Exact quantization of an exact value: x is known as a double-double (the certified fold,
// error below 2^-100 relative), x / s is formed exactly for power-of-two scales and to
// ~2^-100 otherwise, and the rounding decision compares the fraction with 1/2 in that
// precision. tie_distance is |x / s - t| for the nearest rounding tie t (k + 1/2), in steps
// (multiples of s): 0.5 means x / s is an integer, 0 a tie.
#include <cstdint>
#include <string>
#include <vector>

#include "foldcheck/reference/certify.hpp"
#include "foldcheck/reference/dd_arith.hpp"

namespace foldcheck {

enum class QuantRounding { HalfEven, HalfAway };
QuantRounding quant_rounding_from_name(const std::string& n);  // "half_even", "half_away"; InputError
const char* name(QuantRounding r);

struct QuantSpec {
  int bits = 8;              // 2..16
  bool per_channel = false;  // one scale per output channel (axis 0), else one per tensor
  bool pow2 = true;          // scales rounded up to a power of two
  QuantRounding rounding = QuantRounding::HalfEven;
  std::int64_t qmax() const { return (std::int64_t{1} << (bits - 1)) - 1; }
};

// Scales from max |x| per tensor or per channel (channels = x.size() / per_channel values
// each); a zero channel gets scale 1.
std::vector<double> quant_scales(const std::vector<double>& x, std::int64_t per_channel, const QuantSpec& q);

// round(v / s) with the spec's rounding, clamped; v / s evaluated in double (exact for
// power-of-two s).
std::int64_t quantize_value(double v, double s, const QuantSpec& q);

// The same for an exact value x = hi + lo.
struct ExactQuant {
  std::int64_t q = 0;        // clamped
  double tie_distance = 0;   // steps to the nearest tie, see above
  double offset = 0;         // x / s - q before clamping, in steps (in [-1/2, 1/2] unless clamped)
};
ExactQuant quantize_exact(const ref::DoubleDouble& x, double s, const QuantSpec& q);

// a * b exactly, as the double-double quantize_exact takes (dd_arith's two_prod).
inline ref::DoubleDouble exact_product(double a, double b) {
  const ref::dd::DD p = ref::dd::two_prod(a, b);
  return {p.hi, p.lo};
}

}  // namespace foldcheck
