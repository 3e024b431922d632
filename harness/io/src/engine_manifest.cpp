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
  throw InputError(fmt::format("{}: {} (the adapter protocol: tools/engines/README.md)", where, what));
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
  const json m = read_json_input(where, "engine manifest");
  if (!m.is_object()) refuse(where, "not a JSON object");
  if (!m.contains("protocol") || m["protocol"] != 1) refuse(where, "`protocol` must be 1");
  EngineManifest e;
  e.dir = dir;
  if (!m.contains("engine") || !m["engine"].is_string() || m["engine"].get<std::string>().empty())
    refuse(where, "`engine` must name the engine (a string)");
  e.engine = m["engine"].get<std::string>();
  if (m.contains("folded_model") && !m["folded_model"].is_null())
    e.folded_model = inside(where, dir, m["folded_model"], "folded_model");
  const std::string of = m.value("values_of", std::string(e.folded_model ? "folded_model" : "model"));
  if (of != "folded_model" && of != "model") refuse(where, "`values_of` must be \"folded_model\" or \"model\"");
  if (of == "folded_model" && !e.folded_model) refuse(where, "`values_of` is \"folded_model\" but no `folded_model` is given");
  e.values_of_folded = of == "folded_model";
  e.outputs = file_map(where, dir, m, "outputs");
  e.values = file_map(where, dir, m, "values");
  if (m.contains("fusion_preserved") && !m["fusion_preserved"].is_null()) {
    if (!m["fusion_preserved"].is_boolean()) refuse(where, "`fusion_preserved` must be true or false");
    e.fusion_preserved = m["fusion_preserved"].get<bool>();
  }
  if (m.contains("notes")) {
    if (!m["notes"].is_array()) refuse(where, "`notes` must be a list of strings");
    for (const json& n : m["notes"]) {
      if (!n.is_string()) refuse(where, "`notes` must be a list of strings");
      e.notes.push_back(n.get<std::string>());
    }
  }
  return e;
}

}  // namespace foldcheck
