#pragma once
// Operations whose form depends on the arithmetic variant (arithmetic.hpp), written once
// for every number type the paths use: float / double (the float path), Bounded (its
// a-priori error bound) and XNum (attribution runs). Code that computes a path calls
// these, so the bound and the attribution always describe the very operations executed.
#include <cmath>
#include <type_traits>

#include "foldcheck/numerics/arithmetic.hpp"
#include "foldcheck/numerics/bounded.hpp"
#include "foldcheck/numerics/xnum.hpp"

namespace foldcheck {

template <class N>
N madd(const N& a, const N& b, const N& c, bool contract) {
  if (!contract) return a * b + c;
  if constexpr (std::is_floating_point_v<N>) return std::fma(a, b, c);
  else return fma(a, b, c);
}

// Fast reciprocal square root: estimate, then `steps` Newton steps
// y <- y * (1.5 - (y * (0.5 * a)) * y)   (Eigen's order; 0.5 * a is exact barring underflow).
template <class N>
N fast_rsqrt(const N& a, int steps) {
  if constexpr (std::is_same_v<N, Bounded>) {
    return bounded_fast_rsqrt(a, steps);
  } else {
    N y;
    if constexpr (std::is_floating_point_v<N>) y = static_cast<N>(rsqrt_estimate12(static_cast<double>(a)));
    else y = rsqrt_estimate(a);
    const N half_a = a * N(0.5);
    for (int i = 0; i < steps; ++i) y = y * (N(1.5) - (y * half_a) * y);
    return y;
  }
}

// 1/sqrt(a): sqrt and a division, or the fast estimate. Stage: rsqrt.
template <class N>
N inv_sqrt(const N& a, const Arithmetic& ar) {
  using std::sqrt;
  StageScope<N> st(Stage::Rsqrt);
  if (ar.fast_rsqrt()) return fast_rsqrt(a, ar.newton_steps);
  return N{1.0} / sqrt(a);
}

// One reciprocal-square-root operation of an engine (torch.rsqrt): on the CPU, 1/sqrt in
// the arithmetic type (two roundings), as inv_sqrt. Narrow (narrow.hpp) overloads it: its
// kernel computes 1/sqrt in float32 and rounds to the 16-bit type once. Stage: rsqrt.
template <class N>
N rsqrt_op(const N& a, const Arithmetic& ar) {
  return inv_sqrt(a, ar);
}

// x / sqrt(a) (stage rsqrt: the square root and the division), or under fast rsqrt or
// rsqrt_multiply x * rsqrt(a) (the reciprocal in stage rsqrt, the multiplication in
// mul_stage).
template <class N>
N div_sqrt(const N& x, const N& a, const Arithmetic& ar, Stage mul_stage) {
  if (ar.multiplies_by_rsqrt()) {
    const N r = inv_sqrt(a, ar);
    StageScope<N> st(mul_stage);
    return x * r;
  }
  using std::sqrt;
  StageScope<N> st(Stage::Rsqrt);
  return x / sqrt(a);
}

// A value stored into the storage type t (float path: correct rounding; Bounded: one
// more rounding in its bound; XNum: rounded unless the current stage is exact).
template <class N>
N store_as(const N& v, DType t) {
  if constexpr (std::is_floating_point_v<N>) return static_cast<N>(round_to(t, static_cast<double>(v)));
  else if constexpr (std::is_same_v<N, Bounded>) return v.stored_as(t);
  else return store(v, t);
}

}  // namespace foldcheck
