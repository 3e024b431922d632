#pragma once
// Characters that change how the text AFTER them is laid out, neutralised in every report made
// for people. A name from a file (an ONNX node, a case, an entry, an engine or adapter name)
// holding U+202E RIGHT-TO-LEFT OVERRIDE shows the rest of its line reversed in a terminal, a
// Markdown page, an HTML page or a CI log: "layer x\u202E DETCEPXENU" reads as "EXPECTED".
//
// Neutralised (each replaced by the visible six-character escape \uXXXX, upper-case hex):
//  - every Bidi_Control character of Unicode: U+061C ALM, U+200E LRM, U+200F RLM, U+202A–U+202E
//    (LRE, RLE, PDF, LRO, RLO) and U+2066–U+2069 (LRI, RLI, FSI, PDI);
//  - U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR (a line break to a renderer that
//    lays out lines of its own around the name, and a bidi paragraph end);
//  - the C1 controls U+0080–U+009F (NEL breaks a line; U+009B is a terminal's CSI).
// Everything else passes byte for byte: letters of any script (Arabic and Hebrew names keep
// their natural direction, which the Unicode bidi algorithm confines to the name), joiners,
// and bytes that are not UTF-8 (each writer treats those its own way, utf8.hpp).
// The escape holds no character any format gives a meaning to (no '<', '&', '|', '*', '`'),
// so it may be applied before or after a format's own escaping, to a name or a whole page.
// JSON output keeps names exact: it is for machines.
#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "foldcheck/reports/utf8.hpp"

namespace foldcheck::reports {

// The code point of the valid n-byte UTF-8 sequence at s[i] (utf8_length's n >= 1).
inline char32_t utf8_code_point(const std::string& s, std::size_t i, std::size_t n) {
  const auto b = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
  switch (n) {
    case 1: return b(0);
    case 2: return (b(0) & 0x1Fu) << 6 | (b(1) & 0x3Fu);
    case 3: return (b(0) & 0x0Fu) << 12 | (b(1) & 0x3Fu) << 6 | (b(2) & 0x3Fu);
    default: return (b(0) & 0x07u) << 18 | (b(1) & 0x3Fu) << 12 | (b(2) & 0x3Fu) << 6 | (b(3) & 0x3Fu);
  }
}

// Whether c is one of the characters above.
inline bool layout_control(char32_t c) {
  return c == 0x061C || c == 0x200E || c == 0x200F || (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) ||
         c == 0x2028 || c == 0x2029 || (c >= 0x80 && c <= 0x9F);
}

// s with each character above shown as \uXXXX; s itself (a copy) when it holds none.
inline std::string neutralise_bidi(const std::string& s) {
  std::string r;
  r.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n >= 2 && layout_control(utf8_code_point(s, i, n))) {
      r += fmt::format("\\u{:04X}", static_cast<unsigned>(utf8_code_point(s, i, n)));
    } else {
      r.append(s, i, n == 0 ? 1 : n);
    }
    i += n == 0 ? 1 : n;
  }
  return r;
}

}  // namespace foldcheck::reports
