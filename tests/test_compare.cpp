// Comparison kinds, statistics and histograms.
#include <catch2/catch.hpp>

#include <cmath>

#include "foldcheck/compare.hpp"

using namespace foldcheck;

namespace {
ref::Value exact(double hi, double lo = 0.0) {
  ref::Value v;
  v.approx = {hi, lo};
  ref::MpNumber m(200, hi), t(200, lo);
  mpfr_add(m.get(), m.get(), t.get(), MPFR_RNDN);
  for (std::size_t i = 0; i < ref::kNumFormats; ++i) v.rounded[i] = ref::round_to_format(m.get(), ref::kFormats[i]);
  return v;
}
}  // namespace

TEST_CASE("NaN - infinities and signed zeros are their own kinds", "[compare]") {
  const std::vector<ref::Value> x{exact(1.0), exact(2.0), exact(1e39), exact(0.0), exact(3.0)};
  const std::vector<double> v{NAN, INFINITY, INFINITY, -0.0, 3.0};
  const Comparison c = compare(v, x, DType::Float32);
  CHECK(c.kinds.nan == 1);
  CHECK(c.kinds.inf_mismatch == 1);
  CHECK(c.kinds.overflow_match == 1);  // 1e39 rounds to +Inf in float32
  CHECK(c.kinds.signed_zero == 1);
  CHECK(c.kinds.ppm_undefined == 1);
  CHECK(c.ulp.count == 2);  // -0 and 3.0 scored
  CHECK(c.exact_matches == 2);
  CHECK(c.verdict == Verdict::Unexpected);
}

TEST_CASE("all-zero exact values make a comparison MISTRUSTED - never a pass", "[compare]") {
  const std::vector<ref::Value> x(5, exact(0.0));
  const std::vector<double> v(5, 0.0);
  CHECK(compare(v, x, DType::Float32).verdict == Verdict::Mistrusted);
}

TEST_CASE("bounds decide the verdict, statistics and percentiles are nearest-rank", "[compare]") {
  std::vector<ref::Value> x;
  std::vector<double> v, b;
  for (int i = 1; i <= 1000; ++i) {
    x.push_back(exact(1.0));
    v.push_back(1.0 + i * 0x1p-23);  // i ULP above
    b.push_back(1000 * 0x1p-23);
  }
  Comparison c = compare(v, x, DType::Float32, &b);
  CHECK(c.verdict == Verdict::Expected);
  CHECK(c.ulp.max_abs == 1000);
  CHECK(c.ulp.p50 == 500);
  CHECK(c.ulp.p99 == 990);
  CHECK(c.ulp.p999 == 999);
  CHECK(*c.worst_bound_ratio == Approx(1.0).epsilon(1e-9));
  b[999] = 999 * 0x1p-23;
  c = compare(v, x, DType::Float32, &b);
  CHECK(c.verdict == Verdict::Unexpected);
  CHECK(c.beyond_bound == 1);
  CHECK(c.worst_bound_index == 999);
}

TEST_CASE("histogram buckets are (2^(k-1) - 2^k) with signed sides", "[histogram]") {
  Histogram h = Histogram::for_ulp();
  for (double e : {0.0, 0.0625, 0.07, -0.5, 0.5, 0.51, 1.0, -3.0, 1e12}) h.add(e);
  CHECK(h.zero == 1);
  CHECK(h.pos[0] == 1);   // (0, 1/16]
  CHECK(h.pos[1] == 1);   // (1/16, 1/8]
  CHECK(h.neg[3] == 1);   // (1/4, 1/2]
  CHECK(h.pos[3] == 1);
  CHECK(h.pos[4] == 2);   // (1/2, 1]
  CHECK(h.neg[6] == 1);   // (2, 4]
  CHECK(h.pos.back() == 1);
  CHECK(h.label(4) == "(0.5, 1]");
  CHECK(h.label(0) == "(0, 0.0625]");
}
