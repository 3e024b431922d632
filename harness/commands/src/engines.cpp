// `foldcheck engines` (engines.hpp): running the adapters and checking what they wrote.
#include "foldcheck/commands/engines.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "engine_layers.hpp"
#include "foldcheck/base/envelope.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/task_pool.hpp"
#include "foldcheck/commands/accuracy_diff.hpp"
#include "foldcheck/io/engine_manifest.hpp"
#include "foldcheck/io/npy.hpp"
#include "foldcheck/model/layer_computation.hpp"
#include "foldcheck/model/layer_match.hpp"
#include "foldcheck/model/model_run.hpp"
#include "foldcheck/model/output_bound.hpp"
#include "foldcheck/numerics/dtype.hpp"
#include "foldcheck/platform/process.hpp"
#include "output_band_json.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using Say = std::function<void(const std::string&)>;

// The directory the adapters write into: the user's (kept), or a fresh temporary one that is
// removed on every way out.
class WorkDir {
 public:
  explicit WorkDir(const std::optional<std::string>& keep) {
    if (keep) {
      std::error_code ec;
      if (fs::exists(*keep, ec) && (!fs::is_directory(*keep, ec) || !fs::is_empty(*keep, ec)))
        throw InputError(
            fmt::format(fmt::runtime(field("work_dir") +
                                     " {}: must be an empty directory or not exist (its files would be replaced)"),
                        *keep));
      fs::create_directories(*keep, ec);
      if (ec)
        throw InputError(
            fmt::format(fmt::runtime(field("work_dir") + " {}: cannot make it ({})"), *keep, ec.message()));
      path_ = made(*keep);
      return;
    }
    std::string tmpl = (fs::temp_directory_path() / "foldcheck-engines-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      throw InputError("cannot make a temporary directory in " + fs::temp_directory_path().string());
    path_ = made(tmpl);
    owned_ = true;
  }
  ~WorkDir() { remove(); }
  void remove() {
    std::error_code ec;
    if (owned_) fs::remove_all(path_, ec);
    owned_ = false;
  }
  WorkDir(const WorkDir&) = delete;
  WorkDir& operator=(const WorkDir&) = delete;
  const fs::path& path() const { return path_; }
  bool owned() const { return owned_; }

  // The directory as made, by its canonical path: the adapters' files are read from there
  // only while no component of it became a link (contained_file.hpp).
  static fs::path made(const std::string& dir) {
    std::error_code ec;
    const fs::path real = fs::canonical(dir, ec);
    return ec ? fs::path(dir) : real;
  }

 private:
  fs::path path_;
  bool owned_ = false;
};

// The adapter's last words on stderr, on one line (" | " for its line breaks).
std::string stderr_tail(const command::Outcome& r) {
  std::string t = r.err.last(2000);
  while (!t.empty() && t.back() == '\n') t.pop_back();
  for (std::size_t i; (i = t.find('\n')) != std::string::npos;) t.replace(i, 1, " | ");
  return t.empty() ? "" : "; its last words: " + t;
}

// Every occurrence of `from` in s replaced by `to`.
void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (std::size_t i = 0; (i = s.find(from, i)) != std::string::npos; i += to.size()) s.replace(i, from.size(), to);
}

// foldcheck's work directory as it made it (lstat: a link in its place is not it), to tell
// whether an adapter replaced, moved or removed it: inputs and OUTDIRs are written only into it.
struct DirIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const DirIdentity&) const = default;
};

std::optional<DirIdentity> dir_identity(const fs::path& p) {
  struct stat s {};
  if (::lstat(p.c_str(), &s) != 0 || !S_ISDIR(s.st_mode)) return std::nullopt;
  return DirIdentity{s.st_dev, s.st_ino};
}

// A run that failed or was not run: its spec and why, nothing else (EngineRun::failed).
EngineRun failed_run(const EngineSpec& spec, std::string why) {
  EngineRun run;
  run.spec = spec;
  run.failed = std::move(why);
  return run;
}

// An engine not run because an earlier adapter replaced or removed the work directory: its
// input and OUTDIR would be written wherever the replacement points (a user's directory).
EngineRun not_run(const EngineSpec& spec, const fs::path& work_dir) {
  return failed_run(spec, fmt::format("not run: an earlier adapter replaced or removed foldcheck's work directory {} "
                                      "(nothing is written into what took its place)",
                                      work_dir.string()));
}

// The bytes of the model file the adapters are given ({model}: the user's own file, not a
// copy), hashed, to tell whether an adapter wrote to it: an engine after it would run another
// model than the one the checks read (and the user's file stays changed). Unreadable: none.
std::optional<std::size_t> file_fingerprint(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  const std::string bytes{std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
  return std::hash<std::string>{}(bytes);
}

// The same values bit for bit (NaN payloads and signed zeros included).
bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

// Whether the model an adapter was given is no longer the one the checks read: its file's
// bytes (file_fingerprint), or its weights read again, which also come from the external data
// files beside it (a changed data file leaves the model file's bytes as they were).
bool model_differs(const std::string& path, std::optional<std::size_t> bytes, const Model& m) {
  if (file_fingerprint(path) != bytes) return true;
  try {
    const Model again = Model::load(path);
    if (again.initializers.size() != m.initializers.size() || again.int_inits != m.int_inits) return true;
    for (const auto& [name, t] : m.initializers) {
      const auto it = again.initializers.find(name);
      if (it == again.initializers.end() || it->second.shape != t.shape || !same_bits(it->second.data, t.data))
        return true;
    }
  } catch (const InputError&) {  // no longer readable: changed
    return true;
  }
  return false;
}

// An engine run whose adapter changed the model file: what it wrote was computed from another
// model, and the engines after it are not run (they would read the changed file).
void changed_the_model(EngineRun& run, const std::string& model_path) {
  EngineRun failed =
      failed_run(run.spec,
                 fmt::format("the adapter changed the model file it was given, {}, or the external data beside it: its "
                             "results are of another model, not judged; restore the files (the engines after it are "
                             "not run)",
                             model_path));
  failed.engine = run.engine;
  failed.seconds = run.seconds;
  run = std::move(failed);
}

EngineRun model_changed_earlier(const EngineSpec& spec, const std::string& model_path) {
  return failed_run(spec, fmt::format("not run: an earlier adapter changed the model file {}", model_path));
}

// Runs one adapter; InputError-free: a failure is the engine's result, not foldcheck's.
std::optional<std::string> run_adapter(const EngineSpec& s, const std::string& model, const fs::path& input,
                                       const fs::path& outdir, const EnginesOptions& o, const command::SignalScope& sig,
                                       double& seconds) {
  fs::remove_all(outdir);
  fs::create_directories(outdir);
  const std::string cmd =
      command::expand_placeholders(s.command,
                                   {{"{model}", model}, {"{input}", input.string()}, {"{outdir}", outdir.string()}});
  const command::Outcome r = command::run_command(cmd, o.timeout_seconds, sig);
  seconds = r.seconds;
  if (r.status == -1)
    return fmt::format("the adapter timed out after {:g} s: {}{}", o.timeout_seconds, cmd, stderr_tail(r));
  if (r.status != 0)
    return fmt::format("the adapter failed ({}): {}{}",
                       r.status == -2 ? fmt::format("killed by signal {}", r.signal) : fmt::format("exit {}", r.status),
                       cmd, stderr_tail(r));
  return std::nullopt;
}

// A value the adapter wrote, as float32 values (an engine computing in float32 writes them),
// read under the one rule of the adapter's files (engine_manifest.hpp, contained_file.hpp).
Tensor read_value(const EngineManifest& man, const std::string& path) {
  Tensor t = parse_npy(read_adapter_file(man, path, ".npy file"), path);
  if (t.dtype != DType::Float32)
    throw InputError(
        fmt::format("{}: {} values; the engine's layer values must be float32", path, foldcheck::name(t.dtype)));
  return t;
}

// The engine's folded model, read under the same rule (its external data, if any, is read by
// Model::parse from beside it: inside OUTDIR, a regular file, of the declared length).
Model read_folded_model(const EngineManifest& man) {
  return Model::parse(read_adapter_file(man, *man.folded_model, "ONNX model"), *man.folded_model);
}

// Every name the manifest gives is a name of the model it says it names: a typo or a name of
// another model would leave a layer unchecked or an output unscored without a word. `values`,
// `layers` and `left_out` name values (and layers: a node's name) of the values_of model;
// `outputs` names graph outputs of the original model (the outputs scored end to end).
void check_manifest_names(const EngineManifest& man, const Model& model, const Model* folded) {
  const Model& of = man.values_of_folded && folded ? *folded : model;
  const std::string whose = &of == &model ? "the model" : "the engine's folded model";
  std::set<std::string> values, layers;
  for (const ValueInfo& v : of.inputs) values.insert(v.name);
  for (const ModelNode& n : of.nodes) {
    values.insert(n.outputs.begin(), n.outputs.end());
    if (!n.name.empty()) layers.insert(n.name);
  }
  const std::string where = (fs::path(man.dir) / "manifest.json").string();
  auto refuse = [&](const std::string& field, const std::string& name, const std::string& what) {
    throw InputError(fmt::format("{}: `{}` names '{}', which is not {} (the adapter protocol: adapters/README.md)",
                                 where, field, name, what));
  };
  for (const auto& [name, file] : man.values)
    if (!values.contains(name)) refuse("values", name, "a value of " + whose);
  for (const auto& [name, files] : man.layers)
    if (!values.contains(name) && !layers.contains(name))
      refuse("layers", name, "a layer (a node's name or output) of " + whose);
  for (const auto& [name, why] : man.left_out)
    if (!values.contains(name) && !layers.contains(name)) refuse("left_out", name, "a layer or value of " + whose);
  for (const auto& output : man.outputs) {  // not a structured binding: clang 14 cannot capture one
    const std::string& name = output.first;
    if (std::none_of(model.outputs.begin(), model.outputs.end(), [&](const ValueInfo& o) { return o.name == name; }))
      refuse("outputs", name, "a graph output of the model");
  }
}

// Where the engine's values of pair p are (engine_layers.hpp).
LayerValueNames value_names(const Model& m, const BnPair& p, const Model* folded, std::optional<std::size_t> on) {
  LayerValueNames v;
  if (!folded) {
    const ModelNode& n = m.nodes[p.layer];
    v.key = n.name.empty() ? n.outputs.at(0) : n.name;
    v.x = n.inputs.at(0);
    v.y = m.nodes[p.bn].outputs.at(0);
    return v;
  }
  const ModelNode& n = folded->nodes[*on];
  v.key = n.name.empty() ? n.outputs.at(0) : n.name;
  v.x = n.inputs.at(0);
  v.y = n.outputs.at(0);
  if (const auto bn = batchnorm_after(*folded, *on)) v.y = folded->nodes[*bn].outputs.at(0);  // not folded
  for (const std::size_t c : folded->consumers_of(n.outputs.at(0)))  // a MatMul's bias added apart: after it
    if (matmul_bias_add(*folded, folded->nodes[c]) == *on) v.y = folded->nodes[c].outputs.at(0);
  if (n.op == "FusedConv" && n.inputs.size() > 3 && !n.inputs[3].empty()) {
    v.unsupported = "its fused Add (FusedConv input Z) is not modelled";
    return v;
  }
  if (n.op == "FusedConv") {
    const std::string act = n.string_attr("activation", "");
    const Attribute* ap = n.attr("activation_params");
    if (act == "Relu") v.activation = {"Relu", 0.0, HUGE_VAL};
    else if (act == "Clip" && ap && ap->floats.size() == 2) v.activation = {"Clip", ap->floats[0], ap->floats[1]};
    else v.unsupported = fmt::format("its fused activation {} is not modelled (Relu and Clip are: exact)", act);
  }
  return v;
}

// What the whole command shares; the end-to-end bound is made on first use.
struct Context {
  const Model& model;
  const BnPatterns& pat;
  const EnginesOptions& o;
  double alpha = 1e-6;
  Tensor x;
  const command::SignalScope& signals;
  // The end-to-end bounds made so far, by arithmetic (its name, and "/16" with activations
  // stored in its 16-bit format): the bound, or why it was not made.
  mutable std::map<std::string, std::variant<OutputBound, std::string>> bounds;
  // The band's honest side (model/output_band.hpp), made at the first float32 final output and
  // shared by every engine's (the same model and input).
  mutable std::optional<BandCalibration> band;
};

// The band of an engine's float32 final output y of the model (its reference: the float64
// run's), or why there is none: another arithmetic (the honest runs are float32), or a graph
// output that is not the model's first.
OutputBand final_output_band(const Context& cx, const Say& say, const ConvArithmetic& a, bool stored16,
                             const std::string& out, const Tensor& ref, const Tensor& y) {
  OutputBand none;
  if (a.kind != ConvArithmeticKind::Float32 || stored16) {
    none.not_computed =
        std::string("the band's honest runs are float32; ") + a.name() + " is judged by the bound alone";
    return none;
  }
  if (out != cx.model.outputs.at(0).name) {
    none.not_computed = "the band projects the model's first output; " + out + " is judged by the bound alone";
    return none;
  }
  OutputBandOptions bo;
  bo.seed = cx.o.seed;
  bo.threads = cx.o.ref.threads;
  bo.progress = [&](const std::string& what) {
    cx.signals.throw_if_pending();
    say(what);
  };
  if (!cx.band) cx.band = calibrate_band(cx.model, cx.pat, cx.x, ref, bo);
  return judge_band(*cx.band, cx.model, cx.pat, cx.x, ref, y.data, bo);
}

// The end-to-end bound of the model on the input for an engine computing in `a` (activations
// stored in its 16-bit format when stored16: set_end_to_end_arithmetic), made once per
// arithmetic; the reason when foldcheck cannot run the model or bound that arithmetic.
const std::variant<OutputBound, std::string>& end_to_end_bound(const Context& cx, const Say& say,
                                                               const ConvArithmetic& a, bool stored16) {
  const std::string key = std::string(a.name()) + (stored16 ? "/16" : "");
  if (const auto it = cx.bounds.find(key); it != cx.bounds.end()) return it->second;
  try {
    check_supported(cx.model);
    OutputBoundOptions bo;
    bo.samples = cx.o.output_samples;
    bo.seed = cx.o.seed;
    bo.confidence = cx.o.confidence;
    bo.threads = cx.o.ref.threads;
    set_end_to_end_arithmetic(a, stored16, bo);
    bo.progress = [&](std::size_t done, std::size_t total) {
      cx.signals.throw_if_pending();
      say(fmt::format("end-to-end bound{}: run {}/{}", a.kind == ConvArithmeticKind::Float32 ? "" : " (" + key + ")",
                      done, total));
    };
    return cx.bounds.emplace(key, output_bound(cx.model, cx.pat, {{cx.model.inputs[0].name, cx.x}}, bo)).first->second;
  } catch (const InputError& e) {
    return cx.bounds.emplace(key, std::string(e.what())).first->second;
  }
}

// The arithmetic an engine's convs computed in: its manifest's, else the command's, else float32.
ConvArithmetic engine_arithmetic(const Context& cx, const EngineManifest& man) {
  return man.arithmetic.value_or(cx.o.arithmetic.value_or(ConvArithmetic{}));
}

// What the run's layers are held to (EngineRun::arithmetic, algorithm: "per layer" when its
// layers name different ones), and a note where the adapter's declaration overrides the
// command line's.
void declared_arithmetic(EngineRun& run, const Context& cx, const EngineManifest& man) {
  run.arithmetic = engine_arithmetic(cx, man).name();
  const ConvAlgorithm all = man.algorithm.value_or(cx.o.algorithm.value_or(ConvAlgorithm{}));
  std::set<std::string> named;
  for (const auto& [layer, files] : man.layers) named.insert(files.algorithm.value_or(all).name());
  run.algorithm = named.size() > 1 ? "per layer" : named.empty() ? all.name() : *named.begin();
  if (cx.o.arithmetic && man.arithmetic && *cx.o.arithmetic != *man.arithmetic)
    run.notes.push_back(
        fmt::format("the adapter declares arithmetic {}: its layers are held to it ({} {} applies to "
                    "engines that do not say)",
                    man.arithmetic->name(), field("arithmetic"), cx.o.arithmetic->name()));
  if (cx.o.algorithm && man.algorithm && *cx.o.algorithm != *man.algorithm)
    run.notes.push_back(
        fmt::format("the adapter declares algorithm {}: its layers are held to it ({} {} applies to "
                    "engines that do not say)",
                    man.algorithm->name(), field("algorithm"), cx.o.algorithm->name()));
}

// Each final output the engine wrote against the float64 run and the end-to-end bound.
void check_final_outputs(EngineRun& run, const Context& cx, const EngineManifest& man, const Say& say) {
  if (man.outputs.empty() || cx.o.output_samples == 0) {
    run.final_not_checked =
        man.outputs.empty() ? "the adapter wrote no final outputs" : "not asked for (output samples 0)";
    return;
  }
  // The end-to-end bound models direct sums (every layer's rounding a relative perturbation of
  // its u): Winograd's transforms and FFTs are not in it.
  const bool per_layer = std::ranges::any_of(man.layers, [](const auto& l) {
    return l.second.algorithm && l.second.algorithm->kind != ConvAlgorithmKind::Direct;
  });
  const ConvAlgorithm alg = man.algorithm.value_or(cx.o.algorithm.value_or(ConvAlgorithm{}));
  if (per_layer || (alg.kind != ConvAlgorithmKind::Direct && alg.kind != ConvAlgorithmKind::SplitK)) {
    run.final_not_checked =
        "the end-to-end bound models direct convs; this engine's Winograd or FFT convs are not in "
        "it (its layers are judged each with its algorithm's bound)";
    return;
  }
  // Activations stored in the arithmetic's 16-bit format when every final output value is one
  // of its values (torch.autocast's outputs), as accuracy-diff decides.
  // Or when every layer output it wrote is (a final output computed in float32 from 16-bit
  // activations, a mean, is not one).
  const ConvArithmetic a = engine_arithmetic(cx, man);
  std::map<std::string, Tensor> ys;
  const bool narrow = a.storage_format().has_value();
  bool finals16 = narrow, layers16 = narrow && !man.layers.empty();
  for (const auto& [out, path] : man.outputs) {
    const std::string& name = out;  // (a structured binding is not captured before C++20's clang 16)
    if (std::ranges::none_of(cx.model.outputs, [&](const auto& o) { return o.name == name; })) continue;
    ys[out] = read_value(man, path);
    finals16 = finals16 && stored_in_16_bits(a, ys[out].data);
  }
  for (auto it = man.layers.begin(); layers16 && it != man.layers.end(); ++it)
    layers16 = stored_in_16_bits(a, read_value(man, it->second.output).data);
  const bool stored16 = finals16 || layers16;
  const auto& made = end_to_end_bound(cx, say, a, stored16);
  if (const auto* why = std::get_if<std::string>(&made)) {
    run.final_not_checked = "no end-to-end bound: " + *why;
    return;
  }
  const OutputBound* ob = &std::get<OutputBound>(made);
  for (const auto& [out, path] : man.outputs) {
    if (!ob->reference.contains(out) || !ys.contains(out)) continue;  // not a graph output of the original
    const Tensor& y = ys.at(out);
    const Tensor& ref = ob->reference.at(out);
    const bool other_layers =
        std::ranges::any_of(run.layers, [](const EngineLayer& L) { return L.not_the_layer.has_value(); });
    if (y.data.size() != ref.data.size() && other_layers) {  // that computation's shape: not compared
      run.final_not_checked = fmt::format(
          "output {} has shape {}, the model's is {}: some layer of the engine computes something else than the "
          "model's (not_the_layer)",
          out, shape_string(y.shape), shape_string(ref.shape));
      continue;
    }
    if (y.data.size() != ref.data.size())
      throw InputError(fmt::format("{}: shape {}, the model's output {} is {}", path, shape_string(y.shape), out,
                                   shape_string(ref.shape)));
    const ref::ValueArray refv = approximate_values(ref.data, DType::Float32);
    const Comparison c = compare(y.data, refv, DType::Float32, &ob->bound.at(out));
    OutputBand band = final_output_band(cx, say, a, stored16, out, ref, y);
    const Verdict verdict = with_band(c.verdict, band);
    run.final_outputs.push_back({.name = out,
                                 .worst_ratio = c.worst_bound_ratio,
                                 .max_abs_ulp = c.ulp.max_abs,
                                 .bound = ob->formula,
                                 .samples = ob->samples,
                                 .verdict = verdict,
                                 .band = std::move(band)});
  }
  if (run.final_outputs.empty() && !run.final_not_checked)
    run.final_not_checked = "none of the outputs it wrote is a graph output of the model";
}

// The engine's folded model and its layers' match to the original, loaded once per run.
struct FoldedModel {
  Model model;
  std::map<std::size_t, std::size_t> match;  // original's layer node -> the folded model's
};

// A declared narrower weight storage widens the bounds: it must be what the folded model holds.
void check_declared_weights(const Context& cx, const EngineManifest& man, const FoldedModel& fm) {
  const DType t = dtype_from_name(*man.weight_dtype);
  const Model& folded = fm.model;
  for (const auto& [orig, on] : fm.match) {
    const LayerParams lp = layer_params_of_node(folded, on);
    for (const double w : lp.weight)
      if (round_to(t, w) != w)
        throw InputError(
            fmt::format("{}: the manifest declares {} weights, but layer {}'s folded weights are not {} values",
                        *man.folded_model, *man.weight_dtype, cx.model.nodes[orig].name, *man.weight_dtype));
  }
}

// The folded model's weights, layer by layer (the accuracy-diff check of an observed model).
void check_weights(EngineRun& run, const Context& cx, const Model& folded) {
  AccuracyDiffOptions ao;
  ao.observed = &folded;
  ao.weights_only = true;
  ao.ref = cx.o.ref;
  ao.input = cx.o.input;  // the input shape that resolves a SAME auto_pad
  ao.seed = cx.o.seed;
  const AccuracyDiffResult ad = accuracy_diff(cx.model, ao);
  for (std::size_t k = 0; k < ad.layers.size(); ++k) {
    const LayerDiff& ld = ad.layers[k];
    EngineLayer& L = run.layers[k];
    if (ld.identity.observed_node) L.observed = *ld.identity.observed_node;
    if (ld.observed_not_folded) L.not_folded = "the engine's model still applies a BatchNormalization after it";
    if (!ld.not_the_layer.empty()) L.not_the_layer = computation_note(ld.not_the_layer, "the engine's layer");
    L.weights = ld.fold;
  }
}

// The recipes whose bounds the layer's outputs are held to: the one its folded weights came
// closest to, or every recipe when the engine wrote no weights.
std::vector<Recipe> bound_recipes(const EngineLayer& L, const EngineManifest& man) {
  if (man.fold_recipe) return {recipe_from_name(*man.fold_recipe)};
  if (L.weights && !L.weights->recipes.empty()) return {L.weights->recipes[L.weights->best].recipe};
  std::vector<Recipe> r;
  for (const Recipe x : all_recipes())
    if (x != Recipe::Exact) r.push_back(x);
  return r;
}

// One layer's outputs, or why they are not checked.
// The files of pair p's input and output: its own (`layers`), else its values by name (a
// graph output is a value too: the last conv's output often is one). Empty, with the
// reason in L, when the adapter left the layer out or wrote no such value.
std::optional<std::pair<std::string, std::string>> layer_files(const EngineManifest& man, const LayerValueNames& vn,
                                                               EngineLayer& L) {
  if (man.left_out.count(vn.y) || man.left_out.count(vn.key)) {
    L.left_out = man.left_out.count(vn.key) ? man.left_out.at(vn.key) : man.left_out.at(vn.y);
    return std::nullopt;
  }
  if (const auto it = man.layers.find(vn.key); it != man.layers.end())
    return std::pair{it->second.input, it->second.output};
  auto find = [&](const std::string& v) -> const std::string* {
    if (const auto it = man.values.find(v); it != man.values.end()) return &it->second;
    if (const auto it = man.outputs.find(v); it != man.outputs.end()) return &it->second;
    return nullptr;
  };
  const std::string *x = find(vn.x), *y = find(vn.y);
  if (x && y) return std::pair{*x, *y};
  L.outputs_not_checked = fmt::format("the adapter wrote no value '{}' (nor layer '{}')", x ? vn.y : vn.x, vn.key);
  L.outputs_missing = true;
  return std::nullopt;
}

// The engine's input to the first layers is the model's input: the same values bit for bit
// (the adapter was given them; an engine computing in a declared narrower type, bfloat16,
// may hold them rounded to it), or the engine ran on something else.
void check_graph_input(const Context& cx, const EngineManifest& man, const LayerValueNames& vn, const Tensor& x,
                       EngineLayer& L) {
  if (vn.x != cx.model.inputs[0].name) return;
  std::vector<double> given = cx.x.data;
  if (man.weight_dtype && *man.weight_dtype != "float32" && x.data != given)
    for (double& v : given) v = round_to(dtype_from_name(*man.weight_dtype), v);
  if (x.shape != cx.x.shape || x.data != given)
    L.input_mismatch =
        "its input is the model's input, but the engine's values of it differ from the input it was given";
}

void check_one_layer(const Context& cx, const EngineManifest& man, const Model* folded,
                     const std::map<std::size_t, std::size_t>& match, std::size_t k, unsigned threads, EngineLayer& L) {
  cx.signals.throw_if_pending();
  const BnPair& p = cx.pat.pairs[k];
  const std::string& op = cx.model.nodes[p.layer].op;
  if (op != "Conv" && op != "Gemm" && op != "MatMul") {
    L.outputs_not_checked = fmt::format("per-layer outputs are checked for Conv, Gemm and MatMul layers, not {}", op);
    return;
  }
  // Its values are another computation's (often of another shape): no bound of the model's layer holds.
  if (L.not_the_layer) {
    L.outputs_not_checked = "not compared: the engine's layer computes something else than the model's (not_the_layer)";
    return;
  }
  const LayerValueNames vn =
      value_names(cx.model, p, folded, folded ? std::optional<std::size_t>(match.at(p.layer)) : std::nullopt);
  if (vn.unsupported) {
    L.outputs_not_checked = *vn.unsupported;
    return;
  }
  const auto files = layer_files(man, vn, L);
  if (!files) return;
  LayerOutputCheck c;
  c.model = &cx.model;
  c.pair = &p;
  c.x = read_value(man, files->first);
  c.y = read_value(man, files->second);
  check_graph_input(cx, man, vn, c.x, L);
  if (!std::all_of(c.x.data.begin(), c.x.data.end(), [](double v) { return std::isfinite(v); })) {
    L.outputs_not_checked = "the engine's input to it holds NaN or Inf (an earlier layer's failure): no bound holds";
    L.outputs_missing = true;
    return;
  }
  c.activation = vn.activation;
  c.recipes = bound_recipes(L, man);
  c.unfused = L.not_folded.has_value();
  if (man.weight_dtype && *man.weight_dtype != "float32") c.arith.weight_dtype = dtype_from_name(*man.weight_dtype);
  c.arithmetic = engine_arithmetic(cx, man);
  const auto own = man.layers.find(vn.key);
  c.algorithm = own != man.layers.end() && own->second.algorithm
                    ? *own->second.algorithm
                    : man.algorithm.value_or(cx.o.algorithm.value_or(ConvAlgorithm{}));
  c.confidence = cx.o.confidence;
  c.channel_alpha = cx.alpha;
  c.samples = cx.o.channel_samples;
  c.seed = cx.o.seed;
  c.layer_index = k;
  c.ref = cx.o.ref;
  c.ref.threads = threads;
  try {
    check_layer_outputs(c, L, files->second);
  } catch (const NoLayerBound& e) {  // the arithmetic or algorithm has no bound on this layer: not judged
    L.outputs.reset();
    L.outputs_not_checked = std::string("no bound: ") + e.what();
  } catch (const ref::CertificationError& e) {  // values no precision certifies (huge magnitudes)
    L.outputs.reset();
    L.outputs_not_checked = std::string("the reference cannot certify this layer on the engine's input: ") + e.what();
    L.outputs_missing = true;
  }
}

// Every layer's outputs, layers side by side (as accuracy-diff: one per thread, the
// leftover threads inside each); results in graph order, independent of the thread count.
void check_outputs(EngineRun& run, const Context& cx, const EngineManifest& man, const FoldedModel* fm,
                   const Say& say) {
  std::string why;
  if (man.values.empty() && man.layers.empty() && man.left_out.empty()) why = "the adapter wrote no per-layer values";
  else if (man.fusion_preserved == false)
    why =
        "the run that gave the per-layer values had final outputs different from the fused run's: they are not the "
        "fused computation's";
  if (!why.empty()) {
    for (EngineLayer& L : run.layers) {
      L.outputs_not_checked = why;
      L.outputs_missing = man.fusion_preserved == false;  // values given, but not the fused run's
    }
    return;
  }
  const Model* folded = man.values_of_folded && fm ? &fm->model : nullptr;
  static const std::map<std::size_t, std::size_t> kNone;
  const std::map<std::size_t, std::size_t>& match = folded ? fm->match : kNone;
  const std::size_t np = cx.pat.pairs.size();
  const unsigned nt = detail::thread_count(cx.o.ref.threads);
  const unsigned outer = static_cast<unsigned>(std::max<std::size_t>(1, std::min<std::size_t>(nt, np)));
  detail::run_tasks(
      np, outer,
      [&](std::size_t k) { check_one_layer(cx, man, folded, match, k, std::max(1u, nt / outer), run.layers[k]); },
      [&](std::size_t k, std::size_t done) {
        say(fmt::format("{}: layer outputs {}/{} ({})", run.spec.label, done, np, cx.pat.pairs[k].name));
      });
}

// The first layers, in graph order, whose weights or outputs leave their bounds. A layer that
// computes something else than the model's (not_the_layer) is not the fold, whatever its
// weights: it counts as one whose weights are beyond (a bisection starts there).
void first_beyond(EngineRun& run) {
  for (const EngineLayer& L : run.layers) {
    const bool weights_bad = (L.weights && L.weights->verdict == Verdict::Unexpected) || L.not_the_layer;
    if (!run.first_weights_beyond && weights_bad) run.first_weights_beyond = L.name;
    const bool out_bad = (L.outputs && L.outputs->verdict == Verdict::Unexpected) ||
                         L.outputs_detail.channels.beyond_bound > 0 || L.outputs_detail.channels.beyond_estimate > 0 ||
                         L.input_mismatch;
    if (!run.first_outputs_beyond && out_bad) run.first_outputs_beyond = L.name;
  }
}

EngineRun run_engine(const EngineSpec& spec, const Context& cx, const fs::path& input, const fs::path& outdir,
                     const command::SignalScope& sig, const Say& say) {
  EngineRun run;
  run.spec = spec;
  for (const BnPair& p : cx.pat.pairs) run.layers.emplace_back().name = p.name;
  say(fmt::format("{}: running the adapter", spec.label));
  run.failed = run_adapter(spec, cx.model.path, input, outdir, cx.o, sig, run.seconds);
  if (run.failed) return run;
  try {
    const EngineManifest man = read_engine_manifest(outdir.string());
    run.engine = man.engine;
    run.notes = man.notes;
    run.fusion_preserved = man.fusion_preserved;
    run.folded_model = man.folded_model.has_value();
    declared_arithmetic(run, cx, man);
    std::optional<FoldedModel> fm;
    if (man.folded_model) fm = FoldedModel{read_folded_model(man), {}};
    check_manifest_names(man, cx.model, fm ? &fm->model : nullptr);
    if (fm) {
      say(fmt::format("{}: folded weights", spec.label));
      check_weights(run, cx, fm->model);  // refuses, naming it, a model whose layers cannot be matched
      fm->match = match_layers(cx.model, fm->model);
      if (man.weight_dtype && *man.weight_dtype != "float32") check_declared_weights(cx, man, *fm);
    }
    check_outputs(run, cx, man, fm ? &*fm : nullptr, say);
    check_final_outputs(run, cx, man, say);
  } catch (const InputError& e) {
    run.failed = e.what();
    if (!cx.o.work_dir) {  // its files go with the temporary directory: named by the adapter's OUTDIR, not a gone path
      replace_all(*run.failed, outdir.string() + "/", spec.label + "'s OUTDIR/");
      *run.failed += " (the adapter's files are removed: " + field("work_dir") + " keeps them)";
    }
    return run;
  }
  first_beyond(run);
  return run;
}

}  // namespace
}  // namespace foldcheck

namespace foldcheck {

EnginesResult engines(const std::string& model_path, const EnginesOptions& o) {
  if (o.engines.empty()) throw InputError("engines: no engine given (" + field("engines") + ")");
  const Say say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  const Model m = Model::load(model_path);
  const BnPatterns pat = find_bn_pairs(m);
  if (pat.pairs.empty())
    throw InputError(
        fmt::format("{}: no layer -> BatchNormalization pair, nothing for the engines to fold", model_path));
  if (m.inputs.size() != 1)
    throw InputError(fmt::format("{}: {} graph inputs; engines runs models with one", model_path, m.inputs.size()));
  Tensor x = model_input(m, o.input, o.seed);
  EnginesResult res;
  res.model = {model_path, m.producer, m.opset, m.nodes.size(), pat.pairs.size()};
  res.input = {m.inputs[0].name, x.shape, o.input, o.seed};
  double channels = 0;
  for (const BnPair& p : pat.pairs) channels += static_cast<double>(layer_params(m, p).channels);
  res.channel_alpha = (1 - o.confidence) / std::max(1.0, channels * static_cast<double>(o.engines.size()));
  WorkDir wd(o.work_dir);
  const command::SignalScope sig;
  if (wd.owned()) command::SignalScope::remove_on_signal(wd.path().string());
  const Context cx{m, pat, o, res.channel_alpha, x, sig, {}};
  const std::optional<DirIdentity> made = dir_identity(wd.path());
  const std::optional<std::size_t> model_bytes = file_fingerprint(model_path);
  bool model_changed = false;
  try {
    for (std::size_t e = 0; e < o.engines.size(); ++e) {
      if (dir_identity(wd.path()) != made) {  // replaced (a link to a user's directory), moved or removed
        res.runs.push_back(not_run(o.engines[e], wd.path()));
        continue;
      }
      if (model_changed) {
        res.runs.push_back(model_changed_earlier(o.engines[e], model_path));
        continue;
      }
      // Each adapter its own copy of the input, written just before it runs: one that writes to
      // it cannot change another's. Whatever an earlier adapter left at that path (a symbolic
      // link to a file of the user's, a directory) is removed first, never written through.
      const fs::path input = wd.path() / fmt::format("input_{}.npy", e + 1);
      fs::remove_all(input);
      write_npy(input.string(), x);
      res.runs.push_back(run_engine(o.engines[e], cx, input, wd.path() / fmt::format("engine_{}", e + 1), sig, say));
      if (model_differs(model_path, model_bytes, m)) {
        model_changed = true;
        changed_the_model(res.runs.back(), model_path);
      }
    }
    sig.throw_if_pending();                  // a signal during the last engine's checks
  } catch (const command::Interrupted& i) {  // the adapter already ended: remove its files, end by the signal
    wd.remove();
    command::SignalScope::die_of(i.signo);
  }
  return res;
}

}  // namespace foldcheck
