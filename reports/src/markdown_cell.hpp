#pragma once
// Text from a report (entry names, paths, reasons) put into a Markdown table cell, heading
// or paragraph: '|' would end the cell, so '|' is escaped as "\|"; '<', '>' and '&' are entities
// (Markdown passes HTML through) and '`' and '*' are escaped. Line breaks, tabs and other control
// characters, bidi controls are shown as \n, \t, \uXXXX (neutralise.hpp: the one rule for names).
// Ordinary names read as they are.
#include <string>

#include "foldcheck/reports/neutralise.hpp"

namespace foldcheck::reports {

inline std::string markdown_cell(const std::string& s) {
  std::string r;
  for (const char c : neutralised(s)) {
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
    else
      r += c;
  }
  return r;
}

}  // namespace foldcheck::reports
