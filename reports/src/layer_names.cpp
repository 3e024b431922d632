// Short unambiguous layer names (layer_names.hpp).
#include "foldcheck/reports/layer_names.hpp"

#include <map>

namespace foldcheck::reports {
namespace {

std::vector<std::string> components(const std::string& name) {
  std::vector<std::string> c;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= name.size(); ++i)
    if (i == name.size() || name[i] == '/') {
      if (i > start) c.push_back(name.substr(start, i - start));
      start = i + 1;
    }
  return c;
}

std::string joined(const std::vector<std::string>& c, std::size_t from, std::size_t to) {
  std::string s;
  for (std::size_t i = from; i < to; ++i) s += (i == from ? "" : "/") + c[i];
  return s;
}

std::size_t chars(const std::string& s) {
  std::size_t n = 0;
  for (const unsigned char ch : s) n += (ch & 0xC0) != 0x80;
  return n;
}

// The last `n` characters of s (whole code points).
std::string tail(const std::string& s, std::size_t n) {
  std::size_t i = s.size(), k = 0;
  while (i > 0 && k < n) {
    --i;
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) ++k;
  }
  return s.substr(i);
}

// c[from..] in at most `width` characters: whole, or c[from] + "/…/" + the last components that fit.
std::string fitted(const std::vector<std::string>& c, std::size_t from, std::size_t width) {
  const std::string whole = joined(c, from, c.size());
  if (chars(whole) <= width) return whole;
  for (std::size_t j = from + 1; j < c.size(); ++j) {  // drop middle components until it fits
    const std::string s = c[from] + "/…/" + joined(c, j, c.size());
    if (chars(s) <= width) return s;
  }
  return "…" + tail(whole, width - 1);
}

}  // namespace

std::vector<std::string> short_layer_names(const std::vector<std::string>& names, std::size_t width) {
  std::vector<std::vector<std::string>> comps;
  std::map<std::string, int> suffix_count;  // every suffix of every name, how many names end with it
  for (const std::string& n : names) {
    comps.push_back(components(n));
    const auto& c = comps.back();
    for (std::size_t from = 0; from < c.size(); ++from) ++suffix_count[joined(c, from, c.size())];
  }
  std::vector<std::string> out;
  for (std::size_t k = 0; k < names.size(); ++k) {
    const auto& c = comps[k];
    if (c.empty()) {
      out.push_back(chars(names[k]) <= width ? names[k] : "…" + tail(names[k], width - 1));
      continue;
    }
    std::size_t from = c.size() - 1;  // the shortest suffix no other name ends with (else the whole name)
    while (from > 0 && suffix_count[joined(c, from, c.size())] > 1) --from;
    out.push_back(fitted(c, from, width));
  }
  return out;
}

}  // namespace foldcheck::reports
