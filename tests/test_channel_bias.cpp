// The per-channel systematic-bias statistic (channel_bias.hpp) on layers built here: the
// rigorous threshold holds for an adversarial order of the sum (every positive term first,
// the partial sums as large as they get); a channel scaled by (1 + rho) is estimated as rho
// and found; a channel whose outputs are all equal is not tested (never a pass); honest
// samples give the estimated threshold allowance + t_K rms; results do not depend on the
// thread count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "foldcheck/layer/channel_bias.hpp"

using namespace foldcheck;

namespace {

// A conv layer whose folded weights w* are float32 values (so theta = delta = 0), its input,
// and per output: the exact value y* (double: the products of floats are exact, the sums of
// ~150 of them err by ~1e-16 relative, 1e-9 of a float32 rounding), sum |w x| + |b|, and the
// engine's float32 value summed in the order `order` gives.
struct Layer {
  ref::ConvGeometry g;
  std::vector<double> x, w, bias, ystar, z, A, M, y;
};

enum class SumOrder { Natural, PositivesFirst, Shuffled };

Layer make_layer(std::uint64_t seed, SumOrder order, double scale_channel = 0, std::int64_t channel = -1,
                 std::uint64_t order_seed = 0) {
  Layer L;
  L.g.N = 2, L.g.C = 16, L.g.H = L.g.W = 10, L.g.O = 6, L.g.KH = L.g.KW = 3;
  L.g.pad_top = L.g.pad_left = L.g.pad_bottom = L.g.pad_right = 1;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd;
  L.x.resize(static_cast<std::size_t>(L.g.N * L.g.C * L.g.H * L.g.W));
  for (double& v : L.x) v = std::max(0.0f, nd(rng));  // post-ReLU inputs: sums that cancel little
  const std::int64_t pc = L.g.terms_per_output();
  L.w.resize(static_cast<std::size_t>(L.g.O * pc));
  for (double& v : L.w) v = static_cast<float>(0.2 * nd(rng));
  for (std::int64_t o = 0; o < L.g.O; ++o) L.bias.push_back(static_cast<float>(0.1 * nd(rng)));
  const std::size_t n = static_cast<std::size_t>(L.g.output_size());
  L.ystar.resize(n), L.z.resize(n), L.A.resize(n), L.M.resize(n), L.y.resize(n);
  const double u = 0x1p-24, k = static_cast<double>(pc) + 1, gk = k * u / (1 - k * u);
  for (std::size_t i = 0; i < n; ++i) {
    const ref::OutputIndex oi = ref::output_index(L.g, static_cast<std::int64_t>(i));
    std::vector<double> terms;
    const double f = oi.o == channel ? 1 + scale_channel : 1.0;  // the engine's weights of that channel
    double exact = 0, abs = 0;
    ref::for_each_window_term(L.g, oi.n, oi.o, oi.oh, oi.ow, [&](std::size_t xi, std::size_t wi) {
      exact += L.w[wi] * L.x[xi];
      abs += std::fabs(L.w[wi] * L.x[xi]);
      terms.push_back(static_cast<float>(L.w[wi] * f) * L.x[xi]);
    });
    const double b = L.bias[static_cast<std::size_t>(oi.o)];
    if (order == SumOrder::PositivesFirst) std::sort(terms.begin(), terms.end(), std::greater<>());
    std::mt19937_64 shuffle_rng(order_seed * 1000003 + i);
    if (order == SumOrder::Shuffled) std::shuffle(terms.begin(), terms.end(), shuffle_rng);
    float acc = 0;
    for (const double t : terms) acc = acc + static_cast<float>(t);
    L.y[i] = static_cast<float>(acc + static_cast<float>(b));
    L.ystar[i] = exact + b;
    L.z[i] = exact;
    L.A[i] = (abs + std::fabs(b)) * (1 + 1e-12);
    L.M[i] = std::min(L.A[i], (L.A[i] + std::fabs(L.ystar[i])) / 2) + gk * L.A[i];
  }
  return L;
}

struct Run {
  std::vector<double> d;
  ChannelBiasInput in;
};

// The statistic's input for layer L (kept alive by the caller's Run).
std::vector<ChannelBias> statistic(const Layer& L, Run& r, unsigned threads = 1,
                                   const std::vector<const std::vector<double>*>& samples = {}) {
  r.d.resize(L.y.size());
  for (std::size_t i = 0; i < L.y.size(); ++i) r.d[i] = L.y[i] - L.ystar[i];
  r.in.geometry = L.g;
  r.in.x = &L.x;
  r.in.w_star = &L.w;
  r.in.z = &L.z;
  r.in.d = &r.d;
  r.in.ystar = &L.ystar;
  r.in.magnitude = &L.A;
  r.in.partial = &L.M;
  r.in.theta.assign(static_cast<std::size_t>(L.g.O), 0.0);
  r.in.delta.assign(static_cast<std::size_t>(L.g.O), 0.0);
  r.in.roundings = static_cast<double>(L.g.terms_per_output()) + 1;
  r.in.alpha = 1e-6;
  r.in.threads = threads;
  r.in.samples = samples;
  r.in.sample_weights.assign(samples.size(), &L.w);
  return channel_bias(r.in);
}

}  // namespace

TEST_CASE("channel statistic: the rigorous threshold holds for an adversarial order of the sum", "[channel_bias]") {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Layer L = make_layer(seed, SumOrder::PositivesFirst);
    Run r;
    for (const ChannelBias& c : statistic(L, r)) {
      INFO("seed " << seed << " rho " << c.rho << " threshold " << c.threshold);
      REQUIRE(c.tested);
      CHECK(std::fabs(c.rho) <= c.threshold);
      CHECK(c.estimated_threshold == c.threshold);  // no samples: the bound
    }
  }
}

TEST_CASE("channel statistic: a channel scaled by (1 + rho) is estimated as rho and found", "[channel_bias]") {
  const Layer L = make_layer(7, SumOrder::Natural, 2e-5, 4);
  Run r;
  const std::vector<ChannelBias> cb = statistic(L, r);
  for (std::size_t o = 0; o < cb.size(); ++o) {
    INFO("channel " << o << " rho " << cb[o].rho << " threshold " << cb[o].threshold);
    if (o == 4) {
      CHECK(std::fabs(cb[o].rho - 2e-5) < 1e-6);
      CHECK(cb[o].beyond());
    } else {
      CHECK_FALSE(cb[o].beyond());
      CHECK(std::fabs(cb[o].rho) < 1e-6);
    }
  }
}

TEST_CASE("channel statistic: a channel whose outputs are all equal is not tested", "[channel_bias]") {
  Layer L = make_layer(3, SumOrder::Natural);
  std::fill(L.x.begin(), L.x.end(), 0.0);  // every z = 0: no slope to estimate
  for (std::size_t i = 0; i < L.y.size(); ++i) L.z[i] = 0, L.ystar[i] = L.y[i] = L.bias[(i / 100) % 6];
  Run r;
  for (const ChannelBias& c : statistic(L, r)) {
    CHECK_FALSE(c.tested);
    CHECK_FALSE(c.beyond());
  }
}

TEST_CASE("channel statistic: the estimated threshold is allowance + t_K times the honest samples' rms", "[channel_bias]") {
  const Layer L = make_layer(11, SumOrder::Natural);
  // Honest samples: the exact values plus a drift of 1e-8 along z in every channel (each
  // sample's rho_m is then 1e-8, its rms 1e-8; the bound is ~1e-6, so the estimate is below it).
  std::vector<std::vector<double>> ys(8, L.ystar);
  for (auto& y : ys)
    for (std::size_t i = 0; i < y.size(); ++i) y[i] += 1e-8 * L.z[i];
  std::vector<const std::vector<double>*> samples;
  for (const auto& y : ys) samples.push_back(&y);
  Run r;
  for (const ChannelBias& c : statistic(L, r, 1, samples)) {
    CHECK(c.honest_rms == Approx(1e-8).epsilon(1e-6));
    // t_8 at alpha = 1e-6 (two-sided): 13.257 (Student-t, 8 degrees of freedom, by numerical
    // integration of its density), plus the largest |rho_m| (1e-8, a systematic drift's
    // stand-in); the allowance is 0 (theta = eta = 0).
    CHECK(c.allowance == 0);
    CHECK(c.honest_largest == Approx(1e-8).epsilon(1e-6));
    CHECK(c.estimated_threshold == Approx(14.257 * 1e-8).epsilon(0.001));
    CHECK(c.estimated_threshold <= c.threshold);
  }
}

// The stated false-alarm rate on honest data: an honest observation's drift against K honest
// computations' rms is Student-t with K degrees of freedom when the K + 1 drifts are
// exchangeable (here: sums in independent random orders); the max |rho_m| term (for systematic
// drifts) only widens it. At alpha = 0.05 over 40 layers x 6 channels (240 trials), the count
// beyond the estimated threshold is at most Binomial(240, 0.05): P(> 24) < 1e-3. And the band
// stays near the honest drifts: within 6 rms (t_16(0.975) = 2.12, plus the largest of 16).
TEST_CASE("channel statistic: honest observations cross the estimated threshold at its stated rate", "[channel_bias]") {
  constexpr std::size_t K = 16;
  int beyond = 0, trials = 0;
  for (std::uint64_t seed = 100; seed < 140; ++seed) {
    const Layer obs = make_layer(seed, SumOrder::Shuffled, 0, -1, 999);
    std::vector<Layer> honest;
    for (std::uint64_t m = 0; m < K; ++m) honest.push_back(make_layer(seed, SumOrder::Shuffled, 0, -1, m + 1));
    std::vector<const std::vector<double>*> samples(K);
    for (std::size_t m = 0; m < K; ++m) samples[m] = &honest[m].y;
    Run r;
    r.in.alpha = 0.05;
    statistic(obs, r, 1, samples);  // sets the input; rerun at alpha 0.05
    r.in.alpha = 0.05;
    for (const ChannelBias& c : channel_bias(r.in)) {
      REQUIRE(c.tested);
      ++trials;
      beyond += c.beyond_estimate();
      CHECK(c.estimated_threshold < 6 * c.honest_rms);
    }
  }
  CHECK(trials == 240);
  CHECK(beyond <= 24);
}

TEST_CASE("channel statistic: the same for any thread count", "[channel_bias]") {
  const Layer L = make_layer(5, SumOrder::Natural, 3e-6, 2);
  Run r1, r2;
  const auto a = statistic(L, r1, 1), b = statistic(L, r2, 4);
  REQUIRE(a.size() == b.size());
  for (std::size_t o = 0; o < a.size(); ++o) {
    CHECK(a[o].rho == b[o].rho);
    CHECK(a[o].threshold == b[o].threshold);
  }
}
