#pragma once
// What the model commands' renderers print alike (accuracy_diff, bisect, engines, quant_check).
#include <optional>
#include <string>

#include <fmt/format.h>

namespace foldcheck::reports {

// "  (1.2 s)" from a view's seconds; "" when the result had no timing (--no-timing): the same
// text as seconds_suffix (text.hpp) prints from the JSON.
inline std::string seconds_text(const std::optional<double>& seconds) {
  return seconds ? fmt::format("  ({:.1f} s)", *seconds) : std::string();
}

}  // namespace foldcheck::reports
