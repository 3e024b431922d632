// `foldcheck suite SUITE.json -o DIR`: a suite of cases and models, and its report
// directory (harness suite.hpp; reports suite_reports.hpp).
#include <cstdio>
#include <fmt/format.h>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/suite.hpp"
#include "report_dir.hpp"

namespace foldcheck::cli {
namespace {

class SuiteCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("suite",
                              "Run a suite of cases and models (SUITE.json) and write report.json, report.md, report.html, "
                              "junit.xml and every full result (results/) into a directory.");
    cmd_->add_option("suite", suite_file_, "Suite file (JSON); see cases/README.md")->required();
    cmd_->add_option("-o,--out", out_dir_, "Directory for the reports (created)")->required()->check(kReportDirectory);
    cmd_->add_option("--shard", shard_, "Run shard I of N (entries i with i mod N = I - 1); join with `foldcheck merge`")
        ->check(CLI::Validator(shard_problem, "I/N"))
        ->capture_default_str();
    cmd_->add_option("--precision", out_.precision, "Starting working precision of the reference, in bits")
        ->check(integer_in(options::kPrecision))
        ->capture_default_str();
    cmd_->add_option("--threads", out_.threads, "Threads (0: all cores); results are identical for any count")
        ->check(integer_in(options::kThreads));
    cmd_->add_flag("-q,--quiet", out_.quiet, "No progress messages on stderr");
    cmd_->add_flag("--no-timing", out_.no_timing, "No timing block in report.json (same bytes on every run)");
  }

  int run() override {
    SuiteOptions so;
    if (std::sscanf(shard_.c_str(), "%u/%u", &so.shard_index, &so.shard_count) != 2)
      throw InputError("--shard " + shard_ + ": expected I/N, e.g. 2/4");
    so.threads = out_.threads;
    so.precision = out_.precision;
    so.progress = progress_printer(out_);
    SuiteRun r = run_suite(suite_file_, so);
    if (!out_.no_timing) r.report["timing"] = {{"entries", r.seconds}};
    const int code = exit_code(r.verdict());
    // The report directory, then one line of counts on stdout.
    return finish(out_, std::move(r.report), code,
                  Ending{.text = [&](const json& report) { return counts_line(report, out_dir_); },
                         .files = [&](const json& report) { write_report_dir(out_dir_, report, r.results); }},
                  static_cast<bool>(so.progress));
  }

 private:
  // "" for I/N with 1 <= I <= N <= kMaxShards, else the reason.
  static std::string shard_problem(std::string& v) {
    const auto slash = v.find('/');
    std::string i = v.substr(0, slash), n = slash == std::string::npos ? "" : v.substr(slash + 1);
    if (slash == std::string::npos || !integer_in(1, kMaxShards)(i).empty() || !integer_in(1, kMaxShards)(n).empty() ||
        std::stoul(i) > std::stoul(n))
      return fmt::format("expected I/N with 1 <= I <= N <= {}, got '{}'", kMaxShards, v);
    return "";
  }

  OutputOptions out_;
  std::string suite_file_, out_dir_, shard_ = "1/1";
};

}  // namespace

std::unique_ptr<Command> suite_command() { return std::make_unique<SuiteCommand>(); }

}  // namespace foldcheck::cli
