// The model commands' text renderers byte for byte on results the snapshot does not reach
// (tools/output_snapshot.sh): each tests/golden/model_text/NAME.json rendered by the renderer
// of its "command" must equal NAME.txt. The goldens were written by the renderers as they
// were before their typed views (issue 39), so a change of the renderers' reading that
// changes no byte passes. FOLDCHECK_WRITE_GOLDEN=1 rewrites them (only for an intended change
// of the text).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "foldcheck/reports/text.hpp"

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string render(const json& r) {
  const std::string c = r.at("command").get<std::string>();
  if (c == "engines") return foldcheck::reports::engines_text(r);
  if (c == "bisect") return foldcheck::reports::bisect_text(r);
  if (c == "quant-check") return foldcheck::reports::quant_check_text(r);
  if (c == "diagnose") return foldcheck::reports::diagnose_text(r);
  if (c == "accuracy-diff") return foldcheck::reports::accuracy_diff_text(r);
  FAIL("no renderer for " << c);
  return "";
}

}  // namespace

TEST_CASE("model commands' text renderers: byte-identical to their goldens", "[reports][golden]") {
  const fs::path dir = fs::path(FOLDCHECK_SOURCE_DIR) / "tests/golden/model_text";
  const bool write = std::getenv("FOLDCHECK_WRITE_GOLDEN") != nullptr;
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const fs::path txt = fs::path(entry.path()).replace_extension(".txt");
    const std::string text = render(json::parse(slurp(entry.path())));
    if (write) std::ofstream(txt, std::ios::binary) << text;
    INFO(entry.path().filename().string());
    CHECK(text == slurp(txt));
    ++checked;
  }
  CHECK(checked >= 4);
}

// A result with any one key missing (of its top level, of an object there, or of the first
// element of a list there) or with a top-level value of the wrong type is refused by its
// view's from_json or rendered, never read past (no crash). Not accuracy-diff: its answer is
// read by summarize(), whose reading is its own.
namespace {

// Renders r; counts an exception as a refusal.
void render_or_refuse(const json& r, int& refused) {
  try {
    render(r);
  } catch (const std::exception&) {
    ++refused;
  }
}

// Each key of node (an object, or a list's first element) erased in turn, in a copy of whole.
void erase_each(const json& whole, const std::string& key, int& refused) {
  const json& node = whole.at(key);
  const bool list = node.is_array() && !node.empty();
  const json& obj = list ? node[0] : node;
  if (!obj.is_object()) return;
  for (const auto& [k, v] : obj.items()) {
    json r = whole;
    (list ? r[key][0] : r[key]).erase(k);
    render_or_refuse(r, refused);
  }
}

}  // namespace

TEST_CASE("model commands' views: a missing or mistyped key is refused, not read past", "[reports][golden]") {
  const fs::path dir = fs::path(FOLDCHECK_SOURCE_DIR) / "tests/golden/model_text";
  int refused = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    const json whole = json::parse(slurp(entry.path()));
    if (whole.at("command") == "accuracy-diff") continue;
    INFO(entry.path().filename().string());
    for (const auto& [key, value] : whole.items()) {
      if (key == "command") continue;
      for (const json& broken : {json(nullptr), json("x"), json::array({1}), json::object()}) {
        json r = whole;
        r[key] = broken;
        render_or_refuse(r, refused);
      }
      json r = whole;
      r.erase(key);
      render_or_refuse(r, refused);
      erase_each(whole, key, refused);
    }
  }
  CHECK(refused > 0);
}
