#pragma once
// The shipped case files: cases/*.json except suites (a suite has "entries").
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

inline std::vector<std::filesystem::path> shipped_case_files() {
  std::vector<std::filesystem::path> r;
  for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(FOLDCHECK_SOURCE_DIR) / "cases")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream in(e.path());
    if (nlohmann::json::parse(in).contains("entries")) continue;
    r.push_back(e.path());
  }
  std::sort(r.begin(), r.end());
  return r;
}
