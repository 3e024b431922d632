#pragma once
// Building ONNX models in tests through the protobuf API (no PyTorch needed), and the
// layer -> BatchNorm fixture model used by the accuracy-diff tests and make_onnx_fixture.
#include <cstdint>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace foldcheck::testing {

enum class Encoding { Raw, Typed, External };

struct OnnxBuilder {
  onnx::ModelProto model;
  std::string external_file;   // set when an initializer uses Encoding::External
  std::string external_bytes;  // saved as "<model stem>.data" beside the model

  explicit OnnxBuilder(std::int64_t opset = 13);
  void input(const std::string& name, const std::vector<std::int64_t>& shape);
  void output(const std::string& name, const std::vector<std::int64_t>& shape);
  void init(const std::string& name, const std::vector<std::int64_t>& shape, const std::vector<double>& values,
            DType dt = DType::Float32, Encoding enc = Encoding::Raw);
  void init_int64(const std::string& name, const std::vector<std::int64_t>& values);
  onnx::NodeProto& node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs);
  static void attr(onnx::NodeProto& n, const std::string& key, std::int64_t v);
  static void attr(onnx::NodeProto& n, const std::string& key, float v);
  static void attr(onnx::NodeProto& n, const std::string& key, const std::vector<std::int64_t>& v);
  static void attr(onnx::NodeProto& n, const std::string& key, const std::string& v);
  void save(const std::string& path) const;  // and the external data file, if any
};

// The fixture: X[1,4,6,6] -> Conv conv_a (8x4x3x3, bias) -> Identity -> BatchNormalization
// bn_a -> Relu -> Conv conv_b (6x8x1x1) -> bn_b -> Relu -> bn_c (unpaired: after a Relu)
// -> Flatten -> Gemm fc (5x216, transB) -> bn_fc -> Y[1,5]. Seeded random parameters.
// folded: the same model with every pair folded by `recipe` (BNs removed; Identity kept),
// (recipes that leave TVM's separate shift for a layer with a bias throw std::invalid_argument),
// one output channel of `corrupt_layer` ("" for none) scaled by (1 + corrupt_rel).
struct FixtureOptions {
  bool folded = false;
  Recipe recipe = Recipe::PyTorch;
  std::string corrupt_layer;
  std::int64_t corrupt_channel = 0;
  double corrupt_rel = 0;
};
OnnxBuilder bn_fixture(const FixtureOptions& opts, std::uint64_t seed = 7);

}  // namespace foldcheck::testing
