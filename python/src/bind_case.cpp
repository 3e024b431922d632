// run and bisect: case files and pass pipelines (bind.hpp).
#include <cmath>
#include <optional>
#include <utility>

#include <pybind11/stl.h>

#include "bind.hpp"
#include "call.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/commands/bisect.hpp"
#include "foldcheck/commands/run_case.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/layer/passes.hpp"
#include "foldcheck/model/known_computation.hpp"
#include "foldcheck/model/model.hpp"
#include "foldcheck/reports/text.hpp"
#include "result.hpp"

namespace foldcheck::py {
namespace {

namespace pyb = pybind11;
using OptPath = std::optional<std::string>;

// A case: a file, or its JSON text (named `name` in messages).
CaseSpec case_of(const std::string& path, const OptPath& text) {
  if (!text) return load_case(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(*text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not JSON: " + e.what());
  }
  return load_case(j, path);
}

using Arg = const pyb::object&;

Result py_run(Arg path, Arg case_text, Arg seed, Arg attribution, Arg attribution_elements, Arg precision, Arg threads,
              Arg arithmetic, Arg conversion, Arg algorithm, pyb::object on_progress) {
  RunOptions o;
  const std::optional<std::uint64_t> seed_given = optional_integer(seed, "seed", options::kSeed);
  o.attribution = flag(attribution, "attribution");
  o.attribution_elements = integer(attribution_elements, "attribution_elements", options::kAttributionElements);
  o.ref = reference_options(precision, threads);
  o.threads = o.ref.threads;
  CaseSpec spec = case_of(text(path, "path"), optional_text(case_text, "text"));
  if (seed_given) spec.seed = *seed_given;
  apply_arithmetic(spec, optional_text(arithmetic, "arithmetic").value_or(""),
                   optional_text(conversion, "conversion").value_or(""));
  if (const auto a = optional_text(algorithm, "algorithm")) apply_algorithm(spec, conv_algorithm_from_name(*a));
  o.progress = progress(std::move(on_progress));
  check_case_fits(spec);
  const RunResult r = released([&] { return run_case(spec, o); });
  return make_result("run", r.to_json(), r.verdict(), [](const nlohmann::json& j) { return reports::run_text(j); });
}

// bisect's modes by their Python names, the one table mode_of and mode_name read.
constexpr std::pair<const char*, BisectMode> kModes[] = {{"search", BisectMode::Search},
                                                         {"linear", BisectMode::Linear},
                                                         {"leave_one_out", BisectMode::LeaveOneOut}};

BisectMode mode_of(const std::string& m) {
  for (const auto& [n, mode] : kModes)
    if (m == n) return mode;
  throw InputError("mode '" + m + "': expected search, linear or leave_one_out");
}

const char* mode_name(BisectMode m) {
  for (const auto& [n, mode] : kModes)
    if (m == mode) return n;
  return kModes[0].first;
}

// A bisect's result; its exit status says whether it is clean (no pass named, nothing wrong).
Result bisect_result(const BisectResult& r) {
  Result out = make_result("bisect", r.to_json(), r.verdict(), reports::bisect_text);
  out.exit = r.clean() ? 0 : 1;  // as `foldcheck bisect`: a pass named is a finding
  return out;
}

// bisect's scalar arguments, converted once (scalars.hpp).
struct BisectArgs {
  OptPath target, target_text, dtype, input, command, model, reference;
  std::optional<std::uint64_t> opt_level;
  std::string mode;
  std::optional<double> threshold_ulp;
  std::uint64_t seed;
  double timeout;
};

Result py_bisect(const BisectArgs& a, std::vector<std::string> passes, const std::vector<std::string>& disabled,
                 const ref::Options& ref, pyb::object on_progress) {
  // Lambdas below name a's members: clang 14 (tools/hardening.sh, clang-tidy) cannot capture a
  // structured binding.
  const auto& [target, target_text, dtype, input, command, model, reference, opt_level, mode, threshold_ulp, seed,
               timeout] = a;
  if (opt_level) {
    if (!passes.empty()) throw InputError("passes: give passes or opt_level, not both");
    passes = pipeline_for(static_cast<int>(*opt_level), disabled);
  }
  const auto prog = progress(std::move(on_progress));
  if (command) {
    check_pass_names(passes);
    if (target) throw InputError("command: an external bisect takes no case or model target (give `model` or `reference`)");
    ExternalBisectOptions eo;
    eo.command = *command;
    eo.passes = passes;
    eo.threshold_ulp = threshold_ulp;
    eo.timeout_seconds = timeout;
    eo.mode = mode_of(mode);
    eo.progress = prog;
    if (dtype) eo.dtype = dtype_from_name(*dtype);
    if (model.has_value() == reference.has_value())
      throw InputError("command: give exactly one of `model` (with `input`) or `reference`");
    if (reference) {
      const Tensor t = read_npy(*reference);
      if (info(t.dtype).unit_roundoff > info(eo.dtype).unit_roundoff)
        throw InputError(*reference + ": a " + name(t.dtype) + " reference for " + name(eo.dtype) +
                         " outputs: it must be exact, or float64");
      if (t.data.empty()) throw InputError(*reference + ": empty reference: nothing to compare");
      eo.reference = t.data;
      eo.reference_shape = t.shape;
      eo.reference_source = *reference;
    } else {
      if (!input) throw InputError("model: needs `input` (the input the command runs the model on)");
      ModelComputationOptions mo;
      if (dtype) mo.dtype = dtype_from_name(*dtype);
      mo.seed = seed;
      mo.ref = ref;
      mo.progress = prog;
      eo.known = released([&] { return model_computation(Model::load(*a.model), *a.model, *a.input, mo); });
    }
    return bisect_result(released([&] { return external_bisect(eo); }));
  }
  if (!target) throw InputError("target: give a case file or an ONNX model (or `command` for an external compiler)");
  BisectOptions bo;
  bo.passes = passes;
  bo.mode = mode_of(mode);
  bo.threshold_ulp = threshold_ulp;
  if (dtype) bo.dtype = dtype_from_name(*dtype);
  bo.ref = ref;
  bo.progress = prog;
  const bool onnx = target->size() > 5 && target->substr(target->size() - 5) == ".onnx";
  if (onnx) return bisect_result(released([&] { return bisect_model(*a.target, a.input, a.seed, bo); }));
  const CaseSpec spec = case_of(*target, target_text);
  return bisect_result(released([&] { return bisect_case(spec, bo); }));
}

Result py_bisect_args(Arg target, Arg target_text, Arg passes, Arg opt_level, Arg disabled, Arg mode, Arg threshold_ulp,
                      Arg dtype, Arg input, Arg seed, Arg command, Arg model, Arg reference, Arg timeout, Arg precision,
                      Arg threads, pyb::object on_progress) {
  BisectArgs a{optional_text(target, "target"),
               optional_text(target_text, "target_text"),
               optional_text(dtype, "dtype"),
               optional_text(input, "input"),
               optional_text(command, "command"),
               optional_text(model, "model"),
               optional_text(reference, "reference"),
               optional_integer(opt_level, "opt_level", options::kOptLevel),
               text(mode, "mode"),
               optional_number(threshold_ulp, "threshold_ulp", options::kThresholdUlp),
               integer(seed, "seed", options::kSeed),
               number(timeout, "timeout", options::kTimeoutSeconds)};
  return py_bisect(a, texts(passes, "passes"), texts(disabled, "disabled"), reference_options(precision, threads),
                   std::move(on_progress));
}

// The defaults of run and bisect: their C++ options structs' own (default-constructed:
// RunOptions; BisectOptions, ExternalBisectOptions's timeout, ModelComputationOptions's seed of
// a model's input), the one place they are written; the keyword defaults here and in the Python
// layer read them (_core.run_defaults, _core.bisect_defaults).
pyb::dict run_defaults() {
  const RunOptions d;
  pyb::dict o;
  o["attribution"] = d.attribution;
  o["attribution_elements"] = d.attribution_elements;
  add_reference_defaults(o, d.ref);
  return o;
}

pyb::dict bisect_defaults() {
  const BisectOptions d;
  pyb::dict o;
  o["mode"] = std::string(mode_name(d.mode));
  o["seed"] = ModelComputationOptions{}.seed;
  o["timeout"] = ExternalBisectOptions{}.timeout_seconds;
  add_reference_defaults(o, d.ref);
  return o;
}

}  // namespace

void bind_case(pyb::module_& m) {
  using pyb::arg;
  using pyb::object;
  const pyb::dict r = run_defaults(), b = bisect_defaults();
  m.attr("run_defaults") = r;
  m.attr("bisect_defaults") = b;
  m.def("run", &py_run, arg("path"), arg("text") = pyb::none(), arg("seed") = pyb::none(),
        arg("attribution") = object(r["attribution"]), arg("attribution_elements") = object(r["attribution_elements"]),
        arg("precision") = object(r["precision"]), arg("threads") = object(r["threads"]),
        arg("arithmetic") = pyb::none(), arg("conversion") = pyb::none(), arg("algorithm") = pyb::none(),
        arg("progress") = pyb::none());
  m.def("bisect", &py_bisect_args, arg("target") = pyb::none(), arg("target_text") = pyb::none(),
        arg("passes") = pyb::tuple(), arg("opt_level") = pyb::none(), arg("disabled") = pyb::tuple(),
        arg("mode") = object(b["mode"]), arg("threshold_ulp") = pyb::none(), arg("dtype") = pyb::none(),
        arg("input") = pyb::none(), arg("seed") = object(b["seed"]), arg("command") = pyb::none(),
        arg("model") = pyb::none(), arg("reference") = pyb::none(), arg("timeout") = object(b["timeout"]),
        arg("precision") = object(b["precision"]), arg("threads") = object(b["threads"]),
        arg("progress") = pyb::none());
}

}  // namespace foldcheck::py
