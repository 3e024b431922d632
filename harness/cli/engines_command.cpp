// `foldcheck engines MODEL.onnx --engine ...`: real engines run on the model, what they
// produced checked against the certified reference (harness engines.hpp; reports engines_text).
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "command.hpp"
#include "common.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/engine_catalog.hpp"
#include "foldcheck/commands/engines.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/reports/text.hpp"

namespace foldcheck::cli {
namespace {

namespace fs = std::filesystem;

// The directory of this program (/proc/self/exe), for the installed adapters.
fs::path program_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : p.parent_path();
}

// Where the built-in adapters are: FOLDCHECK_ENGINES_DIR, else next to an installed program
// (PREFIX/share/foldcheck/engines), else the source tree this program was built from.
std::string default_adapters_dir() {
  if (const char* e = std::getenv("FOLDCHECK_ENGINES_DIR"); e && *e) return e;
  const fs::path installed = program_dir() / ".." / "share" / "foldcheck" / "engines";
  std::error_code ec;
  if (fs::is_directory(installed, ec)) return installed.lexically_normal().string();
  return FOLDCHECK_SOURCE_DIR "/adapters";
}

// The Python that runs them: FOLDCHECK_PYTHON, else the project's environment (.venv, which
// bootstrap makes with the engines pinned), else python3 on PATH.
std::string default_python() {
  if (const char* e = std::getenv("FOLDCHECK_PYTHON"); e && *e) return e;
  const std::string venv = FOLDCHECK_SOURCE_DIR "/.venv/bin/python";
  if (access(venv.c_str(), X_OK) == 0) return venv;
  return "python3";
}

// foldcheck-onednn (adapters/onednn_engine.cpp): next to this program once installed,
// else where the build made it; empty when it was not built.
std::string onednn_adapter() {
  std::error_code ec;
  const fs::path installed = program_dir() / "foldcheck-onednn";
  if (fs::is_regular_file(installed, ec)) return installed.string();
#ifdef FOLDCHECK_ONEDNN_ADAPTER
  return FOLDCHECK_ONEDNN_ADAPTER;
#else
  return "";
#endif
}

class EnginesCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    std::string known;
    for (const std::string& k : builtin_engine_names()) known += (known.empty() ? "" : ", ") + k;
    cmd_ = app.add_subcommand(
        "engines",
        "Run real engines on an ONNX model and check everything they produced against the certified reference: their "
        "folded weights, and each conv's output on the engine's own input to it (per element, and per channel for a "
        "systematic change), naming the first layer an engine gets wrong. Exit 0 when every engine is EXPECTED.");
    cmd_->add_option("model", model_, "The model with its BatchNormalization nodes (.onnx)")->required();
    cmd_->add_option("--engine", names_, "A built-in engine (" + known + "); repeat for several")
        ->check(known_name([](const std::string& n) {
          const auto& k = builtin_engine_names();
          if (std::find(k.begin(), k.end(), n) == k.end() && n != "onnxruntime") (void)builtin_engine(n, {"python3", ".", "x"});
        }));
    cmd_->add_option("--adapter", adapters_,
                     "LABEL=COMMAND: your own adapter (/bin/sh); {model}, {input} and {outdir} are substituted as quoted "
                     "words; it writes OUTDIR/manifest.json and .npy files (the protocol: adapters/README.md)");
    cmd_->add_option("--input", input_, "Model input (.npy, float32); default: seeded standard-normal values");
    cmd_->add_option("--seed", opts_.seed, "Seed of the default input and of the honest computations' channel orders")
        ->check(integer_in(options::kSeed))
        ->capture_default_str();
    cmd_->add_option("--confidence", opts_.confidence,
                     "Probability that a correct engine passes: the probabilistic bounds and the channel statistic")
        ->check(finite_number(options::kConfidence))
        ->capture_default_str();
    cmd_->add_option("--channel-samples", opts_.channel_samples,
                     "Honest computations per layer (other kernel orders) that estimate the channel statistic's noise; "
                     "0: the rigorous bound only (see README)")
        ->check(integer_in(options::kChannelSamples))
        ->capture_default_str();
    cmd_->add_option("--output-samples", opts_.output_samples,
                     "Perturbed float64 runs of the end-to-end bound the engines' final outputs are held to (0: final "
                     "outputs not judged)")
        ->check(integer_in(options::kEngineOutputSamples))
        ->capture_default_str();
    cmd_->add_option("--timeout", opts_.timeout_seconds, "Seconds per adapter run")
        ->check(finite_number(options::kTimeoutSeconds))
        ->capture_default_str();
    std::vector<std::string> arithmetics;
    for (const ConvArithmetic& a : all_conv_arithmetics()) arithmetics.emplace_back(a.name());
    cmd_->add_option("--arithmetic", arithmetic_,
                     "The arithmetic the engines' convs ran in, for an engine whose manifest does not say: float32 "
                     "(default), tf32 (TF32 tensor cores), bf16 / fp16 (operands, float32 sums), fp16-accumulate, "
                     "bf16x3. Each layer is held to that arithmetic's general bound (every operand conversion keeping "
                     "its bits; outputs stored in its 16-bit format when every value is one), the final outputs to its "
                     "end-to-end bound (nearest conversions; none for fp16-accumulate and bf16x3); diagnose replays "
                     "one layer's conversions exactly, a sharper check")
        ->check(CLI::IsMember(arithmetics));
    cmd_->add_option("--algorithm", algorithm_,
                     "How the engines' convs formed their sums where it applies, for an engine whose manifest does not "
                     "say: direct (default), winograd2 / winograd4 / winograd6 (Winograd F(m x m, 3 x 3) on 3x3 "
                     "stride-1 convs; winograd4-onednn: oneDNN's F(4x4) points), fft (stride-1 convs, float32 "
                     "only), split-k:S (the direct bound holds)");
    cmd_->add_option("--work-dir", work_dir_, "Keep the adapters' files here (default: a temporary directory, removed)");
    cmd_->add_option("--python", python_, "Python for the built-in adapters (default: $FOLDCHECK_PYTHON, the project's .venv, python3)")
        ->check(CLI::ExistingFile);
    cmd_->add_option("--adapters-dir", adapters_dir_, "Directory of the built-in adapters (default: $FOLDCHECK_ENGINES_DIR, installed, source)")
        ->check(CLI::ExistingDirectory);
    add_output_options(cmd_, out_, {"text", "json"});
  }

  int run() override {
    EnginesOptions eo = opts_;
    const EngineTools tools{python_.empty() ? default_python() : python_,
                            adapters_dir_.empty() ? default_adapters_dir() : adapters_dir_, onednn_adapter()};
    eo.engines = engine_list(names_, adapters_, tools);
    if (!input_.empty()) eo.input = input_;
    if (!work_dir_.empty()) eo.work_dir = work_dir_;
    if (!arithmetic_.empty()) eo.arithmetic = conv_arithmetic_from_name(arithmetic_);
    if (!algorithm_.empty()) eo.algorithm = conv_algorithm_from_name(algorithm_);
    eo.ref.precision = out_.precision;
    eo.ref.threads = out_.threads;
    eo.progress = progress_printer(out_);
    const EnginesResult result = engines(model_, eo);
    return finish(out_, result.to_json(), result.verdict(), reports::engines_text, static_cast<bool>(eo.progress));
  }

 private:
  OutputOptions out_;
  std::string model_, input_, work_dir_, python_, adapters_dir_, arithmetic_, algorithm_;
  std::vector<std::string> names_, adapters_;
  EnginesOptions opts_;
};

}  // namespace

std::unique_ptr<Command> engines_command() { return std::make_unique<EnginesCommand>(); }

}  // namespace foldcheck::cli
