// foldcheck._core: the C++ core of the Python package (python/CMakeLists.txt). The functions are
// in bind_*.cpp (bind.hpp); here the Result type Python sees and the error it raises.
//
// Errors: a refused input (InputError: a bad value, file or shape, the message naming the
// argument) raises foldcheck.InputError, a ValueError; anything else the library throws
// (an I/O failure, a certification that cannot finish) raises RuntimeError with its message.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "arrays.hpp"
#include "bind.hpp"
#include "foldcheck/base/errors.hpp"
#include "foldcheck/base/version.hpp"
#include "foldcheck/reports/neutralise.hpp"
#include "result.hpp"
#include "scalars.hpp"

namespace pyb = pybind11;
using foldcheck::py::Result;

namespace {

PyObject* g_input_error = nullptr;  // foldcheck.InputError (the module holds it for the process's life)

// Messages quote names from files: control and bidi characters in them are shown escaped
// (reports/neutralise.hpp), as in the command's error line; the message's own lines kept.
// pybind11::register_exception_translator takes void (*)(std::exception_ptr): by value.
void translate_input_error(std::exception_ptr p) {  // NOLINT(performance-unnecessary-value-param)
  try {
    if (p) std::rethrow_exception(p);
  } catch (const foldcheck::InputError& e) {
    pyb::set_error(pyb::handle(g_input_error), foldcheck::reports::neutralised_page(e.what()).c_str());
  }
}

void bind_result(pyb::module_& m) {
  pyb::class_<Result>(m, "Result")
      .def_readonly("command", &Result::command)
      .def_property_readonly("verdict", [](const Result& r) { return foldcheck::py::verdict_object(r.verdict); })
      .def_property_readonly("exit_code", &Result::exit_code)
      .def(
          "to_json",
          [](const Result& r, int indent) {
            return r.json.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
          },
          pyb::arg("indent") = -1)
      .def("report", &Result::report, pyb::arg("format") = "text")
      .def("answer", &Result::answer)
      .def("array_names",
           [](const Result& r) {
             std::vector<std::string> n;
             for (const auto& [k, v] : r.arrays) n.push_back(k);
             return n;
           })
      .def("array", [](pyb::object self, const std::string& name) {
        const Result& r = self.cast<const Result&>();
        const auto it = r.arrays.find(name);
        if (it == r.arrays.end()) throw pyb::key_error(name);
        return foldcheck::py::view(it->second.data, it->second.shape, self);
      });
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "foldcheck's C++ core (use the functions of the foldcheck package)";
  m.attr("version") = foldcheck::kVersion;
  m.attr("schema_version") = foldcheck::kSchemaVersion;
  g_input_error = pyb::register_exception<foldcheck::InputError>(m, "InputError", PyExc_ValueError).ptr();
  pyb::register_exception_translator(&translate_input_error);  // tried before register_exception's
  foldcheck::py::bind_judgement(m);
  foldcheck::py::bind_scalars(m);
  m.def("neutralised", &foldcheck::reports::neutralised, pyb::arg("text"),
        "text as one line for people: control characters (ESC, CR, LF, TAB, NUL, DEL, C1), bidi controls and "
        "line separators shown as \\n, \\r, \\t or \\uXXXX; what every report does to a name (reports/neutralise.hpp)");
  bind_result(m);
  foldcheck::py::bind_layer(m);
  foldcheck::py::bind_fold(m);
  foldcheck::py::bind_model(m);
  foldcheck::py::bind_case(m);
}
