// `foldcheck diagnose`: is an observed conv+BN (or BatchNorm) output the layer's, up to
// rounding, and if not, which common bug explains it (harness diagnose.hpp; reports
// diagnose_text).
#include <fmt/format.h>

#include "command.hpp"
#include "common.hpp"
#include "diagnose_files.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {
namespace {

class DiagnoseCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
        "diagnose",
        "Is an observed conv + BatchNorm, plain conv or BatchNorm-alone output the layer's, up to rounding, in the "
        "arithmetic it ran in? If not, test the common bugs (training-mode batch statistics, eps mismatch, "
        "variance/std confusion, missing sqrt, gamma/beta swapped, mean not subtracted, NHWC read as NCHW, bias "
        "dropped, BN applied twice) and the other arithmetics (TF32 tensor cores, bf16/fp16 operands, fp16 "
        "accumulation, bf16x3) and name the one that explains it.");
    cmd_->add_option("--input", files_.input, "Layer input x (.npy, NCHW or N x C)")->required();
    cmd_->add_option("--bn", files_.bn,
                     "BatchNorm parameters (.npz with keys gamma, beta, mean, var, eps); without: a plain conv");
    cmd_->add_option("--weights", files_.weights,
                     "Conv weights (.npy, OIHW); without: the layer is the BatchNorm alone");
    add_arithmetic_options(cmd_, files_);
    cmd_->add_option("--bias", files_.bias, "Conv bias (.npy, one per output channel)");
    cmd_->add_option("--observed", observed_, "Observed output (.npy); its dtype is the compared type")->required();
    cmd_->add_option("--stride", files_.stride, "Conv stride")
        ->check(integer_in(options::kStride))
        ->capture_default_str();
    cmd_->add_option("--dilation", files_.dilation, "Conv dilation")
        ->check(integer_in(options::kDilation))
        ->capture_default_str();
    cmd_->add_option("--padding", files_.padding, "Conv padding (symmetric); default: inferred from the shapes")
        ->check(integer_in(options::kPadding));
    add_output_options(cmd_, out_);
  }

  int run() override {
    DiagnoseInput in = load_diagnose_input(files_);
    in.observed = read_npy(observed_);
    if (in.observed.data.empty())
      throw InputError(fmt::format("{}: empty tensor (shape {})", observed_, shape_string(in.observed.shape)));
    in.ref.precision = out_.precision;
    in.ref.threads = out_.threads;
    const auto result = diagnose(in);
    return finish(out_, result.to_json(), result.verdict(), reports::diagnose_text, false);
  }

 private:
  OutputOptions out_;
  DiagnoseFiles files_;
  std::string observed_;
};

}  // namespace

std::unique_ptr<Command> diagnose_command() { return std::make_unique<DiagnoseCommand>(); }

}  // namespace foldcheck::cli
