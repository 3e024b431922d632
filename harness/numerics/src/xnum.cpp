#include "foldcheck/numerics/xnum.hpp"

#include "foldcheck/reference/dd_arith.hpp"

#include <limits>
#include <stdexcept>

namespace foldcheck {
namespace {

// Double-word arithmetic from the reference (dd_arith.hpp: Joldes, Muller & Popescu).
inline XNum from(const ref::dd::DD& d) { return {d.hi, d.lo}; }
inline ref::dd::DD to(const XNum& x) { return {x.hi, x.lo}; }
inline XNum norm(double hi, double lo) { return from(ref::dd::fast_two_sum(hi, lo)); }
XNum dd_add(const XNum& a, const XNum& b) { return from(ref::dd::plus_dd(to(a), to(b))); }
XNum dd_mul(const XNum& a, const XNum& b) { return from(ref::dd::times_dd(to(a), to(b))); }
XNum dd_div(const XNum& a, const XNum& b) {
  const double q1 = a.hi / b.hi;
  XNum r = dd_add(a, -dd_mul(XNum(q1), b));
  const double q2 = r.hi / b.hi;
  r = dd_add(r, -dd_mul(XNum(q2), b));
  const double q3 = r.hi / b.hi;
  const XNum q = norm(q1, q2);
  return dd_add(q, XNum(q3));
}
XNum dd_sqrt(const XNum& a) {
  if (a.hi <= 0) return XNum(std::sqrt(a.hi));
  const double s = std::sqrt(a.hi);
  const XNum r = dd_add(a, -dd_mul(XNum(s), XNum(s)));
  return norm(s, r.hi / (2 * s));
}

// Is v (a double-double) exactly a value of the arithmetic type?
inline bool is_arith(const XNum& v, DType arith) {
  if (v.lo != 0) return false;
  return arith == DType::Float64 || static_cast<double>(static_cast<float>(v.hi)) == v.hi || std::isnan(v.hi);
}

// The result of one operation, given its exact value (to double-double accuracy) and, if
// the operands are values of the arithmetic type, the native float operation's result.
XNum resolve(const XNum& ex, const double* native) {
  XContext& c = xcontext();
  switch (c.mode) {
    case XMode::Round: {
      if (c.exact()) return ex;
      return native ? XNum(*native) : XNum(round_dd(c.arith, ex.hi, ex.lo));
    }
    case XMode::Record: {
      const XNum r = native ? XNum(*native) : XNum(round_dd(c.arith, ex.hi, ex.lo));
      c.tape->push_back(dd_add(r, -ex));
      return r;
    }
    case XMode::Replay: {
      if (c.pos >= c.tape->size()) throw std::logic_error("attribution replay: operation sequence changed");
      const XNum& d = (*c.tape)[c.pos++];
      return c.exact() ? ex : dd_add(ex, d);
    }
  }
  return ex;
}

template <class F32, class F64>
XNum binary(const XNum& a, const XNum& b, const XNum& ex, F32 f32, F64 f64) {
  const DType t = xcontext().arith;
  if (is_arith(a, t) && is_arith(b, t)) {
    const double n = t == DType::Float64 ? f64(a.hi, b.hi) : static_cast<double>(f32(static_cast<float>(a.hi), static_cast<float>(b.hi)));
    return resolve(ex, &n);
  }
  return resolve(ex, nullptr);
}

}  // namespace

XContext& xcontext() {
  thread_local XContext c;
  return c;
}

double round_dd(DType t, double hi, double lo) { return ref::round_to_format(hi, lo, *info(t).format); }

XNum operator-(const XNum& a) { return {-a.hi, -a.lo}; }
XNum exact_product(const XNum& a, const XNum& b) { return dd_mul(a, b); }

XNum operator+(const XNum& a, const XNum& b) {
  return binary(a, b, dd_add(a, b), [](float x, float y) { return x + y; }, [](double x, double y) { return x + y; });
}

XNum operator-(const XNum& a, const XNum& b) { return a + (-b); }

XNum operator*(const XNum& a, const XNum& b) {
  return binary(a, b, dd_mul(a, b), [](float x, float y) { return x * y; }, [](double x, double y) { return x * y; });
}

XNum operator/(const XNum& a, const XNum& b) {
  return binary(a, b, dd_div(a, b), [](float x, float y) { return x / y; }, [](double x, double y) { return x / y; });
}

XNum sqrt(const XNum& a) {
  const DType t = xcontext().arith;
  if (is_arith(a, t)) {
    const double n = t == DType::Float64 ? std::sqrt(a.hi) : static_cast<double>(std::sqrt(static_cast<float>(a.hi)));
    return resolve(dd_sqrt(a), &n);
  }
  return resolve(dd_sqrt(a), nullptr);
}

XNum fma(const XNum& a, const XNum& b, const XNum& cc) {
  const DType t = xcontext().arith;
  const XNum ex = dd_add(dd_mul(a, b), cc);
  if (is_arith(a, t) && is_arith(b, t) && is_arith(cc, t)) {
    const double n = t == DType::Float64 ? std::fma(a.hi, b.hi, cc.hi)
                                         : static_cast<double>(std::fma(static_cast<float>(a.hi), static_cast<float>(b.hi),
                                                                        static_cast<float>(cc.hi)));
    return resolve(ex, &n);
  }
  return resolve(ex, nullptr);
}

XNum store(const XNum& v, DType t) {
  const double n = round_dd(t, v.hi, v.lo);
  return resolve(v, &n);
}

XNum rsqrt_estimate(const XNum& a) {
  const double n = rsqrt_estimate12(a.hi + a.lo);
  return resolve(dd_div(XNum(1.0), dd_sqrt(a)), &n);
}

}  // namespace foldcheck
