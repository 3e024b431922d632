#pragma once
// How the core runs a command: with the GIL released (other Python threads run meanwhile), its
// progress lines sent to an optional Python callable.
//
// Contract: progress(cb) returns the library's progress function. Each line takes the GIL,
// checks for a pending signal (so Ctrl-C stops a long run at its next line, raising
// KeyboardInterrupt) and calls cb(line) when cb is not None. An exception there (the signal's,
// or the callable's own) is thrown through the library, which unwinds, and pybind11 raises it
// again in Python. Library code may call the function from its worker threads: the GIL
// serializes the calls.
#include <functional>
#include <string>
#include <utility>

#include <pybind11/pybind11.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/reference/certify.hpp"
#include "scalars.hpp"

namespace foldcheck::py {

inline std::function<void(const std::string&)> progress(pybind11::object cb) {
  auto held = std::make_shared<pybind11::object>(std::move(cb));
  return [held](const std::string& line) {
    pybind11::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    if (!held->is_none()) (*held)(line);
  };
}

// f() with the GIL released.
template <class F>
auto released(F&& f) {
  pybind11::gil_scoped_release nogil;
  return f();
}

// The certified reference's options from the functions' `precision` and `threads` (the
// command's --precision and --threads ranges, scalars.hpp).
inline ref::Options reference_options(const pybind11::handle& precision, const pybind11::handle& threads) {
  ref::Options o;
  o.precision = static_cast<long>(integer(precision, "precision", options::kPrecision));
  o.threads = static_cast<unsigned>(integer(threads, "threads", options::kThreads));
  return o;
}

// A command's `precision` and `threads` defaults into its defaults dict (`_core.<command>_defaults`):
// those of the reference options its C++ options struct holds (default-constructed), the one
// place they are written.
inline void add_reference_defaults(pybind11::dict& d, const ref::Options& r) {
  d["precision"] = r.precision;
  d["threads"] = r.threads;
}

}  // namespace foldcheck::py
