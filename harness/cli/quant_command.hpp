#pragma once
// `foldcheck quant-check`: dumped integer weights against the exact fold, quantized
// (harness quant_check.hpp); or, with --write-int, the integers a fold gives.
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

#include "common.hpp"

namespace foldcheck::cli {

class QuantCommand {
 public:
  void add_to(CLI::App& app);
  std::optional<int> run();  // the exit code when `quant-check` was given

 private:
  CLI::App* cmd_ = nullptr;
  OutputOptions out_;
  std::string case_, weights_, bn_, ints_, scales_, rounding_ = "half_even", write_int_, write_scales_, fold_ = "exact";
  int bits_ = 8;
  bool per_channel_ = false, free_scales_ = false;
};

}  // namespace foldcheck::cli
