#pragma once
// Running the foldcheck executable from the CLI tests: exit code, stdout, stderr; source
// and temporary paths. FOLDCHECK_BIN and FOLDCHECK_SOURCE_DIR come from CMake.
#include <catch2/catch.hpp>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace foldcheck_cli_test {

namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out, err;
};

// `prefix` is shell text run before foldcheck by popen's sh (e.g. "ulimit -f 1; exec ").
inline Result run_through_shell(const std::string& prefix, const std::string& args) {
  const fs::path errf = fs::temp_directory_path() / ("foldcheck_cli_err_" + std::to_string(getpid()));
  const std::string cmd = prefix + std::string(FOLDCHECK_BIN) + " " + args + " 2>" + errf.string();
  Result r{};
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::array<char, 65536> buf;
  std::size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(errf);
  r.err.assign(std::istreambuf_iterator<char>(e), {});
  fs::remove(errf);
  return r;
}

inline Result run(const std::string& args) { return run_through_shell("", args); }

inline std::string src(const std::string& rel) { return std::string(FOLDCHECK_SOURCE_DIR) + "/" + rel; }

inline fs::path tmp(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("foldcheck_cli_" + std::to_string(getpid()));
  fs::create_directories(d);
  return d / name;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace foldcheck_cli_test
