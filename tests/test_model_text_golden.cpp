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
