#pragma once
// Bad input from the user (files, values, case files). The CLI prints
// "foldcheck: error: <what>" and exits 2; no output file is written.
//
// A message names the file it refuses, or the field of the library's input it refuses, as
// field() writes it: by default in backquotes, "`observed` has 3 values but `original` has
// 2". The library knows fields, not flags: a program with flags (the CLI, cli/app.cpp)
// installs a field namer once, before any work, and the same message reads "--observed has
// 3 values but --original has 2". The name is chosen when the message is built, so nothing
// a user wrote (a path, a value) is ever rewritten.
#include <stdexcept>
#include <string>

namespace foldcheck {

// what() is a C string: a NUL byte from a file (a JSON key "a\u0000b", a path) would cut
// the message there, so NUL is kept as the text "\x00".
inline std::string without_nul(std::string s) {
  for (std::size_t i = s.find('\0'); i != std::string::npos; i = s.find('\0', i + 4)) s.replace(i, 1, "\\x00");
  return s;
}

// The namer field() uses: returns how a program shows `name`, or "" to keep "`name`".
using FieldNamer = std::string (*)(const std::string& name);
inline FieldNamer& field_namer() {
  static FieldNamer namer = nullptr;
  return namer;
}
// Set once, before any thread starts (the CLI's main).
inline void set_field_namer(FieldNamer namer) { field_namer() = namer; }

// A field of the input, in a message: "`name`", or as the installed namer shows it.
inline std::string field(const std::string& name) {
  if (const FieldNamer namer = field_namer())
    if (std::string shown = namer(name); !shown.empty()) return shown;
  return "`" + name + "`";
}

struct InputError : std::runtime_error {
  explicit InputError(const std::string& what) : std::runtime_error(without_nul(what)) {}
  explicit InputError(const char* what) : std::runtime_error(what) {}
};

}  // namespace foldcheck
