// `foldcheck run CASE.json`: a conv+BN case along every path, dtype, recipe and order
// (harness run_case.hpp; reports run_text and the suite renderers).
#include <fmt/format.h>
#include <iostream>
#include <optional>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/reports/neutralise.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {
namespace {

class RunCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("run", "Evaluate a conv+BN case file along every path, dtype, recipe and accumulation "
                                     "order against the certified reference, with bounds, histograms and verdicts.");
    cmd_->add_option("case", case_path_, "Case file (JSON); see cases/README.md")->required();
    cmd_->add_flag("--all-histograms", all_hist_, "Print every path's histograms: error / bound and ULP (text format; by default the headline paths' error / bound)");
    cmd_->add_option("--seed", seed_, "Override the case's seed (every output prints the seed used)")
        ->check(integer_in(options::kSeed));
    cmd_->add_flag("--no-attribution", no_attr_, "Skip the stage attribution (faster)");
    cmd_->add_option("--attribution-elements", attr_elements_,
                     "Outputs attributed per path: an even sample plus each path's worst element (0: all)")
        ->check(integer_in(options::kAttributionElements))
        ->capture_default_str();
    cmd_->add_option("--arithmetic", arithmetic_,
                     "Evaluate every variant's conv with its operands converted to this format first, as tensor "
                     "cores do: float32 (as the case says), tf32, bf16 or fp16 (sums in the dtype's arithmetic; the "
                     "bounds add the conversions' part)")
        ->check(CLI::IsMember({"float32", "tf32", "bf16", "fp16"}));
    cmd_->add_option("--conversion", conversion_,
                     "With --arithmetic: how operands are converted, nearest-even, nearest-away or truncate (default: "
                     "the arithmetic's most common: TF32 nearest-away, bf16 and fp16 nearest-even)");
    cmd_->add_option("--algorithm", algorithm_,
                     "Replace the case's accumulation orders: direct (as the case says), split-k:S (partial sums of "
                     "ceil(k/S) products added at the end: at most S), winograd2 (Winograd F(2x2,3x3))");
    add_output_options(cmd_, out_, {"text", "json", "markdown", "html"});
  }

  int run() override {
    CaseSpec spec = load_case(case_path_);
    if (seed_) spec.seed = *seed_;
    apply_arithmetic(spec, arithmetic_, conversion_);
    if (!algorithm_.empty()) apply_algorithm(spec, conv_algorithm_from_name(algorithm_));
    RunOptions ro;
    ro.attribution = !no_attr_;
    ro.attribution_elements = attr_elements_;
    ro.ref.precision = out_.precision;
    ro.ref.threads = out_.threads;
    ro.threads = out_.threads;
    ro.progress = progress_printer(out_);
    check_case_fits(spec);  // before the case line: a refusal is one line
    if (!out_.quiet)
      std::cerr << fmt::format("foldcheck: case {} (seed {})\n", reports::neutralised(spec.name), spec.seed);
    const RunResult result = run_case(spec, ro);
    return finish(
        out_, result.to_json(), result.verdict(), [&](const json& j) { return reports::run_text(j, {all_hist_}); },
        static_cast<bool>(ro.progress));
  }

 private:
  OutputOptions out_;
  std::string case_path_, arithmetic_, conversion_, algorithm_;
  bool all_hist_ = false, no_attr_ = false;
  std::optional<std::uint64_t> seed_;
  std::size_t attr_elements_ = 1024;
};

}  // namespace

std::unique_ptr<Command> run_command() { return std::make_unique<RunCommand>(); }

}  // namespace foldcheck::cli
