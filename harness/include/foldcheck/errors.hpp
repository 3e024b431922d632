#pragma once
// Bad input from the user (files, flags, case files). The CLI prints
// "foldcheck: error: <what>" and exits 2; no output file is written.
#include <stdexcept>
#include <string>

namespace foldcheck {

struct InputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace foldcheck
