// `foldcheck accuracy-diff MODEL.onnx`: every layer -> BatchNormalization pair of a model
// (harness accuracy_diff.hpp; reports accuracy_diff_text and the suite renderers).
#include <iostream>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {
namespace {

class AccuracyDiffCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
        "accuracy-diff",
        "Every layer -> BatchNormalization pair of an ONNX model (Conv, ConvTranspose, Gemm, MatMul; also through "
        "Identity): each engine recipe's folded weights and biases against the exact fold, with bounds; with --observed, "
        "another engine's folded model checked layer by layer, naming the layer and output channel beyond rounding; "
        "with --observed-output, another engine's outputs against a probabilistic end-to-end bound.");
    cmd_->add_option("model", model_, "The model with its BatchNormalization nodes (.onnx)")->required();
    cmd_->add_option("--observed", observed_,
                     "The same model with its BatchNorms folded by another tool (.onnx); layers are matched by data "
                     "flow, whatever the node order and names (see README)");
    cmd_->add_option("--observed-output", observed_output_,
                     "Another engine's output of the model on --input (.npy, float32): checked against the float64 run "
                     "with a probabilistic end-to-end bound (see README)");
    cmd_->add_option("--arithmetic", arithmetic_,
                     "The arithmetic --observed-output was computed in: float32, tf32 (TF32 tensor cores), or bf16 / "
                     "fp16 operands (with every activation a 16-bit value, as torch.autocast computes, when all the "
                     "output's values are): the end-to-end bound then models the converted operands")
        ->check(CLI::IsMember(std::vector<std::string>{"float32", "tf32", "bf16", "fp16"}))
        ->capture_default_str();
    cmd_->add_option("--output-samples", opts_.output_samples,
                     "Perturbed float64 runs that estimate the end-to-end bound (more: a tighter bound, slower)")
        ->check(integer_in(options::kOutputSamples))
        ->capture_default_str();
    cmd_->add_option("--input", input_,
                     "Model input (.npy, float32), or a batch of them (a multiple of the model's fixed batch along "
                     "the first dimension: --observed-output's band then sums its evidence over the items); default: "
                     "seeded standard-normal values");
    cmd_->add_option("--seed", opts_.seed, "Seed of the default input")
        ->check(integer_in(options::kSeed))
        ->capture_default_str();
    cmd_->add_option("--recipe", recipe_, "Fold of the fused float32 run: pytorch, tvm, onnxruntime, onnxoptimizer, exact")
        ->check(known_name([](const std::string& n) { (void)recipe_from_name(n); }))
        ->capture_default_str();
    cmd_->add_flag("--no-attribution", no_attr_, "Skip the stage attribution (faster)");
    cmd_->add_option("--attribution-elements", opts_.attribution_elements,
                     "Outputs attributed per layer: an even sample plus the layer's worst elements (0: all)")
        ->check(integer_in(options::kAttributionElements))
        ->capture_default_str();
    cmd_->add_flag("--weights-only", opts_.weights_only, "Check the folded parameters only (no runs)");
    add_output_options(cmd_, out_, {"text", "json", "markdown", "html"});
  }

  int run() override {
    AccuracyDiffOptions ao = opts_;
    ao.attribution = !no_attr_;
    if (!observed_.empty()) ao.observed_model = observed_;
    if (!input_.empty()) ao.input = input_;
    if (!observed_output_.empty()) ao.observed_output = observed_output_;
    ao.arithmetic = conv_arithmetic_from_name(arithmetic_);
    ao.recipe = recipe_from_name(recipe_);
    ao.ref.precision = out_.precision;
    ao.ref.threads = out_.threads;
    ao.progress = progress_printer(out_);
    const auto result = accuracy_diff(model_, ao);
    return finish(out_, result.to_json(), result.verdict(), reports::accuracy_diff_text, static_cast<bool>(ao.progress));
  }

 private:
  OutputOptions out_;
  std::string model_, observed_, observed_output_, input_, recipe_ = "pytorch", arithmetic_ = "float32";
  bool no_attr_ = false;
  AccuracyDiffOptions opts_;  // the library's defaults are the flags' defaults
};

}  // namespace

std::unique_ptr<Command> accuracy_diff_command() { return std::make_unique<AccuracyDiffCommand>(); }

}  // namespace foldcheck::cli
