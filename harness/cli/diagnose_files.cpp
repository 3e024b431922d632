// The layer diagnose judges, from files (diagnose_files.hpp).
#include "diagnose_files.hpp"

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/layer/bn_check.hpp"

namespace foldcheck::cli {
namespace {

void check_finite(const std::vector<double>& v, const std::string& what) {
  if (const std::string bad = first_nonfinite(v); !bad.empty()) throw InputError(what + ": has " + bad);
}

}  // namespace

DiagnoseInput load_diagnose_input(const DiagnoseFiles& f) {
  DiagnoseInput in;
  in.x = read_npy(f.input);
  if (in.x.data.empty())
    throw InputError(fmt::format("{}: empty tensor (shape {})", f.input, shape_string(in.x.shape)));
  check_finite(in.x.data, f.input);
  if (!f.weights.empty()) {
    in.weights = read_npy(f.weights);
    if (in.weights->shape.empty() || in.weights->data.empty())
      throw InputError(
          fmt::format("{}: shape {}: conv weights need an output-channel axis and at least one value (OIHW)", f.weights,
                      shape_string(in.weights->shape)));
    check_finite(in.weights->data, f.weights);
  }
  if (!f.bias.empty()) {
    if (f.weights.empty()) throw InputError("--bias needs --weights (a conv bias without a conv)");
    in.conv_bias = read_npy(f.bias).data;
    check_finite(in.conv_bias, f.bias);
  }
  if (f.weights.empty() && f.bn.empty()) throw InputError("give --weights (a conv), --bn (a BatchNorm), or both");
  if (!f.bn.empty()) set_diagnose_bn(in, load_bn_params(BnSources::archive(f.bn), diagnose_bn_rule(in)));
  in.arithmetic = conv_arithmetic_from_name(f.arithmetic);
  in.algorithm = conv_algorithm_from_name(f.algorithm);
  in.stride = f.stride;
  in.dilation = f.dilation;
  in.padding = f.padding;
  return in;
}

void add_arithmetic_options(CLI::App* cmd, DiagnoseFiles& f) {
  std::vector<std::string> names;
  for (const ConvArithmetic& a : all_conv_arithmetics()) names.emplace_back(a.name());
  cmd->add_option("--arithmetic", f.arithmetic,
                  "The arithmetic the conv ran in: float32 (as given), tf32 (TF32 tensor cores: operands rounded to "
                  "10 bits, float32 sums), bf16 / fp16 (operands, float32 sums), fp16-accumulate (fp16 operands and "
                  "sums), bf16x3 (split-float emulation of float32). Each operand conversion is replayed exactly")
      ->check(CLI::IsMember(names))
      ->capture_default_str();
  cmd->add_option("--algorithm", f.algorithm,
                  "How the conv's sums are formed: direct, winograd2 / winograd4 / winograd6 (Winograd F(m x m, "
                  "3 x 3): its transforms' roundings bounded; winograd4-onednn: oneDNN's F(4x4,3x3), points 0, "
                  "+-5/8, +-3/2), fft (2-D FFTs: a normwise bound per output plane, "
                  "float32 only), split-k:S (S partial sums added at the end: the direct bound holds unchanged)")
      ->capture_default_str();
}

}  // namespace foldcheck::cli
