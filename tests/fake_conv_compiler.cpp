// A fake compiler of one conv + BatchNorm layer, for `foldcheck bisect --cmd` tests and the
// README's example: a layer whose outputs cancel, compiled by passes that only re-round it
// and by one that changes its value.
//
//   fake_conv_compiler [--enabled P,Q | --disabled P,Q] -o OUT.npy [--seed S] [--channels C]
//                      [--size H] [--dtype float32|float64] [--write-layer DIR]
//
// The layer (seeded): x [1, C, H, H] standard normal; w [C, C, 3, 3] normal with Kaiming
// scale; padding 1; BatchNorm statistics as after training: the running mean and variance
// near the conv output's own per-channel mean and variance, gamma in [0.5, 1.5], beta
// normal(0, 0.3), eps 1e-5 held in float32. Its outputs cross zero, so some are nearly
// cancelled (|y| << sum |x w|). Values are float32 values; --dtype float64 stores them and
// computes in float64.
// Passes (without --enabled, every pass not in --disabled runs):
//   SimplifyInference  BatchNorm -> c * a + (beta - mean * a), a = rsqrt(var + eps) * gamma
//   FoldConstant       a and the shift computed once (no numerical effect)
//   FoldScaleAxis      a folded into the weights (w * a); needs SimplifyInference
//   FuseOps            FMA accumulation (and the shift added in the conv epilogue)
//   Reorder            pairwise summation of each output's terms
//   Vectorize          8 partial sums
//   FastMath           every 1/sqrt becomes a 12-bit estimate (no Newton step): a change of
//                      value, up to 2^-13 relative per channel, that rounding cannot explain
// Every pass but FastMath only changes the rounding. --write-layer DIR writes the layer as
// foldcheck reads it: x.npy, w.npy, bn.npz, model.onnx (Conv -> BatchNormalization) and
// reference.npy (the exact outputs, from long double arithmetic).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"
#include "onnx_builder.hpp"

namespace {

using foldcheck::DType;
using foldcheck::Tensor;

struct Layer {
  int C = 16, H = 20;
  std::vector<float> x, w, gamma, beta, mean, var;
  float eps = 1e-5f;
};

// The index of x at (c, h, w) with zero padding 1; -1 outside.
int x_at(const Layer& L, int c, int h, int w) {
  if (h < 0 || w < 0 || h >= L.H || w >= L.H) return -1;
  return (c * L.H + h) * L.H + w;
}

Layer make_layer(std::uint64_t seed, int C, int H) {
  Layer L;
  L.C = C;
  L.H = H;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0.0, 1.0);
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  L.x.resize(static_cast<std::size_t>(C * H * H));
  for (float& v : L.x) v = static_cast<float>(nd(rng));
  const double ws = std::sqrt(2.0 / (C * 9));
  L.w.resize(static_cast<std::size_t>(C * C * 9));
  for (float& v : L.w) v = static_cast<float>(ws * nd(rng));
  // The conv output's own statistics per channel, in double.
  for (int o = 0; o < C; ++o) {
    double s = 0, s2 = 0;
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < H; ++q) {
        double acc = 0;
        for (int c = 0; c < C; ++c)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
              if (const int i = x_at(L, c, h + kh - 1, q + kw - 1); i >= 0) acc += double(L.x[i]) * L.w[((o * C + c) * 3 + kh) * 3 + kw];
        s += acc;
        s2 += acc * acc;
      }
    const double n = H * H, m = s / n, v = std::max(s2 / n - m * m, 1e-6);
    L.mean.push_back(static_cast<float>(m + 0.1 * std::sqrt(v) * nd(rng)));
    L.var.push_back(static_cast<float>(v * (0.8 + 0.45 * ud(rng))));
    L.gamma.push_back(static_cast<float>(0.5 + ud(rng)));
    L.beta.push_back(static_cast<float>(0.3 * nd(rng)));
  }
  return L;
}

// 1/sqrt(v) to 12 significant bits, as a hardware estimate without a Newton step.
template <class T>
T rsqrt_estimate(T v) {
  int e = 0;
  const double m = std::frexp(1.0 / std::sqrt(static_cast<double>(v)), &e);
  return static_cast<T>(std::ldexp(std::nearbyint(std::ldexp(m, 12)), e - 12));
}

// The layer compiled in T's arithmetic (its values are float32 values, exact in T).
template <class T>
std::vector<double> compile_and_run(const Layer& L, const std::set<std::string>& on) {
  const bool fast = on.count("FastMath"), simplify = on.count("SimplifyInference"), fold = simplify && on.count("FoldScaleAxis");
  const bool fma = on.count("FuseOps");
  auto rsqrt = [&](T v) { return fast ? rsqrt_estimate(v) : T(1) / std::sqrt(v); };
  const int C = L.C, H = L.H;
  std::vector<double> y(static_cast<std::size_t>(C * H * H));
  std::vector<T> terms;
  for (int o = 0; o < C; ++o) {
    // FoldConstant computes a and the shift once; without it they are computed at run time,
    // by the same float operations (so the same values).
    const T var = L.var[o], eps = L.eps, gamma = L.gamma[o], beta = L.beta[o], mean = L.mean[o];
    const T a = rsqrt(var + eps) * gamma;
    const T shift = beta - mean * a;
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < H; ++q) {
        terms.clear();
        std::vector<std::pair<T, T>> xw;
        for (int c = 0; c < C; ++c)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
              if (const int i = x_at(L, c, h + kh - 1, q + kw - 1); i >= 0) {
                const T wv = L.w[((o * C + c) * 3 + kh) * 3 + kw];
                xw.emplace_back(T(L.x[i]), fold ? wv * a : wv);
              }
        T s = 0;
        if (on.count("Reorder")) {
          for (const auto& [xv, wv] : xw) terms.push_back(xv * wv);
          for (std::size_t step = 1; step < terms.size(); step *= 2)
            for (std::size_t k = 0; k + step < terms.size(); k += 2 * step) terms[k] += terms[k + step];
          s = terms.empty() ? T(0) : terms[0];
        } else {
          const std::size_t lanes = on.count("Vectorize") ? 8 : 1;
          std::vector<T> acc(lanes, T(0));
          for (std::size_t k = 0; k < xw.size(); ++k)
            acc[k % lanes] = fma ? std::fma(xw[k].first, xw[k].second, acc[k % lanes]) : acc[k % lanes] + xw[k].first * xw[k].second;
          for (const T v : acc) s += v;
        }
        T out;
        if (fold) out = s + shift;
        else if (simplify) out = fma ? std::fma(s, a, shift) : s * a + shift;
        else out = (fast ? (s - mean) * rsqrt(var + eps) : (s - mean) / std::sqrt(var + eps)) * gamma + beta;
        y[static_cast<std::size_t>((o * H + h) * H + q)] = out;
      }
  }
  return y;
}

// The exact outputs in long double (float products are exact in double; the sum's and the
// BatchNorm's errors are ~2^-64 relative to sum |x w|, far below float32's ULPs).
std::vector<double> exact(const Layer& L) {
  const int C = L.C, H = L.H;
  std::vector<double> y(static_cast<std::size_t>(C * H * H));
  for (int o = 0; o < C; ++o)
    for (int h = 0; h < H; ++h)
      for (int q = 0; q < H; ++q) {
        long double s = 0;
        for (int c = 0; c < C; ++c)
          for (int kh = 0; kh < 3; ++kh)
            for (int kw = 0; kw < 3; ++kw)
              if (const int i = x_at(L, c, h + kh - 1, q + kw - 1); i >= 0)
                s += static_cast<long double>(static_cast<double>(L.x[i]) * L.w[((o * C + c) * 3 + kh) * 3 + kw]);
        const long double den = std::sqrt(static_cast<long double>(L.var[o]) + static_cast<long double>(L.eps));
        y[static_cast<std::size_t>((o * H + h) * H + q)] =
            static_cast<double>((s - L.mean[o]) / den * L.gamma[o] + static_cast<long double>(L.beta[o]));
      }
  return y;
}

Tensor tensor(const std::vector<std::int64_t>& shape, const std::vector<float>& v, DType dt) {
  return Tensor{shape, std::vector<double>(v.begin(), v.end()), dt};
}

void write_layer(const Layer& L, const std::filesystem::path& dir, DType dt) {
  std::filesystem::create_directories(dir);
  const std::int64_t C = L.C, H = L.H;
  foldcheck::write_npy((dir / "x.npy").string(), tensor({1, C, H, H}, L.x, dt));
  foldcheck::write_npy((dir / "w.npy").string(), tensor({C, C, 3, 3}, L.w, dt));
  foldcheck::write_npz((dir / "bn.npz").string(), {{"gamma", tensor({C}, L.gamma, dt)}, {"beta", tensor({C}, L.beta, dt)},
                                                   {"mean", tensor({C}, L.mean, dt)}, {"var", tensor({C}, L.var, dt)},
                                                   {"eps", tensor({}, {L.eps}, dt)}});
  foldcheck::write_npy((dir / "reference.npy").string(), Tensor{{1, C, H, H}, exact(L), DType::Float64});
  using foldcheck::testing::OnnxBuilder;
  OnnxBuilder b;
  b.input("X", {1, C, H, H});
  b.output("Y", {1, C, H, H});
  auto dbl = [](const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); };
  b.init("W", {C, C, 3, 3}, dbl(L.w), dt);
  b.init("gamma", {C}, dbl(L.gamma), dt);
  b.init("beta", {C}, dbl(L.beta), dt);
  b.init("mean", {C}, dbl(L.mean), dt);
  b.init("var", {C}, dbl(L.var), dt);
  auto& conv = b.node("Conv", "conv", {"X", "W"}, {"c"});
  OnnxBuilder::attr(conv, "pads", std::vector<std::int64_t>{1, 1, 1, 1});
  OnnxBuilder::attr(conv, "kernel_shape", std::vector<std::int64_t>{3, 3});
  auto& bn = b.node("BatchNormalization", "bn", {"c", "gamma", "beta", "mean", "var"}, {"Y"});
  OnnxBuilder::attr(bn, "epsilon", L.eps);
  b.save((dir / "model.onnx").string());
}

}  // namespace

int main(int argc, char** argv) {
  std::string out, layer_dir, enabled_arg, disabled_arg;
  bool have_enabled = false;
  std::uint64_t seed = 1;
  int channels = 16, size = 20;
  DType dt = DType::Float32;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "fake_conv_compiler: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "-o") out = next();
    else if (a == "--write-layer") layer_dir = next();
    else if (a == "--seed") seed = std::stoull(next());
    else if (a == "--channels") channels = std::stoi(next());
    else if (a == "--size") size = std::stoi(next());
    else if (a == "--dtype") dt = foldcheck::dtype_from_name(next());
    else if (a == "--enabled") { enabled_arg = next(); have_enabled = true; }
    else if (a == "--disabled") disabled_arg = next();
    else {
      std::cerr << "fake_conv_compiler: unknown argument " << a << "\n";
      return 2;
    }
  }
  const std::set<std::string> known{"SimplifyInference", "FoldConstant", "FoldScaleAxis", "FuseOps", "Reorder", "Vectorize", "FastMath"};
  std::set<std::string> on;
  const std::vector<std::string> en = foldcheck::split_names(enabled_arg, "enabled passes"),
                                 dis = foldcheck::split_names(disabled_arg, "disabled passes");
  for (const std::string& p : have_enabled ? en : dis)
    if (!known.count(p)) {
      std::cerr << "fake_conv_compiler: unknown pass " << p << "\n";
      return 2;
    }
  if (have_enabled) on.insert(en.begin(), en.end());
  else
    for (const std::string& p : known)
      if (std::find(dis.begin(), dis.end(), p) == dis.end()) on.insert(p);
  const Layer L = make_layer(seed, channels, size);
  if (!layer_dir.empty()) write_layer(L, layer_dir, dt);
  if (!out.empty())
    foldcheck::write_npy(out, Tensor{{1, channels, size, size}, dt == DType::Float64 ? compile_and_run<double>(L, on) : compile_and_run<float>(L, on), dt});
  return 0;
}
