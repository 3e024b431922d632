// accuracy_diff and engines on ONNX models (bind.hpp). Models, inputs and observed outputs are
// files here: the Python layer writes arrays it is given to .npy files first.
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include <pybind11/stl.h>

#include "bind.hpp"
#include "call.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/commands/engine_catalog.hpp"
#include "foldcheck/commands/engines.hpp"
#include "foldcheck/numerics/conv_arithmetic.hpp"
#include "foldcheck/reports/text.hpp"
#include "result.hpp"

namespace foldcheck::py {
namespace {

namespace pyb = pybind11;

using Arg = const pyb::object&;

Result py_accuracy_diff(Arg model, Arg observed, Arg input, Arg seed, Arg observed_output, Arg output_samples,
                        Arg arithmetic, Arg weights_only, Arg recipe, Arg attribution, Arg attribution_elements,
                        Arg confidence, Arg precision, Arg threads, pyb::object on_progress, Arg unmodelled) {
  AccuracyDiffOptions o;
  const std::string model_path = text(model, "model");
  o.observed_model = optional_text(observed, "observed");
  o.input = optional_text(input, "input");
  o.seed = integer(seed, "seed", options::kSeed);
  o.observed_output = optional_text(observed_output, "observed_output");
  o.output_samples = integer(output_samples, "output_samples", options::kOutputSamples);
  o.arithmetic = conv_arithmetic_from_name(text(arithmetic, "arithmetic"));
  o.weights_only = flag(weights_only, "weights_only");
  o.recipe = recipe_from_name(text(recipe, "recipe"));
  o.attribution = flag(attribution, "attribution");
  o.attribution_elements = integer(attribution_elements, "attribution_elements", options::kAttributionElements);
  o.confidence = number(confidence, "confidence", options::kConfidence);
  o.ref = reference_options(precision, threads);
  o.progress = progress(std::move(on_progress));
  for (auto& [layer, why] : text_pairs(unmodelled, "unmodelled")) o.unmodelled[layer] = why;
  const AccuracyDiffResult r = released([&] { return accuracy_diff(model_path, o); });
  return make_result("accuracy-diff", r.to_json(), r.verdict(), reports::accuracy_diff_text);
}

// The engines to run: built-in names and own adapters {label: command}, converted here (scalars.hpp)
// and held to engine_list's rule, before anything runs.
std::vector<EngineSpec> engines_given(Arg names, Arg adapters, const EngineTools& tools) {
  std::vector<EngineSpec> own;
  for (auto& [label, command] : text_pairs(adapters, "adapters")) own.push_back({label, command});
  return engine_list(texts(names, "engines"), own, tools);
}

// The tools of the built-in engines; `python` as the command line's --python takes it: an
// existing file, not a directory.
EngineTools engine_tools(Arg python, Arg adapters_dir, Arg onednn) {
  EngineTools t{text(python, "python"), text(adapters_dir, "adapters_dir"), text(onednn, "onednn")};
  std::error_code ec;
  if (!std::filesystem::exists(t.python, ec) || std::filesystem::is_directory(t.python, ec))
    throw InputError(fmt::format("python: {}: not a file (the Python that runs the built-in adapters)", t.python));
  return t;
}

Result py_engines(Arg model, Arg names, Arg adapters, const EngineTools& tools, Arg input, Arg seed, Arg confidence,
                  Arg channel_samples, Arg output_samples, Arg timeout, Arg work_dir, Arg precision, Arg threads,
                  Arg arithmetic, Arg algorithm, pyb::object on_progress) {
  EnginesOptions o;
  if (const auto a = optional_text(arithmetic, "arithmetic")) o.arithmetic = conv_arithmetic_from_name(*a);
  if (const auto a = optional_text(algorithm, "algorithm")) o.algorithm = conv_algorithm_from_name(*a);
  const std::string model_path = text(model, "model");
  o.input = optional_text(input, "input");
  o.seed = integer(seed, "seed", options::kSeed);
  o.confidence = number(confidence, "confidence", options::kConfidence);
  o.channel_samples = integer(channel_samples, "channel_samples", options::kChannelSamples);
  o.output_samples = integer(output_samples, "output_samples", options::kEngineOutputSamples);
  o.timeout_seconds = number(timeout, "timeout", options::kTimeoutSeconds);
  o.work_dir = optional_text(work_dir, "work_dir");
  o.ref = reference_options(precision, threads);
  o.engines = engines_given(names, adapters, tools);
  o.progress = progress(std::move(on_progress));
  const EnginesResult r = released([&] { return engines(model_path, o); });
  return make_result("engines", r.to_json(), r.verdict(), reports::engines_text);
}

// The defaults of accuracy_diff and engines: the options structs' own (default-constructed), the
// one place they are written; the keyword defaults here and in the Python layer read them
// (_core.accuracy_diff_defaults, _core.engines_defaults).
pyb::dict accuracy_diff_defaults() {
  const AccuracyDiffOptions d;
  pyb::dict o;
  o["seed"] = d.seed;
  o["output_samples"] = d.output_samples;
  o["arithmetic"] = std::string(d.arithmetic.name());
  o["weights_only"] = d.weights_only;
  o["recipe"] = std::string(name(d.recipe));
  o["attribution"] = d.attribution;
  o["attribution_elements"] = d.attribution_elements;
  o["confidence"] = d.confidence;
  add_reference_defaults(o, d.ref);
  return o;
}

pyb::dict engines_defaults() {
  const EnginesOptions d;
  pyb::dict o;
  o["seed"] = d.seed;
  o["confidence"] = d.confidence;
  o["channel_samples"] = d.channel_samples;
  o["output_samples"] = d.output_samples;
  o["timeout"] = d.timeout_seconds;
  add_reference_defaults(o, d.ref);
  return o;
}

}  // namespace

void bind_model(pyb::module_& m) {
  using pyb::arg;
  pyb::class_<EngineTools>(m, "EngineTools")
      .def(pyb::init(&engine_tools), arg("python"), arg("adapters_dir"), arg("onednn"));
  m.def("engine_names", &builtin_engine_names);
  const pyb::dict a = accuracy_diff_defaults(), e = engines_defaults();
  m.attr("accuracy_diff_defaults") = a;
  m.attr("engines_defaults") = e;
  m.def("accuracy_diff", &py_accuracy_diff, arg("model"), arg("observed") = pyb::none(), arg("input") = pyb::none(),
        arg("seed") = pyb::object(a["seed"]), arg("observed_output") = pyb::none(),
        arg("output_samples") = pyb::object(a["output_samples"]), arg("arithmetic") = pyb::object(a["arithmetic"]),
        arg("weights_only") = pyb::object(a["weights_only"]), arg("recipe") = pyb::object(a["recipe"]),
        arg("attribution") = pyb::object(a["attribution"]),
        arg("attribution_elements") = pyb::object(a["attribution_elements"]),
        arg("confidence") = pyb::object(a["confidence"]), arg("precision") = pyb::object(a["precision"]),
        arg("threads") = pyb::object(a["threads"]), arg("progress") = pyb::none(), arg("unmodelled") = pyb::none());
  m.def("engines", &py_engines, arg("model"), arg("names"), arg("adapters"), arg("tools"), arg("input") = pyb::none(),
        arg("seed") = pyb::object(e["seed"]), arg("confidence") = pyb::object(e["confidence"]),
        arg("channel_samples") = pyb::object(e["channel_samples"]),
        arg("output_samples") = pyb::object(e["output_samples"]), arg("timeout") = pyb::object(e["timeout"]),
        arg("work_dir") = pyb::none(), arg("precision") = pyb::object(e["precision"]),
        arg("threads") = pyb::object(e["threads"]), arg("arithmetic") = pyb::none(), arg("algorithm") = pyb::none(),
        arg("progress") = pyb::none());
}

}  // namespace foldcheck::py
