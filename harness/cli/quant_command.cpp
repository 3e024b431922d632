// `foldcheck quant-check`: dumped integer weights against the exact fold, quantized
// (harness quant_check.hpp); or, with --write-int, the integers a fold gives; or, with
// --case, a quantized layer's outputs (quant_layer.hpp).
#include <fmt/format.h>
#include <iostream>
#include <optional>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/io/bn_params.hpp"

#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/quant/quant_check.hpp"
#include "foldcheck/quant/quant_layer.hpp"
#include "foldcheck/numerics/recipes.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {
namespace {

class QuantCommand : public Command {
 public:
  void add_to(CLI::App& app) override;
  int run() override;

 private:
  OutputOptions out_;
  std::string case_, weights_, bn_, ints_, scales_, rounding_ = "half_even", write_int_, write_scales_, fold_ = "exact";
  int bits_ = 8;
  bool per_channel_ = false, free_scales_ = false;
};

void QuantCommand::add_to(CLI::App& app) {
  cmd_ = app.add_subcommand(
      "quant-check",
      "Are dumped integer weights the quantized fold of the BatchNorm? Each integer against the exact fold quantized with "
      "the scales; a one-step flip at a rounding tie within a correct float fold's error bound is EXPECTED, anything else "
      "UNEXPECTED. Also: where each engine recipe's float fold flips an integer, and which float stage crossed the tie.");
  cmd_->add_option("--weights", weights_, "Original (unfolded) weights (.npy, output channels on axis 0)");
  cmd_->add_option("--bn", bn_, "BatchNorm parameters (.npz with gamma, beta, mean, var, eps)");
  cmd_->add_option("--case", case_,
                   "A case file's layer, folded by --fold and quantized: its outputs along the reference, integer and "
                   "fake-quant paths, in LSBs of the output scale");
  cmd_->add_option("--int-weights", ints_, "Dumped integer weights to check (.npy, any integer dtype, same shape)");
  cmd_->add_option("--scales", scales_, "Weight scales: .npy or a comma list (one, or one per channel); default: from max |exact fold|");
  cmd_->add_flag("--per-channel", per_channel_, "One scale per output channel (default: per tensor)");
  cmd_->add_option("--bits", bits_, "Integer width (symmetric: -(2^(b-1)-1) .. 2^(b-1)-1)")
      ->check(integer_in(options::kQuantBits))
      ->capture_default_str();
  cmd_->add_option("--rounding", rounding_, "half_even or half_away")
      ->check(known_name([](const std::string& n) { (void)quant_rounding_from_name(n); }))
      ->capture_default_str();
  cmd_->add_flag("--free-scales", free_scales_, "Computed scales are max|x|/qmax as they are (default: rounded up to a power of two)");
  output_file_option(cmd_->add_option("--write-int", write_int_,
                                      "Write the integers of --fold to this .npy (int8 up to 8 bits, else int32) and exit"));
  output_file_option(cmd_->add_option("--write-scales", write_scales_, "With --write-int: also write the scales (.npy, float64)"));
  cmd_->add_option("--fold", fold_, "For --write-int: exact, pytorch, tvm, onnxruntime or onnxoptimizer; for --case: the "
                                    "engine recipe of the run-time fold (default there: pytorch)")
      ->check(known_name([](const std::string& n) { (void)recipe_from_name(n); }))
      ->capture_default_str();
  add_output_options(cmd_, out_);
}

int QuantCommand::run() {
  QuantSpec spec;
  spec.bits = bits_;
  spec.per_channel = per_channel_;
  spec.pow2 = !free_scales_;
  spec.rounding = quant_rounding_from_name(rounding_);
  if (!case_.empty()) {
    if (!weights_.empty() || !bn_.empty() || !ints_.empty()) throw InputError("quant-check: --case replaces --weights, --bn and --int-weights");
    ref::Options ro;
    ro.precision = out_.precision;
    ro.threads = out_.threads;
    const CaseSpec cs = load_case(case_);
    // The case's "quantize" section, with the flags given on the command line on top.
    QuantSpec cq = cs.quantize.value_or(spec);
    if (cmd_->count("--bits")) cq.bits = spec.bits;
    if (cmd_->count("--per-channel")) cq.per_channel = true;
    if (cmd_->count("--free-scales")) cq.pow2 = false;
    if (cmd_->count("--rounding")) cq.rounding = spec.rounding;
    const QuantLayerResult result = quantized_layer(cs, cq, recipe_from_name(fold_ == "exact" ? "pytorch" : fold_), ro);
    return finish(out_, result.to_json(), result.verdict(), reports::quant_check_text, false);
  }
  if (weights_.empty() || bn_.empty()) throw InputError("quant-check: give --weights and --bn (or --case)");
  QuantCheckInput in;
  in.weights = read_npy(weights_);
  if (const std::string bad = first_nonfinite(in.weights.data); !bad.empty()) throw InputError(weights_ + ": weights have " + bad);
  if (in.weights.shape.size() < 2 || in.weights.data.empty())
    throw InputError(fmt::format("{}: shape {}: weights need an output-channel axis and at least one value", weights_,
                                 shape_string(in.weights.shape)));
  in.bn = load_bn_params(BnSources::archive(bn_), quant_bn_rule(in.weights)).bn;
  in.spec = spec;
  in.ref.precision = out_.precision;
  in.ref.threads = out_.threads;
  if (!scales_.empty()) {
    in.scales = load_values(scales_, "--scales");
    for (std::size_t i = 0; i < in.scales->size(); ++i)
      if (const double v = (*in.scales)[i]; !(v > 0) || !std::isfinite(v))
        throw InputError(fmt::format("--scales {}: scale {} at index {} is not a finite positive number", scales_, v, i));
  }
  if (!write_int_.empty()) {
    const QuantizedFold qf = quantized_fold(in, fold_);
    write_npy_ints(write_int_, in.weights.shape, qf.q, bits_ <= 8 ? 1 : 4);
    if (!write_scales_.empty()) write_npy(write_scales_, Tensor{{static_cast<std::int64_t>(qf.scales.size())}, qf.scales, DType::Float64});
    std::cout << fmt::format("wrote {} integers of the {} fold to {}\n", qf.q.size(), fold_, write_int_);
    return 0;
  }
  if (!ints_.empty()) {
    const IntArray a = read_npy_ints(ints_);
    if (element_count(a.shape) != static_cast<std::int64_t>(in.weights.data.size()))
      throw InputError(fmt::format("{}: shape {}, the weights are {}", ints_, shape_string(a.shape), shape_string(in.weights.shape)));
    in.found = a.values;
  }
  const QuantCheckResult result = quant_check(in);
  return finish(out_, result.to_json(), result.verdict(), reports::quant_check_text, false);
}

}  // namespace

std::unique_ptr<Command> quant_command() { return std::make_unique<QuantCommand>(); }

}  // namespace foldcheck::cli
