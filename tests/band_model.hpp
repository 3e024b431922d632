#pragma once
// The model of the output band's tests (test_output_band.cpp, test_bisect_band.cpp): every op
// family the reverse pass takes, on a seeded input, with float32 and float64 runs of it.
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"

namespace foldcheck_band_test {

using namespace foldcheck;

inline std::vector<double> random_values(std::size_t n, double scale, std::mt19937_64& rng, double offset = 0) {
  std::normal_distribution<double> nd;
  std::vector<double> v(n);
  for (double& x : v) x = static_cast<float>(offset + scale * nd(rng));
  return v;
}

// X[1,4,10,10] -> a (8x4x3x3, pad 1) + bn -> Clip(0, 6) -> b (8x4x3x3, pad 1, group 2) + bn
// -> Add(clip) -> Relu -> Mul(k[1,8,1,1]) -> MaxPool 3/2/1 -> [1,8,5,5] -> AveragePool 2/1 ->
// [1,8,4,4] -> Concat(itself via c: depthwise 8x1x3x3 stride 1 pad 1, bias, unpaired) ->
// [1,16,4,4] -> d (16x16x1x1, stride 2) + bn -> [1,16,2,2] -> Concat(Flatten(GlobalAveragePool),
// Flatten) -> [1,80] -> Gemm fc (48x80): 48 outputs for 43 directions, none through a bottleneck.
Model band_model(const std::filesystem::path& dir);

// The model written to a directory of this process (test binaries run side by side).
struct Fixture {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("foldcheck_output_band_" + std::to_string(getpid()));
  Model m;
  BnPatterns pairs;
  Tensor x;
  Fixture() {
    std::filesystem::create_directories(dir);
    m = band_model(dir);
    pairs = find_bn_pairs(m);
    std::mt19937_64 rng(3);
    x = Tensor{{1, 4, 10, 10}, random_values(400, 1.0, rng), DType::Float32};
  }
  ~Fixture() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;
  Tensor run(const Model& mm, DType dt) const {
    ModelRunOptions o;
    o.dtype = dt;
    return run_model(mm, find_bn_pairs(mm), {{"X", x}}, o).at("Y");
  }
};

}  // namespace foldcheck_band_test
