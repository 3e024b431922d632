#pragma once
// Resource limits on what foldcheck reads: a malicious or mistaken file must be refused
// before it makes foldcheck allocate, not after.
//
// Contract: every reader that sizes an allocation from a file (an .npy header, an ONNX
// initializer's dims, a case file's geometry, a model input's declared shape) first calls
// checked_element_count, which refuses negative dimensions, products that overflow int64,
// and more elements than max_elements(). Tensors are held as doubles, so the default of
// 2^28 elements is 2 GiB per tensor: far above any layer of the models foldcheck is for
// (VGG-16's largest weight has 1.0e8 elements) and far below the machines' memory.
// The limit is process-wide: the CLI sets it once, before reading anything, from
// --max-elements or the environment variable FOLDCHECK_MAX_ELEMENTS.
#include <cstdint>
#include <string>

#include "foldcheck/tensor.hpp"

namespace foldcheck {

inline constexpr std::int64_t kDefaultMaxElements = std::int64_t(1) << 28;

std::int64_t max_elements();
void set_max_elements(std::int64_t n);  // n >= 1
// The limit from FOLDCHECK_MAX_ELEMENTS if set (InputError if it is not a positive integer),
// else kDefaultMaxElements.
std::int64_t max_elements_from_environment();

// The number of elements of `shape`; InputError naming `what` if a dimension is negative,
// the product overflows, or it exceeds max_elements().
std::int64_t checked_element_count(const Shape& shape, const std::string& what);

}  // namespace foldcheck
