// The operand conversions of the conv arithmetics (numerics/conv_arithmetic.hpp) against the
// bit operations hardware performs on float32 patterns: TF32 keeps the top 10 of 23 stored
// bits (nearest-even, nearest-away: add half of the dropped part and clear it, truncation:
// clear it); bf16 keeps 7; fp16 is IEEE binary16 (dtype.hpp's round_to). Random float32 values
// over the whole range, subnormals and exact ties included; bf16x3's split is exact.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "foldcheck/layer/fft_bound.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/numerics/dtype.hpp"

using namespace foldcheck;

namespace {

// The float32 pattern with its low `drop` bits rounded off as a tensor core or cvt does.
float by_bits(float x, int drop, OperandConversion c) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x), mask = (1u << drop) - 1, low = b & mask,
                      half = 1u << (drop - 1);
  std::uint32_t r = b & ~mask;
  const bool odd = (r >> drop) & 1u;
  if (c == OperandConversion::NearestAway && low >= half) r += 1u << drop;
  if (c == OperandConversion::NearestEven && (low > half || (low == half && odd))) r += 1u << drop;
  return std::bit_cast<float>(r);
}

float random_float(std::mt19937_64& rng) {
  for (;;) {
    std::uint32_t b = static_cast<std::uint32_t>(rng());
    if (rng() % 8 == 0) b = (b & ~0x1fffu) | 0x1000u;  // an exact TF32 tie
    if (rng() % 8 == 0) b = (b & ~0xffffu) | 0x8000u;  // an exact bf16 tie
    if (rng() % 16 == 0) b &= 0x807fffffu;             // a subnormal
    const float f = std::bit_cast<float>(b);
    if (std::isfinite(f)) return f;
  }
}

}  // namespace

TEST_CASE("conv arithmetic: TF32 and bf16 conversions are the float32 bit operations of hardware", "[arithmetic]") {
  std::mt19937_64 rng(41);
  const OperandFormat tf32{11, -126, 127}, bf16{8, -126, 127};
  for (int i = 0; i < 60000; ++i) {
    const float x = random_float(rng);
    for (const OperandConversion c :
         {OperandConversion::NearestEven, OperandConversion::NearestAway, OperandConversion::Truncate}) {
      const float t = by_bits(x, 13, c), b = by_bits(x, 16, c);
      // Past float32's range a rounding up overflows: the pattern becomes Inf, as convert says.
      INFO("x = " << x << " conversion " << name(c));
      CHECK(convert(x, tf32, c) == static_cast<double>(t));
      CHECK(convert(x, bf16, c) == static_cast<double>(b));
    }
    CHECK(convert(x, bf16, OperandConversion::NearestEven) == round_to(DType::BFloat16, x));
  }
}

TEST_CASE("conv arithmetic: fp16 operands are IEEE binary16, overflow to Inf or saturate", "[arithmetic]") {
  std::mt19937_64 rng(42);
  const OperandFormat fp16{11, -14, 15};
  for (int i = 0; i < 60000; ++i) {
    const double x = std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 48) - 30);
    const double v = static_cast<double>(static_cast<float>(x));
    CHECK(convert(v, fp16, OperandConversion::NearestEven) == round_to(DType::Float16, v));
  }
  // A tie at 1.5 times the smallest subnormal rounds to even, twice it (the reference's
  // rounding once took the exponent's last bit for the significand's there).
  for (const DType t : {DType::Float16, DType::BFloat16}) {
    const double s = info(t).min_subnormal;
    CHECK(round_to(t, 1.5 * s) == 2 * s);
    CHECK(round_to(t, -1.5 * s) == -2 * s);
    CHECK(round_to(t, 2.5 * s) == 2 * s);
    CHECK(round_to(t, 0.5 * s) == 0.0);
  }
  CHECK(std::isinf(convert(65520.0, fp16, OperandConversion::NearestEven)));
  CHECK(convert(65519.0, fp16, OperandConversion::NearestEven) == 65504.0);
  CHECK(convert(1e6, fp16, OperandConversion::Truncate) == 65504.0);
  CHECK(convert(-1e6, fp16, OperandConversion::Truncate) == -65504.0);
}

TEST_CASE("conv arithmetic: bf16x3's split is hi + lo with a remainder below 2^-16 |x|", "[arithmetic]") {
  std::mt19937_64 rng(43);
  for (int i = 0; i < 30000; ++i) {
    const float x = random_float(rng);
    if (std::fabs(x) < 1e-30f || std::fabs(x) > 1e38f) continue;  // lo underflows; hi may overflow
    const SplitOperand s = split_bf16(x);
    CHECK(round_to(DType::BFloat16, s.hi) == s.hi);
    CHECK(round_to(DType::BFloat16, s.lo) == s.lo);
    CHECK(std::fabs(static_cast<double>(x) - s.hi - s.lo) <= 0x1p-16 * std::fabs(static_cast<double>(x)));
  }
}

TEST_CASE("conv arithmetic: names round-trip and unknown ones are refused with the list", "[arithmetic]") {
  for (const ConvArithmetic& a : all_conv_arithmetics()) CHECK(conv_arithmetic_from_name(a.name()) == a);
  CHECK_THROWS_WITH(conv_arithmetic_from_name("tf16"),
                    Catch::Contains("float32|tf32|bf16|fp16|fp16-accumulate|bf16x3"));
}

TEST_CASE("conv algorithm: names round-trip, fft among them", "[arithmetic]") {
  for (const char* n : {"direct", "winograd2", "winograd4", "winograd6", "fft", "split-k:8"})
    CHECK(conv_algorithm_from_name(n).name() == n);
  CHECK_THROWS_WITH(conv_algorithm_from_name("fft2"),
                    Catch::Contains("direct|winograd2|winograd4|winograd4-onednn|winograd6|fft|split-k:S"));
}

TEST_CASE("fft bound: one value per output plane, growing with the transform, stride 1 only", "[arithmetic]") {
  ref::ConvGeometry g;
  g.N = 1, g.C = 2, g.H = 6, g.W = 7, g.O = 3, g.KH = 3, g.KW = 3;
  std::vector<double> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W)), w(static_cast<std::size_t>(g.O * g.C * 9));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<double>(i));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::cos(static_cast<double>(i));
  const std::vector<long double> c(static_cast<std::size_t>(g.output_size()), 0.0L);
  const FftBound b = fft_bound(g, x, w, {}, c);
  CHECK((b.n1 == 8 && b.n2 == 8));
  const std::size_t plane = static_cast<std::size_t>(g.OH() * g.OW());
  for (std::size_t i = 0; i < b.E.size(); ++i) CHECK(b.E[i] == b.E[i / plane * plane]);
  CHECK(b.E[0] > 0);
  g.pad_top = g.pad_bottom = 2;  // 10 rows: a 16-point transform
  const FftBound p = fft_bound(g, x, w, {}, std::vector<long double>(static_cast<std::size_t>(g.output_size())));
  CHECK(p.n1 == 16);
  CHECK(p.E[0] > b.E[0]);
  g.stride_h = 2;
  CHECK_THROWS_WITH(fft_bound(g, x, w, {}, c), Catch::Contains("stride 1"));
}
