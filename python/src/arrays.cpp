// numpy arrays in and out (arrays.hpp).
#include "arrays.hpp"

#include <bit>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"
#include "foldcheck/layer/bn_check.hpp"

namespace foldcheck::py {
namespace {

// The array's dtype as foldcheck names it ("float32", "bfloat16", ...), from numpy's own name.
std::string dtype_name(const pyb::array& a) { return pyb::str(a.dtype().attr("name")).cast<std::string>(); }

template <class T>
void read_as(const pyb::array& a, std::vector<double>& out) {
  const T* p = static_cast<const T*>(a.data());
  for (pyb::ssize_t i = 0; i < a.size(); ++i) out[static_cast<std::size_t>(i)] = static_cast<double>(p[i]);
}

// In place means as this machine stores numbers: C order, native byte order.
void require_contiguous(const pyb::array& a, const std::string& field) {
  if (!(a.flags() & pyb::array::c_style))
    throw InputError(field + ": the array is not C-contiguous (numpy.ascontiguousarray first)");
  const char order = a.dtype().byteorder();
  const bool little = std::endian::native == std::endian::little;
  if ((order == '>' && little) || (order == '<' && !little))
    throw InputError(field + ": the array's bytes are in the other byte order (astype(dtype.newbyteorder('=')) first)");
}

Shape shape_of(const pyb::array& a) {
  Shape s;
  for (pyb::ssize_t d = 0; d < a.ndim(); ++d) s.push_back(static_cast<std::int64_t>(a.shape(d)));
  return s;
}

}  // namespace

Tensor tensor_arg(const pyb::array& a, const std::string& field) {
  require_contiguous(a, field);
  Tensor t;
  t.shape = shape_of(a);
  t.data.resize(static_cast<std::size_t>(a.size()));
  const std::string n = dtype_name(a);
  if (n == "float64") {
    t.dtype = DType::Float64;
    read_as<double>(a, t.data);
  } else if (n == "float32") {
    t.dtype = DType::Float32;
    read_as<float>(a, t.data);
  } else if ((n == "float16" || n == "bfloat16") && a.itemsize() == 2) {
    t.dtype = n == "float16" ? DType::Float16 : DType::BFloat16;
    const auto* p = static_cast<const std::uint16_t*>(a.data());
    for (std::size_t i = 0; i < t.data.size(); ++i) t.data[i] = from_bits(t.dtype, p[i]);
  } else {
    throw InputError(fmt::format("{}: dtype {} (expected float16, bfloat16, float32 or float64)", field, n));
  }
  return t;
}

std::vector<std::int64_t> int_arg(const pyb::array& a, const std::string& field) {
  require_contiguous(a, field);
  const std::string n = dtype_name(a);
  std::vector<std::int64_t> r(static_cast<std::size_t>(a.size()));
  auto copy = [&](auto* p) { for (std::size_t i = 0; i < r.size(); ++i) r[i] = static_cast<std::int64_t>(p[i]); };
  if (n == "int8") copy(static_cast<const std::int8_t*>(a.data()));
  else if (n == "int16") copy(static_cast<const std::int16_t*>(a.data()));
  else if (n == "int32") copy(static_cast<const std::int32_t*>(a.data()));
  else if (n == "int64") copy(static_cast<const std::int64_t*>(a.data()));
  else if (n == "uint8") copy(static_cast<const std::uint8_t*>(a.data()));
  else throw InputError(fmt::format("{}: dtype {} (expected an integer dtype: int8, int16, int32, int64, uint8)", field, n));
  return r;
}

void require_values_of(const Tensor& t, DType want, const std::string& field) {
  if (const std::string bad = first_overflow(t.data, want); !bad.empty()) throw InputError(field + ": " + bad);
  for (std::size_t i = 0; i < t.data.size(); ++i)
    if (const double x = t.data[i]; !std::isnan(x) && round_to(want, x) != x)
      throw InputError(fmt::format("{}: value {:.17g} at index {} is not a {} value (give the array in {})", field, x, i,
                                   name(want), name(want)));
}

void require_finite(const Tensor& t, const std::string& field) {
  if (const std::string bad = first_nonfinite(t.data); !bad.empty()) throw InputError(field + ": has " + bad);
}

pyb::array view(const std::vector<double>& data, const std::vector<std::int64_t>& shape, pyb::handle owner) {
  std::vector<pyb::ssize_t> extents(shape.begin(), shape.end());
  pyb::array r(pyb::dtype::of<double>(), extents, {}, data.data(), owner);
  pyb::detail::array_proxy(r.ptr())->flags &= ~pyb::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return r;
}

}  // namespace foldcheck::py
