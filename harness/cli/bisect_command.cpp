// `foldcheck bisect`: the first compiler pass that takes a drift past what rounding
// explains — through foldcheck's pass pipeline on a case file or model, or through an
// external command's outputs (harness bisect.hpp).
#include <cmath>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "command.hpp"
#include "common.hpp"
#include "diagnose_files.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/bisect.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/io/layer_files.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/layer/passes.hpp"
#include "foldcheck/model/known_computation.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/model/model_patterns.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {
namespace {

using Progress = std::function<void(const std::string&)>;

class BisectCommand : public Command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  BisectResult run_external(const std::vector<std::string>& passes, const Progress& progress);
  // --input, --weights, --bias, --bn, geometry
  KnownComputation load_layer(const Progress& progress) const;
  // The layer judged by diagnose: without --bn, or under --arithmetic / --algorithm.
  void diagnosed_layer(ExternalBisectOptions& eo) const;
  bool diagnosed() const { return bn_.empty() || arith_.arithmetic != "float32" || arith_.algorithm != "direct"; }

  OutputOptions out_;
  std::string target_, passes_, disabled_, external_, reference_, model_, input_, dtype_, weights_, bias_, bn_;
  DiagnoseFiles arith_;  // --arithmetic, --algorithm (the layer's files are the members above)
  std::int64_t stride_ = 1, dilation_ = 1;
  std::optional<std::int64_t> padding_;
  std::optional<int> opt_level_;
  std::optional<double> threshold_ulp_;
  double timeout_ = 600;
  std::uint64_t seed_ = 0;
  bool linear_ = false, leave_one_out_ = false;
};

void BisectCommand::add_to(CLI::App& app) {
  std::string names;
  for (const PassInfo& p : all_passes()) names += (names.empty() ? "" : ", ") + p.name;
  cmd_ = app.add_subcommand(
      "bisect",
      "Find the compiler pass that takes a drift past what rounding explains: through foldcheck's pass pipeline on a "
      "case file or an ONNX model's Conv+BN pairs (passes: " + names + "), or through an external command's outputs (--cmd). Exit 1 when a pass is named, or when the output with every "
      "pass disabled is already bad.");
  cmd_->add_option("target", target_, "Case file (JSON) or ONNX model for the internal pipeline");
  cmd_->add_option("--passes", passes_, "Pass pipeline, comma-separated, in order");
  cmd_->add_option("--opt-level", opt_level_, "Pipeline of every pass up to this TVM opt_level (instead of --passes)")
      ->check(integer_in(options::kOptLevel));
  cmd_->add_option("--disabled-pass", disabled_, "Passes left out of the --opt-level pipeline, comma-separated");
  cmd_->add_flag("--linear", linear_, "Evaluate every prefix and print the per-pass table");
  cmd_->add_flag("--leave-one-out", leave_one_out_,
                 "The whole pipeline with each pass disabled in turn; the culprit is the one pass whose removal alone "
                 "makes it good (when several do, none is named and the result lists them as candidates)");
  cmd_->add_option("--threshold-ulp", threshold_ulp_,
                   "Bad when max |ULP| exceeds N (instead of the bounds, or with --cmd the channel units)")
      ->check(finite_number(options::kThresholdUlp));
  cmd_->add_option("--dtype", dtype_,
                   "Case dtype to evaluate (default: the case's first); with --cmd, the type the outputs are computed in "
                   "(default float32; the layer: its --input's)")
      ->check(known_name([](const std::string& n) { (void)dtype_from_name(n); }));
  cmd_->add_option("--cmd", external_,
                   "External compiler command (/bin/sh); {enabled}, {disabled} (comma-separated pass names, one quoted "
                   "shell word) and {out} (the .npy it must write) are substituted, in one pass; other {...} is left as "
                   "it is. Pass names must be identifiers (letters, digits, _ . : -)");
  cmd_->add_option("--reference", reference_,
                   "Reference outputs for --cmd (.npy, exact or float64): runs are judged by their errors in units of "
                   "each channel's largest value, against twice the all-disabled run's");
  cmd_->add_option("--model", model_,
                   "With --input: the ONNX model --cmd compiles; runs are judged against the bounds of every correct "
                   "compilation of it (certified, for a model that is one Conv->BatchNormalization layer)");
  cmd_->add_option("--input", input_,
                   "Input (.npy): of the ONNX target, of --model, or of the --weights/--bn layer; default for a target: "
                   "seeded normal");
  cmd_->add_option(
      "--weights", weights_,
      "With --input (and --bn; without, a plain conv): the layer --cmd compiles, conv weights (.npy, OIHW); "
      "runs are judged against the certified bounds of every correct compilation of it (without --bn or "
      "under --arithmetic/--algorithm: as diagnose judges it, every replay tried); its dtype is --input's");
  cmd_->add_option("--bias", bias_, "The layer's conv bias (.npy, one per output channel)");
  cmd_->add_option("--bn", bn_, "The layer's BatchNorm parameters (.npz with keys gamma, beta, mean, var, eps; each optional)");
  cmd_->add_option("--stride", stride_, "The layer's conv stride")
      ->check(integer_in(options::kStride))
      ->capture_default_str();
  cmd_->add_option("--dilation", dilation_, "The layer's conv dilation")
      ->check(integer_in(options::kDilation))
      ->capture_default_str();
  cmd_->add_option("--padding", padding_, "The layer's conv padding (symmetric); default dilation*(K-1)/2")
      ->check(integer_in(options::kPadding));
  add_arithmetic_options(cmd_, arith_);
  cmd_->add_option("--seed", seed_, "Seed of the default model input")
      ->check(integer_in(options::kSeed))
      ->capture_default_str();
  cmd_->add_option("--timeout", timeout_, "Seconds per command run")
      ->check(finite_number(options::kTimeoutSeconds))
      ->capture_default_str();
  add_output_options(cmd_, out_);
}

int BisectCommand::run() {
  if (linear_ && leave_one_out_) throw InputError("bisect: --linear and --leave-one-out exclude each other");
  std::vector<std::string> passes = split_names(passes_, "--passes");
  if (opt_level_) {
    if (!passes.empty()) throw InputError("bisect: give --passes or --opt-level, not both");
    passes = pipeline_for(*opt_level_, split_names(disabled_, "--disabled-pass"));
  }
  const auto progress = progress_printer(out_);
  BisectResult result;
  if (!external_.empty()) {
    result = run_external(passes, progress);
  } else {
    if (target_.empty()) throw InputError("bisect: give a case file, or --cmd for an external compiler");
    for (const auto& [v, flag] : {std::pair{&weights_, "--weights"}, std::pair{&bias_, "--bias"}, std::pair{&bn_, "--bn"},
                                  std::pair{&reference_, "--reference"}, std::pair{&model_, "--model"}})
      if (!v->empty()) throw InputError(fmt::format("bisect: {} is for --cmd (the internal pipeline takes a case file or a model)", flag));
    if (arith_.arithmetic != "float32" || arith_.algorithm != "direct")
      throw InputError(
          "bisect: --arithmetic and --algorithm judge an external compiler's outputs (--cmd with the "
          "layer or --model); foldcheck's own pipeline computes in the case's dtypes");
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
      result = bisect_model(target_, input_.empty() ? std::nullopt : std::optional<std::string>(input_), seed_, bo);
    } else {
      result = bisect_case(load_case(target_), bo);
    }
  }
  // Exit 1 when a pass is named, or when the verdict is not EXPECTED (clean()).
  return finish(out_, result.to_json(), result.clean() ? 0 : 1, Ending{reports::bisect_text},
                static_cast<bool>(progress));
}

BisectResult BisectCommand::run_external(const std::vector<std::string>& passes, const Progress& progress) {
  check_pass_names(passes);  // before anything runs: the names are pasted into a shell command
  if (!target_.empty()) throw InputError("bisect: --cmd bisects an external command; leave out the case file");
  ExternalBisectOptions eo;
  eo.command = external_;
  eo.passes = passes;
  eo.threshold_ulp = threshold_ulp_;
  eo.timeout_seconds = timeout_;
  eo.mode = linear_ ? BisectMode::Linear : leave_one_out_ ? BisectMode::LeaveOneOut : BisectMode::Search;
  eo.progress = progress;
  if (!dtype_.empty()) eo.dtype = dtype_from_name(dtype_);
  const int forms = !reference_.empty() + !model_.empty() + !weights_.empty();
  if (forms != 1)
    throw InputError(
        "bisect: --cmd needs exactly one of --reference R.npy, --model M.onnx with --input X.npy, or the "
        "layer (--input X.npy --weights W.npy [--bn BN.npz])");
  if (cmd_->get_option("--seed")->count() > 0)
    throw InputError("bisect: --seed draws the input of an internal model bisect; --cmd runs on the --input given");
  if (weights_.empty())
    for (const char* flag : {"--bn", "--bias", "--stride", "--dilation", "--padding"})
      if (cmd_->get_option(flag)->count() > 0)
        throw InputError(fmt::format("bisect: {} describes the layer: give it with --weights and --input", flag));
  const bool default_arithmetic = arith_.arithmetic == "float32" && arith_.algorithm == "direct";
  if (!reference_.empty() && !default_arithmetic)
    throw InputError(
        "bisect: --arithmetic and --algorithm describe the computation: give it (--model, or the layer "
        "with --weights); --reference outputs are judged in channel units");
  if (!model_.empty() && arith_.algorithm != "direct")
    throw InputError(
        "bisect: --algorithm describes one conv's sums: give the layer (--input, --weights, --bn) to judge "
        "it as diagnose does; a model's end-to-end bound models direct convs");
  if (!reference_.empty()) {
    if (!input_.empty()) throw InputError("bisect: --input is the input of --model or of the layer; --reference needs none");
    const Tensor t = read_npy(reference_);
    // The reference is taken as exact: one coarser than the outputs would count its own
    // rounding as the command's error (a float16 copy hides a 12-bit rsqrt estimate).
    if (info(t.dtype).unit_roundoff > info(eo.dtype).unit_roundoff)
      throw InputError(fmt::format("{}: a {} reference for {} outputs: it must be exact, or float64 (at least as precise "
                                   "as the outputs; --dtype names their type)",
                                   reference_, name(t.dtype), name(eo.dtype)));
    if (t.data.empty())
      throw InputError(fmt::format("{}: empty reference (shape {}): nothing to compare", reference_, shape_string(t.shape)));
    eo.reference = t.data;
    eo.reference_shape = t.shape;
    eo.reference_source = reference_;
  } else if (!model_.empty()) {
    if (input_.empty()) throw InputError("bisect: --model needs --input X.npy (the input the command runs the model on)");
    const Model m = Model::load(model_);
    ModelComputationOptions mo;
    if (!dtype_.empty()) mo.dtype = dtype_from_name(dtype_);
    mo.seed = seed_;
    mo.arithmetic = conv_arithmetic_from_name(arith_.arithmetic);
    mo.ref.precision = out_.precision;
    mo.ref.threads = out_.threads;
    mo.progress = progress;
    eo.known = model_computation(m, model_, input_, mo);
  } else if (diagnosed()) {
    if (progress) progress("bisect: certified reference of the layer (diagnose judges each run)");
    diagnosed_layer(eo);
  } else {
    eo.known = load_layer(progress);
  }
  return external_bisect(eo);
}

// The observed output diagnose judges is each run's: its shape is the conv's with the padding
// bisect defaults to (dilation (K - 1) / 2), its dtype the input's (or --dtype).
void BisectCommand::diagnosed_layer(ExternalBisectOptions& eo) const {
  if (input_.empty())
    throw InputError(
        "bisect: the layer needs --input X.npy and --weights W.npy (--bn BN.npz optional: without, a plain conv)");
  DiagnoseFiles f = arith_;
  f.input = input_;
  f.weights = weights_;
  f.bias = bias_;
  f.bn = bn_;
  f.stride = stride_;
  f.dilation = dilation_;
  DiagnoseInput in = load_diagnose_input(f);
  const Shape& xs = in.x.shape;
  const Shape& ws = in.weights->shape;
  if (xs.size() != 4 || ws.size() != 4)
    throw InputError(fmt::format("bisect: the layer's input and weights must be 4-D (NCHW, OIHW): {} and {}",
                                 shape_string(xs), shape_string(ws)));
  const std::int64_t pad = padding_.value_or(dilation_ * (ws[2] - 1) / 2);
  const std::int64_t oh = (xs[2] + 2 * pad - dilation_ * (ws[2] - 1) - 1) / stride_ + 1,
                     ow = (xs[3] + 2 * pad - dilation_ * (ws[3] - 1) - 1) / stride_ + 1;
  if (oh < 1 || ow < 1)
    throw InputError(fmt::format("bisect: the conv of {} by {} (padding {}) has no output", shape_string(xs),
                                 shape_string(ws), pad));
  in.padding = pad;
  in.observed.shape = {xs[0], ws[0], oh, ow};
  in.observed.dtype = dtype_.empty() ? in.x.dtype : dtype_from_name(dtype_);
  in.observed.data.assign(static_cast<std::size_t>(xs[0] * ws[0] * oh * ow), 0.0);
  in.ref.precision = out_.precision;
  in.ref.threads = out_.threads;
  in.exact_cache = make_exact_conv_cache();  // every run's replays are the same exact convs
  eo.reference = diagnose_exact_output(in);
  eo.reference_shape = in.observed.shape;
  eo.dtype = in.observed.dtype;
  eo.reference_source =
      fmt::format("the layer (input {}, weights {}{}{}; {}, padding {}, {}{}): exact outputs", input_, weights_,
                  bias_.empty() ? "" : ", bias " + bias_, bn_.empty() ? ", no BatchNorm" : ", BatchNorm " + bn_,
                  name(eo.dtype), pad, in.arithmetic.name(),
                  in.algorithm.kind == ConvAlgorithmKind::Direct ? "" : ", algorithm " + in.algorithm.name());
  eo.layer = std::move(in);
}

KnownComputation BisectCommand::load_layer(const Progress& progress) const {
  if (input_.empty() || bn_.empty()) throw InputError("bisect: the layer needs --input X.npy, --weights W.npy and --bn BN.npz");
  LayerFiles files;
  files.input = input_;
  files.weights = weights_;
  files.bias = bias_;
  files.bn = bn_;
  if (!dtype_.empty()) files.dtype = dtype_from_name(dtype_);
  files.stride = stride_;
  files.dilation = dilation_;
  files.padding = padding_;
  const LayerFromFiles layer = layer_from_files(files);
  const Graph& graph = layer.graph;
  const DType t = graph.dtype;
  ref::Options ro;
  ro.precision = out_.precision;
  ro.threads = out_.threads;
  if (progress) progress(fmt::format("bisect: certified reference and bounds of the layer ({})", layer_size(graph)));
  KnownComputation k = layer_computation(graph, layer.input.data, 0.999, ro);
  // Keys the file left out take a fresh BatchNorm's values: say which, where it is read.
  std::string defaults;
  for (const std::string& d : layer.bn_defaulted) defaults += (defaults.empty() ? "" : ", ") + d;
  k.source = fmt::format("the layer (input {}, weights {}{}, BatchNorm {}{}; {}, padding {}): certified exact outputs", input_,
                         weights_, bias_.empty() ? "" : ", bias " + bias_, bn_,
                         defaults.empty() ? "" : " with the defaults " + defaults, name(t), graph.nodes[0].geometry.pad_top);
  k.shape_hint = "the conv's geometry: --padding, --stride, --dilation";
  return k;
}

}  // namespace

std::unique_ptr<Command> bisect_command() { return std::make_unique<BisectCommand>(); }

}  // namespace foldcheck::cli
