#pragma once
// Certified correctly rounded values of exact real expressions.
//
// Contract: certify(f, opts) calls f(precision) -> Interval that must enclose the exact
// value; it starts at opts.precision bits (default 256) and doubles the precision until
// both endpoints round to the same value in every format of opts.formats (monotonicity of
// rounding then proves that value correctly rounded), up to opts.max_precision, where
// it throws CertificationError. An exact result (a point interval) always certifies.
// Ties cannot stall it: an expression that hits a tie exactly is computed exactly
// (point interval), and an irrational value is never a tie.
#include <array>
#include <functional>
#include <stdexcept>

#include "foldcheck/reference/formats.hpp"
#include "foldcheck/reference/interval.hpp"

namespace foldcheck::ref {

// Bit i set: certify the rounding into kFormats[i].
inline constexpr unsigned kAllFormats = (1u << kNumFormats) - 1;
unsigned format_bit(const Format& f);  // throws std::invalid_argument for an unknown format

struct Options {
  long precision = 256;        // starting working precision in bits (>= 64)
  long max_precision = 65536;  // give up (CertificationError) beyond this
  unsigned threads = 0;        // 0: std::thread::hardware_concurrency()
  // Formats whose rounding must be certified. The conv reference's fast path (see
  // conv_bn_reference.hpp) certifies narrow formats only: request just the formats you
  // compare in (kAllFormats keeps every output on the multiprecision path).
  unsigned formats = kAllFormats;
  bool fast = true;            // allow the conv reference's fast path
};

struct CertificationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One exact real, certified.
struct Value {
  DoubleDouble approx;                            // the exact value to within `radius`
  double radius = 0.0;                            // |approx - exact| <= radius (certified)
  std::array<double, kNumFormats> rounded{};      // correctly rounded to kFormats[i] (if certified)
  unsigned certified = kAllFormats;               // which entries of `rounded` are certified
  long precision_used = 0;                        // working precision that certified it (0: fast path)

  // Throws std::logic_error if f's rounding was not certified (not requested).
  double rounded_to(const Format& f) const;
};

Value certify(const std::function<void(Interval& out, long precision)>& f, const Options& opts);

// Value from an enclosure, if it certifies in every format of `formats` (else false).
// approx is the enclosure's midpoint (>= 106 bits when the enclosure is that narrow).
bool try_certify(const Interval& enclosure, Value& out, unsigned formats = kAllFormats);

}  // namespace foldcheck::ref
