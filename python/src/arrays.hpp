#pragma once
// numpy arrays in and out of the C++ core.
//
// In: a C-contiguous numpy array of float16, bfloat16 (ml_dtypes), float32 or float64 is read
// in place through its buffer (no conversion copy in numpy) into the library's Tensor: each
// value converted exactly to double (every format here is a subset of binary64), the array's
// dtype kept as the Tensor's. Integer arrays (quant-check's dumped integers) likewise into
// int64. Anything else (object arrays, complex, a non-contiguous view the Python layer did not
// make contiguous) is refused with InputError naming the argument.
//
// Out: a read-only numpy view of a vector a Result owns (no copy): the view keeps the Result
// alive through its base object.
#include <cstdint>
#include <string>
#include <vector>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck::py {

namespace pyb = pybind11;

Tensor tensor_arg(const pyb::array& a, const std::string& field);
std::vector<std::int64_t> int_arg(const pyb::array& a, const std::string& field);
// A tensor whose values must be values of T exactly (refusing a float64 array of other values).
void require_values_of(const Tensor& t, DType want, const std::string& field);
void require_finite(const Tensor& t, const std::string& field);

// A read-only view of data (shape: its extents, row-major) owned by `owner`.
pyb::array view(const std::vector<double>& data, const std::vector<std::int64_t>& shape, pyb::handle owner);

}  // namespace foldcheck::py
