// The fast reference (exact-product sums with a binary64 BatchNorm enclosure, certified per
// output; a compensated re-sum as its second tier) gives rounded values bit-identical to the
// all-multiprecision reference: on every shipped case and dtype, on thousands of adversarial
// dot products (heavy cancellation, wide dynamic range, subnormal products, exact rounding
// ties) and on random layer geometries, with and without the bound data (whose kernels and
// radii differ), for every set of narrow formats. It is identical for any thread count, and
// outputs it cannot certify go to the multiprecision path and are counted.
#include <cstdlib>
#include <catch2/catch.hpp>

#include "shipped_cases.hpp"

#include <cmath>
#include <filesystem>
#include <random>

#include "foldcheck/io/case_file.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

using namespace foldcheck;
namespace fs = std::filesystem;

namespace {

constexpr unsigned kNarrow = 0b1110;  // float32, float16, bfloat16 (kFormats order: f64, f32, f16, bf16)

struct Pair {
  ref::LayerResult fast, slow;
};

Pair both(const ref::LayerData& d, unsigned formats, unsigned threads = 0, bool bound_data = true) {
  ref::Options f;
  f.formats = formats;
  f.threads = threads;
  f.bound_data = bound_data;
  ref::Options s = f;
  s.fast = false;
  return {ref::conv_bn(d, f), ref::conv_bn(d, s)};
}

void require_identical(const Pair& p, unsigned formats) {
  REQUIRE(p.fast.y.size() == p.slow.y.size());
  for (std::size_t i = 0; i < p.fast.y.size(); ++i)
    for (std::size_t k = 0; k < ref::kNumFormats; ++k) {
      if (!(formats & (1u << k))) continue;
      const double a = p.fast.y[i].rounded[k], b = p.slow.y[i].rounded[k];
      if (!(a == b || (std::isnan(a) && std::isnan(b)))) {
        INFO("output " << i << " format " << ref::kFormats[k].name << ": fast " << a << " slow " << b);
        REQUIRE(false);
      }
      // The fast approx lies within its radius of the 106-bit value.
      const long double fa = static_cast<long double>(p.fast.y[i].approx.hi) + p.fast.y[i].approx.lo;
      const long double sa = static_cast<long double>(p.slow.y[i].approx.hi) + p.slow.y[i].approx.lo;
      REQUIRE(std::fabs(fa - sa) <= p.fast.y[i].radius * 1.0000001 + std::fabs(sa) * 0x1p-62);
    }
}

// A dot product of n terms as a 1x1 conv: C = n input channels, one pixel.
struct Dot {
  ref::ConvGeometry g;
  std::vector<double> x, w, bias;
  ref::BnParams bn;
};

Dot dot_of(const std::vector<double>& x, const std::vector<double>& w) {
  Dot d;
  d.g.C = static_cast<std::int64_t>(x.size());
  d.g.O = 1;
  d.x = x;
  d.w = w;
  return d;
}

}  // namespace

TEST_CASE("fast reference: bit-identical to multiprecision on every shipped case and dtype", "[reference][fast]") {
  for (const fs::path& case_path : shipped_case_files()) {
    const CaseSpec spec = load_case(case_path.string());
    if (spec.name == "resnet_3x3_64") continue;  // 200k outputs: covered by the random layers' shapes
    for (DType dt : {DType::Float32, DType::Float16, DType::BFloat16}) {
      INFO(spec.name << " " << name(dt));
      const CaseData d = materialize(spec, dt);
      const Node& c = d.graph.nodes[0];
      const ref::LayerData L{c.geometry, &d.input, &c.weight.data, c.bias.empty() ? nullptr : &c.bias,
                             &d.graph.nodes[1].bn};
      const Pair p = both(L, kNarrow);
      CHECK(p.fast.fast_certified + p.fast.fallbacks == static_cast<std::int64_t>(p.fast.y.size()));
      CHECK(p.fast.fast_certified > 0);
      require_identical(p, kNarrow);
    }
  }
}

TEST_CASE("fast reference: thousands of adversarial dot products are bit-identical", "[reference][fast]") {
  std::mt19937_64 rng(20261130);
  std::normal_distribution<double> nd;
  std::uniform_int_distribution<int> ex(-60, 60), sub(-149, -120);
  std::int64_t fallbacks = 0, compensated = 0, total = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int kind = trial % 5;
    const std::size_t n = 16 + static_cast<std::size_t>(rng() % 300);
    std::vector<double> x(n), w(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = static_cast<float>(nd(rng));
      w[i] = static_cast<float>(nd(rng));
      if (kind == 1) {  // wide dynamic range
        x[i] = static_cast<float>(std::ldexp(nd(rng), ex(rng)));
        w[i] = static_cast<float>(std::ldexp(nd(rng), ex(rng)));
      } else if (kind == 2) {  // subnormal inputs: products near 2^-298
        x[i] = static_cast<float>(std::ldexp(1.0 + (rng() % 1024), sub(rng)));
        if (rng() & 1) x[i] = -x[i];
      }
    }
    if (kind == 3) {  // heavy cancellation: the second half cancels the first, plus a small residue
      for (std::size_t i = 0; i < n / 2; ++i) {
        x[n / 2 + i] = -x[i];
        w[n / 2 + i] = w[i];
      }
      x[n - 1] = static_cast<float>(std::ldexp(nd(rng), -30));
    } else if (kind == 4) {  // the exact sum sits on a float32 rounding tie: 1 + 2^-24 (+ cancelling pairs)
      for (std::size_t i = 0; i + 1 < n; i += 2) {
        x[i + 1] = -x[i];
        w[i + 1] = w[i];
      }
      x[0] = 1.0;
      w[0] = 1.0;
      x[1] = 0x1p-24;
      w[1] = (trial / 5) % 2 ? 1.0 : 3.0;  // 1 + 2^-24 (tie) or 1 + 3*2^-24 (tie, odd side)
      if (n % 2) x[n - 1] = 0;
    }
    Dot d = dot_of(x, w);
    const bool with_bn = trial % 3 != 0;
    d.bn = ref::BnParams{{1.0}, {0.0}, {0.0}, {1.0}, 0.0};  // an exact identity BatchNorm
    if (with_bn && kind != 4) d.bn = ref::BnParams{{static_cast<float>(0.5 + std::fabs(nd(rng)))}, {static_cast<float>(nd(rng))},
                                                   {static_cast<float>(nd(rng))}, {static_cast<float>(0.1 + std::fabs(nd(rng)))}, 1e-5};
    if (trial % 7 == 0) d.bias = {static_cast<float>(nd(rng))};
    const ref::LayerData L{d.g, &d.x, &d.w, d.bias.empty() ? nullptr : &d.bias, with_bn ? &d.bn : nullptr};
    const bool bound_data = (trial / 2) % 2 == 0;
    INFO("trial " << trial << " kind " << kind << " bound data " << bound_data);
    const Pair p = both(L, kNarrow, 1, bound_data);
    require_identical(p, kNarrow);
    REQUIRE(p.fast.fast_certified + p.fast.fallbacks == static_cast<std::int64_t>(p.fast.y.size()));
    fallbacks += p.fast.fallbacks;
    compensated += p.fast.compensated;
    total += static_cast<std::int64_t>(p.fast.y.size());
  }
  // Every exact tie must have gone to the multiprecision path; near-boundary sums that are
  // not ties were certified by the second tier.
  CHECK(fallbacks >= 3000 / 5);
  CHECK(fallbacks < total);
  CHECK(compensated > 0);
}

TEST_CASE("fast reference: identical for any thread count, float64 stays multiprecision", "[reference][fast]") {
  const CaseSpec spec = load_case(std::string(FOLDCHECK_SOURCE_DIR) + "/cases/engine_variants.json");
  const CaseData d = materialize(spec, DType::Float32);
  const Node& c = d.graph.nodes[0];
  const ref::LayerData L{c.geometry, &d.input, &c.weight.data, &c.bias, &d.graph.nodes[1].bn};
  ref::Options o;
  o.formats = kNarrow;
  o.threads = 1;
  const ref::LayerResult a = ref::conv_bn(L, o);
  o.threads = 2;
  const ref::LayerResult b = ref::conv_bn(L, o);
  REQUIRE(a.fast_certified > 0);
  for (std::size_t i = 0; i < a.y.size(); ++i) {
    REQUIRE(a.y[i].approx.hi == b.y[i].approx.hi);
    REQUIRE(a.y[i].approx.lo == b.y[i].approx.lo);
    for (std::size_t k = 1; k < ref::kNumFormats; ++k) REQUIRE(a.y[i].rounded[k] == b.y[i].rounded[k]);
    REQUIRE(a.conv[i] == b.conv[i]);
    REQUIRE(a.abs_sum[i] == b.abs_sum[i]);
  }
  // Requesting float64 keeps every output on the multiprecision path (>= 106 bits).
  const ref::LayerResult full = ref::conv_bn(L, ref::Options{});
  CHECK(full.fast_certified == 0);
  CHECK_THROWS_AS(a.y[0].rounded_to(ref::kFloat64), std::logic_error);
  CHECK(full.y[0].rounded_to(ref::kFloat32) == a.y[0].rounded_to(ref::kFloat32));
}

TEST_CASE("fast reference: random geometries (batch, stride, dilation, groups, asymmetric padding)", "[reference][fast]") {
  std::mt19937_64 rng(77);
  std::normal_distribution<double> nd;
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<unsigned>(hi - lo + 1)); };
  for (int trial = 0; trial < 90; ++trial) {
    ref::ConvGeometry g;
    g.N = pick(1, 3);
    const int mode = trial % 3;  // 0: dense, 1: depthwise, 2: two groups
    g.groups = mode == 0 ? 1 : 2;
    g.C = mode == 1 ? pick(1, 6) : 2 * pick(1, 4);
    if (mode == 1) g.groups = g.C;
    g.O = mode == 1 ? g.C : 2 * pick(1, 5);
    g.KH = pick(1, 4);
    g.KW = pick(1, 4);
    g.stride_h = pick(1, 3);
    g.stride_w = pick(1, 3);
    g.dil_h = pick(1, 2);
    g.dil_w = pick(1, 2);
    g.pad_top = pick(0, 2);
    g.pad_left = pick(0, 2);
    g.pad_bottom = pick(0, 2);
    g.pad_right = pick(0, 2);
    g.H = pick(g.dil_h * (g.KH - 1) + 1, 23);
    g.W = pick(g.dil_w * (g.KW - 1) + 1, 41);
    if (g.OH() <= 0 || g.OW() <= 0) continue;
    std::vector<double> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W)), w(static_cast<std::size_t>(g.O * g.terms_per_output())),
        bias(static_cast<std::size_t>(g.O));
    for (double& v : x) v = static_cast<float>(nd(rng));
    for (double& v : w) v = static_cast<float>(0.3 * nd(rng));
    for (double& v : bias) v = static_cast<float>(0.1 * nd(rng));
    ref::BnParams bn;
    for (std::int64_t o = 0; o < g.O; ++o) {
      bn.gamma.push_back(static_cast<float>(0.5 + std::fabs(nd(rng))));
      bn.beta.push_back(static_cast<float>(0.2 * nd(rng)));
      bn.mean.push_back(static_cast<float>(0.2 * nd(rng)));
      bn.var.push_back(static_cast<float>(0.2 + std::fabs(nd(rng))));
    }
    bn.eps = 1e-5;
    INFO("trial " << trial << ": N" << g.N << " C" << g.C << " O" << g.O << " groups " << g.groups << " k " << g.KH << "x" << g.KW
                  << " stride " << g.stride_h << "," << g.stride_w << " dil " << g.dil_h << "," << g.dil_w << " HW " << g.H
                  << "x" << g.W);
    const ref::LayerData L{g, &x, &w, trial % 2 ? &bias : nullptr, &bn};
    // Formats: all narrow ones, float32 alone, float16 alone (no float32 test in the
    // vector pass); bound data on half of the trials.
    const unsigned formats[] = {kNarrow, ref::format_bit(ref::kFloat32), ref::format_bit(ref::kFloat16)};
    const unsigned f = formats[(trial / 3) % 3];
    const bool bound_data = (trial / 9) % 2 == 0;
    INFO("formats " << f << " bound data " << bound_data);
    const Pair p = both(L, f, 1 + static_cast<unsigned>(trial % 2), bound_data);
    CHECK(p.fast.fast_certified > 0);
    require_identical(p, f);
    if (!bound_data) {
      CHECK(p.fast.conv.empty());
      continue;
    }
    for (std::size_t i = 0; i < p.fast.y.size(); ++i) {
      // The harness's bound inputs agree with the multiprecision path's.
      REQUIRE(std::fabs(p.fast.conv[i] - p.slow.conv[i]) <= p.fast.conv_radius[i] + p.slow.conv_radius[i]);
      REQUIRE(p.fast.abs_sum[i] >= p.slow.abs_sum[i] * (1 - 1e-12));
      REQUIRE(p.fast.abs_x_sum[i] >= p.slow.abs_x_sum[i] * (1 - 1e-12));
    }
  }
}

TEST_CASE("fast reference: FOLDCHECK_ISA names the kernels' level, else the best this CPU has", "[reference][fast]") {
  const std::vector<const char*> levels = ref::available_isa_levels();
  REQUIRE(!levels.empty());
  CHECK(std::string(levels.back()) == "base");
  const char* env = std::getenv("FOLDCHECK_ISA");
  const std::string want = env && *env ? env : levels.front();
  CHECK(std::string(ref::isa_level()) == want);
  INFO("kernels at x86-64 level " << ref::isa_level());
}
