#pragma once
// `foldcheck suite SUITE.json`: a list of cases (`run`) and models (`accuracy-diff`) run as
// one report, optionally one shard of it. Format (paths relative to the suite file):
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
// Sharding: entry i (0-based, in file order) belongs to shard (i mod N) + 1 of N, so shards
// are balanced and `merge` restores the file order from each entry's "index".
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/numerics/compare.hpp"

namespace foldcheck {

// The most shards a suite is split into (--shard I/N, and what merge reads from a report).
inline constexpr unsigned kMaxShards = 1u << 20;

struct SuiteOptions {
  unsigned shard_index = 1, shard_count = 1;  // 1-based, shard_count <= kMaxShards
  unsigned threads = 0;
  long precision = 256;
  std::function<void(const std::string&)> progress;
};

struct SuiteRun {
  std::int64_t passed = 0, failed = 0;  // entries that gave their expected verdict, and entries that did not
  // UNEXPECTED when an entry failed; MISTRUSTED when the shard ran no entry (nothing compared).
  Verdict verdict() const;
  nlohmann::json report;                       // the suite report (summaries, see summary.hpp)
  std::map<std::string, nlohmann::json> results;  // full results by file name (results/NAME.json)
  std::map<std::string, double> seconds;          // per entry name
};

// A suite file read and checked: every entry named, its case file read (with the override
// applied) and loaded, its options parsed. Every shard plans the whole suite, so a bad
// entry fails every shard the same way. InputError naming the entry otherwise.
struct SuiteEntry {
  std::size_t index = 0;
  std::string name, where, source;
  Verdict expect = Verdict::Expected;  // the verdict the entry must give to pass
  bool is_case = true;
  CaseSpec spec;              // case entries
  RunOptions run;             // case entries: attribution settings
  AccuracyDiffOptions model;  // model entries
};
struct SuitePlan {
  std::string path, name, description;
  std::vector<SuiteEntry> entries;
};
SuitePlan plan_suite(const nlohmann::json& suite, const std::string& suite_path);

SuiteRun run_suite(const std::string& suite_path, const SuiteOptions& opts);

// Joins shard reports of one suite (same name, shard count and schema version; every shard
// once) into the report of the whole suite — the same bytes one unsharded run writes (with
// --no-timing). Throws InputError otherwise.
nlohmann::json merge_reports(const std::vector<nlohmann::json>& reports);

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
