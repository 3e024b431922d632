#pragma once
// Narrow<T>: the float path's number type for a fold computed in a 16-bit type T (float16
// or bfloat16), as PyTorch's fusers compute it on a .half() or .bfloat16() module: every
// intermediate is a tensor of T.
//
// Contract: each operation is what PyTorch's CPU kernels do for a reduced-precision
// tensor: the operands widened to float32 (the "opmath" type; T is a subset of float32, so
// exactly), the operation performed once in float32 (correctly rounded: +, -, *, /, sqrt,
// fma), the result rounded to T: v = RN_T(RN_f(a op b)). A scalar operand (eps, a Python
// float) is converted to T first, as c10 converts a scalar to the tensor's type (double to
// float to T: RN_T(RN_f(x)); measured with torch 2.14: var + 1e-3 in float16 is
// RN(var + RN_T(1e-3)), not RN(var + RN_f(1e-3))). torch.rsqrt's vector kernel computes
// 1/sqrt in float32 (two float roundings) and rounds to T once; its scalar loop rounds to T
// twice (rsqrt_op below).
//
// The bound of such a fold is Bounded's with arithmetic T: Bounded::exact(v, T) charges each
// operation operation_roundoff(T) = u_T + u_f (1 + u_T) (bounded.hpp), which covers the two
// roundings; torch.rsqrt's u_T + 2 u_f (1 + u_T) is covered by the sqrt and division it is
// bounded as. eps's conversion (the same two roundings, and T's subnormal range: 1e-5 is
// subnormal in float16) is charged by layer_math.hpp's eps_value. Every operand is then a
// value of T, so a sum below T's normal range is exact, as the bound of + assumes.
#include <cmath>

#include "foldcheck/numerics/arithmetic.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/numerics/num_ops.hpp"

namespace foldcheck {

template <DType T>
struct Narrow {
  static_assert(T == DType::Float16 || T == DType::BFloat16, "Narrow is for the 16-bit types");
  float v = 0.0f;
  Narrow() = default;
  // A value of T, or a scalar converted to T (double -> float -> T).
  explicit Narrow(double x) : v(static_cast<float>(round_to(T, static_cast<float>(x)))) {}
  explicit operator double() const { return v; }
  // The kernel's result: float32 value rounded to T.
  static Narrow result(float f) {
    Narrow n;
    n.v = static_cast<float>(round_to(T, f));
    return n;
  }
};

template <DType T> Narrow<T> operator+(Narrow<T> a, Narrow<T> b) { return Narrow<T>::result(a.v + b.v); }
template <DType T> Narrow<T> operator-(Narrow<T> a, Narrow<T> b) { return Narrow<T>::result(a.v - b.v); }
template <DType T> Narrow<T> operator*(Narrow<T> a, Narrow<T> b) { return Narrow<T>::result(a.v * b.v); }
template <DType T> Narrow<T> operator/(Narrow<T> a, Narrow<T> b) { return Narrow<T>::result(a.v / b.v); }
template <DType T> Narrow<T> operator-(Narrow<T> a) { return Narrow<T>::result(-a.v); }
template <DType T> Narrow<T> sqrt(Narrow<T> a) { return Narrow<T>::result(std::sqrt(a.v)); }
template <DType T> Narrow<T> fma(Narrow<T> a, Narrow<T> b, Narrow<T> c) { return Narrow<T>::result(std::fma(a.v, b.v, c.v)); }
// The 12-bit estimate of arithmetic.hpp as the kernel's float32 result.
template <DType T> Narrow<T> rsqrt_estimate(Narrow<T> a) {
  return Narrow<T>::result(static_cast<float>(rsqrt_estimate12(a.v)));
}
// torch.rsqrt: the vector kernel rounds 1/sqrt to T once; the scalar loop rounds the sqrt
// and the division (ar.rsqrt_rounds_twice). The fast estimate when the variant has one.
template <DType T> Narrow<T> rsqrt_op(const Narrow<T>& a, const Arithmetic& ar) {
  if (ar.fast_rsqrt() || ar.rsqrt_rounds_twice) return inv_sqrt(a, ar);
  return Narrow<T>::result(1.0f / std::sqrt(a.v));
}
template <DType T> Narrow<T> store(Narrow<T> a, DType t) { return Narrow<T>(round_to(t, a.v)); }

}  // namespace foldcheck
