// foldcheck: is a conv+BatchNorm drift the rounding IEEE arithmetic predicts, or a bug?
//
// Exit codes: 0 the command's verdict is EXPECTED; 1 it is SUSPICIOUS, UNEXPECTED or
// MISTRUSTED (a vacuous comparison never counts as a pass; bisect: also when a pass is
// named); 2 bad usage or bad input (one line on
// stderr naming the input and the problem; no output file is written).
#include <malloc.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <iostream>
#include <new>
#include <optional>

#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/io/case_file.hpp"
#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/layer/bn_check.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/explain.hpp"
#include "foldcheck/io/limits.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/io/number_list.hpp"
#include "foldcheck/reports/text.hpp"
#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/base/version.hpp"
#include "common.hpp"
#include "bn_args.hpp"
#include "bisect_command.hpp"
#include "quant_command.hpp"
#include "suite_commands.hpp"

namespace fc = foldcheck;
using json = nlohmann::json;

namespace {

using fc::cli::OutputOptions;
using fc::cli::add_output_options;
using fc::cli::emit;
using fc::cli::exit_code;
using fc::cli::progress_printer;
using fc::cli::render;
using fc::cli::stamp;
using fc::cli::ExplainArgs;
using fc::cli::load_bn;

void check_finite(const std::vector<double>& v, const std::string& what) {
  if (const std::string bad = fc::first_nonfinite(v); !bad.empty()) throw fc::InputError(what + ": has " + bad);
}

int cmd_explain(const ExplainArgs& a, const OutputOptions& o) {
  fc::ExplainInput in;
  fc::Shape oshape;
  std::optional<fc::DType> npy_dtype;
  in.original = fc::load_values(a.original, "--original", &oshape, &npy_dtype);
  in.observed = fc::load_values(a.observed, "--observed");
  check_finite(in.original, "--original");
  const bool npy = npy_dtype.has_value();
  in.dtype = a.dtype.empty() ? npy_dtype.value_or(fc::DType::Float32) : fc::dtype_from_name(a.dtype);
  // Values are checked in the dtype they are computed in: a finite value past its range
  // would become an infinity that is never scored.
  for (const auto& [v, flag] : {std::pair{&in.original, "--original"}, std::pair{&in.observed, "--observed"}}) {
    if (const std::string bad = fc::first_overflow(*v, in.dtype); !bad.empty())
      throw fc::InputError(fmt::format("{}: {}", flag, bad));
    for (double& x : *v) {
      const double r = fc::round_to(in.dtype, x);
      if (npy && r != x && !std::isnan(x))
        throw fc::InputError(fmt::format("{}: value {:.17g} is not a {} value", a.original, x, fc::name(in.dtype)));
      x = r;
    }
  }
  in.bn = load_bn(a, in.bn_given, in.bn_source, static_cast<std::int64_t>(in.original.size()));
  const std::string bn_what = "BatchNorm (" + in.bn_source + ")";
  for (const auto& [v, key] : {std::pair{&in.bn.gamma, "gamma"}, std::pair{&in.bn.beta, "beta"},
                               std::pair{&in.bn.mean, "mean"}, std::pair{&in.bn.var, "var"}}) {
    if (const std::string bad = fc::first_overflow(*v, in.dtype); !bad.empty())
      throw fc::InputError(fmt::format("{}: {}: {}", bn_what, key, bad));
    for (double& x : *v) x = fc::round_to(in.dtype, x);
  }
  fc::check_bn_params_in(in.bn, in.bn.gamma.size(), in.dtype, bn_what);
  if (npy && oshape.size() > 1 && in.bn.gamma.size() > 1 && oshape[0] != static_cast<std::int64_t>(in.bn.gamma.size()))
    throw fc::InputError(fmt::format("{}: shape {} has {} output channels but the BatchNorm has {}", a.original,
                                     fc::shape_string(oshape), oshape[0], in.bn.gamma.size()));
  in.ref_options.precision = o.precision;
  in.ref_options.threads = o.threads;
  json r = fc::explain(in);
  stamp(r, o);
  emit(o, o.format == "json" ? fc::cli::json_text(r, 2) : fc::reports::explain_text(r));
  return exit_code(r);
}

int cmd_run(const std::string& path, const OutputOptions& o, bool all_hist, const std::optional<std::uint64_t>& seed,
            bool no_attr, std::size_t attr_elements) {
  fc::CaseSpec spec = fc::load_case(path);
  if (seed) spec.seed = *seed;
  fc::RunOptions ro;
  ro.attribution = !no_attr;
  ro.attribution_elements = attr_elements;
  ro.ref.precision = o.precision;
  ro.ref.threads = o.threads;
  ro.threads = o.threads;
  ro.progress = progress_printer(o);
  fc::check_case_fits(spec);  // before the case line: a refusal is one line
  if (!o.quiet) std::cerr << fmt::format("foldcheck: case {} (seed {})\n", spec.name, spec.seed);
  json r = fc::run_case(spec, ro);
  stamp(r, o);
  if (ro.progress) std::cerr << "\r\033[K";
  emit(o, render(o, r, [&](const json& j) { return fc::reports::run_text(j, {all_hist}); }));
  return exit_code(r);
}

struct DiagnoseArgs {
  std::string input, bn, weights, bias, observed;
  std::int64_t stride = 1, dilation = 1;
  std::optional<std::int64_t> padding;
};

int cmd_diagnose(const DiagnoseArgs& a, const OutputOptions& o) {
  fc::DiagnoseInput in;
  in.x = fc::read_npy(a.input);
  in.observed = fc::read_npy(a.observed);
  // An empty layer has nothing to compare (and no channel to divide by).
  for (const auto& [t, path] : {std::pair{&in.x, &a.input}, std::pair{&in.observed, &a.observed}})
    if (t->data.empty()) throw fc::InputError(fmt::format("{}: empty tensor (shape {})", *path, fc::shape_string(t->shape)));
  check_finite(in.x.data, a.input);
  ExplainArgs ea;
  ea.bn_file = a.bn;
  bool given = false;
  std::string source;
  in.bn = load_bn(ea, given, source, static_cast<std::int64_t>(in.x.data.size()), &in.eps_given);
  if (!a.weights.empty()) {
    in.weights = fc::read_npy(a.weights);
    if (in.weights->shape.empty() || in.weights->data.empty())
      throw fc::InputError(fmt::format("{}: shape {}: conv weights need an output-channel axis and at least one value (OIHW)",
                                       a.weights, fc::shape_string(in.weights->shape)));
    check_finite(in.weights->data, a.weights);
  }
  if (!a.bias.empty()) {
    if (a.weights.empty()) throw fc::InputError("--bias needs --weights (a conv bias without a conv)");
    in.conv_bias = fc::read_npy(a.bias).data;
    check_finite(in.conv_bias, a.bias);
  }
  // One BN value broadcast to every channel (load_bn gives 1 when the file held scalars).
  const std::size_t C = in.weights ? static_cast<std::size_t>(in.weights->shape.at(0))
                                   : static_cast<std::size_t>(in.x.shape.size() >= 2 ? in.x.shape[1] : 1);
  for (auto* v : {&in.bn.gamma, &in.bn.beta, &in.bn.mean, &in.bn.var})
    if (v->size() == 1 && C > 1) v->assign(C, v->front());
  // As the fold and the observed engine compute it: σ² + ε > 0 in the observed dtype.
  if (in.bn.gamma.size() == C) fc::check_bn_params_in(in.bn, C, in.observed.dtype, "BatchNorm (" + a.bn + ")");
  in.stride = a.stride;
  in.dilation = a.dilation;
  in.padding = a.padding;
  in.ref.precision = o.precision;
  in.ref.threads = o.threads;
  json r = fc::diagnose(in);
  stamp(r, o);
  emit(o, o.format == "json" ? fc::cli::json_text(r, 2) : fc::reports::diagnose_text(r));
  return exit_code(r);
}

struct AccuracyDiffArgs {
  std::string model, observed, observed_output, input, recipe = "pytorch";
  std::size_t output_samples = 32;
  std::uint64_t seed = 0;
  bool weights_only = false;
  std::size_t attribution_elements = 256;
};

int cmd_accuracy_diff(const AccuracyDiffArgs& a, const OutputOptions& o) {
  fc::AccuracyDiffOptions ao;
  if (!a.observed.empty()) ao.observed_model = a.observed;
  if (!a.input.empty()) ao.input = a.input;
  if (!a.observed_output.empty()) ao.observed_output = a.observed_output;
  ao.output_samples = a.output_samples;
  ao.seed = a.seed;
  ao.weights_only = a.weights_only;
  ao.recipe = fc::recipe_from_name(a.recipe);
  ao.attribution_elements = a.attribution_elements;
  ao.ref.precision = o.precision;
  ao.ref.threads = o.threads;
  ao.progress = progress_printer(o);
  json r = fc::accuracy_diff(a.model, ao);
  stamp(r, o);
  if (ao.progress) std::cerr << "\r\033[K";
  emit(o, render(o, r, fc::reports::accuracy_diff_text));
  return exit_code(r);
}

}  // namespace

int main(int argc, char** argv) {
  // Keep freed memory for reuse instead of returning it to the OS: a layer's reference and
  // paths allocate tens of MB, and faulting fresh pages back in on every use was measured
  // at ~40 ns per output (more than certifying it). glibc: serve large blocks from the
  // heap (no mmap) and never trim it.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  CLI::App app{"foldcheck — is a conv+BatchNorm drift the rounding IEEE arithmetic predicts, or a bug?\n"
               "Exit codes: 0 the verdict is EXPECTED; 1 it is SUSPICIOUS, UNEXPECTED or MISTRUSTED (bisect: also when a "
               "pass is named; compare: a regression); 2 bad usage or input.",
               "foldcheck"};
  app.set_version_flag("--version", std::string("foldcheck ") + fc::kVersion);
  app.require_subcommand(1);
  // Options of the program as a whole, accepted before or after the subcommand.
  app.fallthrough();
  std::int64_t max_elements = 0;
  app.add_option("--max-elements", max_elements,
                 "Refuse any tensor (in a file, a model or a case) with more elements than this, before allocating it "
                 "(default 2^28 = 268435456, or FOLDCHECK_MAX_ELEMENTS; at most 2^40)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return fc::parse_element_limit(text) ? "" : fmt::format("must be {}, got '{}'", fc::kElementLimitRange, text);
          },
          "N"));

  OutputOptions eo, ro;
  ExplainArgs ea;
  auto* explain = app.add_subcommand(
      "explain",
      "Is an observed folded weight tensor the fold of a BatchNorm? From numbers alone: per element drift (ppm), "
      "exact fold, residual (ULP), the recipes that reproduce it bit for bit, and a verdict with its bound.");
  explain->add_option("--original", ea.original, "Original weights: comma list or .npy (OIHW: channel = axis 0)")->required();
  explain->add_option("--observed", ea.observed, "Observed folded weights: comma list or .npy")->required();
  explain->add_option("--gamma", ea.gamma, "BatchNorm scale: one value or one per channel (list or .npy); default 1");
  explain->add_option("--beta", ea.beta, "BatchNorm shift; default 0");
  explain->add_option("--mean", ea.mean, "Running mean; default 0");
  explain->add_option("--var", ea.var, "Running variance; default 1");
  explain->add_option("--eps", ea.eps, "BatchNorm epsilon; default 1e-5")->each([&](const std::string&) { ea.eps_given = true; });
  explain->add_option("--bn", ea.bn_file, "BatchNorm parameters: .npz with keys gamma, beta, mean, var, eps (each optional)");
  explain->add_option("--dtype", ea.dtype, "float32 (default for lists), float64, float16 or bfloat16; .npy input: its dtype")
      ->check(fc::cli::known_name([](const std::string& n) { (void)fc::dtype_from_name(n); }));
  add_output_options(explain, eo);

  std::string case_path;
  bool all_hist = false;
  std::optional<std::uint64_t> seed;
  auto* run = app.add_subcommand("run", "Evaluate a conv+BN case file along every path, dtype, recipe and accumulation "
                                        "order against the certified reference, with bounds, histograms and verdicts.");
  run->add_option("case", case_path, "Case file (JSON); see cases/README.md")->required();
  run->add_flag("--all-histograms", all_hist, "Print a histogram for every path (text format)");
  run->add_option("--seed", seed, "Override the case's seed (every output prints the seed used)")
      ->check(fc::cli::integer_in(0, UINT64_MAX));
  bool no_attr = false;
  std::size_t attr_elements = 1024;
  run->add_flag("--no-attribution", no_attr, "Skip the stage attribution (faster)");
  run->add_option("--attribution-elements", attr_elements,
                  "Outputs attributed per path: an even sample plus each path's worst element (0: all)")
      ->check(fc::cli::integer_in(0, std::uint64_t(1) << 40))
      ->capture_default_str();
  add_output_options(run, ro, {"text", "json", "markdown", "html"});

  OutputOptions dopt;
  DiagnoseArgs da;
  auto* diag = app.add_subcommand(
      "diagnose",
      "Is an observed conv+BN (or BatchNorm-alone) output the layer's, up to rounding? If not, test the common bugs "
      "(training-mode batch statistics, eps mismatch, variance/std confusion, missing sqrt, gamma/beta swapped, mean "
      "not subtracted, NHWC read as NCHW, bias dropped, BN applied twice) and name the one that explains it.");
  diag->add_option("--input", da.input, "Layer input x (.npy, NCHW or N x C)")->required();
  diag->add_option("--bn", da.bn, "BatchNorm parameters (.npz with keys gamma, beta, mean, var, eps)")->required();
  diag->add_option("--weights", da.weights, "Conv weights (.npy, OIHW); without: the layer is the BatchNorm alone");
  diag->add_option("--bias", da.bias, "Conv bias (.npy, one per output channel)");
  diag->add_option("--observed", da.observed, "Observed output (.npy); its dtype is the compared type")->required();
  diag->add_option("--stride", da.stride, "Conv stride")->check(fc::cli::integer_in(1, 1 << 20))->capture_default_str();
  diag->add_option("--dilation", da.dilation, "Conv dilation")->check(fc::cli::integer_in(1, 1 << 20))->capture_default_str();
  diag->add_option("--padding", da.padding, "Conv padding (symmetric); default: inferred from the shapes")
      ->check(fc::cli::integer_in(0, 1 << 20));
  add_output_options(diag, dopt);

  OutputOptions aopt;
  AccuracyDiffArgs ad;
  auto* adiff = app.add_subcommand(
      "accuracy-diff",
      "Every layer -> BatchNormalization pair of an ONNX model (Conv, ConvTranspose, Gemm, MatMul; also through "
      "Identity): each engine recipe's folded weights and biases against the exact fold, with bounds; with --observed, "
      "another engine's folded model checked layer by layer, naming the layer and output channel beyond rounding; "
      "with --observed-output, another engine's outputs against a probabilistic end-to-end bound.");
  adiff->add_option("model", ad.model, "The model with its BatchNormalization nodes (.onnx)")->required();
  adiff->add_option("--observed", ad.observed,
                    "The same model with its BatchNorms folded by another tool (.onnx); layers are matched in graph "
                    "order (see README)");
  adiff->add_option("--observed-output", ad.observed_output,
                    "Another engine's output of the model on --input (.npy, float32): checked against the float64 run "
                    "with a probabilistic end-to-end bound (see README)");
  adiff->add_option("--output-samples", ad.output_samples,
                    "Perturbed float64 runs that estimate the end-to-end bound (more: a tighter bound, slower)")
      ->check(CLI::Range(2, 4096))
      ->capture_default_str();
  adiff->add_option("--input", ad.input, "Model input (.npy, float32); default: seeded standard-normal values");
  adiff->add_option("--seed", ad.seed, "Seed of the default input")->check(fc::cli::integer_in(0, UINT64_MAX))->capture_default_str();
  adiff->add_option("--recipe", ad.recipe, "Fold of the fused float32 run: pytorch, tvm, onnxruntime, onnxoptimizer, exact")
      ->check(fc::cli::known_name([](const std::string& n) { (void)fc::recipe_from_name(n); }))
      ->capture_default_str();
  adiff->add_option("--attribution-elements", ad.attribution_elements,
                    "Outputs attributed per layer and path (0: no attribution)")
      ->check(fc::cli::integer_in(0, std::uint64_t(1) << 40))
      ->capture_default_str();
  adiff->add_flag("--weights-only", ad.weights_only, "Check the folded parameters only (no runs)");
  add_output_options(adiff, aopt, {"text", "json", "markdown", "html"});

  fc::cli::SuiteCommands suite_cmds;
  suite_cmds.add_to(app);
  fc::cli::BisectCommand bisect_cmd;
  bisect_cmd.add_to(app);
  fc::cli::QuantCommand quant_cmd;
  quant_cmd.add_to(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, exit 2. Without a command, name what was given instead of CLI11's "A
    // subcommand is required".
    std::string message = fc::cli::one_line(e.what());
    if (app.get_subcommands().empty()) {
      std::vector<std::string> names;
      for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) names.push_back(sub->get_name());
      const std::string commands = fmt::format("(commands: {}; see 'foldcheck --help')", fmt::join(names, ", "));
      std::string given;  // the first word that is not a program option or its value
      for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--max-elements") {
          ++i;
          continue;
        }
        if (!a.empty() && a[0] == '-') continue;
        given = a;
        break;
      }
      if (!given.empty()) message = fmt::format("unknown command '{}' {}", fc::cli::one_line(given), commands);
      else if (dynamic_cast<const CLI::RequiredError*>(&e)) message = "a command is required " + commands;
    }
    std::cerr << "foldcheck: error: " << message << "\n";
    return 2;
  }
  try {
    fc::set_max_elements(max_elements > 0 ? max_elements : fc::max_elements_from_environment());
    fc::cli::refuse_outputs_that_are_inputs(app);
    if (*explain) return cmd_explain(ea, eo);
    if (*run) return cmd_run(case_path, ro, all_hist, seed, no_attr, attr_elements);
    if (*diag) return cmd_diagnose(da, dopt);
    if (*adiff) return cmd_accuracy_diff(ad, aopt);
    if (const auto rc = suite_cmds.run()) return *rc;
    if (const auto rc = bisect_cmd.run()) return *rc;
    if (const auto rc = quant_cmd.run()) return *rc;
  } catch (const std::bad_alloc&) {
    // Sizes are checked against the element limit and the machine's memory before large
    // allocations; this is what is left (many tensors each under the limit).
    std::cerr << "foldcheck: error: out of memory: the inputs need more memory than this machine has (a lower "
                 "--max-elements refuses large tensors before allocating them)\n";
    return 2;
  } catch (const std::exception& e) {
    // InputError (bad input), domain_error (an impossible request) or a library's error: all
    // one line naming the input, exit 2.
    std::cerr << "foldcheck: error: " << fc::cli::one_line(e.what()) << "\n";
    return 2;
  }
  return 2;
}
