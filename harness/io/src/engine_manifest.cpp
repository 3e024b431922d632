// The adapter protocol's manifest (engine_manifest.hpp).
#include "foldcheck/io/engine_manifest.hpp"

#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/io/input_file.hpp"

namespace foldcheck {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

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

}  // namespace

EngineManifest read_engine_manifest(const std::string& dir) {
  const std::string where = (fs::path(dir) / "manifest.json").string();
  // A regular file inside the directory: a FIFO would block the read for ever, a link could
  // point anywhere.
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(where, ec);
  const fs::path rel = real.lexically_relative(fs::weakly_canonical(dir, ec));
  if (fs::exists(real, ec) && (rel.empty() || *rel.begin() == ".." || !fs::is_regular_file(real, ec)))
    refuse(where, "not a regular file inside the output directory (a FIFO, a directory or a link out of it)");
  const json m = read_json_input(where, "engine manifest");
  if (!m.is_object()) refuse(where, "not a JSON object");
  if (!m.contains("protocol") || !m["protocol"].is_number_integer() || m["protocol"] != 1) refuse(where, "`protocol` must be 1");
  EngineManifest e;
  e.dir = dir;
  if (!m.contains("engine") || !m["engine"].is_string() || m["engine"].get<std::string>().empty())
    refuse(where, "`engine` must name the engine (a string)");
  e.engine = m["engine"].get<std::string>();
  if (e.engine.size() > 200) e.engine = e.engine.substr(0, 200) + "…";
  if (m.contains("folded_model") && !m["folded_model"].is_null())
    e.folded_model = inside(where, dir, m["folded_model"], "folded_model");
  if (m.contains("values_of") && !m["values_of"].is_string()) refuse(where, "`values_of` must be a string");
  const std::string of = m.contains("values_of") ? m["values_of"].get<std::string>() : e.folded_model ? "folded_model" : "model";
  if (of != "folded_model" && of != "model") refuse(where, "`values_of` must be \"folded_model\" or \"model\"");
  if (of == "folded_model" && !e.folded_model) refuse(where, "`values_of` is \"folded_model\" but no `folded_model` is given");
  e.values_of_folded = of == "folded_model";
  e.outputs = file_map(where, dir, m, "outputs");
  e.values = file_map(where, dir, m, "values");
  if (m.contains("layers")) {
    if (!m["layers"].is_object()) refuse(where, "`layers` must be an object {layer: {\"input\": file, \"output\": file}}");
    for (const auto& [layer, f] : m["layers"].items()) {
      if (layer.empty() || !f.is_object() || !f.contains("input") || !f.contains("output"))
        refuse(where, "`layers` must be an object {layer: {\"input\": file, \"output\": file}}");
      e.layers[layer] = {inside(where, dir, f["input"], "layers." + layer + ".input"),
                         inside(where, dir, f["output"], "layers." + layer + ".output")};
    }
  }
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
  if (m.contains("accumulation") && !m["accumulation"].is_string()) refuse(where, "`accumulation` must be a string");
  const std::string acc = m.contains("accumulation") ? m["accumulation"].get<std::string>() : "direct";
  if (acc != "direct" && acc != "winograd_f2x3") refuse(where, "`accumulation` must be \"direct\" or \"winograd_f2x3\"");
  e.winograd = acc == "winograd_f2x3";
  if (m.contains("left_out")) {
    if (!m["left_out"].is_object()) refuse(where, "`left_out` must be an object {value name: reason}");
    for (const auto& [k, v] : m["left_out"].items()) {
      if (!v.is_string()) refuse(where, "`left_out` must be an object {value name: reason}");
      e.left_out[k] = v.get<std::string>();
    }
  }
  if (m.contains("notes")) {
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
  return e;
}

}  // namespace foldcheck
