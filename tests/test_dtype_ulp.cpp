// Rounding into storage types and the ULP convention (compare.hpp): ULP error =
// (v - x) / ulp_T(x), signed, with ulp_T floored at the subnormal spacing.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reference/mp_number.hpp"

using namespace foldcheck;

TEST_CASE("round_to matches hardware conversions and the reference's rounding", "[dtype]") {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  for (int i = 0; i < 200000; ++i) {
    const int e = static_cast<int>(rng() % 320) - 160;
    double x = std::ldexp(mant(rng), e);
    if (rng() & 1) x = -x;
    REQUIRE(round_to(DType::Float32, x) == static_cast<double>(static_cast<float>(x)));
#if defined(__clang__) && __clang_major__ < 15
    // clang 14 (the hardening build) has no _Float16 on x86-64: MPFR's rounding instead.
    if (e > -30 && e < 17) REQUIRE(round_to(DType::Float16, x) == ref::round_to_format(ref::MpNumber(64, x).get(), ref::kFloat16));
#else
    if (e > -30 && e < 17) REQUIRE(round_to(DType::Float16, x) == static_cast<double>(static_cast<_Float16>(x)));
#endif
    if (i % 8 == 0) {
      ref::MpNumber m(64, x);
      REQUIRE(round_to(DType::BFloat16, x) == ref::round_to_format(m.get(), ref::kBFloat16));
      REQUIRE(round_to(DType::Float16, x) == ref::round_to_format(m.get(), ref::kFloat16));
    }
  }
  CHECK(std::isinf(round_to(DType::BFloat16, 3.4e38)));
  CHECK(round_to(DType::BFloat16, 1.0 + 0x1p-8) == 1.0);
  CHECK(representable(DType::Float32, 0.5));
  CHECK_FALSE(representable(DType::Float32, 0.1));
}

TEST_CASE("ulp: binades - powers of two approached from below - zero and subnormals", "[ulp]") {
  CHECK(ulp(DType::Float32, 1.0) == 0x1p-23);
  CHECK(ulp(DType::Float32, 0.999) == 0x1p-24);
  CHECK(ulp(DType::Float32, 1.0, -0x1p-80) == 0x1p-24);  // x just below 1
  CHECK(ulp(DType::Float32, -1.0, 0x1p-80) == 0x1p-24);
  CHECK(ulp(DType::Float32, 1.0, 0x1p-80) == 0x1p-23);
  CHECK(ulp(DType::Float32, 0.0) == 0x1p-149);
  CHECK(ulp(DType::Float32, 1e-45) == 0x1p-149);
  CHECK(ulp(DType::Float32, 0x1p-126) == 0x1p-149);
  CHECK(ulp(DType::Float32, 0x1p-130) == 0x1p-149);
  CHECK(ulp(DType::Float64, 1.0) == 0x1p-52);
  CHECK(ulp(DType::Float64, 0.0) == 0x1p-1074);
  CHECK(ulp(DType::Float16, 1.0) == 0x1p-10);
  CHECK(ulp(DType::Float16, 1e-7) == 0x1p-24);
  CHECK(ulp(DType::BFloat16, 1.0) == 0x1p-7);
  CHECK(ulp(DType::BFloat16, 0x1p-130) == 0x1p-133);
}

TEST_CASE("ulp_error is signed and fractional against the exact value", "[ulp]") {
  CHECK(ulp_error(std::nextafter(1.0f, 2.0f), {1.0, 0.0}, DType::Float32) == 1.0);
  CHECK(ulp_error(1.0, {1.0 + 0x1p-24, 0.0}, DType::Float32) == -0.5);
  CHECK(ulp_error(1.0, {1.0, -0x1p-26}, DType::Float32) == 0.25);  // ulp below 1 is 2^-24
  CHECK(ulp_error(0x1p-149, {0.0, 0.0}, DType::Float32) == 1.0);    // subnormal floor at zero
  CHECK(ulp_error(-0x1p-149, {0x1p-150, 0.0}, DType::Float32) == -1.5);
  CHECK(ulp_error(1.0 + 0x1p-52, {1.0, 0x1p-60}, DType::Float64) == Approx(1.0 - 0x1p-8).epsilon(1e-12));
}
