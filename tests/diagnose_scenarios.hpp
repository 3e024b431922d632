#pragma once
// The seed scenario of the PyTorch forum report, rebuilt without PyTorch: x is
// 1 x 3 x 224 x 224 standard normal (float32); the BatchNorm is fresh (1, 0, 0, 1, 1e-5)
// or has trained running statistics; "observed" outputs are computed in float32 the way
// PyTorch's CPU kernels do (statistics accumulated in double, then
// y = x * a + (beta - mean * a) with a = invstd * gamma in float).
#include <cmath>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "foldcheck/io/npy.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

namespace scenarios {

struct BnScenario {
  foldcheck::Tensor x;
  foldcheck::ref::BnParams bn;
};

inline BnScenario make_bn_scenario(bool trained, std::int64_t H = 224, std::uint64_t seed = 7) {
  BnScenario s;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const std::int64_t C = 3;
  s.x.dtype = foldcheck::DType::Float32;
  s.x.shape = {1, C, H, H};
  s.x.data.resize(static_cast<std::size_t>(C * H * H));
  for (double& v : s.x.data) v = static_cast<float>(normal(rng));
  s.bn.eps = 1e-5;
  for (std::int64_t c = 0; c < C; ++c) {
    if (trained) {
      std::uniform_real_distribution<double> g(0.5, 1.5), v(0.5, 2.0);
      s.bn.gamma.push_back(static_cast<float>(g(rng)));
      s.bn.beta.push_back(static_cast<float>(0.2 * normal(rng)));
      s.bn.mean.push_back(static_cast<float>(0.1 * normal(rng)));
      s.bn.var.push_back(static_cast<float>(v(rng)));
    } else {
      s.bn.gamma.push_back(1);
      s.bn.beta.push_back(0);
      s.bn.mean.push_back(0);
      s.bn.var.push_back(1);
    }
  }
  return s;
}

// A float32 BatchNorm output: eval mode (running statistics, eps_used) or training mode
// (batch statistics with the biased variance, as PyTorch normalises in training).
inline foldcheck::Tensor bn_output(const BnScenario& s, bool training, double eps_used) {
  const std::size_t C = s.bn.gamma.size(), plane = s.x.data.size() / C;
  foldcheck::Tensor y = s.x;
  for (std::size_t c = 0; c < C; ++c) {
    double mean = s.bn.mean[c], var = s.bn.var[c];
    if (training) {
      double sum = 0, sq = 0;
      for (std::size_t i = 0; i < plane; ++i) sum += s.x.data[c * plane + i];
      mean = sum / static_cast<double>(plane);
      for (std::size_t i = 0; i < plane; ++i) sq += (s.x.data[c * plane + i] - mean) * (s.x.data[c * plane + i] - mean);
      var = sq / static_cast<double>(plane);
    }
    const float invstd = static_cast<float>(1.0 / std::sqrt(var + eps_used));
    const float a = invstd * static_cast<float>(s.bn.gamma[c]);
    const float b = static_cast<float>(s.bn.beta[c]) - static_cast<float>(mean) * a;
    for (std::size_t i = 0; i < plane; ++i) y.data[c * plane + i] = static_cast<float>(s.x.data[c * plane + i]) * a + b;
  }
  return y;
}

inline void write_bn_npz(const std::string& path, const foldcheck::ref::BnParams& bn) {
  auto vec = [](const std::vector<double>& v) {
    foldcheck::Tensor t;
    t.dtype = foldcheck::DType::Float32;
    t.shape = {static_cast<std::int64_t>(v.size())};
    t.data = v;
    return t;
  };
  foldcheck::Tensor eps;
  eps.dtype = foldcheck::DType::Float64;
  eps.shape = {};
  eps.data = {bn.eps};
  foldcheck::write_npz(path, {{"gamma", vec(bn.gamma)}, {"beta", vec(bn.beta)}, {"mean", vec(bn.mean)},
                              {"var", vec(bn.var)}, {"eps", eps}});
}

}  // namespace scenarios
