#pragma once
// `foldcheck run CASE.json`: evaluate a conv+BN case along every requested path
// (unfused; fused with each recipe) x dtype x accumulation order, score each against the
// certified reference with its deterministic bound, score every recipe's folded weights
// and biases against the exact fold, and compare fused with unfused per element.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/io/case_file.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/reference/conv_bn_reference.hpp"

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

// How the certified reference got its values, summed over every dtype
// (conv_bn_reference.hpp LayerResult).
struct ReferenceCounts {
  std::int64_t escalations = 0, fast_certified = 0, compensated = 0, fallbacks = 0;
  long max_precision = 0;
  void add(const ref::LayerResult& r);
};

// One dtype's run: its verdict (the worst of its paths, folded weights and biases) and
// what the result lists for it (paths, bounds, histograms, attribution).
struct RunDtype {
  DType dtype = DType::Float32;
  Verdict verdict = Verdict::Expected;
  nlohmann::json detail;
};

// The case's observed engine weights explained against its BatchNorm (explain.hpp), each
// element labelled by its OIHW index. Anything but EXPECTED there is UNEXPECTED for the run:
// a weight no recipe reproduces is a wrong fold, and weights that test nothing are not a pass.
struct ObservedWeights {
  Verdict explained = Verdict::Expected;  // explain's own verdict
  nlohmann::json detail;                  // explain's result, elements labelled
  Verdict verdict() const { return explained == Verdict::Expected ? Verdict::Expected : Verdict::Unexpected; }
};

// The result of `run`: the case, its reference, each dtype and the observed weights.
struct RunResult {
  std::string case_name, case_path, description;
  std::uint64_t seed = 0;
  ref::ConvGeometry geometry;
  bool conv_bias = false;
  double eps = 0;
  BnForm bn_form = BnForm::Textbook;
  ReferenceCounts reference;
  long precision = 0;  // of the reference's multiprecision path
  std::vector<RunDtype> dtypes;
  std::optional<ObservedWeights> observed;
  Verdict verdict() const;        // the worst of every dtype and the observed weights
  nlohmann::json to_json() const;  // the `run` result (schema "run")
};

RunResult run_case(const CaseSpec& spec, const RunOptions& opts);

}  // namespace foldcheck
