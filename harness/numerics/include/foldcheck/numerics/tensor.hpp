#pragma once
// A dense tensor of values of one dtype, held exactly in doubles (row-major).
#include <cstdint>
#include <string>
#include <vector>

#include "foldcheck/numerics/dtype.hpp"

namespace foldcheck {

using Shape = std::vector<std::int64_t>;

struct Tensor {
  Shape shape;
  std::vector<double> data;
  DType dtype = DType::Float32;

  std::int64_t size() const { return static_cast<std::int64_t>(data.size()); }
};

std::int64_t element_count(const Shape& s);
std::string shape_string(const Shape& s);  // "[1, 3, 224, 224]"
// The coordinates of row-major flat element `flat` of a tensor of shape s.
std::vector<std::int64_t> unravel_index(const Shape& s, std::size_t flat);

}  // namespace foldcheck
