#pragma once
// Bad input from the user (files, flags, case files). The CLI prints
// "foldcheck: error: <what>" and exits 2; no output file is written.
#include <stdexcept>
#include <string>

namespace foldcheck {

// what() is a C string: a NUL byte from a file (a JSON key "a\u0000b", a path) would cut
// the message there, so NUL is kept as the text "\x00".
inline std::string without_nul(std::string s) {
  for (std::size_t i = s.find('\0'); i != std::string::npos; i = s.find('\0', i + 4)) s.replace(i, 1, "\\x00");
  return s;
}

struct InputError : std::runtime_error {
  explicit InputError(const std::string& what) : std::runtime_error(without_nul(what)) {}
  explicit InputError(const char* what) : std::runtime_error(what) {}
};

}  // namespace foldcheck
