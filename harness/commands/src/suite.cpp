// Suites and shard merging (suite.hpp).
#include "foldcheck/commands/suite.hpp"

#include <chrono>
#include <map>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "foldcheck/base/envelope.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/io/suite_file.hpp"
#include "foldcheck/reports/summary.hpp"
#include "foldcheck/result/judgement.hpp"
#include "foldcheck/result/views/json_io.hpp"
#include "foldcheck/result/views/report.hpp"

namespace foldcheck {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// A case entry's run options: what the suite file set, the rest run's defaults.
RunOptions run_options(const SuiteEntry& se) {
  RunOptions ro;
  if (se.attribution_elements) ro.attribution_elements = *se.attribution_elements;
  ro.attribution = se.attribution;
  return ro;
}

// A model entry's accuracy-diff options: what the suite file set, the rest its defaults.
AccuracyDiffOptions model_options(const SuiteEntry& se) {
  AccuracyDiffOptions ao;
  ao.observed_model = se.observed;
  ao.input = se.input;
  ao.observed_output = se.observed_output;
  if (se.output_samples) ao.output_samples = *se.output_samples;
  if (se.recipe) ao.recipe = *se.recipe;
  if (se.attribution_elements) ao.attribution_elements = *se.attribution_elements;
  ao.attribution = se.attribution;
  ao.weights_only = se.weights_only;
  ao.seed = se.seed;
  return ao;
}

}  // namespace

SuiteRun run_suite(const std::string& suite_path, const SuiteOptions& opts) {
  if (opts.shard_count == 0 || opts.shard_index == 0 || opts.shard_index > opts.shard_count)
    throw InputError(fmt::format(fmt::runtime(field("shard") + " {}/{}: expected I/N with 1 <= I <= N"), opts.shard_index, opts.shard_count));
  const SuitePlan plan = plan_suite(read_json_input(suite_path, "suite"), suite_path);
  const fs::path dir = fs::path(suite_path).parent_path();
  const std::size_t n = plan.entries.size();

  SuiteRun out;
  json entries = json::array();
  for (const SuiteEntry& se : plan.entries) {
    const std::size_t i = se.index;
    if (i % opts.shard_count != opts.shard_index - 1) continue;
    if (opts.progress) opts.progress(fmt::format("suite {}: entry {}/{} ({})", plan.name, i + 1, n, se.name));
    const auto t0 = std::chrono::steady_clock::now();
    json result;
    Verdict verdict = Verdict::Expected;
    if (se.is_case) {
      RunOptions ro = run_options(se);
      ro.ref.precision = opts.precision;
      ro.ref.threads = opts.threads;
      ro.threads = opts.threads;
      const RunResult r = run_case(se.spec, ro);
      verdict = r.verdict();
      result = r.to_json();
    } else {
      AccuracyDiffOptions ao = model_options(se);
      ao.ref.precision = opts.precision;
      ao.ref.threads = opts.threads;
      const AccuracyDiffResult r = accuracy_diff(se.source, ao);
      verdict = r.verdict();
      result = r.to_json();
    }
    out.seconds[se.name] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string file = "results/" + file_stem_for(se.name) + ".json";
    const bool ok = verdict == se.expect;
    (ok ? out.passed : out.failed) += 1;
    out.checks.push_back(judgement::of_expectation(verdict, se.expect));
    const fs::path rel_source = fs::path(se.source).lexically_relative(dir.empty() ? fs::path(".") : dir);
    entries.push_back({{"index", i},
                       {"name", se.name},
                       {"kind", se.is_case ? "case" : "model"},
                       {"source", rel_source.string()},
                       {"expect", name(se.expect)},
                       {"passed", ok},
                       {"result_file", file},
                       {"summary", reports::summarize(result)}});
    out.results[file] = std::move(result);
  }
  out.report = result_envelope("suite");
  out.report.update(json{{"suite",
                 {{"name", plan.name},
                  {"description", plan.description},
                  {"path", suite_path},
                  {"entries_in_suite", n},
                  {"shards", json::array({opts.shard_index})},
                  {"shard_count", opts.shard_count}}},
                {"entries", entries},
                {"counts", {{"passed", out.passed}, {"failed", out.failed}}},
                {"verdict", name(out.verdict())}});
  return out;
}

Verdict SuiteRun::verdict() const {
  judgement::Tally t;
  for (const Verdict v : checks) t.add(v);
  return t.verdict();
}

namespace {
// A shard number or count as a report holds it: an integer from 1 to kMaxShards (the range
// --shard accepts). Read as a signed integer, so "-4294967294" is refused rather than
// wrapped into an unsigned shard 2.
std::int64_t shard_number(const json& v, const std::string& what) {
  const std::int64_t k = v.is_number_integer() ? v.get<std::int64_t>() : 0;
  if (k < 1 || k > std::int64_t{kMaxShards})
    throw InputError(fmt::format("merge: {} {} is not an integer from 1 to {}", what, v.dump(), kMaxShards));
  return k;
}
}  // namespace

namespace {

// An entry's "passed" is derived: its verdict is the one expected. A report where it is not
// was edited by hand; merging it would count a failure as a pass (or the reverse) and render
// a table that contradicts itself, so it is refused.
void check_passed(const json& e) {
  const json& s = e.value("summary", json::object());
  const json verdict = s.is_object() ? s.value("verdict", json()) : json();
  const bool passed = e.value("passed", false);
  if (!verdict.is_string() || !e.value("expect", json()).is_string() || passed != (verdict == e["expect"]))
    throw InputError(fmt::format("merge: entry index {} says passed {} but its verdict {} against the expected {} says {}",
                                 e["index"].dump(), passed, verdict.dump(), e.value("expect", json()).dump(),
                                 verdict.is_string() && verdict == e.value("expect", json())));
}

}  // namespace

json merge_reports(const std::vector<json>& reports) {
  if (reports.empty()) throw InputError("merge: no reports given");
  const json& first = reports[0];
  std::set<std::int64_t> shards;
  std::map<std::int64_t, json> by_index;
  for (const json& r : reports) {
    if (r.value("command", "") != "suite") throw InputError("merge: every input must be a suite report (report.json)");
    if (r["suite"]["name"] != first["suite"]["name"] || r["suite"]["shard_count"] != first["suite"]["shard_count"] ||
        r.value("schema_version", 0) != first.value("schema_version", 0) ||
        r["suite"]["entries_in_suite"] != first["suite"]["entries_in_suite"])
      throw InputError(fmt::format("merge: {} and {} are not shards of one suite (name, shard count, entry count and schema "
                                   "version must agree)",
                                   r["suite"]["name"].dump(), first["suite"]["name"].dump()));
    const std::int64_t count = shard_number(r["suite"]["shard_count"], "shard count");
    for (const json& s : r["suite"]["shards"]) {
      const std::int64_t k = shard_number(s, "shard");
      if (k > count) throw InputError(fmt::format("merge: shard {} is past the shard count {}", k, count));
      if (!shards.insert(k).second) throw InputError(fmt::format("merge: shard {} given twice", k));
    }
    const std::int64_t total = result::views::count_as(r["suite"].at("entries_in_suite"), "entries_in_suite");
    for (const json& e : r["entries"]) {
      // Each entry belongs to one shard: an index twice, or past the suite, is not a shard's.
      const std::int64_t i = e["index"].get<std::int64_t>();
      if (i < 0 || i >= total) throw InputError(fmt::format("merge: entry index {} is outside the suite's {} entries", i, total));
      if (!by_index.emplace(i, e).second) throw InputError(fmt::format("merge: entry index {} appears in two shards", i));
      check_passed(e);
    }
  }
  const std::int64_t count = shard_number(first["suite"]["shard_count"], "shard count");
  for (std::int64_t s = 1; s <= count; ++s)
    if (!shards.count(s)) throw InputError(fmt::format("merge: shard {}/{} is missing", s, count));
  // Every shard is here, so every entry of the suite must be: one missing was cut from a
  // report, and a merged report without it would count it neither passed nor failed.
  const std::int64_t total = result::views::count_as(first["suite"].at("entries_in_suite"), "entries_in_suite");
  for (std::int64_t i = 0; i < total; ++i)
    if (!by_index.count(i)) throw InputError(fmt::format("merge: entry index {} of the suite's {} is in no shard", i, total));
  json out = first;
  out.erase("timing");
  // Every shard is here: the result is the report of the whole suite, as one run writes it.
  out["suite"]["shards"] = json::array({1});
  out["suite"]["shard_count"] = 1;
  json entries = json::array();
  std::int64_t passed = 0, failed = 0;
  judgement::Tally checks;  // as run_suite judges them (SuiteRun::verdict)
  for (auto& [i, e] : by_index) {
    (e["passed"].get<bool>() ? passed : failed) += 1;
    const result::views::ReportEntry entry = result::views::ReportEntry::from_json(e);  // check_passed read it
    checks.add(judgement::of_expectation(entry.summary.verdict, entry.expect));
    entries.push_back(std::move(e));
  }
  out["entries"] = entries;
  out["counts"] = {{"passed", passed}, {"failed", failed}};
  out["verdict"] = name(checks.verdict());
  return out;
}

}  // namespace foldcheck
