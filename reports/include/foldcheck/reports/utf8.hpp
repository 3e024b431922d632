#pragma once
// UTF-8 validity, for every writer that must not pass on bytes its format cannot hold
// (XML in junit.xml and HTML, a terminal, one error line). Names reach reports from ONNX
// files too, whose strings protobuf does not validate.
#include <cstddef>
#include <string>

namespace foldcheck::reports {

// The length of the valid UTF-8 sequence at s[i] (1 to 4), or 0 if the bytes there are not
// one (a stray continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
inline std::size_t utf8_length(const std::string& s, std::size_t i) {
  const auto b = [&](std::size_t k) { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0u; };
  const unsigned c = b(0);
  const auto cont = [&](std::size_t k) { return (b(k) & 0xC0u) == 0x80u; };
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (!cont(1) || !cont(2) || (c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) > 0x9F)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3) || (c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) > 0x8F)) return 0;
    return 4;
  }
  return 0;
}

// Whether the valid sequence of n bytes at s[i] is U+FFFE or U+FFFF (EF BF BE, EF BF BF):
// UTF-8, but not characters XML 1.0 can hold.
inline bool utf8_noncharacter(const std::string& s, std::size_t i, std::size_t n) {
  return n == 3 && static_cast<unsigned char>(s[i]) == 0xEF && static_cast<unsigned char>(s[i + 1]) == 0xBF &&
         (static_cast<unsigned char>(s[i + 2]) & 0xFE) == 0xBE;
}

}  // namespace foldcheck::reports
