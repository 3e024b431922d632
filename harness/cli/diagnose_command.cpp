// `foldcheck diagnose`: is an observed conv+BN (or BatchNorm) output the layer's, up to
// rounding, and if not, which common bug explains it (harness diagnose.hpp; reports
// diagnose_text).
#include <fmt/format.h>

#include "command.hpp"
#include "common.hpp"
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
    cmd_->add_option("--input", input_, "Layer input x (.npy, NCHW or N x C)")->required();
    cmd_->add_option("--bn", bn_,
                     "BatchNorm parameters (.npz with keys gamma, beta, mean, var, eps); without: a plain conv");
    cmd_->add_option("--weights", weights_, "Conv weights (.npy, OIHW); without: the layer is the BatchNorm alone");
    cmd_->add_option("--arithmetic", arithmetic_,
                     "The arithmetic the conv ran in: float32 (as given), tf32 (TF32 tensor cores: operands rounded to "
                     "10 bits, float32 sums), bf16 / fp16 (operands, float32 sums), fp16-accumulate (fp16 operands and "
                     "sums), bf16x3 (split-float emulation of float32). Each operand conversion is replayed exactly")
        ->check(CLI::IsMember(arithmetic_names()))
        ->capture_default_str();
    cmd_->add_option("--algorithm", algorithm_,
                     "How the conv's sums are formed: direct, winograd2 / winograd4 / winograd6 (Winograd F(m x m, "
                     "3 x 3): its transforms' roundings bounded), fft (2-D FFTs: a normwise bound per output plane, "
                     "float32 only), split-k:S (S partial sums added at the end: the direct bound holds unchanged)")
        ->capture_default_str();
    cmd_->add_option("--bias", bias_, "Conv bias (.npy, one per output channel)");
    cmd_->add_option("--observed", observed_, "Observed output (.npy); its dtype is the compared type")->required();
    cmd_->add_option("--stride", stride_, "Conv stride")->check(integer_in(options::kStride))->capture_default_str();
    cmd_->add_option("--dilation", dilation_, "Conv dilation")
        ->check(integer_in(options::kDilation))
        ->capture_default_str();
    cmd_->add_option("--padding", padding_, "Conv padding (symmetric); default: inferred from the shapes")
        ->check(integer_in(options::kPadding));
    add_output_options(cmd_, out_);
  }

  int run() override {
    DiagnoseInput in;
    in.x = read_tensor(input_);
    in.observed = read_tensor(observed_);
    check_finite(in.x.data, input_);
    if (!weights_.empty()) {
      in.weights = read_npy(weights_);
      if (in.weights->shape.empty() || in.weights->data.empty())
        throw InputError(fmt::format("{}: shape {}: conv weights need an output-channel axis and at least one value (OIHW)",
                                     weights_, shape_string(in.weights->shape)));
      check_finite(in.weights->data, weights_);
    }
    if (!bias_.empty()) {
      if (weights_.empty()) throw InputError("--bias needs --weights (a conv bias without a conv)");
      in.conv_bias = read_npy(bias_).data;
      check_finite(in.conv_bias, bias_);
    }
    if (weights_.empty() && bn_.empty()) throw InputError("give --weights (a conv), --bn (a BatchNorm), or both");
    if (!bn_.empty()) {
      set_diagnose_bn(in, load_bn_params(BnSources::archive(bn_), diagnose_bn_rule(in)));
    }
    in.arithmetic = conv_arithmetic_from_name(arithmetic_);
    in.algorithm = conv_algorithm_from_name(algorithm_);
    in.stride = stride_;
    in.dilation = dilation_;
    in.padding = padding_;
    in.ref.precision = out_.precision;
    in.ref.threads = out_.threads;
    const auto result = diagnose(in);
    return finish(out_, result.to_json(), result.verdict(), reports::diagnose_text, false);
  }

 private:
  // An empty layer has nothing to compare (and no channel to divide by).
  static Tensor read_tensor(const std::string& path) {
    Tensor t = read_npy(path);
    if (t.data.empty()) throw InputError(fmt::format("{}: empty tensor (shape {})", path, shape_string(t.shape)));
    return t;
  }
  static void check_finite(const std::vector<double>& v, const std::string& what) {
    if (const std::string bad = first_nonfinite(v); !bad.empty()) throw InputError(what + ": has " + bad);
  }

  OutputOptions out_;
  std::string input_, bn_, weights_, bias_, observed_, arithmetic_ = "float32", algorithm_ = "direct";
  static std::vector<std::string> arithmetic_names() {
    std::vector<std::string> v;
    for (const ConvArithmetic& a : all_conv_arithmetics()) v.emplace_back(a.name());
    return v;
  }
  std::int64_t stride_ = 1, dilation_ = 1;
  std::optional<std::int64_t> padding_;
};

}  // namespace

std::unique_ptr<Command> diagnose_command() { return std::make_unique<DiagnoseCommand>(); }

}  // namespace foldcheck::cli
