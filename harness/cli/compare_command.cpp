// `foldcheck compare REPORT --baseline BASELINE`: what changed, and whether it regressed
// (reports compare_reports.hpp).
#include <fmt/format.h>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/base/envelope.hpp"
#include "foldcheck/reports/compare_reports.hpp"
#include "report_dir.hpp"

namespace foldcheck::cli {
namespace {

class CompareCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("compare",
                              "What changed between a report and a baseline, per case and path or model and layer; exit 1 "
                              "on a regression (a verdict worse, an entry or path missing, more elements beyond their "
                              "bound, or a statistic grown past the tolerance).");
    cmd_->add_option("report", current_, "The new report (a suite report.json, or a run / accuracy-diff JSON)")->required();
    cmd_->add_option("--baseline", baseline_, "The baseline report (e.g. reports/baselines/nightly.json)")->required();
    cmd_->add_option("--tolerance", co_.tolerance, "Relative growth allowed for |ULP| percentiles, ppm and bound ratios")
        ->check(finite_number(0, false))
        ->capture_default_str();
    cmd_->add_option("--ulp-floor", co_.ulp_floor, "Growth in ULP always allowed (added to the tolerance)")
        ->check(finite_number(0, false))
        ->capture_default_str();
    cmd_->add_option("--ppm-floor", co_.ppm_floor, "Growth in ppm always allowed")
        ->check(finite_number(0, false))
        ->capture_default_str();
    cmd_->add_option("--ratio-floor", co_.ratio_floor, "Growth of bound ratios always allowed")
        ->check(finite_number(0, false))
        ->capture_default_str();
    add_output_options(cmd_, out_, {"text", "json", "markdown"});
  }

  int run() override {
    return as_report_error(fmt::format("compare {} --baseline {}", current_, baseline_), [&] { return compare(); });
  }

 private:
  int compare() {
    json d = reports::compare_reports(read_report(current_, "report"), read_report(baseline_, "baseline"), co_);
    d.update(result_envelope("compare"));
    d["report"] = current_;
    d["baseline"] = baseline_;
    const int code = exit_code_of_report(d);
    // Not stamped: the comparison of two reports has no timing of its own.
    return finish(out_, std::move(d), code,
                  Ending{.text = reports::compare_text, .markdown = reports::compare_markdown, .stamped = false},
                  false);
  }

  OutputOptions out_;
  std::string current_, baseline_;
  reports::CompareOptions co_;
};

}  // namespace

std::unique_ptr<Command> compare_command() { return std::make_unique<CompareCommand>(); }

}  // namespace foldcheck::cli
