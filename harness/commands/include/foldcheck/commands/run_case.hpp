#pragma once
// `foldcheck run CASE.json`: evaluate a conv+BN case along every requested path
// (unfused; fused with each recipe) x dtype x accumulation order, score each against the
// certified reference with its deterministic bound, score every recipe's folded weights
// and biases against the exact fold, and compare fused with unfused per element.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/io/case_file.hpp"

namespace foldcheck {

struct RunOptions {
  ref::Options ref;
  unsigned threads = 0;
  double confidence = 0.999;  // of the probabilistic bound, over all outputs of a path
  bool attribution = true;    // stage attribution of every path (attribution.hpp)
  std::size_t attribution_elements = 1024;  // outputs attributed per path (0: all)
  std::function<void(const std::string&)> progress;  // status lines for long runs (may be empty)
};

// InputError naming the case when a run of it would need more than 3/4 of this machine's
// memory (check_fits_in_memory); run_case checks it first.
void check_case_fits(const CaseSpec& spec);
nlohmann::json run_case(const CaseSpec& spec, const RunOptions& opts);

}  // namespace foldcheck
