// `foldcheck merge SHARD/report.json ... -o DIR`: the shards of a suite joined into one
// report directory (harness suite.hpp merge_reports).
#include <filesystem>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/suite.hpp"
#include "foldcheck/io/input_file.hpp"
#include "report_dir.hpp"

namespace foldcheck::cli {
namespace {

namespace fs = std::filesystem;

class MergeCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("merge", "Join the report.json of every shard of a suite into one report directory.");
    cmd_->add_option("reports", inputs_, "The shards' report.json files")->required();
    cmd_->add_option("-o,--out", dir_, "Directory for the merged reports (created)")->required()->check(kReportDirectory);
    // The grammar every command shares: -q and --no-timing (merge reports no progress).
    cmd_->add_flag("-q,--quiet", out_.quiet, "No progress messages on stderr (merge writes none)");
    cmd_->add_flag("--no-timing", out_.no_timing,
                   "Leave the shards' timing out of report.json (same bytes on every run)");
  }

  int run() override {
    return as_report_error(fmt::format("merge {}", fmt::join(inputs_, ", ")), [&] { return merge(); });
  }

 private:
  int merge() {
    std::vector<json> parts;
    std::map<std::string, json> results;
    for (const std::string& p : inputs_) {
      parts.push_back(read_report(p, "report"));
      for (const json& e : parts.back().value("entries", json::array())) read_result(p, e, results);
    }
    json merged = merge_reports(parts);
    json times = json::object();  // the shards' per-entry seconds, when they kept them
    for (const json& p : parts)
      if (p.contains("timing") && p["timing"].is_object()) times.update(p["timing"].value("entries", json::object()));
    if (!times.empty() && !out_.no_timing) merged["timing"] = {{"entries", times}};
    const int code = exit_code_of_report(merged);
    // Not stamped: the merged report keeps the shards' per-entry seconds. The report directory, then
    // one line of counts on stdout.
    return finish(out_, std::move(merged), code,
                  Ending{.text = [&](const json& report) { return counts_line(report, dir_); },
                         .files = [&](const json& report) { write_report_dir(dir_, report, results); },
                         .stamped = false},
                  false);
  }

  // The result file entry `e` of report `p` names, read from inside the shard's directory.
  static void read_result(const std::string& p, const json& e, std::map<std::string, json>& results) {
    if (!e.is_object() || !e.contains("result_file")) return;
    const fs::path dir = fs::path(p).parent_path();
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
    check_counts(r, (dir / file).string());
    if (!results.emplace(file, std::move(r)).second)
      throw InputError(fmt::format("{}: result_file '{}' is named by two entries", p, file));
  }

  OutputOptions out_;  // text to stdout; -q and --no-timing
  std::vector<std::string> inputs_;
  std::string dir_;
};

}  // namespace

std::unique_ptr<Command> merge_command() { return std::make_unique<MergeCommand>(); }

}  // namespace foldcheck::cli
