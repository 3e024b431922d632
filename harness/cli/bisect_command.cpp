// `foldcheck bisect` (bisect_command.hpp).
#include "bisect_command.hpp"

#include <cmath>
#include <iostream>

#include <fmt/format.h>

#include "foldcheck/bisect.hpp"
#include "foldcheck/case_file.hpp"
#include "foldcheck/errors.hpp"
#include "foldcheck/model.hpp"
#include "foldcheck/model_patterns.hpp"
#include "foldcheck/model_run.hpp"
#include "foldcheck/npy.hpp"
#include "foldcheck/passes.hpp"
#include "foldcheck/number_list.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {

void BisectCommand::add_to(CLI::App& app) {
  std::string names;
  for (const PassInfo& p : all_passes()) names += (names.empty() ? "" : ", ") + p.name;
  cmd_ = app.add_subcommand(
      "bisect",
      "Find the compiler pass that takes a drift past what rounding explains: through foldcheck's pass pipeline on a "
      "case file or an ONNX model's Conv+BN pairs (passes: " + names + "), or through an external command's outputs (--cmd). Exit 1 when a pass is named.");
  cmd_->add_option("target", target_, "Case file (JSON) or ONNX model for the internal pipeline");
  cmd_->add_option("--passes", passes_, "Pass pipeline, comma-separated, in order");
  cmd_->add_option("--opt-level", opt_level_, "Pipeline of every pass up to this TVM opt_level (instead of --passes)")
      ->check(CLI::Range(0, 4));
  cmd_->add_option("--disabled-pass", disabled_, "Passes left out of the --opt-level pipeline, comma-separated");
  cmd_->add_flag("--linear", linear_, "Evaluate every prefix and print the per-pass table");
  cmd_->add_flag("--leave-one-out", leave_one_out_, "The whole pipeline with each pass disabled in turn");
  cmd_->add_option("--threshold-ulp", threshold_ulp_, "Bad when max |ULP| exceeds N (instead of the bound / the default margin)")
      ->check(finite_number(0, false));
  cmd_->add_option("--dtype", dtype_, "Case dtype to evaluate (default: the case's first)")
      ->check(known_name([](const std::string& n) { (void)dtype_from_name(n); }));
  cmd_->add_option("--cmd", external_,
                   "External compiler command (/bin/sh); {enabled}, {disabled} (comma-separated pass names, one quoted "
                   "shell word) and {out} (the .npy it must write) are substituted, in one pass; other {...} is left as "
                   "it is. Pass names must be identifiers (letters, digits, _ . : -)");
  cmd_->add_option("--reference", reference_, "Reference outputs for --cmd (.npy, exact or float64)");
  cmd_->add_option("--model", model_, "With --input: compute the --cmd reference as a float64 run of this ONNX model");
  cmd_->add_option("--input", input_, "Model input (.npy): of the ONNX target, or of --model; default for a target: seeded normal");
  cmd_->add_option("--seed", seed_, "Seed of the default model input")->check(integer_in(0, UINT64_MAX))->capture_default_str();
  cmd_->add_option("--timeout", timeout_, "Seconds per command run")->check(finite_number(0, true))
      ->capture_default_str();
  add_output_options(cmd_, out_);
}

std::optional<int> BisectCommand::run() {
  if (!*cmd_) return std::nullopt;
  if (linear_ && leave_one_out_) throw InputError("bisect: --linear and --leave-one-out exclude each other");
  std::vector<std::string> passes = split_names(passes_);
  if (opt_level_) {
    if (!passes.empty()) throw InputError("bisect: give --passes or --opt-level, not both");
    passes = pipeline_for(*opt_level_, split_names(disabled_));
  }
  const auto progress = progress_printer(out_);
  json r;
  if (!external_.empty()) {
    check_pass_names(passes);  // before anything runs: the names are pasted into a shell command
    if (!target_.empty()) throw InputError("bisect: --cmd bisects an external command; leave out the case file");
    if (leave_one_out_) throw InputError("bisect: --leave-one-out is for the internal pipeline");
    ExternalBisectOptions eo;
    eo.command = external_;
    eo.passes = passes;
    eo.threshold_ulp = threshold_ulp_;
    eo.timeout_seconds = timeout_;
    eo.linear = linear_;
    eo.progress = progress;
    if (!dtype_.empty()) eo.dtype = dtype_from_name(dtype_);
    if (!reference_.empty()) {
      const Tensor t = read_npy(reference_);
      if (t.data.empty())
        throw InputError(fmt::format("{}: empty reference (shape {}): nothing to compare", reference_, shape_string(t.shape)));
      eo.reference = t.data;
      eo.reference_shape = t.shape;
      eo.reference_source = reference_;
    } else if (!model_.empty() && !input_.empty()) {
      const Model m = Model::load(model_);
      if (m.inputs.size() != 1 || m.outputs.size() != 1) throw InputError(model_ + ": --model needs one input and one output");
      Tensor x = read_npy(input_);
      ModelRunOptions ro;
      ro.dtype = DType::Float64;
      ro.policy.threads = out_.threads;
      const Tensor y = run_model(m, find_bn_pairs(m), {{m.inputs[0].name, x}}, ro).at(m.outputs[0].name);
      eo.reference = y.data;
      eo.reference_shape = y.shape;
      eo.reference_source = "float64 run of " + model_ + " on " + input_;
    } else {
      throw InputError("bisect: --cmd needs --reference R.npy, or --model M.onnx with --input X.npy");
    }
    r = bisect_command(eo);
  } else {
    if (target_.empty()) throw InputError("bisect: give a case file, or --cmd for an external compiler");
    BisectOptions bo;
    bo.passes = passes;
    bo.mode = linear_ ? BisectMode::Linear : leave_one_out_ ? BisectMode::LeaveOneOut : BisectMode::Search;
    bo.threshold_ulp = threshold_ulp_;
    if (!dtype_.empty()) bo.dtype = dtype_from_name(dtype_);
    bo.ref.precision = out_.precision;
    bo.ref.threads = out_.threads;
    bo.progress = progress;
    const bool onnx = target_.size() > 5 && target_.substr(target_.size() - 5) == ".onnx";
    if (onnx) {
      if (!dtype_.empty() && dtype_ != "float32") throw InputError("bisect: models are lowered in float32");
      r = bisect_model(target_, input_.empty() ? std::nullopt : std::optional<std::string>(input_), seed_, bo);
    } else {
      r = bisect_case(load_case(target_), bo);
    }
  }
  if (progress) std::cerr << "\r\033[K";
  stamp(r, out_);
  emit(out_, out_.format == "json" ? json_text(r, 2) : reports::bisect_text(r));
  return r["culprit"].is_null() && r["verdict"] == "EXPECTED" ? 0 : 1;
}

}  // namespace foldcheck::cli
