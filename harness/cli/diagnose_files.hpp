#pragma once
// A layer for diagnose's judgement read from the command line's files (diagnose and bisect's
// layer form): the input, the conv's weights and bias, the BatchNorm (optional: none is a
// plain conv), the arithmetic and algorithm by name. Every file is checked as diagnose
// checks it (non-empty, finite); throws InputError naming the file and the problem.
#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "foldcheck/commands/diagnose.hpp"

namespace foldcheck::cli {

struct DiagnoseFiles {
  std::string input, weights, bias, bn;  // empty: not given
  std::string arithmetic = "float32", algorithm = "direct";
  std::int64_t stride = 1, dilation = 1;
  std::optional<std::int64_t> padding;
};

// Everything but the observed output (the caller's: a file, or each run's).
DiagnoseInput load_diagnose_input(const DiagnoseFiles& f);

// --arithmetic and --algorithm, one text for every command that takes them (the names are
// checked when the command runs: conv_arithmetic_from_name, conv_algorithm_from_name).
void add_arithmetic_options(CLI::App* cmd, DiagnoseFiles& f);

}  // namespace foldcheck::cli
