// Every seed of the fuzz corpora (fuzz/corpus/<target>/) and every input the fuzzers
// crashed on (fuzz/regressions/<target>/, kept after the fix) through the fuzz bodies
// (fuzz/targets.hpp), in every build: a body must return (input read, or refused as bad
// input); an escaping exception fails here, and under tools/hardening.sh a memory error or
// UB aborts.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "foldcheck/io/limits.hpp"
#include "targets.hpp"

namespace {

namespace fs = std::filesystem;

std::string bytes_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// Runs every file under fuzz/<kind>/<target>/; returns how many.
std::size_t run_all(const std::string& kind) {
  std::size_t n = 0;
  for (const auto& [target, body] : foldcheck::fuzz::bodies()) {
    const fs::path dir = fs::path(FOLDCHECK_SOURCE_DIR) / "fuzz" / kind / target;
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      INFO(target << " on " << e.path().string());
      CHECK_NOTHROW(body(bytes_of(e.path())));
      ++n;
    }
  }
  return n;
}

}  // namespace

TEST_CASE("fuzz seeds: every reader takes every seed of its corpus", "[fuzz]") {
  foldcheck::fuzz::use_small_limits();
  CHECK(run_all("corpus") >= 20);
  for (const auto& [target, body] : foldcheck::fuzz::bodies()) {
    INFO(target << " has seeds");
    CHECK(fs::exists(fs::path(FOLDCHECK_SOURCE_DIR) / "fuzz" / "corpus" / target));
  }
  foldcheck::set_max_elements(foldcheck::kDefaultMaxElements);
}

TEST_CASE("fuzz regressions: every input a fuzzer crashed on is now read or refused", "[fuzz]") {
  foldcheck::fuzz::use_small_limits();
  CHECK(run_all("regressions") >= 1);
  foldcheck::set_max_elements(foldcheck::kDefaultMaxElements);
}
