// Suite files read into entries (suite_file.hpp).
#include "foldcheck/io/suite_file.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/input_file.hpp"

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
  if (!e[key].is_number_unsigned())
    throw InputError(fmt::format("{}: '{}' must be a non-negative integer", where, key));
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
      f.compare(f.size() - suffix.size(), suffix.size(), suffix) != 0 ||
      f.size() > prefix.size() + kMaxStem + suffix.size())
    return false;
  const std::string stem = f.substr(prefix.size(), f.size() - prefix.size() - suffix.size());
  return std::all_of(stem.begin(), stem.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == '_';
  });
}

namespace {

// A model entry's accuracy-diff settings (paths resolved against the suite's folder).
template <class Resolve>
void model_entry(const json& e, const Resolve& resolve, SuiteEntry& se) {
  const std::string& where = se.where;
  se.source = resolve(str(e, "model", where));
  se.name = e.contains("name") ? str(e, "name", where) : fs::path(se.source).stem().string();
  if (e.contains("observed")) se.observed = resolve(str(e, "observed", where));
  if (e.contains("input")) se.input = resolve(str(e, "input", where));
  if (e.contains("observed_output")) se.observed_output = resolve(str(e, "observed_output", where));
  if (e.contains("output_samples")) {
    se.output_samples = count(e, "output_samples", 0, where);
    if (*se.output_samples < 2 || *se.output_samples > 4096)  // as --output-samples
      throw InputError(fmt::format("{}: 'output_samples' must be from 2 to 4096 (got {})", where, *se.output_samples));
  }
  if (e.contains("recipe")) se.recipe = recipe_from_name(str(e, "recipe", where));
  if (e.contains("attribution_elements"))
    se.attribution_elements = count(e, "attribution_elements", 0, where);  // 0: all
  se.attribution = !e.value("no_attribution", false);
  se.weights_only = e.value("weights_only", false);
  se.seed = count(e, "seed", 0, where);
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
      check_keys(e, where,
                 {"model", "name", "observed", "input", "observed_output", "output_samples", "recipe",
                  "attribution_elements", "no_attribution", "weights_only", "seed", "expect"});
    const std::optional<Verdict> expect = verdict_named(e.contains("expect") ? str(e, "expect", where) : "EXPECTED");
    if (!expect) throw InputError(where + ": 'expect' must be EXPECTED, UNEXPECTED, SUSPICIOUS or MISTRUSTED");
    se.expect = *expect;
    for (const char* flag : {"no_attribution", "weights_only"})
      if (e.contains(flag) && !e[flag].is_boolean())
        throw InputError(fmt::format("{}: '{}' must be true or false", where, flag));
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
      if (e.contains("attribution_elements"))
        se.attribution_elements = count(e, "attribution_elements", 0, where);  // 0: all
      se.attribution = !e.value("no_attribution", false);
    } else {
      model_entry(e, resolve, se);
    }
    if (!names.insert(se.name).second)
      throw InputError(fmt::format("{}: entry name '{}' is used twice", where, se.name));
    // Distinct names can map to one file name ('x/y' and 'x_y'): one result would be lost.
    const auto [at, fresh] = stems.emplace(file_stem_for(se.name), se.name);
    if (!fresh)
      throw InputError(
          fmt::format("{}: entry name '{}' and entry name '{}' both give the result file results/{}.json "
                      "(rename one)",
                      where, se.name, at->second, at->first));
    plan.entries.push_back(std::move(se));
  }
  return plan;
}

}  // namespace foldcheck
