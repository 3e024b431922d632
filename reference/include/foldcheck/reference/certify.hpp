#pragma once
// Certified correctly rounded values of exact real expressions.
//
// Contract: certify(f, opts) calls f(precision) -> Interval that must enclose the exact
// value; it starts at opts.precision bits (default 256) and doubles the precision until
// both endpoints round to the same value in every format of kFormats (monotonicity of
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

struct Options {
  long precision = 256;        // starting working precision in bits (>= 64)
  long max_precision = 65536;  // give up (CertificationError) beyond this
  unsigned threads = 0;        // 0: std::thread::hardware_concurrency()
};

struct CertificationError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One exact real, certified.
struct Value {
  DoubleDouble approx;                            // >= 106 bits of the exact value (normal range)
  std::array<double, kNumFormats> rounded{};      // correctly rounded to kFormats[i]
  long precision_used = 0;                        // working precision that certified it

  double rounded_to(const Format& f) const;
};

Value certify(const std::function<void(Interval& out, long precision)>& f, const Options& opts);

// Value from an enclosure, if it certifies (else false).
bool try_certify(const Interval& enclosure, Value& out);

}  // namespace foldcheck::ref
