// Each recipe reproduces a hand-written operation sequence bit for bit (the sequence as
// written in each engine's source; see recipes.hpp), in float32 and float64.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "foldcheck/layer/fold_pass.hpp"

using namespace foldcheck;

namespace {
struct Bn1 {
  float gamma, beta, mean, var, b;
};

template <class T>
void hand(Recipe r, const Bn1& p, double eps, T w, bool has_bias, T& w_out, T& b_out, T& post) {
  const T g = p.gamma, be = p.beta, m = p.mean, v = p.var, b = has_bias ? T(p.b) : T(0);
  const T e32 = static_cast<T>(static_cast<float>(eps));
  post = 0;
  switch (r) {
    case Recipe::PyTorch: {
      const T e = static_cast<T>(eps);
      const T rs = T(1) / std::sqrt(v + e);
      w_out = w * (g * rs);
      b_out = ((b - m) * rs) * g + be;
      break;
    }
    case Recipe::Tvm: {
      const T s = (T(1) / std::sqrt(v + e32)) * g;
      w_out = w * s;
      const T shift = (-m) * s + be;
      if (has_bias) {
        b_out = b * s;
        post = shift;
      } else {
        b_out = shift;
      }
      break;
    }
    case Recipe::OnnxRuntime: {
      const T s = g / std::sqrt(v + e32);
      w_out = w * s;
      b_out = has_bias ? ((b - m) * s) + be : be - m * s;
      break;
    }
    case Recipe::OnnxOptimizer: {
      const T s = g / std::sqrt(v + e32);
      w_out = w * s;
      b_out = ((b - m) * s) + be;
      break;
    }
    default: break;
  }
}

template <class T>
void check_all(DType dt) {
  std::mt19937_64 rng(99);
  std::normal_distribution<float> nd;
  std::uniform_real_distribution<float> uv(1e-7f, 3.0f);
  for (Recipe r : {Recipe::PyTorch, Recipe::Tvm, Recipe::OnnxRuntime, Recipe::OnnxOptimizer})
    for (bool has_bias : {false, true})
      for (int trial = 0; trial < 300; ++trial) {
        const Bn1 p{nd(rng), nd(rng), nd(rng), uv(rng), nd(rng)};
        const double eps = trial % 2 ? 1e-5 : 1e-3;
        std::vector<double> w(6);
        for (auto& x : w) x = nd(rng);
        ref::BnParams bn{{p.gamma}, {p.beta}, {p.mean}, {p.var}, eps};
        std::vector<double> cb;
        if (has_bias) cb = {p.b};
        const FoldedParams fp = fold_parameters(w, 6, cb, bn, dt, r, ref::Options{});
        for (std::size_t i = 0; i < w.size(); ++i) {
          T wo{}, bo{}, post{};
          hand<T>(r, p, eps, static_cast<T>(w[i]), has_bias, wo, bo, post);
          REQUIRE(fp.weight[i] == static_cast<double>(wo));
          REQUIRE(fp.bias[0] == static_cast<double>(bo));
          if (r == Recipe::Tvm && has_bias) REQUIRE(fp.post_add.at(0) == static_cast<double>(post));
        }
      }
}
}  // namespace

TEST_CASE("recipes are bit-exact against hand-written float32 sequences", "[recipes]") { check_all<float>(DType::Float32); }
TEST_CASE("recipes are bit-exact against hand-written float64 sequences", "[recipes]") { check_all<double>(DType::Float64); }

TEST_CASE("the exact recipe is the correctly rounded exact fold", "[recipes]") {
  ref::BnParams bn{{0.7}, {0.1}, {0.3}, {0.002}, 1e-5};
  std::vector<double> w{0.25, -1.5, 3.0};
  for (auto& x : w) x = static_cast<float>(x);
  for (auto& v : {&bn.gamma, &bn.beta, &bn.mean, &bn.var}) (*v)[0] = static_cast<float>((*v)[0]);
  const FoldedParams fp = fold_parameters(w, 3, {}, bn, DType::Float32, Recipe::Exact, ref::Options{});
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(fp.weight[i] == ref::fold_weight(w[i], bn.gamma[0], bn.var[0], bn.eps, {}).rounded_to(ref::kFloat32));
}

TEST_CASE("bfloat16 and float16 folds compute in float32 and round once to storage", "[recipes]") {
  ref::BnParams bn{{1.0}, {0.0}, {0.0}, {1.0}, 1e-5};
  const FoldedParams a = fold_parameters({1.5}, 1, {}, bn, DType::BFloat16, Recipe::PyTorch, {});
  const float r = 1.0f / std::sqrt(1.0f + static_cast<float>(1e-5));
  CHECK(a.weight[0] == round_to(DType::BFloat16, 1.5f * (1.0f * r)));
  CHECK(a.weight[0] == 1.5);  // -5 ppm is far below half a bfloat16 ULP
}
