// make_onnx_fixture DIR: writes the accuracy-diff fixture models (tests/onnx_builder.hpp)
// into DIR: model.onnx (with BatchNorms), folded.onnx (folded by the PyTorch recipe),
// corrupt.onnx (the same, output channel 3 of conv_b scaled by 1 + 60e-6), x.npy (a seeded
// input), and outputs on x of a float32 engine (foldcheck's run in pairwise order):
// y_folded.npy of folded.onnx, y_corrupt.npy of folded.onnx with channel 2 of conv_b 1% off.
#include <filesystem>
#include <iostream>

#include <random>

#include "foldcheck/model/model_run.hpp"
#include "foldcheck/io/npy.hpp"
#include "onnx_builder.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_onnx_fixture DIR\n";
    return 2;
  }
  namespace fs = std::filesystem;
  using namespace foldcheck::testing;
  const fs::path d = argv[1];
  fs::create_directories(d);
  bn_fixture({}).save((d / "model.onnx").string());
  FixtureOptions f;
  f.folded = true;
  bn_fixture(f).save((d / "folded.onnx").string());
  f.corrupt_layer = "conv_b";
  f.corrupt_channel = 3;
  f.corrupt_rel = 60e-6;
  bn_fixture(f).save((d / "corrupt.onnx").string());
  using foldcheck::Tensor;
  std::mt19937_64 rng(4);
  std::normal_distribution<double> nd;
  Tensor x{{1, 4, 6, 6}, std::vector<double>(144), foldcheck::DType::Float32};
  for (double& v : x.data) v = static_cast<float>(nd(rng));
  foldcheck::write_npy((d / "x.npy").string(), x);
  auto engine_output = [&](const FixtureOptions& fo, const std::string& file) {
    bn_fixture(fo).save((d / "engine.onnx").string());
    const foldcheck::Model m = foldcheck::Model::load((d / "engine.onnx").string());
    foldcheck::ModelRunOptions ro;
    ro.policy.order.kind = foldcheck::Accumulation::Pairwise;
    Tensor y = foldcheck::run_model(m, foldcheck::find_bn_pairs(m), {{"X", x}}, ro).at("Y");
    y.dtype = foldcheck::DType::Float32;
    foldcheck::write_npy((d / file).string(), y);
  };
  FixtureOptions e;
  e.folded = true;
  engine_output(e, "y_folded.npy");
  e.corrupt_layer = "conv_b";
  e.corrupt_channel = 2;
  e.corrupt_rel = 1e-2;
  engine_output(e, "y_corrupt.npy");
  fs::remove(d / "engine.onnx");
  fs::remove(d / "engine.data");
  std::cout << "model.onnx, folded.onnx, corrupt.onnx, x.npy, y_folded.npy, y_corrupt.npy in " << d.string() << "\n";
  return 0;
}
