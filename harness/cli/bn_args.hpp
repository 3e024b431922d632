#pragma once
// BatchNorm parameters from the command line: an .npz (--bn) and per-parameter flags, with
// a fresh BatchNorm's defaults; shared by the commands that take a layer's BatchNorm.
#include <cstdint>
#include <string>

#include "foldcheck/reference/layer.hpp"

namespace foldcheck::cli {

struct ExplainArgs {
  std::string original, observed, gamma, beta, mean, var, bn_file, dtype;
  double eps = 1e-5;
  bool eps_given = false;
};

// eps_in_file (if given) tells whether the .npz held an eps.
// max_values: no parameter array may hold more (one per channel; channels <= the weights).
foldcheck::ref::BnParams load_bn(const ExplainArgs& a, bool& given, std::string& source, std::int64_t max_values,
                          bool* eps_in_file = nullptr);

}  // namespace foldcheck::cli
