// Adversarial tests of the channel-lane sequential conv (conv_rows.hpp / conv_lanes.cpp):
// hand-picked geometries around block boundaries and the lanes' fallbacks, special values
// (subnormals, overflow, -0, NaN/Inf in bias, inputs, weights out of float range), float64,
// float16 and bfloat16 storage, thread counts 1..4. The oracle is written from the contract
// with explicit loops (no shared window walk): per output acc = +0, then acc = acc + x*w for
// every in-bounds (c, kh, kw) in order, each product rounded, then + bias, then the storage
// rounding. Bits compared; a NaN result must be the one canonical quiet NaN (evaluate.cpp
// stores every NaN so, whichever NaN the kernel's operand order produced). Written by an
// adversarial review of the lanes; tagged [fast]: ctest runs it at every x86-64 level.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/reference/layer.hpp"

using namespace foldcheck;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

ref::ConvGeometry geo(std::int64_t N, std::int64_t C, std::int64_t O, std::int64_t groups, std::int64_t H,
                      std::int64_t W, std::int64_t KH, std::int64_t KW, std::int64_t sh = 1, std::int64_t sw = 1,
                      std::int64_t dh = 1, std::int64_t dw = 1, std::int64_t pt = 0, std::int64_t pl = 0,
                      std::int64_t pb = 0, std::int64_t pr = 0) {
  ref::ConvGeometry g;
  g.N = N, g.C = C, g.O = O, g.groups = groups, g.H = H, g.W = W, g.KH = KH, g.KW = KW;
  g.stride_h = sh, g.stride_w = sw, g.dil_h = dh, g.dil_w = dw;
  g.pad_top = pt, g.pad_left = pl, g.pad_bottom = pb, g.pad_right = pr;
  return g;
}

std::string describe(const ref::ConvGeometry& g) {
  std::ostringstream s;
  s << "N" << g.N << " C" << g.C << " O" << g.O << " groups " << g.groups << " H" << g.H << " W" << g.W << " K"
    << g.KH << "x" << g.KW << " s" << g.stride_h << "," << g.stride_w << " d" << g.dil_h << "," << g.dil_w
    << " pads t" << g.pad_top << " l" << g.pad_left << " b" << g.pad_bottom << " r" << g.pad_right << " OH" << g.OH()
    << " OW" << g.OW();
  return s.str();
}

template <class A>
std::vector<double> oracle(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                           const std::vector<double>& bias, DType storage) {
  const std::int64_t OH = g.OH(), OW = g.OW(), cpg = g.C / g.groups, opg = g.O / g.groups;
  std::vector<double> y(static_cast<std::size_t>(g.output_size()));
  for (std::int64_t n = 0; n < g.N; ++n)
    for (std::int64_t o = 0; o < g.O; ++o)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const std::int64_t gi = o / opg;
          A acc = A(0);
          for (std::int64_t c = 0; c < cpg; ++c)
            for (std::int64_t kh = 0; kh < g.KH; ++kh) {
              const std::int64_t ih = oh * g.stride_h - g.pad_top + kh * g.dil_h;
              if (ih < 0 || ih >= g.H) continue;
              for (std::int64_t kw = 0; kw < g.KW; ++kw) {
                const std::int64_t iw = ow * g.stride_w - g.pad_left + kw * g.dil_w;
                if (iw < 0 || iw >= g.W) continue;
                const A xv = static_cast<A>(x[static_cast<std::size_t>(((n * g.C + gi * cpg + c) * g.H + ih) * g.W + iw)]);
                const A wv = static_cast<A>(w[static_cast<std::size_t>(((o * cpg + c) * g.KH + kh) * g.KW + kw)]);
                volatile A prod = xv * wv;  // rounded product, never contracted
                acc = acc + prod;
              }
            }
          if (!bias.empty()) acc = acc + static_cast<A>(bias[static_cast<std::size_t>(o)]);
          const double v = static_cast<double>(acc);
          y[static_cast<std::size_t>(((n * g.O + o) * OH + oh) * OW + ow)] =
              (storage == DType::Float32 || storage == DType::Float64) ? v : round_to(storage, v);
        }
  return y;
}

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

std::vector<double> run(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                        const std::vector<double>& bias, DType dt, unsigned threads) {
  Graph gr;
  gr.dtype = dt;
  Node c;
  c.geometry = g;
  c.weight.data = w;
  c.bias = bias;
  gr.nodes.push_back(c);
  Policy p;
  p.threads = threads;
  return evaluate(gr, x, p);
}

template <class A>
void check(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
           const std::vector<double>& bias, DType dt) {
  const std::vector<double> want = oracle<A>(g, x, w, bias, dt);
  std::vector<double> first;
  for (const unsigned threads : {1u, 3u}) {
    const std::vector<double> got = run(g, x, w, bias, dt, threads);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      const std::uint64_t expected = std::isnan(want[i]) ? bits(kNaN) : bits(want[i]);
      if (bits(got[i]) == expected) continue;
      INFO(describe(g) << " dtype " << info(dt).name << " threads " << threads << " output " << i << " got "
                       << got[i] << " want " << want[i]);
      REQUIRE(bits(got[i]) == expected);
    }
    if (threads == 1) {
      first = got;
    } else {
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (bits(got[i]) == bits(first[i])) continue;  // NaN bits too
        INFO(describe(g) << " thread-count dependence at " << i << " threads " << threads);
        REQUIRE(bits(got[i]) == bits(first[i]));
      }
    }
  }
}

struct Values {
  std::mt19937_64 rng;
  double plain() { return std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 7) - 3); }
  double pick(const std::vector<double>& specials, double rate) {
    if (std::uniform_real_distribution<double>(0, 1)(rng) < rate) return specials[rng() % specials.size()];
    return plain();
  }
};

template <class A>
void check_random(const ref::ConvGeometry& g, Values& v, DType dt, const std::vector<double>& xs,
                  const std::vector<double>& ws, const std::vector<double>& bs, double rate, bool with_bias) {
  auto in_type = [&](double d) { return static_cast<double>(static_cast<A>(d)); };
  std::vector<double> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W)),
      w(static_cast<std::size_t>(g.O * g.terms_per_output())), bias;
  for (double& e : x) e = in_type(v.pick(xs, rate));
  for (double& e : w) e = in_type(v.pick(ws, rate));
  if (with_bias) {
    bias.resize(static_cast<std::size_t>(g.O));
    for (double& e : bias) e = in_type(v.pick(bs, rate));
  }
  check<A>(g, x, w, bias, dt);
}

std::vector<ref::ConvGeometry> hostile_geometries() {
  std::vector<ref::ConvGeometry> gs;
  // Dense: channel counts across block boundaries, OW around the tiles (6 and 12).
  for (const std::int64_t O : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 48, 63, 64, 65, 127})
    for (const std::int64_t W : {1, 3, 6, 7, 12, 13, 25})
      gs.push_back(geo(1, 3, O, 1, 4, W, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1));
  // Grouped: opg around half a register at every level (float 2/4/8, double 1/2/4) and more.
  for (const std::int64_t opg : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33})
    for (const std::int64_t groups : {2, 3, 4})
      for (const std::int64_t cpg : {1, 2, 3})
        gs.push_back(geo(2, groups * cpg, groups * opg, groups, 5, 9, 3, 2, 1, 2, 1, 1, 1, 0, 2, 1));
  // Depthwise: C not a multiple of 16/8/4 (and multiples), with stride, dilation, pads.
  for (const std::int64_t C : {2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 23, 31, 32, 33, 47, 65, 100}) {
    gs.push_back(geo(1, C, C, C, 7, 13, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1));
    gs.push_back(geo(2, C, C, C, 9, 14, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1));
    gs.push_back(geo(1, C, C, C, 6, 6, 3, 3, 1, 1, 3, 2, 4, 3, 4, 5));
    gs.push_back(geo(1, C, C, C, 5, 30, 1, 5, 1, 3, 1, 2, 0, 4, 0, 4));
  }
  // Depthwise multiplier (groups == C, O == 2C): not depthwise lanes, opg = 2.
  for (const std::int64_t C : {3, 8, 17}) gs.push_back(geo(1, C, 2 * C, C, 6, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1));
  // Stride larger than the kernel; 1x1 with stride; 2x2 with stride 5.
  gs.push_back(geo(1, 4, 32, 1, 11, 17, 1, 1, 3, 3));
  gs.push_back(geo(2, 3, 33, 1, 13, 29, 2, 2, 5, 4, 1, 1, 1, 2, 0, 3));
  gs.push_back(geo(1, 16, 16, 16, 13, 29, 2, 2, 5, 4, 1, 1, 1, 2, 0, 3));
  // Dilation with big pads (windows mostly in padding).
  gs.push_back(geo(1, 2, 40, 1, 5, 6, 3, 3, 1, 1, 4, 5, 8, 10, 8, 10));
  gs.push_back(geo(1, 24, 24, 24, 5, 6, 3, 3, 1, 1, 4, 5, 8, 10, 8, 10));
  // 1xK and Kx1.
  gs.push_back(geo(1, 5, 48, 1, 6, 20, 1, 7, 1, 1, 1, 1, 0, 3, 0, 3));
  gs.push_back(geo(1, 5, 48, 1, 20, 6, 7, 1, 1, 1, 1, 1, 3, 0, 3, 0));
  gs.push_back(geo(1, 20, 20, 20, 6, 20, 1, 7, 1, 1, 1, 1, 0, 3, 0, 3));
  gs.push_back(geo(1, 20, 20, 20, 20, 6, 7, 1, 1, 1, 1, 1, 3, 0, 3, 0));
  // N > 1 with dense, grouped and depthwise.
  gs.push_back(geo(3, 4, 65, 1, 5, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1));
  gs.push_back(geo(4, 33, 33, 33, 4, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1));
  // Output width 1 (kernel = width, no pad) and output 1x1.
  gs.push_back(geo(1, 3, 32, 1, 5, 3, 3, 3));
  gs.push_back(geo(2, 3, 33, 1, 3, 3, 3, 3));
  gs.push_back(geo(1, 32, 32, 32, 3, 3, 3, 3));
  // Pads far larger than the input, with strides that leave a tiny output: windows wholly in padding.
  gs.push_back(geo(1, 2, 32, 1, 2, 2, 2, 2, 7, 7, 1, 1, 10, 10, 10, 10));
  gs.push_back(geo(1, 17, 17, 17, 2, 2, 2, 2, 7, 7, 1, 1, 10, 10, 10, 10));
  // Asymmetric: all left padding, none right; all bottom.
  gs.push_back(geo(1, 3, 40, 1, 4, 9, 3, 3, 1, 1, 1, 1, 0, 6, 5, 0));
  gs.push_back(geo(1, 40, 40, 40, 4, 9, 3, 3, 1, 1, 1, 1, 0, 6, 5, 0));
  // Many terms (C = 70, 1x1; and 5x5).
  gs.push_back(geo(1, 70, 36, 1, 3, 14, 1, 1));
  gs.push_back(geo(1, 9, 64, 1, 9, 9, 5, 5, 1, 1, 1, 1, 2, 2, 2, 2));
  // Grouped with opg >= 8 and large cpg.
  gs.push_back(geo(2, 16, 64, 2, 6, 15, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1));
  gs.push_back(geo(1, 12, 96, 4, 6, 15, 3, 3, 2, 1, 1, 2, 1, 2, 1, 2));
  return gs;
}

const std::vector<double> kNoSpecials{0.0};

}  // namespace

TEST_CASE("float conv lanes, adversarial: lanes over hand-picked geometries, float32 and float64", "[fast][conv]") {
  Values v{std::mt19937_64(1)};
  for (const ref::ConvGeometry& g : hostile_geometries()) {
    check_random<float>(g, v, DType::Float32, kNoSpecials, kNoSpecials, kNoSpecials, 0.0, true);
    check_random<float>(g, v, DType::Float32, kNoSpecials, kNoSpecials, kNoSpecials, 0.0, false);
    check_random<double>(g, v, DType::Float64, kNoSpecials, kNoSpecials, kNoSpecials, 0.0, true);
  }
}

TEST_CASE("float conv lanes, adversarial: special values in float32", "[fast][conv]") {
  Values v{std::mt19937_64(2)};
  // x may be anything; w finite in float (lanes) or not (rows); bias anything.
  const std::vector<double> xs{-0.0, 0.0, 1e-45, -1e-45, 1e-40, -1e-38, 3e38, -3e38, 1e30, kInf, -kInf, kNaN, 1e39, -1e39};
  const std::vector<double> ws_finite{-0.0, 0.0, 1e-45, -1e-40, 3e38, -3e38, 1e20, 1e-50, -1e-50};
  const std::vector<double> ws_all{-0.0, 0.0, 1e-45, 3e38, kInf, -kInf, kNaN, 1e39 /* inf in float */};
  const std::vector<double> bs{-0.0, 0.0, kNaN, kInf, -kInf, 3e38, -3e38, 1e-45};
  for (const ref::ConvGeometry& g : hostile_geometries()) {
    check_random<float>(g, v, DType::Float32, xs, ws_finite, bs, 0.3, true);
    check_random<float>(g, v, DType::Float32, xs, ws_finite, bs, 0.9, false);
    check_random<float>(g, v, DType::Float32, xs, ws_all, bs, 0.05, true);
  }
}

TEST_CASE("float conv lanes, adversarial: special values in float64", "[fast][conv]") {
  Values v{std::mt19937_64(3)};
  const std::vector<double> xs{-0.0, 0.0, 4.9e-324, -4.9e-324, 1e-310, 1e308, -1e308, 1e200, kInf, -kInf, kNaN, 3e38};
  const std::vector<double> ws_finite{-0.0, 0.0, 4.9e-324, -1e-310, 1e308, -1e308, 1e200, 1e-200};
  const std::vector<double> bs{-0.0, 0.0, kNaN, kInf, -kInf, 1e308, -1e308, 4.9e-324};
  for (const ref::ConvGeometry& g : hostile_geometries()) {
    check_random<double>(g, v, DType::Float64, xs, ws_finite, bs, 0.3, true);
    check_random<double>(g, v, DType::Float64, xs, ws_finite, bs, 0.9, false);
  }
}

TEST_CASE("float conv lanes, adversarial: float16 and bfloat16 storage", "[fast][conv]") {
  Values v{std::mt19937_64(4)};
  const std::vector<double> xs{-0.0, 0.0, 65504, -65504, 70000, 1e-7, 6e-8, 3e38, kInf, kNaN};
  const std::vector<double> ws{-0.0, 0.0, 65504, 2, 1e-7, 3e38, 1e-45};
  const std::vector<double> bs{-0.0, kNaN, kInf, 65504};
  const auto gs = hostile_geometries();
  for (std::size_t k = 0; k < gs.size(); k += 2) {
    for (const DType dt : {DType::Float16, DType::BFloat16}) {
      check_random<float>(gs[k], v, dt, kNoSpecials, kNoSpecials, kNoSpecials, 0.0, true);
      check_random<float>(gs[k], v, dt, xs, ws, bs, 0.2, true);
    }
  }
}

TEST_CASE("float conv lanes, adversarial: every product -0 and -0 bias, every geometry", "[fast][conv]") {
  for (const ref::ConvGeometry& g : hostile_geometries()) {
    std::vector<double> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W), -0.0);
    std::vector<double> w(static_cast<std::size_t>(g.O * g.terms_per_output()), 0.75);
    std::vector<double> bias(static_cast<std::size_t>(g.O), -0.0);
    check<float>(g, x, w, bias, DType::Float32);
    check<double>(g, x, w, {}, DType::Float64);
    // x positive, w -0 (a finite weight: lanes), bias -0.
    std::fill(x.begin(), x.end(), 2.0);
    std::fill(w.begin(), w.end(), -0.0);
    check<float>(g, x, w, bias, DType::Float32);
    // Subnormal products that underflow to -0.
    std::fill(x.begin(), x.end(), -1e-30);
    std::fill(w.begin(), w.end(), static_cast<double>(1e-30f));
    check<float>(g, x, w, {}, DType::Float32);
  }
}

TEST_CASE("float conv lanes, adversarial: sums that overflow to +inf then meet -inf (NaN) and products that overflow", "[fast][conv]") {
  for (const ref::ConvGeometry& g : hostile_geometries()) {
    std::vector<double> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = (i % 5 == 3) ? -3e38 : 3e38;
    std::vector<double> w(static_cast<std::size_t>(g.O * g.terms_per_output()));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = (i % 3 == 0) ? 1.0 : (i % 3 == 1 ? 2.0 : -0.5);
    check<float>(g, x, w, {}, DType::Float32);
    for (double& e : x) e *= 1e270;  // float64: 3e308 would overflow; 3e38*1e270 does
    for (double& e : x) e = std::isinf(e) ? std::copysign(1.7e308, e) : e;
    check<double>(g, x, w, {}, DType::Float64);
  }
}
