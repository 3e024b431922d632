#pragma once
// The one rule for names in every report made for people (text, Markdown, HTML, SVG, JUnit, an
// error line, the Python package's reports): characters that drive a terminal or change how the
// text around a name is laid out are shown as visible escapes. A name comes from a file or from
// the user's objects (an ONNX node, a case, an entry, an engine or adapter label, a PyTorch
// module): ESC in it recolours or rewrites a terminal and a CI log, CR overwrites the line, BEL
// rings, backspace erases; a line break or tab inside a name breaks the report's rows and forges
// lines ("x\nverdict: EXPECTED"); U+202E RIGHT-TO-LEFT OVERRIDE shows the rest of the line reversed
// ("layer x\u202E DETCEPXENU" reads as "EXPECTED").
//
// Shown escaped: LF, CR and TAB as \n, \r and \t; every other character below as \uXXXX (six
// characters, upper-case hex):
//  - the C0 controls U+0000–U+001F (NUL, BEL, BS, VT, FF, ESC...) and DEL U+007F;
//  - the C1 controls U+0080–U+009F (NEL breaks a line; U+009B is a terminal's CSI);
//  - every Bidi_Control character of Unicode: U+061C ALM, U+200E LRM, U+200F RLM, U+202A–U+202E
//    (LRE, RLE, PDF, LRO, RLO) and U+2066–U+2069 (LRI, RLI, FSI, PDI);
//  - U+2028 LINE SEPARATOR and U+2029 PARAGRAPH SEPARATOR (a line break to a renderer that lays
//    out lines of its own around the name, and a bidi paragraph end).
// A byte that is not UTF-8 (ONNX strings are not validated) is shown as U+FFFD: a report for
// people is UTF-8. Everything else passes byte for byte: letters of any script (Arabic and Hebrew
// names keep their natural direction, which the Unicode bidi algorithm confines to the name),
// joiners, a backslash (the escapes are for reading, not decoding: the JSON keeps names exact).
// The escapes hold no character any format gives a meaning to (no '<', '&', '|', '*', '`'), so the
// rule may be applied before or after a format's own escaping, and applying it twice changes
// nothing.
//
// Three entry points: neutralised(name) for one name (a name is one line: LF escaped too);
// neutralised_page(page) for a whole page, the backstop for any string a writer did not escape
// (the page's own line breaks kept); neutralised_strings(result) for every string (and key) of a
// result's JSON before a text renderer lays it out. JSON output keeps names exact: it is for machines.
#include <cstddef>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
inline bool shown_escaped(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0x9F) || c == 0x061C || c == 0x200E || c == 0x200F ||
         (c >= 0x202A && c <= 0x202E) || (c >= 0x2066 && c <= 0x2069) || c == 0x2028 || c == 0x2029;
}

namespace detail {
// How the character c above is shown: \n, \r, \t or \uXXXX.
inline std::string escape_of(char32_t c) {
  if (c == '\n') return "\\n";
  if (c == '\r') return "\\r";
  if (c == '\t') return "\\t";
  return fmt::format("\\u{:04X}", static_cast<unsigned>(c));
}

inline std::string neutralise(const std::string& s, bool keep_line_feeds) {
  std::string r;
  r.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      r += "\xEF\xBF\xBD";  // U+FFFD for a byte that is not UTF-8
      ++i;
      continue;
    }
    const char32_t c = utf8_code_point(s, i, n);
    if (shown_escaped(c) && !(c == '\n' && keep_line_feeds)) r += escape_of(c);
    else r.append(s, i, n);
    i += n;
  }
  return r;
}
}  // namespace detail

// One name (or any text that is one line): each character above escaped, LF included.
inline std::string neutralised(const std::string& name) { return detail::neutralise(name, false); }

// A whole page: each character above escaped but the line feeds that end the page's own lines.
inline std::string neutralised_page(const std::string& page) { return detail::neutralise(page, true); }

// A result's JSON with every string, and every key, neutralised: what the text renderers lay out
// (they print names from the JSON in lines and columns of their own). Numbers, booleans, nulls kept.
inline nlohmann::json neutralised_strings(const nlohmann::json& j) {
  if (j.is_string()) return neutralised(j.get_ref<const std::string&>());
  if (j.is_array()) {
    nlohmann::json r = nlohmann::json::array();
    for (const auto& v : j) r.push_back(neutralised_strings(v));
    return r;
  }
  if (!j.is_object()) return j;
  nlohmann::json r = nlohmann::json::object();
  for (auto it = j.begin(); it != j.end(); ++it) r[neutralised(it.key())] = neutralised_strings(it.value());
  return r;
}

}  // namespace foldcheck::reports
