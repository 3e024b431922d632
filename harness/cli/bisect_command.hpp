#pragma once
// `foldcheck bisect`: the first compiler pass that takes a drift past what rounding
// explains — through foldcheck's pass pipeline on a case file, or through an external
// command's outputs (harness bisect.hpp).
#include <CLI/CLI.hpp>
#include <optional>
#include <functional>
#include <string>
#include <vector>

#include "common.hpp"
#include "foldcheck/model/known_computation.hpp"

namespace foldcheck::cli {

class BisectCommand {
 public:
  void add_to(CLI::App& app);
  std::optional<int> run();  // the exit code when `bisect` was given

 private:
  nlohmann::json run_external(const std::vector<std::string>& passes, const std::function<void(const std::string&)>& progress);
  // --input, --weights, --bias, --bn, geometry
  KnownComputation load_layer(const std::function<void(const std::string&)>& progress) const;

 private:
  CLI::App* cmd_ = nullptr;
  OutputOptions out_;
  std::string target_, passes_, disabled_, external_, reference_, model_, input_, dtype_, weights_, bias_, bn_;
  std::int64_t stride_ = 1, dilation_ = 1;
  std::optional<std::int64_t> padding_;
  std::optional<int> opt_level_;
  std::optional<double> threshold_ulp_;
  double timeout_ = 600;
  std::uint64_t seed_ = 0;
  bool linear_ = false, leave_one_out_ = false;
};

}  // namespace foldcheck::cli
