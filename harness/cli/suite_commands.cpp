// `foldcheck suite`, `merge`, `compare` (suite_commands.hpp).
#include "suite_commands.hpp"

#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/input_file.hpp"
#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/io/output_file.hpp"
#include "foldcheck/reports/suite_reports.hpp"
#include "foldcheck/commands/suite.hpp"
#include "foldcheck/base/version.hpp"

namespace foldcheck::cli {

namespace {

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

}  // namespace

namespace fs = std::filesystem;

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
    if (const std::string clash = reports::input_clash(path.string()); !clash.empty()) throw InputError("--out: " + clash);
  check_targets(dir, files);
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "results", ec);
  if (ec) throw InputError(fmt::format("--out: {}: cannot create the report directory ({})", dir, ec.message()));
  for (const auto& [path, content] : files) reports::write_file_atomically(path.string(), content);
}

std::string counts_line(const json& report, const std::string& dir) {
  return fmt::format("suite {}: {} passed, {} failed -> {}/report.json, report.md, report.html, junit.xml; verdict {}\n",
                     text_name(report["suite"]["name"].get<std::string>()), report["counts"]["passed"].get<std::int64_t>(),
                     report["counts"]["failed"].get<std::int64_t>(), dir, report["verdict"].get<std::string>());
}

}  // namespace

void SuiteCommands::add_to(CLI::App& app) {
  suite_ = app.add_subcommand("suite",
                              "Run a suite of cases and models (SUITE.json) and write report.json, report.md, report.html, "
                              "junit.xml and every full result (results/) into a directory.");
  suite_->add_option("suite", suite_file_, "Suite file (JSON); see cases/README.md")->required();
  suite_->add_option("-o,--out", out_dir_, "Directory for the reports (created)")->required()->check(kReportDirectory);
  suite_->add_option("--shard", shard_, "Run shard I of N (entries i with i mod N = I - 1); join with `foldcheck merge`")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            const auto slash = v.find('/');
            std::string i = v.substr(0, slash), n = slash == std::string::npos ? "" : v.substr(slash + 1);
            if (slash == std::string::npos || !integer_in(1, kMaxShards)(i).empty() || !integer_in(1, kMaxShards)(n).empty() ||
                std::stoul(i) > std::stoul(n))
              return fmt::format("expected I/N with 1 <= I <= N <= {}, got '{}'", kMaxShards, v);
            return "";
          },
          "I/N"))
      ->capture_default_str();
  suite_->add_option("--precision", suite_out_.precision, "Starting working precision of the reference, in bits")
      ->check(CLI::Range(64L, 65536L))
      ->capture_default_str();
  suite_->add_option("--threads", suite_out_.threads, "Threads (0: all cores); results are identical for any count")
      ->check(integer_in(0, 1024));
  suite_->add_flag("-q,--quiet", suite_out_.quiet, "No progress messages on stderr");
  suite_->add_flag("--no-timing", suite_out_.no_timing, "No timing block in report.json (same bytes on every run)");

  merge_ = app.add_subcommand("merge", "Join the report.json of every shard of a suite into one report directory.");
  merge_->add_option("reports", merge_inputs_, "The shards' report.json files")->required();
  merge_->add_option("-o,--out", merge_dir_, "Directory for the merged reports (created)")->required()->check(kReportDirectory);

  compare_ = app.add_subcommand("compare",
                                "What changed between a report and a baseline, per case and path or model and layer; exit 1 "
                                "on a regression (a verdict worse, an entry or path missing, more elements beyond their "
                                "bound, or a statistic grown past the tolerance).");
  compare_->add_option("report", current_, "The new report (a suite report.json, or a run / accuracy-diff JSON)")->required();
  compare_->add_option("--baseline", baseline_, "The baseline report (e.g. reports/baselines/nightly.json)")->required();
  compare_->add_option("--tolerance", tolerance_, "Relative growth allowed for |ULP| percentiles, ppm and bound ratios")
      ->check(finite_number(0, false))
      ->capture_default_str();
  compare_->add_option("--ulp-floor", ulp_floor_, "Growth in ULP always allowed (added to the tolerance)")
      ->check(finite_number(0, false))
      ->capture_default_str();
  compare_->add_option("--ppm-floor", ppm_floor_, "Growth in ppm always allowed")->check(finite_number(0, false))->capture_default_str();
  compare_->add_option("--ratio-floor", ratio_floor_, "Growth of bound ratios always allowed")
      ->check(finite_number(0, false))
      ->capture_default_str();
  add_output_options(compare_, compare_out_, {"text", "json", "markdown"});
}

std::optional<int> SuiteCommands::run() {
  if (*suite_) {
    SuiteOptions so;
    if (std::sscanf(shard_.c_str(), "%u/%u", &so.shard_index, &so.shard_count) != 2)
      throw InputError("--shard " + shard_ + ": expected I/N, e.g. 2/4");
    so.threads = suite_out_.threads;
    so.precision = suite_out_.precision;
    so.progress = progress_printer(suite_out_);
    SuiteRun r = run_suite(suite_file_, so);
    if (so.progress) std::cerr << "\r\033[K";
    if (!suite_out_.no_timing) r.report["timing"] = {{"entries", r.seconds}};
    stamp(r.report, suite_out_);
    write_report_dir(out_dir_, r.report, r.results);
    std::cout << terminal_safe(counts_line(r.report, out_dir_));
    return exit_code(r.report);
  }
  if (*merge_) return as_report_error(fmt::format("merge {}", fmt::join(merge_inputs_, ", ")), [&] { return merge(); });
  if (*compare_) return as_report_error(fmt::format("compare {} --baseline {}", current_, baseline_), [&] { return compare(); });
  return std::nullopt;
}

int SuiteCommands::merge() {
  std::vector<json> parts;
  std::map<std::string, json> results;
  for (const std::string& p : merge_inputs_) {
    parts.push_back(read_report(p, "report"));
    const fs::path dir = fs::path(p).parent_path();
    for (const json& e : parts.back().value("entries", json::array())) {
      if (!e.is_object() || !e.contains("result_file")) continue;
      const std::string file = e["result_file"].is_string() ? e["result_file"].get<std::string>() : e["result_file"].dump();
      // A report names where its results lie: only results/STEM.json, inside the shard's
      // directory when read and inside -o when written.
      if (!is_result_file_name(file))
        throw InputError(fmt::format("{}: result_file '{}' is not a result file name (results/NAME.json)", p, file));
      // A named result that is not there was lost between the shard and the merge: the merged
      // report would name a file it does not have.
      if (!fs::exists(dir / file))
        throw InputError(fmt::format("{}: result_file '{}' is missing from {}", p, file, (dir / file).string()));
      // Read only from inside the shard's directory: results/ or the file may be links.
      std::error_code ec;
      const fs::path real = fs::canonical(dir / file, ec), base = fs::canonical(dir.empty() ? fs::path(".") : dir, ec);
      const auto rel = real.lexically_relative(base);
      if (ec || rel.empty() || *rel.begin() == "..")
        throw InputError(fmt::format("{}: result_file '{}' leads outside the report's directory (a link)", p, file));
      json r = read_json_input((dir / file).string(), "result");
      if (!results.emplace(file, std::move(r)).second)
        throw InputError(fmt::format("{}: result_file '{}' is named by two entries", p, file));
    }
  }
  json merged = merge_reports(parts);
  json times = json::object();  // the shards' per-entry seconds, when they kept them
  for (const json& p : parts)
    if (p.contains("timing") && p["timing"].is_object()) times.update(p["timing"].value("entries", json::object()));
  if (!times.empty()) merged["timing"] = {{"entries", times}};
  write_report_dir(merge_dir_, merged, results);
  std::cout << terminal_safe(counts_line(merged, merge_dir_));
  return exit_code(merged);
}

int SuiteCommands::compare() {
  {
    reports::CompareOptions co;
    co.tolerance = tolerance_;
    co.ulp_floor = ulp_floor_;
    co.ppm_floor = ppm_floor_;
    co.ratio_floor = ratio_floor_;
    json d = reports::compare_reports(read_report(current_, "report"), read_report(baseline_, "baseline"), co);
    d["tool"] = "foldcheck";
    d["version"] = kVersion;
    d["schema_version"] = kSchemaVersion;
    d["report"] = current_;
    d["baseline"] = baseline_;
    const std::string& f = compare_out_.format;
    emit(compare_out_, f == "json" ? json_text(d, 2) : f == "markdown" ? reports::compare_markdown(d) : reports::compare_text(d));
    return exit_code(d);
  }
}

}  // namespace foldcheck::cli
