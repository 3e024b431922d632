// make_onnx_fixture DIR: writes the accuracy-diff fixture models (tests/onnx_builder.hpp)
// into DIR: model.onnx (with BatchNorms), folded.onnx (folded by the PyTorch recipe),
// corrupt.onnx (the same, output channel 3 of conv_b scaled by 1 + 60e-6).
#include <filesystem>
#include <iostream>

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
  std::cout << "model.onnx, folded.onnx, corrupt.onnx in " << d.string() << "\n";
  return 0;
}
