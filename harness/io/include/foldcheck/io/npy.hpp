#pragma once
// NumPy .npy and .npz I/O (format version 1.0/2.0/3.0, little-endian float16/32/64,
// C order). Values are returned as doubles (exact widening) with the file's dtype.
//
// Contract: read_npy validates the magic, header, dtype, shape (against the element limit,
// limits.hpp) and that the data length is exactly what the shape needs before converting;
// any defect is an InputError naming the file. Writers replace the file atomically.
// read_npz reads the named arrays (members "<key>.npy") of a zip archive via libzip.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "foldcheck/numerics/tensor.hpp"

namespace foldcheck {

Tensor read_npy(const std::string& path);
Tensor parse_npy(const std::string& bytes, const std::string& what);
std::string serialize_npy(const Tensor& t);  // float16/32/64 only (bfloat16 has no npy dtype: written as float32)
void write_npy(const std::string& path, const Tensor& t);

// Integer arrays (int8/16/32/64, uint8/16/32, little-endian): quantized weights and the like.
struct IntArray {
  Shape shape;
  std::vector<std::int64_t> values;
};
IntArray read_npy_ints(const std::string& path);
void write_npy_ints(const std::string& path, const Shape& shape, const std::vector<std::int64_t>& values, int width);  // width 1 (int8) or 4 (int32)

// All members of an .npz as tensors, keyed by name without ".npy".
// expected: the keys the caller knows; any other is refused before a member is read
// (empty: every key is returned). Members are read in chunks (no allocation from sizes
// the archive claims) and each .npy header is checked before the member's data is read;
// max_values > 0: a member with more values is refused from its header (BatchNorm
// parameters: one per channel, never more than the weights).
std::map<std::string, Tensor> read_npz(const std::string& path, const std::vector<std::string>& expected = {},
                                       std::int64_t max_values = 0);
std::map<std::string, Tensor> parse_npz(const std::string& bytes, const std::string& what,
                                        const std::vector<std::string>& expected = {}, std::int64_t max_values = 0);
void write_npz(const std::string& path, const std::map<std::string, Tensor>& arrays);

}  // namespace foldcheck
