// The core functions' scalar arguments (scalars.hpp).
#include "scalars.hpp"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "call.hpp"
#include "foldcheck/base/errors.hpp"

namespace foldcheck::py {

namespace pyb = pybind11;

namespace {

// What was given, for the message: its repr (cut short) and its type.
std::string shown(const pyb::handle& v) {
  std::string r = pyb::repr(v).cast<std::string>();
  if (r.size() > 60) r = r.substr(0, 57) + "...";
  return fmt::format("{} ({})", r, Py_TYPE(v.ptr())->tp_name);
}

[[noreturn]] void refuse(const pyb::handle& v, const char* name, const std::string& expected) {
  throw InputError(fmt::format("{}: must be {}, got {}", name, expected, shown(v)));  // as the command's flags say it
}

std::string integer_text(options::IntegerRange r) { return fmt::format("an integer from {} to {}", r.lo, r.hi); }

std::string number_text(options::NumberRange r) {  // as the command line's finite_number says it
  if (r.lo <= -std::numeric_limits<double>::max()) return "a finite number";
  return fmt::format("a finite number {} {:g}{}", r.lo_excluded ? ">" : ">=", r.lo,
                     r.hi < 1e300 ? fmt::format(" and <= {:g}", r.hi) : "");
}

// The dtype's name of a numpy scalar, array or tensor; "" for other objects.
std::string dtype_name(const pyb::handle& v) {
  if (!pyb::hasattr(v, "dtype")) return "";
  return pyb::str(v.attr("dtype")).cast<std::string>();
}

// A bool of any kind: Python's, numpy's, a 0-d bool array or tensor.
bool boolean_kind(const pyb::handle& v) {
  if (PyBool_Check(v.ptr())) return true;
  const std::string d = dtype_name(v);
  return d == "bool" || d == "torch.bool";
}

// An array or tensor of one or more dimensions (a numpy scalar and a 0-d array have ndim 0).
bool has_axes(const pyb::handle& v) {
  if (!pyb::hasattr(v, "ndim")) return false;
  const pyb::object n = v.attr("ndim");
  return !PyLong_Check(n.ptr()) || n.cast<long>() != 0;
}

bool is_text(const pyb::handle& v) { return PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()); }

}  // namespace

std::uint64_t integer(const pyb::handle& v, const char* name, options::IntegerRange range) {
  const std::string want = integer_text(range);
  if (v.is_none() || boolean_kind(v) || is_text(v) || has_axes(v) || !PyIndex_Check(v.ptr())) refuse(v, name, want);
  const pyb::object i =
      pyb::reinterpret_steal<pyb::object>(PyNumber_Index(v.ptr()));  // int, numpy integer, 0-d integer array
  if (!i) {
    PyErr_Clear();  // a 0-d float array: no integer
    refuse(v, name, want);
  }
  int overflow = 0;
  const long long s = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow < 0 || (overflow == 0 && s < 0)) refuse(v, name, want);
  const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();  // past 2^64 - 1
    refuse(v, name, want);
  }
  if (u < range.lo || u > range.hi) refuse(v, name, want);
  return u;
}

std::optional<std::uint64_t> optional_integer(const pyb::handle& v, const char* name, options::IntegerRange range) {
  if (v.is_none()) return std::nullopt;
  return integer(v, name, range);
}

double number(const pyb::handle& v, const char* name, options::NumberRange range) {
  const std::string want = number_text(range);
  if (v.is_none() || boolean_kind(v) || is_text(v) || has_axes(v) || PyComplex_Check(v.ptr()) ||
      dtype_name(v).find("complex") != std::string::npos)
    refuse(v, name, want);
  const pyb::object f =
      pyb::reinterpret_steal<pyb::object>(PyNumber_Float(v.ptr()));  // int, float, numpy number, 0-d array
  if (!f) {
    PyErr_Clear();
    refuse(v, name, want);
  }
  const double x = PyFloat_AsDouble(f.ptr());
  if (!std::isfinite(x) || (range.lo_excluded ? !(x > range.lo) : !(x >= range.lo)) || !(x <= range.hi))
    refuse(v, name, want);
  return x;
}

std::optional<double> optional_number(const pyb::handle& v, const char* name, options::NumberRange range) {
  if (v.is_none()) return std::nullopt;
  return number(v, name, range);
}

bool flag(const pyb::handle& v, const char* name) {
  if (PyBool_Check(v.ptr())) return v.ptr() == Py_True;
  if (dtype_name(v) == "bool" && !has_axes(v)) return PyObject_IsTrue(v.ptr()) == 1;  // numpy.bool_
  refuse(v, name, "True or False");
}

std::string text(const pyb::handle& v, const char* name) {
  if (!PyUnicode_Check(v.ptr())) refuse(v, name, "a str");
  std::string t = v.cast<std::string>();
  if (t.find('\0') != std::string::npos) refuse(v, name, "a str without NUL characters");
  return t;
}

std::optional<std::string> optional_text(const pyb::handle& v, const char* name) {
  if (v.is_none()) return std::nullopt;
  return text(v, name);
}

std::vector<std::string> texts(const pyb::handle& v, const char* name) {
  if (PyUnicode_Check(v.ptr())) return {text(v, name)};
  if (!PyList_Check(v.ptr()) && !PyTuple_Check(v.ptr())) refuse(v, name, "a str or a list of str");
  std::vector<std::string> r;
  std::size_t i = 0;
  for (const pyb::handle item : v) r.push_back(text(item, fmt::format("{}[{}]", name, i++).c_str()));
  return r;
}

std::vector<std::pair<std::string, std::string>> text_pairs(const pyb::handle& v, const char* name) {
  if (v.is_none()) return {};
  const pyb::object mapping = pyb::module_::import("collections.abc").attr("Mapping");
  if (!pyb::isinstance(v, mapping)) refuse(v, name, "a dict of str to str");
  std::vector<std::pair<std::string, std::string>> r;
  for (const pyb::handle key : v) {
    const std::string k = text(key, fmt::format("{} (a key)", name).c_str());
    const std::string place = fmt::format("{}[{}]", name, pyb::repr(key).cast<std::string>());
    r.emplace_back(k, text(v[key], place.c_str()));
  }
  return r;
}

void bind_scalars(pyb::module_& m) {
  m.def(
      "number",
      [](const pyb::object& v, const std::string& name, double lo, bool lo_excluded) {
        return number(v, name.c_str(), options::NumberRange{lo, lo_excluded});
      },
      pyb::arg("value"), pyb::arg("name"), pyb::arg("lo") = options::kAnyFinite.lo, pyb::arg("lo_excluded") = false,
      "value as a float, converted as every core function converts a number argument (scalars.hpp): a finite number "
      "above lo (strictly when lo_excluded), or foldcheck.InputError naming `name`");
  m.def(
      "reference_options",
      [](const pyb::object& precision, const pyb::object& threads) {
        const ref::Options o = reference_options(precision, threads);
        return pyb::make_tuple(o.precision, o.threads);
      },
      pyb::arg("precision"), pyb::arg("threads"),
      "(precision, threads) converted as every core function converts them (the command's --precision and --threads "
      "ranges), or foldcheck.InputError naming the argument: for functions that check them before running anything "
      "(foldcheck.keras.check_tflite)");
}

}  // namespace foldcheck::py
