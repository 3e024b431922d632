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

#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck {

inline constexpr std::int64_t kDefaultMaxElements = std::int64_t(1) << 28;
// The largest limit that can be set: 2^40 elements (8 TiB of doubles, beyond any machine),
// so that every size derived from the limit (bytes, with headroom) stays far from 2^63.
inline constexpr std::int64_t kMaxElementLimit = std::int64_t(1) << 40;

std::int64_t max_elements();
void set_max_elements(std::int64_t n);  // n >= 1
// A limit as written by the user (--max-elements, FOLDCHECK_MAX_ELEMENTS): decimal digits
// only, from 1 to kMaxElementLimit; 0 for anything else (a sign, spaces, a fraction, out of
// range). The flag and the variable share this one reading and the message below.
std::int64_t parse_element_limit(const std::string& text);
inline constexpr const char* kElementLimitRange = "an integer from 1 to 2^40 = 1099511627776";
static_assert(kMaxElementLimit == 1099511627776, "kElementLimitRange spells the limit out");
// The limit from FOLDCHECK_MAX_ELEMENTS if set (InputError if it is not a positive integer),
// else kDefaultMaxElements.
std::int64_t max_elements_from_environment();

// A command that holds `bytes_per_element` bytes for each of `elements` elements (measured
// per command, with headroom): InputError naming `what` when that exceeds 3/4 of this
// machine's physical memory, before anything is computed, instead of an out-of-memory kill
// or a bare std::bad_alloc an hour later. The element limit alone cannot say this: it is
// per tensor, and commands hold from 8 to ~250 bytes per element.
void check_fits_in_memory(std::uint64_t elements, std::uint64_t bytes_per_element, const std::string& what);

// The number of elements of `shape`; InputError naming `what` if a dimension is negative,
// the product overflows, or it exceeds max_elements().
std::int64_t checked_element_count(const Shape& shape, const std::string& what);

}  // namespace foldcheck
