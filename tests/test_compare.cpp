// Comparison kinds, statistics and histograms.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "foldcheck/numerics/compare.hpp"

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

TEST_CASE("edge references: zero, subnormal, largest finite, NaN and Inf from a file - each its own kind", "[compare]") {
  const float max = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  SECTION("exact references") {
    // 0 and -0 against an exact 0; a subnormal; the largest finite value; values that
    // round to +Inf in float32 met by a saturating engine (max, 0.75 ULP below the exact
    // value) and by IEEE (+Inf).
    const double beyond = static_cast<double>(max) + 0.75 * 0x1p104;  // float32's top spacing is 2^104
    const std::vector<ref::Value> x{exact(0.0), exact(0.0), exact(3 * static_cast<double>(tiny)), exact(max),
                                    exact(beyond), exact(1e39)};
    const std::vector<double> v{0.0, -0.0, 4 * static_cast<double>(tiny), max, max, INFINITY};
    const Comparison c = compare(v, x, DType::Float32);
    CHECK(c.kinds.signed_zero == 1);
    CHECK(c.kinds.ppm_undefined == 2);
    CHECK(c.kinds.subnormal_reference == 1);
    CHECK(c.kinds.overflow_finite == 1);
    CHECK(c.kinds.overflow_match == 1);
    CHECK(c.ulp.count + c.kinds.unscored() == c.elements);
    CHECK(c.ulp.max_abs == Approx(1.0));  // the subnormal is 1 spacing (2^-149) off; max is 0.75 below
    CHECK(std::isfinite(c.ulp.max_abs));
    CHECK(c.verdict == Verdict::Expected);  // no bounds given: only special values decide
  }
  SECTION("references from a file: NaN and infinities are never scored, mismatches are UNEXPECTED") {
    const ref::ValueArray x = approximate_values({NAN, NAN, INFINITY, -INFINITY, 1.0, -0.0}, DType::Float32);
    const std::vector<double> v{NAN, 1.0, INFINITY, 5.0, 1.0, 0.0};
    const Comparison c = compare(v, x, DType::Float32);
    CHECK(c.kinds.nan_match == 1);
    CHECK(c.kinds.reference_nan == 1);
    CHECK(c.kinds.overflow_match == 1);
    CHECK(c.kinds.inf_missed == 1);
    CHECK(c.kinds.signed_zero == 1);  // +0 against a reference -0
    CHECK(c.ulp.count == 2);
    CHECK(c.ulp.count + c.kinds.unscored() == c.elements);
    CHECK(std::isfinite(c.ulp.max_abs));
    CHECK(c.verdict == Verdict::Unexpected);
    const nlohmann::json j = to_json(c);
    CHECK(j["histograms"]["ulp"]["unscored"]["reference_nan"] == 1);
    CHECK(j["kinds"]["inf_missed"] == 1);
  }
  SECTION("NaN against NaN alone agrees") {
    const ref::ValueArray x = approximate_values({NAN, 2.0}, DType::Float32);
    CHECK(compare({NAN, 2.0}, x, DType::Float32).verdict == Verdict::Expected);
  }
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

// The ratio chart (issue 23): each scored element's signed error / its own bound, where 1 is a
// bucket edge: (1/2, 1] is the last bucket within the bound, (1, 2] the first beyond; the
// sign is the error's; a bound of 0 with an error counts beyond every edge. The bound in ULP
// at the max-|ULP| element is kept beside the one at the element nearest its bound.
TEST_CASE("bound-ratio histogram: signed, 1 is an edge, every scored element counted", "[compare][histogram]") {
  std::vector<ref::Value> x;
  std::vector<double> v, b;
  auto add = [&](double xv, double err_ulp, double bound_ulp) {
    x.push_back(exact(xv));
    v.push_back(xv + err_ulp * 0x1p-23);
    b.push_back(bound_ulp * 0x1p-23);
  };
  add(1.0, 0.75, 1.0);    // ratio 0.75: (1/2, 1]
  add(1.0, -1.0, 1.0);    // -1: still within, (1/2, 1] on the negative side
  add(1.0, 3.0, 2.0);     // 1.5: (1, 2], beyond
  add(1.0, 0.0, 1.0);     // exactly 0
  add(1.0, 1.0, 0.0);     // a zero bound with an error: beyond every edge
  add(1.5, 64.0, 4096.0); // the largest |ULP| under a wide bound (a cancelled result's)
  const Comparison c = compare(v, x, DType::Float32, &b);
  REQUIRE(c.bound_hist);
  const Histogram& h = *c.bound_hist;
  CHECK(h.unit == "bound");
  const std::size_t one = static_cast<std::size_t>(0 - h.lo);  // the bucket (1/2, 1]
  CHECK(h.upper_edge(one) == 1.0);
  CHECK(h.pos[one] == 1);
  CHECK(h.neg[one] == 1);
  CHECK(h.pos[one + 1] == 1);
  CHECK(h.zero == 1);
  CHECK(h.pos.back() == 1);
  std::int64_t total = h.zero;
  for (std::size_t i = 0; i < h.buckets(); ++i) total += h.neg[i] + h.pos[i];
  CHECK(total == c.ulp.count);
  CHECK(c.beyond_bound == 2);
  CHECK(c.bound_ulp_at_max_ulp == Approx(4096.0));  // 1.5 is in 1.0's binade: the same ULP
  CHECK(c.worst_bound_ulp == 0.0);                  // the element nearest (beyond) its bound: the zero bound
  CHECK(h.label(0) == "(0, 2^-20]");
  CHECK(to_json(c)["histograms"]["bound"]["unit"] == "bound");
  // Without bounds there is no ratio chart.
  CHECK_FALSE(compare(v, x, DType::Float32).bound_hist);
  CHECK_FALSE(to_json(compare(v, x, DType::Float32))["histograms"].contains("bound"));
}
