#pragma once
// A minimal RAII owner of one mpfr_t. MPFR is used directly (not through
// boost::multiprecision::mpfr_float) because the reference needs directed rounding per
// operation, ternary (exactness) results and mpfr_sum, which the Boost wrapper hides.
#include <mpfr.h>
#include <string>

namespace foldcheck::ref {

class MpNumber {
 public:
  explicit MpNumber(mpfr_prec_t precision) { mpfr_init2(v_, precision); }
  MpNumber(mpfr_prec_t precision, double value) : MpNumber(precision) { set(value); }
  MpNumber(const MpNumber& o) : MpNumber(mpfr_get_prec(o.v_)) { mpfr_set(v_, o.v_, MPFR_RNDN); }
  MpNumber& operator=(const MpNumber& o) {
    if (this != &o) {
      mpfr_set_prec(v_, mpfr_get_prec(o.v_));
      mpfr_set(v_, o.v_, MPFR_RNDN);
    }
    return *this;
  }
  ~MpNumber() { mpfr_clear(v_); }

  // Exact whenever precision >= 53 (every double is then representable).
  void set(double value) { mpfr_set_d(v_, value, MPFR_RNDN); }
  mpfr_ptr get() { return v_; }
  mpfr_srcptr get() const { return v_; }
  mpfr_prec_t precision() const { return mpfr_get_prec(v_); }
  double to_double() const { return mpfr_get_d(v_, MPFR_RNDN); }
  // Decimal rendering with `digits` significant digits (scientific notation).
  std::string to_string(int digits = 25) const;

 private:
  mpfr_t v_;
};

}  // namespace foldcheck::ref
