#include "foldcheck/result/verdict.hpp"

namespace foldcheck {

const char* name(Verdict v) {
  switch (v) {
    case Verdict::Expected: return "EXPECTED";
    case Verdict::Suspicious: return "SUSPICIOUS";
    case Verdict::Unexpected: return "UNEXPECTED";
    case Verdict::Mistrusted: return "MISTRUSTED";
  }
  return "?";
}

std::optional<Verdict> verdict_named(const std::string& text) {
  for (const Verdict v : {Verdict::Expected, Verdict::Suspicious, Verdict::Unexpected, Verdict::Mistrusted})
    if (text == name(v)) return v;
  return std::nullopt;
}

}  // namespace foldcheck
