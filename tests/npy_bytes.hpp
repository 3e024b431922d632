#pragma once
// .npy files made byte by byte in tests: a header dict as given (padded as NumPy pads it,
// version 1.0) followed by raw data, so that malformed headers can be written.
#include <string>

namespace foldcheck::testing {

inline std::string npy_with_header(const std::string& dict, const std::string& data) {
  std::string h = dict;
  while ((10 + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string b("\x93NUMPY\x01\x00", 8);
  b += static_cast<char>(h.size() & 0xff);
  b += static_cast<char>(h.size() >> 8);
  return b + h + data;
}

}  // namespace foldcheck::testing
