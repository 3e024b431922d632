#pragma once
// Suite files: a list of cases (`run`) and models (`accuracy-diff`) run as one report
// (commands/suite.hpp runs them). Format (paths relative to the suite file):
//
//   {"name": "nightly", "description": "...",
//    "entries": [
//      {"case": "tvm_thread.json"},
//      {"case": "engine_variants.json", "name": "variants_fast_rsqrt",
//       "override": {"compare": {"variants": [{"rsqrt": "fast", "newton_steps": 0}]}},
//       "attribution_elements": 256},
//      {"model": "models/fixture/model.onnx", "observed": "models/fixture/folded.onnx",
//       "input": "models/fixture/x.npy", "observed_output": "models/fixture/y_folded.npy",
//       "output_samples": 8, "recipe": "pytorch", "name": "small_cnn"},
//      {"model": "...", "observed": "models/fixture/corrupt.onnx", "expect": "UNEXPECTED"}]}
//
// Case entries take "attribution_elements" (as `run`: 0 means all) and "no_attribution";
// model entries take accuracy-diff's options by their long names.
// "override" is a JSON merge patch (RFC 7386) applied to the case file before it is read.
// "expect" (default EXPECTED) is the verdict the entry must give to pass: a suite can keep
// known bugs that foldcheck must go on catching. Entry names (default: the case's name, the
// model file's stem) are unique. Unknown keys are errors (InputError naming the entry).
//
// Contract: plan_suite reads the whole file and every case file it names, so a bad entry
// fails every shard the same way; what an entry leaves out stays unset here, and the
// command that runs it (run, accuracy-diff) supplies its own default.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/io/case_file.hpp"
#include "foldcheck/numerics/compare.hpp"
#include "foldcheck/numerics/recipes.hpp"

namespace foldcheck {

// One entry read and checked: named, its case file read (with the override applied) and
// loaded, its settings parsed (absent: none).
struct SuiteEntry {
  std::size_t index = 0;
  std::string name, where, source;     // where: "SUITE: entries[i]"; source: the case file or model
  Verdict expect = Verdict::Expected;  // the verdict the entry must give to pass
  bool is_case = true;
  CaseSpec spec;                                    // case entries, with the entry's "seed"
  std::optional<std::size_t> attribution_elements;  // both kinds (0: all)
  bool attribution = true;                          // both kinds: false for "no_attribution"
  // Model entries: accuracy-diff's settings (paths resolved against the suite's folder).
  std::optional<std::string> observed, input, observed_output;
  std::optional<std::size_t> output_samples;  // 2 to 4096
  std::optional<Recipe> recipe;
  bool weights_only = false;
  std::uint64_t seed = 0;
};
struct SuitePlan {
  std::string path, name, description;
  std::vector<SuiteEntry> entries;
};
// `suite` is the parsed file; `suite_path` names it in messages and anchors relative paths.
SuitePlan plan_suite(const nlohmann::json& suite, const std::string& suite_path);

// "a/b c" -> "a_b_c": a name usable as a file name (letters, digits, '-', '.', '_'), at
// most kMaxStem bytes (longer names: a prefix and a hash of the whole name). Not
// injective ('x/y' and 'x_y' give one stem): plan_suite refuses a suite whose entries
// collide.
inline constexpr std::size_t kMaxStem = 120;
std::string file_stem_for(const std::string& name);

// Whether `f` is a result file name a suite writes ("results/STEM.json", STEM as
// file_stem_for makes it): merge reads and writes only such names, so a report cannot
// direct a write outside the output directory ("../x", "/etc/x").
bool is_result_file_name(const std::string& f);

}  // namespace foldcheck
