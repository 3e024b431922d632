#pragma once
// Bad input from the user (files, values, case files). The CLI prints
// "foldcheck: error: <what>" and exits 2; no output file is written.
//
// A message names the file it refuses, or the field of the library's input it refuses in
// backquotes, as field() writes it: "`observed` has 3 values but `original` has 2". The
// library knows fields, not flags: the CLI shows each field as its flag
// (cli/app.cpp: "--observed has 3 values but --original has 2"), a library caller sees the
// field of its own struct.
#include <stdexcept>
#include <string>

namespace foldcheck {

// what() is a C string: a NUL byte from a file (a JSON key "a\u0000b", a path) would cut
// the message there, so NUL is kept as the text "\x00".
inline std::string without_nul(std::string s) {
  for (std::size_t i = s.find('\0'); i != std::string::npos; i = s.find('\0', i + 4)) s.replace(i, 1, "\\x00");
  return s;
}

// "`name`": a field of the input, in a message.
inline std::string field(const char* name) { return std::string("`") + name + "`"; }

struct InputError : std::runtime_error {
  explicit InputError(const std::string& what) : std::runtime_error(without_nul(what)) {}
  explicit InputError(const char* what) : std::runtime_error(what) {}
};

}  // namespace foldcheck
