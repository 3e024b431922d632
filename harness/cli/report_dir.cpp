// Report directories and reports read back (report_dir.hpp).
#include "report_dir.hpp"

#include <filesystem>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/version.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/io/output_file.hpp"
#include "foldcheck/reports/neutralise.hpp"
#include "foldcheck/reports/suite_reports.hpp"

namespace foldcheck::cli {

namespace fs = std::filesystem;

namespace {

// The keys whose integers are counts or indices in foldcheck's results (schema foldcheck.schema.json).
// Not here: the integers a quantized check compares (found, expected, recipe), worst_index (-1:
// none), statistics (min, median, max) and seeds.
// One block of names, not one name a line:
// clang-format off
const std::set<std::string> kCountKeys = {
    "attributed_elements", "beyond", "beyond_bound", "beyond_combined_bound", "beyond_estimate",
    "beyond_probabilistic", "bits", "changed", "changes", "channel", "channels", "count", "dilation", "elements",
    "elements_beyond_bound", "elements_differing", "elements_total", "entries_in_suite", "escalations", "evaluations",
    "exact_matches", "expected_flips", "failed", "fast_path_certified", "fast_path_compensated", "fast_path_fallbacks",
    "flat_index", "flip_count", "fused_vs_reference", "fused_vs_unfused", "gross", "groups", "index", "inf",
    "inf_mismatch", "inf_missed", "input_shape", "kernel", "layers", "layers_changed", "matches", "matching",
    "max_precision_used", "mismatches", "nan", "nan_match", "near_tie", "negative", "nodes",
    "nonfinite", "observed_vs_reference", "opset", "out_channels", "output_channels", "outputs", "overflow_finite",
    "overflow_match", "pairs", "pairs_found", "passed", "positive", "ppm_undefined", "precision_bits",
    "reference_compensated", "reference_escalations", "reference_fallbacks", "reference_fast_certified",
    "reference_nan", "regressions", "replay_mismatches", "rows", "samples", "shape", "shard_count", "shards",
    "signed_zero", "stride", "subnormal_reference", "terms_per_output", "tested", "unexpected",
    "unfused_vs_reference", "values_per_channel", "weight_index", "weight_shape", "worst_channel", "zero"};
// clang-format on

// j, found under `key` (an array's items are under their array's key), at JSON pointer `at`.
void check_counts_in(const json& j, const std::string& key, const std::string& at, const std::string& path) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) check_counts_in(v, k, at + "/" + k, path);
  } else if (j.is_array()) {
    for (std::size_t i = 0; i < j.size(); ++i) check_counts_in(j[i], key, at + "/" + std::to_string(i), path);
  } else if (j.is_number() && kCountKeys.contains(key) &&
             !(j.is_number_unsigned() || (j.is_number_integer() && j.get<std::int64_t>() >= 0))) {
    throw InputError(
        fmt::format("{}: {}: a count or an index must be a non-negative integer, got {}", path, at, j.dump()));
  }
}

}  // namespace

void check_counts(const json& report, const std::string& path) { check_counts_in(report, "", "", path); }

// A report for compare and merge: a foldcheck JSON report of this schema version and a
// command whose results compare (suite, run, accuracy-diff), or InputError naming the file.
json read_report(const std::string& path, const std::string& what) {
  json r = read_json_input(path, what);
  if (!r.is_object() || r.value("tool", json()) != "foldcheck")
    throw InputError(fmt::format("{}: not a foldcheck report (no \"tool\": \"foldcheck\")", path));
  if (r.value("schema_version", json()) != kSchemaVersion)
    throw InputError(fmt::format("{}: report schema version {}, this foldcheck reads version {}", path,
                                 r.value("schema_version", json()).dump(), kSchemaVersion));
  const json cmd = r.value("command", json());
  if (cmd != "suite" && cmd != "run" && cmd != "accuracy-diff")
    throw InputError(fmt::format("{}: a {} report; compare and merge take suite, run and accuracy-diff reports", path,
                                 cmd.dump()));
  check_counts(r, path);
  return r;
}

// Runs `job` on reports read from users' files. Their structure is checked where it is
// read (read_report, result_file names); a report that passes those checks but still lacks
// a value, or holds one of the wrong type or length, surfaces as a JSON or range error deep
// in the merge or a renderer: it is bad input, named by the command's files, not a bare
// "[json.exception...]" or "vector::_M_range_check".
int as_report_error(const std::string& files, const std::function<int()>& job) {
  try {
    return job();
  } catch (const InputError&) {
    throw;
  } catch (const nlohmann::json::exception& e) {
    throw InputError(fmt::format("{}: a report is not well-formed ({})", files, json_error_reason(e)));
  } catch (const std::out_of_range&) {
    throw InputError(fmt::format("{}: a report is not well-formed (a value is missing, or lists of different lengths)", files));
  }
}

namespace {

// What is already at each target of a report directory, checked before anything is
// written: DIR/results and every file must be absent or a real directory / regular file.
// A link planted in DIR (results -> ../elsewhere, report.json -> a file outside) would
// make the writes land outside DIR, and a directory at junit.xml would fail the last write
// after the others had replaced the previous reports: both refuse the directory untouched.
void check_targets(const std::string& dir, const std::vector<std::pair<fs::path, std::string>>& files) {
  std::error_code ec;
  const fs::path results = fs::path(dir) / "results";
  const fs::file_status rs = fs::symlink_status(results, ec);
  if (fs::exists(rs) && !fs::is_directory(rs))
    throw InputError(fmt::format("--out: {}: {} (refused: results are written only into a real directory inside {})",
                                 results.string(), fs::is_symlink(rs) ? "is a link" : "is not a directory", dir));
  for (const auto& [path, content] : files) {
    const fs::file_status st = fs::symlink_status(path, ec);
    if (!fs::exists(st) || fs::is_regular_file(st)) continue;
    throw InputError(fmt::format("--out: {}: {} (refused before writing anything: a report replaces only a regular file)",
                                 path.string(), fs::is_symlink(st) ? "is a link" : fs::is_directory(st) ? "is a directory"
                                                                                                        : "is not a regular file"));
  }
}

}  // namespace

// DIR/report.json, report.md, report.html, junit.xml (and the full results, if given). Every
// file is rendered and every target checked before the first is written: a target that is
// one of the run's inputs (a case file kept in DIR) refuses the whole directory, untouched.
void write_report_dir(const std::string& dir, const json& report, const std::map<std::string, json>& results) {
  std::vector<std::pair<fs::path, std::string>> files;
  for (const auto& [file, r] : results) files.emplace_back(fs::path(dir) / file, json_text(r, 1) + "\n");
  files.emplace_back(fs::path(dir) / "report.json", json_text(report, 1) + "\n");
  files.emplace_back(fs::path(dir) / "report.md", reports::report_markdown(report));
  files.emplace_back(fs::path(dir) / "report.html", reports::report_html(report));
  files.emplace_back(fs::path(dir) / "junit.xml", reports::report_junit(report));
  for (const auto& [path, content] : files)
    if (const std::string clash = input_clash(path.string()); !clash.empty()) throw InputError("--out: " + clash);
  check_targets(dir, files);
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "results", ec);
  if (ec) throw InputError(fmt::format("--out: {}: cannot create the report directory ({})", dir, ec.message()));
  for (const auto& [path, content] : files) write_file_atomically(path.string(), content);
}

std::string counts_line(const json& report, const std::string& dir) {
  return fmt::format(
      "suite {}: {} passed, {} failed -> {}/report.json, report.md, report.html, junit.xml; verdict {}\n",
      reports::neutralised(report["suite"]["name"].get<std::string>()), report["counts"]["passed"].get<std::int64_t>(),
      report["counts"]["failed"].get<std::int64_t>(), dir, report["verdict"].get<std::string>());
}

}  // namespace foldcheck::cli
