// Suites and shard merging (suite.hpp).
#include "foldcheck/commands/suite.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <map>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/reports/summary.hpp"
#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/base/envelope.hpp"

namespace foldcheck {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

void check_keys(const json& e, const std::string& where, std::initializer_list<const char*> allowed) {
  for (const auto& [k, v] : e.items()) {
    bool ok = false;
    for (const char* a : allowed) ok = ok || k == a;
    if (!ok) throw InputError(fmt::format("{}: unknown key '{}'", where, k));
  }
}

std::string str(const json& e, const char* key, const std::string& where) {
  if (!e[key].is_string()) throw InputError(fmt::format("{}: '{}' must be a string", where, key));
  return e[key].get<std::string>();
}

std::size_t count(const json& e, const char* key, std::size_t fallback, const std::string& where) {
  if (!e.contains(key)) return fallback;
  if (!e[key].is_number_unsigned()) throw InputError(fmt::format("{}: '{}' must be a non-negative integer", where, key));
  return e[key].get<std::size_t>();
}

}  // namespace

std::string file_stem_for(const std::string& name) {
  std::string s;
  for (const char c : name) s += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  if (s.empty()) return "entry";
  // Long names keep a readable prefix and a hash of the whole name, so that the result file
  // name stays far below NAME_MAX (255 bytes) and long names that share a prefix differ.
  if (s.size() > kMaxStem) {
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a, 64 bits
    for (const unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    s = fmt::format("{}-{:016x}", s.substr(0, kMaxStem - 17), h);
  }
  return s;
}

bool is_result_file_name(const std::string& f) {
  const std::string prefix = "results/", suffix = ".json";
  if (f.size() <= prefix.size() + suffix.size() || f.compare(0, prefix.size(), prefix) != 0 ||
      f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0 || f.size() > prefix.size() + kMaxStem + suffix.size())
    return false;
  const std::string stem = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
  return std::all_of(stem.begin(), stem.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

namespace {

// A model entry's accuracy-diff options (paths resolved against the suite's folder).
template <class Resolve>
void model_entry(const json& e, const Resolve& resolve, SuiteEntry& se) {
  const std::string& where = se.where;
  se.source = resolve(str(e, "model", where));
  se.name = e.contains("name") ? str(e, "name", where) : fs::path(se.source).stem().string();
  AccuracyDiffOptions& ao = se.model;
  if (e.contains("observed")) ao.observed_model = resolve(str(e, "observed", where));
  if (e.contains("input")) ao.input = resolve(str(e, "input", where));
  if (e.contains("observed_output")) ao.observed_output = resolve(str(e, "observed_output", where));
  ao.output_samples = count(e, "output_samples", ao.output_samples, where);
  if (ao.output_samples < 2 || ao.output_samples > 4096)  // as --output-samples
    throw InputError(fmt::format("{}: 'output_samples' must be from 2 to 4096 (got {})", where, ao.output_samples));
  if (e.contains("recipe")) ao.recipe = recipe_from_name(str(e, "recipe", where));
  ao.attribution_elements = count(e, "attribution_elements", ao.attribution_elements, where);  // 0: all
  ao.attribution = !e.value("no_attribution", false);
  ao.weights_only = e.value("weights_only", false);
  ao.seed = count(e, "seed", 0, where);
}

}  // namespace

SuitePlan plan_suite(const json& suite, const std::string& suite_path) {
  if (!suite.is_object()) throw InputError(suite_path + ": a suite must be a JSON object");
  check_keys(suite, suite_path, {"name", "description", "entries"});
  if (!suite.contains("entries") || !suite["entries"].is_array() || suite["entries"].empty())
    throw InputError(suite_path + ": 'entries' must be a non-empty array");
  if (suite.contains("name") && !suite["name"].is_string()) throw InputError(suite_path + ": 'name' must be a string");
  if (suite.contains("description") && !suite["description"].is_string())
    throw InputError(suite_path + ": 'description' must be a string");
  const fs::path dir = fs::path(suite_path).parent_path();
  auto resolve = [&](const std::string& p) { return (dir / p).lexically_normal().string(); };
  SuitePlan plan;
  plan.path = suite_path;
  plan.name = suite.value("name", fs::path(suite_path).stem().string());
  plan.description = suite.value("description", "");
  std::set<std::string> names;
  std::map<std::string, std::string> stems;  // result file stem -> the entry name that has it
  const std::size_t n = suite["entries"].size();
  for (std::size_t i = 0; i < n; ++i) {
    const json& e = suite["entries"][i];
    SuiteEntry se;
    se.index = i;
    se.where = fmt::format("{}: entries[{}]", suite_path, i);
    const std::string& where = se.where;
    if (!e.is_object()) throw InputError(where + ": must be an object");
    const bool is_case = e.contains("case"), is_model = e.contains("model");
    if (is_case == is_model) throw InputError(where + ": needs exactly one of 'case' and 'model'");
    se.is_case = is_case;
    if (is_case)
      check_keys(e, where, {"case", "name", "override", "expect", "attribution_elements", "no_attribution", "seed"});
    else
      check_keys(e, where, {"model", "name", "observed", "input", "observed_output", "output_samples", "recipe",
                            "attribution_elements", "no_attribution", "weights_only", "seed", "expect"});
    const std::optional<Verdict> expect = verdict_named(e.contains("expect") ? str(e, "expect", where) : "EXPECTED");
    if (!expect) throw InputError(where + ": 'expect' must be EXPECTED, UNEXPECTED, SUSPICIOUS or MISTRUSTED");
    se.expect = *expect;
    for (const char* flag : {"no_attribution", "weights_only"})
      if (e.contains(flag) && !e[flag].is_boolean()) throw InputError(fmt::format("{}: '{}' must be true or false", where, flag));
    // Parse and name every entry (all shards validate the whole suite the same way).
    if (is_case) {
      se.source = resolve(str(e, "case", where));
      json case_json = read_json_input(se.source, "case file");
      if (e.contains("override")) {
        if (!e["override"].is_object()) throw InputError(where + ": 'override' must be an object (a JSON merge patch)");
        case_json.merge_patch(e["override"]);
      }
      se.name = e.contains("name") ? str(e, "name", where)
                : case_json.is_object() && case_json.contains("name") && case_json["name"].is_string()
                    ? case_json["name"].get<std::string>()
                    : fs::path(se.source).stem().string();
      se.spec = load_case(case_json, se.source);
      se.spec.name = se.name;
      if (e.contains("seed")) se.spec.seed = count(e, "seed", 0, where);
      se.run.attribution_elements = count(e, "attribution_elements", se.run.attribution_elements, where);  // 0: all
      se.run.attribution = !e.value("no_attribution", false);
    } else {
      model_entry(e, resolve, se);
    }
    if (!names.insert(se.name).second) throw InputError(fmt::format("{}: entry name '{}' is used twice", where, se.name));
    // Distinct names can map to one file name ('x/y' and 'x_y'): one result would be lost.
    const auto [at, fresh] = stems.emplace(file_stem_for(se.name), se.name);
    if (!fresh)
      throw InputError(fmt::format("{}: entry name '{}' and entry name '{}' both give the result file results/{}.json "
                                   "(rename one)",
                                   where, se.name, at->second, at->first));
    plan.entries.push_back(std::move(se));
  }
  return plan;
}

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
      RunOptions ro = se.run;
      ro.ref.precision = opts.precision;
      ro.ref.threads = opts.threads;
      ro.threads = opts.threads;
      const RunResult r = run_case(se.spec, ro);
      verdict = r.verdict();
      result = r.to_json();
    } else {
      AccuracyDiffOptions ao = se.model;
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
  return failed ? Verdict::Unexpected : passed == 0 ? Verdict::Mistrusted : Verdict::Expected;
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
    const std::int64_t total = r["suite"]["entries_in_suite"].get<std::int64_t>();
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
  const std::int64_t total = first["suite"]["entries_in_suite"].get<std::int64_t>();
  for (std::int64_t i = 0; i < total; ++i)
    if (!by_index.count(i)) throw InputError(fmt::format("merge: entry index {} of the suite's {} is in no shard", i, total));
  json out = first;
  out.erase("timing");
  // Every shard is here: the result is the report of the whole suite, as one run writes it.
  out["suite"]["shards"] = json::array({1});
  out["suite"]["shard_count"] = 1;
  json entries = json::array();
  std::int64_t passed = 0, failed = 0;
  for (auto& [i, e] : by_index) {
    (e["passed"].get<bool>() ? passed : failed) += 1;
    entries.push_back(std::move(e));
  }
  out["entries"] = entries;
  out["counts"] = {{"passed", passed}, {"failed", failed}};
  out["verdict"] = failed ? "UNEXPECTED" : entries.empty() ? "MISTRUSTED" : "EXPECTED";
  return out;
}

}  // namespace foldcheck
