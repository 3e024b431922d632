#pragma once
// Case files: a conv+BN layer (shapes; seeded distributions, literal values or .npy files
// for input, weights and BatchNorm statistics) and what to compare. See cases/README.md
// for the format.
//
// Contract: load_case validates everything it reads (unknown keys are errors, shapes
// must agree, variances non-negative, var + eps > 0, no NaN/Inf in parameters) and
// throws InputError naming the file and the field. materialize() draws every tensor in
// the given dtype from a std::mt19937_64 stream seeded by (case seed, tensor name), so
// values are identical on every run and thread count, and each tensor's stream is
// independent of the others.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/layer/evaluate.hpp"
#include "foldcheck/layer/graph.hpp"
#include "foldcheck/numerics/quantize.hpp"

namespace foldcheck {

struct TensorSpec {
  nlohmann::json init;          // {"normal":{mean,std}} | {"uniform":{low,high}} | {"const":v} | {"values":[...]} | {"npy":path}
  std::vector<double> prefix;   // leading values that override drawn ones
};

struct CaseSpec {
  std::string path, name, description;
  std::uint64_t seed = 0;
  ref::ConvGeometry geometry;
  bool conv_bias = false;
  TensorSpec input, weights, bias, gamma, beta, mean, var;
  double eps = 1e-5;
  std::vector<DType> dtypes{DType::Float32};
  std::vector<Recipe> recipes;
  std::vector<Order> accumulations{Order()};
  std::vector<Arithmetic> variants{Arithmetic()};  // arithmetic variants engines use
  BnForm bn_form = BnForm::Textbook;
  std::optional<std::vector<double>> observed_weights_prefix;  // e.g. values printed by an engine
  std::string observed_note;
  std::optional<QuantSpec> quantize;  // "quantize": how `quant-check --case` quantizes the folded layer
};

CaseSpec load_case(const std::string& path);
// The same from a case already parsed; `path` names it in messages and anchors relative
// .npy paths (suites apply their overrides this way).
CaseSpec load_case(const nlohmann::json& j, const std::string& path);

struct CaseData {
  Graph graph;               // Conv -> BatchNorm in dtype
  std::vector<double> input; // in dtype
};
CaseData materialize(const CaseSpec& spec, DType dtype);

}  // namespace foldcheck
