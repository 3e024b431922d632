// The reference is the ground truth: its rounding is checked against MPFR's own
// conversions and hand-constructed ties, and its values against exact rational results
// and an independent, naive 2048-bit computation.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "foldcheck/reference/conv_bn_reference.hpp"

using namespace foldcheck::ref;

namespace {
double rf(double x, const Format& f, long prec = 200) {
  MpNumber m(prec, x);
  return round_to_format(m.get(), f);
}
// x = a + b exactly, at high precision
double rf_sum(double a, double b, const Format& f) {
  MpNumber m(2200, a), t(2200, b);
  mpfr_add(m.get(), m.get(), t.get(), MPFR_RNDN);
  return round_to_format(m.get(), f);
}
}  // namespace

TEST_CASE("round_to_format agrees with MPFR's own correctly rounded conversions", "[reference][rounding]") {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  for (int i = 0; i < 20000; ++i) {
    // a 120-bit value at exponents across float32's and float64's normal and subnormal ranges
    const int e = static_cast<int>(rng() % 2200) - 1100;
    MpNumber m(120, mant(rng));
    MpNumber tail(120, mant(rng));
    mpfr_mul_2si(tail.get(), tail.get(), -60, MPFR_RNDN);
    mpfr_add(m.get(), m.get(), tail.get(), MPFR_RNDN);
    mpfr_mul_2si(m.get(), m.get(), e, MPFR_RNDN);
    if (rng() & 1) mpfr_neg(m.get(), m.get(), MPFR_RNDN);
    REQUIRE(round_to_format(m.get(), kFloat64) == mpfr_get_d(m.get(), MPFR_RNDN));
    if (e > -200 && e < 200) {
      const double f = round_to_format(m.get(), kFloat32);
      const float g = mpfr_get_flt(m.get(), MPFR_RNDN);
      REQUIRE(f == static_cast<double>(g));
    }
  }
}

TEST_CASE("round_to_format: ties to even - subnormals - overflow and zero signs", "[reference][rounding]") {
  // float32 ties
  CHECK(rf(1.0 + 0x1p-24, kFloat32) == 1.0);
  CHECK(rf(1.0 + 3 * 0x1p-24, kFloat32) == 1.0 + 0x1p-22);
  CHECK(rf_sum(1.0 + 0x1p-24, 0x1p-600, kFloat32) == 1.0 + 0x1p-23);  // just above the tie
  CHECK(rf_sum(1.0 + 0x1p-24, -0x1p-600, kFloat32) == 1.0);           // just below
  // float32 subnormals: spacing 2^-149
  CHECK(rf(0x1p-150, kFloat32) == 0.0);          // tie between 0 and 2^-149: even is 0
  CHECK(rf(3 * 0x1p-150, kFloat32) == 0x1p-148); // tie between 2^-149 and 2^-148
  CHECK(std::signbit(rf(-0x1p-151, kFloat32)));  // underflow keeps the sign
  CHECK(rf(0x1.8p-149, kFloat32) == 0x1p-148);
  // float32 overflow threshold (2 - 2^-24) 2^127
  CHECK(std::isinf(rf(std::ldexp(2.0 - 0x1p-24, 127), kFloat32)));
  CHECK(rf_sum(std::ldexp(2.0 - 0x1p-24, 127), -0x1p-900, kFloat32) == std::ldexp(2.0 - 0x1p-23, 127));
  // float16: max 65504, overflow at 65520; subnormal spacing 2^-24
  CHECK(rf(65519.0, kFloat16) == 65504.0);
  CHECK(std::isinf(rf(65520.0, kFloat16)));
  CHECK(rf(0x1p-25, kFloat16) == 0.0);
  CHECK(rf(0x1.8p-24, kFloat16) == 0x1p-23);
  // bfloat16: 8-bit significand
  CHECK(rf(1.0 + 0x1p-8, kBFloat16) == 1.0);
  CHECK(rf(1.0 + 3 * 0x1p-8, kBFloat16) == 1.0 + 0x1p-6);
  CHECK(rf(0x1p-134, kBFloat16) == 0.0);
  // zero and specials
  CHECK(rf(0.0, kFloat32) == 0.0);
  CHECK(std::signbit(rf(-0.0, kFloat32)));
  CHECK(std::isinf(rf(INFINITY, kFloat16)));
}

TEST_CASE("certified fold values against known constants", "[reference][certify]") {
  const Options o;
  const Value one = fold_scale(1.0, 1.0, 0.0, o);
  CHECK(one.approx.hi == 1.0);
  CHECK(one.approx.lo == 0.0);
  CHECK(fold_weight(3.0, 1.0, 3.0, 1.0, o).rounded_to(kFloat32) == 1.5);  // 3/sqrt(4)
  // 1/sqrt(2) to 40 digits
  const Value s = fold_scale(1.0, 2.0, 0.0, o);
  MpNumber ref(400);
  mpfr_set_str(ref.get(), "0.7071067811865475244008443621048490392848359376884740365883", 10, MPFR_RNDN);
  MpNumber got(400, s.approx.hi), lo(400, s.approx.lo);
  mpfr_add(got.get(), got.get(), lo.get(), MPFR_RNDN);
  mpfr_sub(got.get(), got.get(), ref.get(), MPFR_RNDN);
  CHECK(std::fabs(mpfr_get_d(got.get(), MPFR_RNDN)) < 0x1p-105);
  CHECK(s.rounded_to(kFloat32) == static_cast<double>(0.70710678118654752440f));
  CHECK(s.rounded_to(kFloat64) == 0.70710678118654752440);
  // the TVM thread: w / sqrt(1 + 1e-5) for w = float32(2.1122932)
  const double w = static_cast<float>(2.1122932);
  const Value f = fold_weight(w, 1.0, 1.0, 1e-5, o);
  CHECK(f.approx.hi == Approx(w / std::sqrt(1.00001)).epsilon(1e-15));
}

TEST_CASE("conv_bn reference equals exact rational results (integer data - perfect-square variance)", "[reference][conv]") {
  // y = (c - 1) * 2 / sqrt(3 + 1) + 0.5 = c - 0.5, exact; geometry with stride, padding,
  // dilation and groups, against a direct double convolution of small integers (exact).
  ConvGeometry g;
  g.N = 2; g.C = 4; g.H = 7; g.W = 6; g.O = 6; g.KH = 3; g.KW = 2;
  g.stride_h = 2; g.stride_w = 1; g.pad_top = 1; g.pad_left = 2; g.pad_bottom = 0; g.pad_right = 1;
  g.dil_h = 1; g.dil_w = 2; g.groups = 2;
  std::mt19937 rng(5);
  std::vector<double> x(g.N * g.C * g.H * g.W), w(g.O * (g.C / g.groups) * g.KH * g.KW), b(g.O);
  for (auto& v : x) v = static_cast<int>(rng() % 21) - 10;
  for (auto& v : w) v = static_cast<int>(rng() % 11) - 5;
  for (auto& v : b) v = static_cast<int>(rng() % 7) - 3;
  BnParams bn{std::vector<double>(g.O, 2.0), std::vector<double>(g.O, 0.5), std::vector<double>(g.O, 1.0),
              std::vector<double>(g.O, 3.0), 1.0};
  LayerData L{g, &x, &w, &b, &bn};
  const LayerResult r = conv_bn(L, Options{});
  const auto OH = g.OH(), OW = g.OW(), cg = g.C / g.groups, og = g.O / g.groups;
  REQUIRE(static_cast<std::int64_t>(r.y.size()) == g.output_size());
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.O; ++o)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double c = b[o];
          for (std::int64_t ci = 0; ci < cg; ++ci)
            for (std::int64_t kh = 0; kh < g.KH; ++kh)
              for (std::int64_t kw = 0; kw < g.KW; ++kw) {
                const auto ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
                const auto iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
                if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
                c += x[((n * g.C + (o / og) * cg + ci) * g.H + ih) * g.W + iw] * w[((o * cg + ci) * g.KH + kh) * g.KW + kw];
              }
          const auto i = ((n * g.O + o) * OH + oh) * OW + ow;
          REQUIRE(r.conv[i] == c);
          REQUIRE(r.y[i].approx.hi == c - 0.5);
          REQUIRE(r.y[i].approx.lo == 0.0);
          REQUIRE(r.y[i].rounded_to(kFloat32) == c - 0.5);
        }
}

namespace {
// Naive, independent evaluation at 2048 bits: no intervals, no mpfr_sum.
void naive(std::vector<double>& f32, std::vector<double>& f64, const ConvGeometry& g, const std::vector<double>& x,
           const std::vector<double>& w, const BnParams& bn) {
  const long P = 2048;
  const auto OH = g.OH(), OW = g.OW();
  MpNumber acc(P), t(P), s(P);
  for (std::int64_t o = 0; o < g.O; ++o)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        mpfr_set_zero(acc.get(), 1);
        for (std::int64_t c = 0; c < g.C; ++c)
          for (std::int64_t kh = 0; kh < g.KH; ++kh)
            for (std::int64_t kw = 0; kw < g.KW; ++kw) {
              const auto ih = oh - g.pad_top + kh, iw = ow - g.pad_left + kw;
              if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) continue;
              mpfr_set_d(t.get(), x[(c * g.H + ih) * g.W + iw], MPFR_RNDN);
              mpfr_mul_d(t.get(), t.get(), w[((o * g.C + c) * g.KH + kh) * g.KW + kw], MPFR_RNDN);
              mpfr_add(acc.get(), acc.get(), t.get(), MPFR_RNDN);
            }
        mpfr_sub_d(acc.get(), acc.get(), bn.mean[o], MPFR_RNDN);
        mpfr_set_d(s.get(), bn.var[o], MPFR_RNDN);
        mpfr_add_d(s.get(), s.get(), bn.eps, MPFR_RNDN);
        mpfr_sqrt(s.get(), s.get(), MPFR_RNDN);
        mpfr_mul_d(acc.get(), acc.get(), bn.gamma[o], MPFR_RNDN);
        mpfr_div(acc.get(), acc.get(), s.get(), MPFR_RNDN);
        mpfr_add_d(acc.get(), acc.get(), bn.beta[o], MPFR_RNDN);
        f32.push_back(mpfr_get_flt(acc.get(), MPFR_RNDN));
        f64.push_back(mpfr_get_d(acc.get(), MPFR_RNDN));
      }
}
}  // namespace

TEST_CASE("conv_bn reference matches a naive 2048-bit evaluation bit for bit", "[reference][conv]") {
  for (bool float64_inputs : {false, true}) {
    ConvGeometry g;
    g.C = 5; g.H = 6; g.W = 5; g.O = 4; g.KH = 3; g.KW = 3; g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 1;
    std::mt19937_64 rng(float64_inputs ? 11 : 12);
    std::normal_distribution<double> nd;
    auto draw = [&] { return float64_inputs ? nd(rng) : static_cast<double>(static_cast<float>(nd(rng))); };
    std::vector<double> x(g.C * g.H * g.W), w(g.O * g.C * 9);
    for (auto& v : x) v = draw();
    for (auto& v : w) v = draw() * 0.2;
    BnParams bn;
    for (int o = 0; o < g.O; ++o) {
      bn.gamma.push_back(draw());
      bn.beta.push_back(draw());
      bn.mean.push_back(draw());
      bn.var.push_back(std::fabs(draw()) + 1e-3);
    }
    bn.eps = 1e-5;
    LayerData L{g, &x, &w, nullptr, &bn};
    const LayerResult r = conv_bn(L, Options{});
    std::vector<double> f32, f64;
    naive(f32, f64, g, x, w, bn);
    REQUIRE(f32.size() == r.y.size());
    for (std::size_t i = 0; i < f32.size(); ++i) {
      REQUIRE(r.y[i].rounded_to(kFloat32) == f32[i]);
      REQUIRE(r.y[i].rounded_to(kFloat64) == f64[i]);
    }
  }
}

TEST_CASE("certification escalates precision when the enclosure straddles a rounding boundary", "[reference][certify]") {
  // exact value 1 + 2^-24 + 2^-298: just above a float32 tie. At 256 bits the 2^-298
  // term is lost and the enclosure straddles the tie; at 512 bits the sum is exact.
  ConvGeometry g;
  g.C = 3; g.O = 1;
  std::vector<double> x{1.0, 0x1p-24, 0x1p-149}, w{1.0, 1.0, 0x1p-149};
  // inputs as 3 channels of a 1x1 image, weights 1x3x1x1
  LayerData L{g, &x, &w, nullptr, nullptr};
  const LayerResult r = conv_bn(L, Options{});
  CHECK(r.escalations == 1);
  CHECK(r.max_precision_used == 512);
  CHECK(r.y[0].rounded_to(kFloat32) == 1.0 + 0x1p-23);
  CHECK(r.y[0].rounded_to(kFloat64) == 1.0 + 0x1p-24);
  // An exact tie is a point interval: certified at once, ties to even.
  std::vector<double> x2{1.0, 0x1p-24, 0.0};
  LayerData L2{g, &x2, &w, nullptr, nullptr};
  const LayerResult r2 = conv_bn(L2, Options{});
  CHECK(r2.escalations == 0);
  CHECK(r2.y[0].rounded_to(kFloat32) == 1.0);
}

TEST_CASE("conv_bn results do not depend on the thread count", "[reference][threads]") {
  ConvGeometry g;
  g.C = 8; g.H = 9; g.W = 9; g.O = 7; g.KH = 3; g.KW = 3;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd;
  std::vector<double> x(g.C * g.H * g.W), w(g.O * g.C * 9);
  for (auto& v : x) v = nd(rng);
  for (auto& v : w) v = nd(rng);
  const LayerResult a = conv_bn(LayerData{g, &x, &w, nullptr, nullptr}, Options{256, 65536, 1});
  const LayerResult b = conv_bn(LayerData{g, &x, &w, nullptr, nullptr}, Options{256, 65536, 3});
  for (std::size_t i = 0; i < a.y.size(); ++i) {
    REQUIRE(a.y[i].approx.hi == b.y[i].approx.hi);
    REQUIRE(a.y[i].approx.lo == b.y[i].approx.lo);
  }
}

TEST_CASE("reference rejects inconsistent layers", "[reference]") {
  ConvGeometry g;
  g.C = 2; g.O = 1;
  std::vector<double> x{1.0}, w{1.0, 2.0};
  CHECK_THROWS_AS(conv_bn(LayerData{g, &x, &w, nullptr, nullptr}, Options{}), std::invalid_argument);
  CHECK_THROWS_AS(fold_scale(1.0, -1.0, 0.5, Options{}), std::domain_error);
}

// Exact rounding ties of the folded values: var + eps a perfect square r^2 (dyadic r), and
// the parameters chosen so that the fold is a midpoint m of the format. Certification must
// end (the tie computed exactly) with m rounded to even, for the scale, the weight (one at a
// time and batched), and the bias. With the scale formed first (gamma/r not dyadic) the
// reference once escalated to 65536 bits and threw.
TEST_CASE("rounding ties of the fold are certified and rounded to even", "[reference][certify][ties]") {
  std::mt19937_64 rng(99);
  std::uniform_int_distribution<int> odd(0, 1 << 10), sh(-6, 6);
  Options o;
  o.max_precision = 4096;  // a tie must not need escalation: it is exact at the first precision
  int ties = 0;
  for (const Format& f : {kBFloat16, kFloat16, kFloat32}) {
    for (int it = 0; it < 200; ++it) {
      const double r = std::ldexp(2 * odd(rng) + 1, -10 + sh(rng) / 3);    // sqrt(var + eps), dyadic
      const double eps = std::ldexp(1.0, -12), var = r * r - eps;           // exact in double
      if (!(var > 0)) continue;
      // m: a midpoint of f, 2^(f.precision+1) odd multiples of a power of two.
      const double m = std::ldexp(2.0 * ((1 << f.precision) + odd(rng)) + 1, sh(rng) - f.precision - 1);
      const double c = std::ldexp(1.0, sh(rng));                            // gamma = r c, w = m / c
      const double gamma = r * c, w = m / c, rounded = rf(m, f);
      REQUIRE(rounded != m);  // m is a tie of f
      CHECK(fold_scale(m * r, var, eps, o).rounded_to(f) == rounded);
      CHECK(fold_weight(w, gamma, var, eps, o).rounded_to(f) == rounded);
      Options batched = o;
      batched.formats = format_bit(f);
      CHECK(fold_weights({w}, 1, BnParams{{gamma}, {0.0}, {0.0}, {var}, eps}, batched).rounded_to(0, f) == rounded);
      const double beta = std::ldexp(1.0, sh(rng)), mean = 0.25;             // (b - mean) gamma / r = m - beta
      const double b = (m - beta) / c + mean;
      CHECK(fold_bias(b, gamma, beta, mean, var, eps, o).rounded_to(f) == rf_sum(m, 0.0, f));
      ++ties;
    }
  }
  CHECK(ties > 500);
}
