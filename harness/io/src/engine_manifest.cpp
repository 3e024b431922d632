// The adapter protocol's manifest (engine_manifest.hpp).
#include "foldcheck/io/engine_manifest.hpp"

#include <algorithm>
#include <filesystem>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/contained_file.hpp"
#include "foldcheck/io/input_file.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

const char* const kOutdirName = "the adapter's output directory";

[[noreturn]] void refuse(const std::string& where, const std::string& what) {
  throw InputError(fmt::format("{}: {} (the adapter protocol: adapters/README.md)", where, what));
}

// A file the manifest names: relative, inside the directory, not empty.
std::string inside(const std::string& where, const std::string& dir, const json& v, const std::string& field_name) {
  if (!v.is_string() || v.get<std::string>().empty()) refuse(where, "`" + field_name + "` must name a file (a string)");
  const fs::path p(v.get<std::string>());
  if (p.is_absolute()) refuse(where, "`" + field_name + "` is an absolute path; files must lie inside the output directory");
  for (const fs::path& part : p)
    if (part == "..") refuse(where, "`" + field_name + "` leaves the output directory (\"..\")");
  return (fs::path(dir) / p).string();
}

std::map<std::string, std::string> file_map(const std::string& where, const std::string& dir, const json& m,
                                            const std::string& key) {
  std::map<std::string, std::string> r;
  if (!m.contains(key)) return r;
  if (!m[key].is_object()) refuse(where, "`" + key + "` must be an object {value name: file}");
  for (const auto& [name, file] : m[key].items()) {
    if (name.empty()) refuse(where, "`" + key + "` has an empty value name");
    r[name] = inside(where, dir, file, key + "." + name);
  }
  return r;
}

// Every key of the manifest is one the protocol has: a typo ("fusion_preserverd": false)
// would otherwise be ignored, and the claim it meant to make with it (values not from the
// fused run) silently dropped.
void check_keys(const std::string& where, const json& m) {
  static const std::vector<std::string> kKeys{"protocol",    "engine",       "folded_model", "values_of",
                                              "outputs",     "values",       "layers",       "fusion_preserved",
                                              "fold_recipe", "weight_dtype", "accumulation", "left_out",
                                              "notes",       "arithmetic"};
  for (const auto& [k, v] : m.items())
    if (std::find(kKeys.begin(), kKeys.end(), k) == kKeys.end()) {
      std::string known;
      for (const std::string& x : kKeys) known += (known.empty() ? "" : ", ") + x;
      refuse(where, "unknown key `" + k + "` (the manifest's keys: " + known + ")");
    }
}

// An `accumulation` value: the algorithm it names.
ConvAlgorithm accumulation(const std::string& where, const json& v, const std::string& field) {
  static const std::vector<std::pair<std::string, ConvAlgorithmKind>> kNames{
      {"direct", ConvAlgorithmKind::Direct},           {"winograd_f2x3", ConvAlgorithmKind::Winograd2},
      {"winograd_f4x3", ConvAlgorithmKind::Winograd4}, {"winograd_f4x3_onednn", ConvAlgorithmKind::Winograd4OneDnn},
      {"winograd_f6x3", ConvAlgorithmKind::Winograd6}, {"fft", ConvAlgorithmKind::FFT}};
  if (v.is_string())
    for (const auto& [n, k] : kNames)
      if (v.get<std::string>() == n) return ConvAlgorithm{k};
  refuse(
      where,
      "`" + field +
          R"(` must be "direct", "winograd_f2x3", "winograd_f4x3", "winograd_f4x3_onednn", "winograd_f6x3" or "fft")");
}

void read_layers(const std::string& where, const std::string& dir, const json& m, EngineManifest& e) {
  if (!m.contains("layers")) return;
  const std::string shape =
      R"(`layers` must be an object {layer: {"input": file, "output": file, optional "accumulation"}})";
  if (!m["layers"].is_object()) refuse(where, shape);
  for (const auto& [layer, f] : m["layers"].items()) {
    if (layer.empty() || !f.is_object() || !f.contains("input") || !f.contains("output")) refuse(where, shape);
    for (const auto& [k, v] : f.items())
      if (k != "input" && k != "output" && k != "accumulation")
        refuse(where, "unknown key `layers." + layer + "." + k + "` (" + shape + ")");
    EngineManifest::LayerFiles lf{inside(where, dir, f["input"], "layers." + layer + ".input"),
                                  inside(where, dir, f["output"], "layers." + layer + ".output"), std::nullopt};
    if (f.contains("accumulation"))
      lf.algorithm = accumulation(where, f["accumulation"], "layers." + layer + ".accumulation");
    e.layers[layer] = std::move(lf);
  }
}

// What the layers are held to: the recipe, the weights' storage, the accumulation.
void read_claims(const std::string& where, const json& m, EngineManifest& e) {
  if (m.contains("fusion_preserved") && !m["fusion_preserved"].is_null()) {
    if (!m["fusion_preserved"].is_boolean()) refuse(where, "`fusion_preserved` must be true or false");
    e.fusion_preserved = m["fusion_preserved"].get<bool>();
  }
  for (const char* key : {"fold_recipe", "weight_dtype"})
    if (m.contains(key) && !m[key].is_null()) {
      if (!m[key].is_string()) refuse(where, std::string("`") + key + "` must be a string");
      (std::string(key) == "fold_recipe" ? e.fold_recipe : e.weight_dtype) = m[key].get<std::string>();
    }
  if (e.fold_recipe && *e.fold_recipe != "pytorch" && *e.fold_recipe != "tvm" && *e.fold_recipe != "onnxruntime" &&
      *e.fold_recipe != "onnxoptimizer")
    refuse(where, "`fold_recipe` must be one of pytorch, tvm, onnxruntime, onnxoptimizer");
  if (e.weight_dtype && *e.weight_dtype != "float32" && *e.weight_dtype != "bfloat16" && *e.weight_dtype != "float16")
    refuse(where, "`weight_dtype` must be \"float32\", \"bfloat16\" or \"float16\"");
  if (m.contains("accumulation") && !m["accumulation"].is_null())
    e.algorithm = accumulation(where, m["accumulation"], "accumulation");
  if (m.contains("arithmetic") && !m["arithmetic"].is_null()) {
    if (!m["arithmetic"].is_string()) refuse(where, "`arithmetic` must be a string");
    try {
      e.arithmetic = conv_arithmetic_from_name(m["arithmetic"].get<std::string>());
    } catch (const InputError& err) {
      refuse(where, std::string("`arithmetic`: ") + err.what());
    }
  }
}

void read_left_out_and_notes(const std::string& where, const json& m, EngineManifest& e) {
  if (m.contains("left_out")) {
    if (!m["left_out"].is_object()) refuse(where, "`left_out` must be an object {value name: reason}");
    for (const auto& [k, v] : m["left_out"].items()) {
      if (!v.is_string()) refuse(where, "`left_out` must be an object {value name: reason}");
      e.left_out[k] = v.get<std::string>();
    }
  }
  if (!m.contains("notes")) return;
  if (!m["notes"].is_array()) refuse(where, "`notes` must be a list of strings");
  for (const json& n : m["notes"]) {
    if (!n.is_string()) refuse(where, "`notes` must be a list of strings");
    // Shown to people: at most 50 notes of 1,000 characters (a report is not a log).
    if (e.notes.size() == 50) {
      e.notes.push_back(fmt::format("({} more notes not shown)", m["notes"].size() - 50));
      break;
    }
    const std::string t = n.get<std::string>();
    e.notes.push_back(t.size() > 1000 ? t.substr(0, 1000) + "…" : t);
  }
}

}  // namespace

EngineManifest read_engine_manifest(const std::string& dir) {
  const std::string where = (fs::path(dir) / "manifest.json").string();
  // Read under the one rule of the adapter's files (contained_file.hpp).
  const json m = parse_json_text(read_contained(dir, kOutdirName, where, "engine manifest"), where);
  if (!m.is_object()) refuse(where, "not a JSON object");
  check_keys(where, m);
  if (!m.contains("protocol") || !m["protocol"].is_number_integer() || m["protocol"] != 1)
    refuse(where, "`protocol` must be 1");
  EngineManifest e;
  e.dir = dir;
  if (!m.contains("engine") || !m["engine"].is_string() || m["engine"].get<std::string>().empty())
    refuse(where, "`engine` must name the engine (a string)");
  e.engine = m["engine"].get<std::string>();
  if (e.engine.size() > 200) e.engine = e.engine.substr(0, 200) + "…";
  if (m.contains("folded_model") && !m["folded_model"].is_null())
    e.folded_model = inside(where, dir, m["folded_model"], "folded_model");
  if (m.contains("values_of") && !m["values_of"].is_string()) refuse(where, "`values_of` must be a string");
  const std::string of = m.contains("values_of") ? m["values_of"].get<std::string>()
                         : e.folded_model        ? "folded_model"
                                                 : "model";
  if (of != "folded_model" && of != "model") refuse(where, R"(`values_of` must be "folded_model" or "model")");
  if (of == "folded_model" && !e.folded_model)
    refuse(where, "`values_of` is \"folded_model\" but no `folded_model` is given");
  e.values_of_folded = of == "folded_model";
  e.outputs = file_map(where, dir, m, "outputs");
  e.values = file_map(where, dir, m, "values");
  read_layers(where, dir, m, e);
  read_claims(where, m, e);
  read_left_out_and_notes(where, m, e);
  return e;
}

std::string read_adapter_file(const EngineManifest& man, const std::string& path, const std::string& kind) {
  return read_contained(man.dir, kOutdirName, path, kind);
}

}  // namespace foldcheck
