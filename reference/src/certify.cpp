#include "foldcheck/reference/certify.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <string>

namespace foldcheck::ref {

unsigned format_bit(const Format& f) {
  for (std::size_t i = 0; i < kNumFormats; ++i)
    if (kFormats[i].precision == f.precision && kFormats[i].emin == f.emin) return 1u << i;
  throw std::invalid_argument(std::string("unknown format ") + f.name);
}

std::size_t format_index(const Format& f) { return static_cast<std::size_t>(std::countr_zero(format_bit(f))); }

double Value::rounded_to(const Format& f) const {
  if (!(certified & format_bit(f))) throw std::logic_error(std::string("reference value not certified for ") + f.name);
  return rounded[format_index(f)];
}

ValueArray::ValueArray(std::size_t n, unsigned formats, Width width)
    : formats_(formats), hi_(n), radius_(n), certified_(n) {
  if (width == kWide) {
    lo_.resize(n);
    precision_.resize(n);
  }
  for (std::size_t k = 0; k < kNumFormats; ++k)
    if (formats & (1u << k)) rounded_[k].resize(n);
}

namespace {
unsigned formats_of(const std::vector<Value>& values) {
  unsigned f = 0;
  for (const Value& v : values) f |= v.certified;
  return f;
}
}  // namespace

ValueArray::ValueArray(const std::vector<Value>& values) : ValueArray(values.size(), formats_of(values)) {
  for (std::size_t i = 0; i < values.size(); ++i) set(i, values[i]);
}

Value ValueArray::operator[](std::size_t i) const {
  Value v;
  v.approx = approx(i);
  v.radius = radius_[i];
  v.certified = certified_[i];
  v.precision_used = precision_.empty() ? 0 : precision_[i];
  for (std::size_t k = 0; k < kNumFormats; ++k)
    v.rounded[k] = rounded_[k].empty() ? std::numeric_limits<double>::quiet_NaN() : rounded_[k][i];
  return v;
}

void ValueArray::set(std::size_t i, const Value& v) {
  if (v.certified & ~formats_) throw std::logic_error("ValueArray::set: a format without storage");
  if (lo_.empty() && !hi_.empty()) {
    if (v.approx.lo != 0.0 || v.precision_used != 0) throw std::logic_error("ValueArray::set: a wide value in a narrow array");
  } else {
    lo_[i] = v.approx.lo;
    precision_[i] = static_cast<std::int32_t>(v.precision_used);
  }
  hi_[i] = v.approx.hi;
  radius_[i] = v.radius;
  certified_[i] = static_cast<std::uint8_t>(v.certified);
  for (std::size_t k = 0; k < kNumFormats; ++k)
    if (!rounded_[k].empty()) rounded_[k][i] = v.rounded[k];
}

void ValueArray::widen() {
  if (!lo_.empty() || hi_.empty()) return;
  lo_.assign(hi_.size(), 0.0);
  precision_.assign(hi_.size(), 0);
}

double ValueArray::rounded_to(std::size_t i, const Format& f) const {
  if (!(certified_[i] & format_bit(f))) throw std::logic_error(std::string("reference value not certified for ") + f.name);
  return rounded_[format_index(f)][i];
}

bool try_certify(const Interval& enclosure, Value& out, unsigned formats) {
  out.rounded.fill(std::numeric_limits<double>::quiet_NaN());
  for (std::size_t i = 0; i < kNumFormats; ++i) {
    if (!(formats & (1u << i))) continue;
    const double lo = round_to_format(enclosure.lo(), kFormats[i]);
    const double hi = round_to_format(enclosure.hi(), kFormats[i]);
    // Compare values; a zero result is reported as +0 (the exact real 0 has no sign).
    if (!(lo == hi)) return false;
    out.rounded[i] = (lo == 0.0) ? 0.0 : lo;
  }
  out.approx = midpoint(enclosure);
  out.radius = radius_of(enclosure, out.approx);
  out.certified = formats;
  out.precision_used = enclosure.precision();
  return true;
}

Value certify(const std::function<void(Interval&, long)>& f, const Options& opts) {
  for (long p = opts.precision; p <= opts.max_precision; p *= 2) {
    Interval enclosure(p);
    f(enclosure, p);
    Value v;
    if (try_certify(enclosure, v, opts.formats)) return v;
  }
  throw CertificationError("reference could not certify a rounding within " +
                           std::to_string(opts.max_precision) + " bits");
}

}  // namespace foldcheck::ref
