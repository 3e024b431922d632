// The float path's sequential conv (evaluate(), no FMA) against a scalar oracle written
// here from the contract alone: per output, acc = +0, then acc = acc + x*w for every
// in-bounds term in (c, kh, kw) order, then + bias, in the arithmetic type. Random
// geometries cover both vectorised kernels (channel lanes, depthwise lanes) and the row
// kernels they fall back to: groups, strides, dilations, asymmetric and wide padding,
// channel counts around the block sizes, rows shorter and longer than a tile, and values
// that test the zero-padding argument (conv_rows.hpp): -0, infinities and NaN in the
// input, and infinite or NaN weights (which must take the row kernels). Bits compared.
// Tagged [fast]: ctest runs it at every x86-64 level the CPU has (kernels_at_*).
#include <catch2/catch.hpp>

#include <bit>
#include <cfenv>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/reference/layer.hpp"

using namespace foldcheck;

namespace {

template <class A>
std::vector<double> oracle(const ref::ConvGeometry& g, const std::vector<double>& x, const std::vector<double>& w,
                           const std::vector<double>& bias) {
  std::vector<double> y(static_cast<std::size_t>(g.output_size()));
  for (std::int64_t i = 0; i < g.output_size(); ++i) {
    const ref::OutputIndex o = ref::output_index(g, i);
    A acc = A(0);
    ref::for_each_window_term(g, o.n, o.o, o.oh, o.ow, [&](std::size_t xi, std::size_t wi) {
      const A p = static_cast<A>(x[xi]) * static_cast<A>(w[wi]);
      acc = acc + p;
    });
    if (!bias.empty()) acc = acc + static_cast<A>(bias[static_cast<std::size_t>(o.o)]);
    y[static_cast<std::size_t>(i)] = static_cast<double>(acc);
  }
  return y;
}

std::uint64_t bits(double v) { return std::bit_cast<std::uint64_t>(v); }

// A graph of one conv node.
Graph conv_graph(const ref::ConvGeometry& g, std::vector<double> w, std::vector<double> bias = {},
                 DType dt = DType::Float32) {
  Graph gr;
  gr.dtype = dt;
  Node c;
  c.geometry = g;
  c.weight.data = std::move(w);
  c.bias = std::move(bias);
  gr.nodes.push_back(std::move(c));
  return gr;
}

struct Draw {
  std::mt19937_64 rng;
  std::int64_t in(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }
  double value(double special_rate, bool allow_nonfinite) {
    std::uniform_real_distribution<double> u(0, 1);
    if (u(rng) < special_rate) {
      const double s[] = {-0.0, 0.0, 1e30, -1e30, 3e38, std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN(), 1e-40};
      const double v = s[in(0, allow_nonfinite ? 8 : 4)];
      return v;
    }
    return std::ldexp(u(rng) * 2 - 1, static_cast<int>(in(-4, 4)));
  }
};

ref::ConvGeometry random_geometry(Draw& d) {
  ref::ConvGeometry g;
  const int kind = static_cast<int>(d.in(0, 3));  // 0: dense, 1: depthwise, 2: grouped, 3: narrow
  g.N = d.in(1, 2);
  g.KH = d.in(1, 3);
  g.KW = d.in(1, 4);
  g.stride_h = d.in(1, 2);
  g.stride_w = d.in(1, 3);
  g.dil_h = d.in(1, 2);
  g.dil_w = d.in(1, 2);
  g.pad_top = d.in(0, 3);
  g.pad_bottom = d.in(0, 3);
  g.pad_left = d.in(0, 4);
  g.pad_right = d.in(0, 2);
  if (kind == 1) {
    g.groups = d.in(2, 40);
    g.C = g.O = g.groups;
  } else if (kind == 2) {
    g.groups = d.in(2, 3);
    g.C = g.groups * d.in(1, 4);
    g.O = g.groups * d.in(4, 40);
  } else {
    g.C = d.in(1, 6);
    g.O = kind == 0 ? d.in(8, 70) : d.in(1, 5);
  }
  g.H = d.in(std::max<std::int64_t>(1, (g.KH - 1) * g.dil_h + 1 - g.pad_top - g.pad_bottom), 9);
  g.W = d.in(std::max<std::int64_t>(1, (g.KW - 1) * g.dil_w + 1 - g.pad_left - g.pad_right), 30);
  return g;
}

template <class A>
void check_case(Draw& d, double special_rate, bool nonfinite_weights, unsigned threads) {
  const ref::ConvGeometry g = random_geometry(d);
  const DType dt = std::is_same_v<A, float> ? DType::Float32 : DType::Float64;
  auto in_type = [&](double v) { return static_cast<double>(static_cast<A>(v)); };
  std::vector<double> x(static_cast<std::size_t>(g.N * g.C * g.H * g.W)), w(static_cast<std::size_t>(g.O * g.terms_per_output())), bias;
  for (double& v : x) v = in_type(d.value(special_rate, true));
  for (double& v : w) v = in_type(d.value(special_rate, nonfinite_weights));
  if (d.in(0, 1)) {
    bias.resize(static_cast<std::size_t>(g.O));
    for (double& v : bias) v = in_type(d.value(special_rate, false));
  }
  const Graph gr = conv_graph(g, w, bias, dt);
  Policy p;
  p.threads = threads;
  const std::vector<double> got = evaluate(gr, x, p), want = oracle<A>(g, x, w, bias);
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (bits(got[i]) == bits(want[i]) || (std::isnan(got[i]) && std::isnan(want[i]))) continue;
    INFO("N" << g.N << " C" << g.C << " O" << g.O << " groups " << g.groups << " H" << g.H << " W" << g.W << " K" << g.KH
             << "x" << g.KW << " s" << g.stride_h << "," << g.stride_w << " d" << g.dil_h << "," << g.dil_w << " pads "
             << g.pad_top << "," << g.pad_left << "," << g.pad_bottom << "," << g.pad_right << " output " << i);
    REQUIRE(got[i] == want[i]);
  }
}

}  // namespace

TEST_CASE("float conv: the vectorised sequential kernels are bit-identical to the scalar order", "[fast][conv]") {
  Draw d{std::mt19937_64(20261201)};
  for (int k = 0; k < 300; ++k) {
    const double special = k % 3 == 0 ? 0.05 : 0.0;
    const bool nonfinite_w = k % 7 == 0;
    const unsigned threads = 1 + static_cast<unsigned>(k % 3);
    check_case<float>(d, special, nonfinite_w, threads);
    check_case<double>(d, special, nonfinite_w, threads);
  }
}

TEST_CASE("float conv: a zero sum keeps the sign the sequential order gives", "[fast][conv]") {
  // Every product -0 (x = -0, w > 0): the order gives +0 + -0 = +0 in every output, padded
  // or not; a kernel that started from the first product would give -0.
  ref::ConvGeometry g;
  g.C = 3;
  g.O = 32;
  g.H = g.W = 5;
  g.KH = g.KW = 3;
  g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 1;
  const Graph gr = conv_graph(g, std::vector<double>(static_cast<std::size_t>(g.O * g.terms_per_output()), 0.5));
  const std::vector<double> x(static_cast<std::size_t>(g.C * g.H * g.W), -0.0);
  for (const double v : evaluate(gr, x, Policy{})) REQUIRE(!std::signbit(v));
}

TEST_CASE("float conv: a geometry whose padded copy would be huge takes the row kernels", "[fast][conv]") {
  // Pads and strides of 30000 around a 4x4 input: the padded input would hold ~2.3e11
  // values (the lanes' copy is refused above 4x the data), the output only 3x3 per channel.
  ref::ConvGeometry g;
  g.C = 16;
  g.O = 32;
  g.H = g.W = 4;
  g.KH = g.KW = 3;
  g.stride_h = g.stride_w = 30000;
  g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 30000;
  const Graph gr = conv_graph(g, std::vector<double>(static_cast<std::size_t>(g.O * g.terms_per_output()), 0.25));
  std::vector<double> x(static_cast<std::size_t>(g.C * g.H * g.W));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 7) - 3.0;
  const std::vector<double> got = evaluate(gr, x, Policy{}), want = oracle<float>(g, x, gr.nodes[0].weight.data, {});
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) REQUIRE(bits(got[i]) == bits(want[i]));
}

TEST_CASE("float conv: outside the default floating-point environment the order still holds", "[fast][conv]") {
  // Windows wholly in the padding and negative weights: a padded position's product is -0,
  // and +0 + (-0) is -0 when rounding down, so the zero-padded lanes would differ from the
  // order, which skips the position (+0). Likewise a flushed tiny sum. Under either
  // environment evaluate() must take the row kernels and match the order run in it too.
  ref::ConvGeometry g;
  g.C = 2;
  g.O = 32;
  g.H = g.W = 3;
  g.KH = g.KW = 3;
  g.pad_top = g.pad_left = g.pad_bottom = g.pad_right = 3;
  std::vector<double> w(static_cast<std::size_t>(g.O * g.terms_per_output()));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = i % 3 ? -0.5 : static_cast<double>(std::ldexp(1.0f, -100));
  std::vector<double> x(static_cast<std::size_t>(g.C * g.H * g.W));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? 0.75 : -static_cast<double>(std::ldexp(1.0f, -40));
  const Graph gr = conv_graph(g, w);
  auto same = [&](const char* what) {
    const std::vector<double> got = evaluate(gr, x, Policy{}), want = oracle<float>(g, x, w, {});
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(what << " output " << i << " got " << got[i] << " want " << want[i]);
      REQUIRE(bits(got[i]) == bits(want[i]));
    }
  };
  REQUIRE(std::fesetround(FE_DOWNWARD) == 0);
  same("rounding down");
  std::fesetround(FE_TONEAREST);
#if defined(__SSE__)
  const unsigned csr = _mm_getcsr();
  _mm_setcsr(csr | 0x8040);  // flush-to-zero and denormals-are-zero
  same("flush-to-zero");
  _mm_setcsr(csr);
#endif
}
