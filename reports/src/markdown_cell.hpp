#pragma once
// Text from a report (entry names, paths, reasons) put into a Markdown table cell, heading
// or paragraph: '|' would end the cell and a line break the row, so '|' is escaped as "\|",
// line breaks become spaces and other control characters U+FFFD; '<', '>' and '&' are
// entities (Markdown passes HTML through) and '`' and '*' are escaped. Ordinary names read as they
// are. Bidi controls are shown as \uXXXX (bidi.hpp).
#include <string>

#include "foldcheck/reports/bidi.hpp"

namespace foldcheck::reports {

inline std::string markdown_cell(const std::string& s) {
  std::string r;
  for (const char c : neutralise_bidi(s)) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '|')
      r += "\\|";
    else if (c == '<')
      r += "&lt;";
    else if (c == '>')
      r += "&gt;";
    else if (c == '&')
      r += "&amp;";
    else if (c == '`')
      r += "\\`";
    else if (c == '*')  // w*gamma*r would set "gamma" in italics
      r += "\\*";
    else if (c == '\n' || c == '\r' || c == '\t')
      r += ' ';
    else if (u < 0x20 || u == 0x7f)
      r += "\xEF\xBF\xBD";
    else
      r += c;
  }
  return r;
}

}  // namespace foldcheck::reports
