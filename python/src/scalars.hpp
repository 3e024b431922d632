#pragma once
// The one conversion of the core functions' scalar arguments (every integer, number, flag and
// name of bind_*.cpp), each taken as the Python object given and converted here, so that a
// wrong one is refused as foldcheck.InputError (a ValueError) in one line naming the argument,
// what was given and what is accepted, never pybind11's TypeError listing the C++ signature.
//
// Contract:
//  - integer: a Python int, a numpy integer or a 0-d integer array (anything with __index__),
//    within the range the `foldcheck` command's flag accepts (option_ranges.hpp, the one
//    source). A bool is refused (True is not 1 thread), as is a float even when integral
//    (dilation=1.7 was truncated to 1), a string and None (unless the argument is optional);
//  - number: a Python int or float, a numpy number or a 0-d array or tensor of one (a numpy
//    scalar is a number wherever a float is), finite and within its range; bools, strings,
//    complex numbers and arrays of more than one value are refused;
//  - flag: True, False or a numpy bool; 0 and 1 are refused (a flag is not a count);
//  - text: a str (paths are str after the Python layer's os.fspath) without a NUL character
//    (a path or a command would end there: the rest silently dropped);
//  - texts: a str (one name) or a list or tuple of str, each converted as text naming its
//    place ("engines[1]: must be a str, got None (NoneType)");
//  - text_pairs: None (none), or a mapping (a dict) of str to str, in its order, each key and
//    value converted as text naming its place ("adapters['e']"): a list, or a value of None or
//    bytes (formatted into a shell command, it ran "None"), is refused by name.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/pybind11.h>

#include "foldcheck/commands/option_ranges.hpp"

namespace foldcheck::py {

std::uint64_t integer(const pybind11::handle& v, const char* name, options::IntegerRange range);
std::optional<std::uint64_t> optional_integer(const pybind11::handle& v, const char* name, options::IntegerRange range);
double number(const pybind11::handle& v, const char* name, options::NumberRange range);
std::optional<double> optional_number(const pybind11::handle& v, const char* name, options::NumberRange range);
bool flag(const pybind11::handle& v, const char* name);
std::string text(const pybind11::handle& v, const char* name);
std::optional<std::string> optional_text(const pybind11::handle& v, const char* name);
std::vector<std::string> texts(const pybind11::handle& v, const char* name);
std::vector<std::pair<std::string, std::string>> text_pairs(const pybind11::handle& v, const char* name);

// _core.number(value, name, lo, lo_excluded): number() for the Python layer's own number
// arguments (foldcheck.keras.check_tflite's eps); _core.reference_options(precision,
// threads): those two as every core function converts them, for a function that checks its
// arguments before it runs anything (check_tflite, whose core calls come late).
void bind_scalars(pybind11::module_& m);

}  // namespace foldcheck::py
