#pragma once
// The core's functions, one file per group (module.cpp calls each): bind_layer.cpp (explain,
// diagnose, quant_check: one layer from arrays), bind_model.cpp (accuracy_diff, engines: ONNX
// models), bind_case.cpp (run, bisect: case files and pipelines), bind_fold.cpp (fold_check, diagnose_fold: a fused
// conv against its conv and BatchNorm, and the cause of a failure), bind_judgement.cpp (Verdict and
// the judgement policies).
//
// Contract of every function: arguments are checked as the `foldcheck` command checks its
// flags' values (bad input raises foldcheck.InputError, a ValueError, naming the argument);
// the work runs with the GIL released (call.hpp); the return value is a Result (result.hpp).
// The Python layer (python/foldcheck/) gives each its signature and documentation; every default
// is the C++ options struct's, exposed once as _core.<command>_defaults (explain_defaults, ...,
// engines_defaults) and read by both the keyword defaults here and the Python signatures.
#include <pybind11/pybind11.h>

#include "foldcheck/result/verdict.hpp"

namespace foldcheck::py {

void bind_layer(pybind11::module_& m);
void bind_model(pybind11::module_& m);
void bind_case(pybind11::module_& m);
void bind_fold(pybind11::module_& m);
// Verdict (a StrEnum made from the C++ enum) and the judgement policies (bind_judgement.cpp).
void bind_judgement(pybind11::module_& m);
// The Verdict member of v (bind_judgement must have run).
pybind11::object verdict_object(Verdict v);

}  // namespace foldcheck::py
