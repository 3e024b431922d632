#pragma once
// `foldcheck suite SUITE.json`: a list of cases (`run`) and models (`accuracy-diff`) run as
// one report, optionally one shard of it. The suite file's format and how it is read and
// checked: io/suite_file.hpp (plan_suite).
//
// Sharding: entry i (0-based, in file order) belongs to shard (i mod N) + 1 of N, so shards
// are balanced and `merge` restores the file order from each entry's "index".
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/io/suite_file.hpp"
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
  std::vector<Verdict> checks;          // each entry's verdict against its expected one (judgement::of_expectation)
  // The Tally of `checks`: UNEXPECTED when an entry contradicted its expectation, MISTRUSTED
  // when one could not be judged (or the shard ran no entry: nothing compared).
  Verdict verdict() const;
  nlohmann::json report;                       // the suite report (summaries, see summary.hpp)
  std::map<std::string, nlohmann::json> results;  // full results by file name (results/NAME.json)
  std::map<std::string, double> seconds;          // per entry name
};

SuiteRun run_suite(const std::string& suite_path, const SuiteOptions& opts);

// Joins shard reports of one suite (same name, shard count and schema version; every shard
// once) into the report of the whole suite — the same bytes one unsharded run writes (with
// --no-timing). Throws InputError otherwise.
nlohmann::json merge_reports(const std::vector<nlohmann::json>& reports);

}  // namespace foldcheck
