#pragma once
// Certified correctly rounded values of exact real expressions.
//
// Contract: certify(f, opts) calls f(precision) -> Interval that must enclose the exact
// value; it starts at opts.precision bits (default 256) and doubles the precision until
// both endpoints round to the same value in every format of opts.formats (monotonicity of
// rounding then proves that value correctly rounded), up to opts.max_precision, where
// it throws CertificationError. An exact result (a point interval) always certifies.
// Ties cannot stall it: an irrational value is never a tie, and the fold's expressions
// are evaluated in an order that computes a tie exactly (a point interval; the reasoning
// is at bn_interval in conv_bn_reference.cpp). A new expression must keep that property.
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <utility>
#include <vector>

#include "foldcheck/reference/formats.hpp"
#include "foldcheck/reference/interval.hpp"

namespace foldcheck::ref {

// Bit i set: certify the rounding into kFormats[i].
inline constexpr unsigned kAllFormats = (1u << kNumFormats) - 1;
unsigned format_bit(const Format& f);      // throws std::invalid_argument for an unknown format
std::size_t format_index(const Format& f);  // f's index in kFormats (same errors)

struct Options {
  long precision = 256;        // starting working precision in bits (>= 64)
  long max_precision = 65536;  // give up (CertificationError) beyond this
  unsigned threads = 0;        // 0: std::thread::hardware_concurrency()
  // Formats whose rounding must be certified. The conv reference's fast path (see
  // conv_bn_reference.hpp) certifies narrow formats only: request just the formats you
  // compare in (kAllFormats keeps every output on the multiprecision path).
  unsigned formats = kAllFormats;
  bool fast = true;            // allow the conv reference's fast path
  // conv_bn: also return each output's conv value and radius and the window sums
  // sum|x w|, sum|x| that error bounds need (conv_bn_reference.hpp).
  bool bound_data = true;
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

// An allocator whose resize leaves new elements uninitialised (default-initialised): for
// streams that are filled completely right after they are sized.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
template <class T>
using Stream = std::vector<T, UninitAllocator<T>>;

// Many certified values stored by field (structure of arrays): a layer reference writes
// millions of them, and by field it writes only the formats it certifies, in streams the
// fast path fills with vector stores. operator[] assembles one Value (a copy).
// Contract: for each i, rounded(i, k) holds kFormats[k]'s correct rounding of the exact
// value whenever certified(i) has bit k (NaN or unused otherwise); approx/radius enclose it.
class ValueArray {
 public:
  ValueArray() = default;
  // n values, not yet set (every one must be set before it is read); storage for the
  // rounded values of the formats in `formats` only. Narrow: without the streams of
  // approx.lo and precision_used, which then read as 0 (a fast writer's values, binary64
  // approximations certified at no extra precision) until widen() adds them.
  enum Width { kWide, kNarrow };
  ValueArray(std::size_t n, unsigned formats, Width width = kWide);
  // A copy of separately certified values (storage for every format any of them certifies).
  explicit ValueArray(const std::vector<Value>& values);

  std::size_t size() const { return hi_.size(); }
  bool empty() const { return hi_.empty(); }
  unsigned formats() const { return formats_; }
  Value operator[](std::size_t i) const;
  // v's certified formats must be among formats(); a narrow array takes only values with
  // approx.lo = 0 and precision_used = 0 (std::logic_error otherwise).
  void set(std::size_t i, const Value& v);

  DoubleDouble approx(std::size_t i) const { return {hi_[i], lo_.empty() ? 0.0 : lo_[i]}; }
  bool wide() const { return !lo_.empty() || hi_.empty(); }
  void widen();  // adds the lo and precision streams (zeros) if narrow
  double radius(std::size_t i) const { return radius_[i]; }
  unsigned certified(std::size_t i) const { return certified_[i]; }
  // Throws std::logic_error if f's rounding of value i was not certified.
  double rounded_to(std::size_t i, const Format& f) const;

  // The raw streams, for writers that fill many values at once.
  double* hi() { return hi_.data(); }
  double* lo() { return lo_.data(); }  // null when narrow
  double* radius() { return radius_.data(); }
  double* rounded(std::size_t format_index) { return rounded_[format_index].data(); }
  std::uint8_t* certified() { return certified_.data(); }
  std::int32_t* precision_used() { return precision_.data(); }  // null when narrow

 private:
  // Sized, not initialised: a layer reference writes every entry (fast path or not).
  unsigned formats_ = 0;
  Stream<double> hi_, lo_, radius_;
  std::array<Stream<double>, kNumFormats> rounded_;
  Stream<std::uint8_t> certified_;
  Stream<std::int32_t> precision_;
};

Value certify(const std::function<void(Interval& out, long precision)>& f, const Options& opts);

// Value from an enclosure, if it certifies in every format of `formats` (else false).
// approx is the enclosure's midpoint (>= 106 bits when the enclosure is that narrow).
bool try_certify(const Interval& enclosure, Value& out, unsigned formats = kAllFormats);

}  // namespace foldcheck::ref
