#pragma once
// `foldcheck suite`, `merge` and `compare`: suites of cases and models, shard reports
// joined, and a report checked against a baseline (harness suite.hpp; reports
// compare_reports.hpp, suite_reports.hpp).
#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"

namespace foldcheck::cli {

class SuiteCommands {
 public:
  void add_to(CLI::App& app);
  // The exit code when one of these subcommands was given; nullopt otherwise.
  std::optional<int> run();

 private:
  int merge();
  int compare();
  CLI::App *suite_ = nullptr, *merge_ = nullptr, *compare_ = nullptr;
  OutputOptions suite_out_, merge_out_, compare_out_;
  std::string suite_file_, out_dir_, shard_ = "1/1", merge_dir_, current_, baseline_;
  std::vector<std::string> merge_inputs_;
  double tolerance_ = 0.10, ulp_floor_ = 0.5, ppm_floor_ = 0.5, ratio_floor_ = 0.01;
};

}  // namespace foldcheck::cli
