// `foldcheck explain`: is an observed folded weight tensor the fold of a BatchNorm?
// (harness explain.hpp; reports explain_text).
#include <cmath>
#include <fmt/format.h>
#include <optional>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/explain.hpp"
#include "foldcheck/io/bn_params.hpp"
#include "foldcheck/io/number_list.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {
namespace {

class ExplainCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand(
        "explain",
        "Is an observed folded weight tensor the fold of a BatchNorm? From numbers alone: per element drift (ppm), "
        "exact fold, residual (ULP), the recipes that reproduce it bit for bit, and a verdict with its bound.");
    cmd_->add_option("--original", original_, "Original weights: comma list or .npy (OIHW: channel = axis 0)")->required();
    cmd_->add_option("--observed", observed_, "Observed folded weights: comma list or .npy")->required();
    cmd_->add_option("--gamma", bn_.gamma.text, "BatchNorm scale: one value or one per channel (list or .npy); default 1");
    cmd_->add_option("--beta", bn_.beta.text, "BatchNorm shift; default 0");
    cmd_->add_option("--mean", bn_.mean.text, "Running mean; default 0");
    cmd_->add_option("--var", bn_.var.text, "Running variance; default 1");
    // A plain number, given or not: "" is 0 (refused as eps <= 0), never "not given".
    cmd_->add_option("--eps", eps_, "BatchNorm epsilon; default 1e-5")->each([this](const std::string&) { eps_given_ = true; });
    cmd_->add_option("--bn", bn_.file, "BatchNorm parameters: .npz with keys gamma, beta, mean, var, eps (each optional)");
    cmd_->add_option("--dtype", dtype_, "float32 (default for lists), float64, float16 or bfloat16; .npy input: its dtype")
        ->check(known_name([](const std::string& n) { (void)dtype_from_name(n); }));
    add_output_options(cmd_, out_);
    bn_.gamma.label = "--gamma";
    bn_.beta.label = "--beta";
    bn_.mean.label = "--mean";
    bn_.var.label = "--var";
  }

  int run() override {
    ExplainInput in = read_weights();
    if (eps_given_) bn_.eps = eps_;
    BnRule rule;
    rule.max_values = static_cast<std::int64_t>(in.original.size());
    rule.dtype = in.dtype;
    rule.values = BnValues::Round;  // values typed as text are rounded to the dtype, as the weights
    LoadedBn bn = load_bn_params(bn_, rule);
    in.bn = bn.bn;
    in.bn_given = bn.given;
    in.bn_source = bn.source;
    if (npy_ && oshape_.size() > 1 && in.bn.gamma.size() > 1 && oshape_[0] != static_cast<std::int64_t>(in.bn.gamma.size()))
      throw InputError(fmt::format("{}: shape {} has {} output channels but the BatchNorm has {}", original_,
                                   shape_string(oshape_), oshape_[0], in.bn.gamma.size()));
    in.ref_options.precision = out_.precision;
    in.ref_options.threads = out_.threads;
    const auto result = explain(in);
    return finish(out_, result.to_json(), result.verdict(), reports::explain_text, false);
  }

 private:
  // --original and --observed in the dtype they are computed in: a finite value past its
  // range would become an infinity that is never scored; a .npy's values must be its dtype's.
  ExplainInput read_weights() {
    ExplainInput in;
    std::optional<DType> npy_dtype;
    in.original = load_values(original_, "--original", &oshape_, &npy_dtype);
    in.observed = load_values(observed_, "--observed");
    if (const std::string bad = first_nonfinite(in.original); !bad.empty()) throw InputError("--original: has " + bad);
    npy_ = npy_dtype.has_value();
    in.dtype = dtype_.empty() ? npy_dtype.value_or(DType::Float32) : dtype_from_name(dtype_);
    for (const auto& [v, flag] : {std::pair{&in.original, "--original"}, std::pair{&in.observed, "--observed"}}) {
      if (const std::string bad = first_overflow(*v, in.dtype); !bad.empty())
        throw InputError(fmt::format("{}: {}", flag, bad));
      for (double& x : *v) {
        const double r = round_to(in.dtype, x);
        if (npy_ && r != x && !std::isnan(x))
          throw InputError(fmt::format("{}: value {:.17g} is not a {} value", original_, x, name(in.dtype)));
        x = r;
      }
    }
    return in;
  }

  OutputOptions out_;
  std::string original_, observed_, dtype_;
  BnSources bn_;
  double eps_ = 1e-5;
  bool eps_given_ = false;
  Shape oshape_;
  bool npy_ = false;
};

}  // namespace

std::unique_ptr<Command> explain_command() { return std::make_unique<ExplainCommand>(); }

}  // namespace foldcheck::cli
