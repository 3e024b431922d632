#include "foldcheck/numerics/tensor.hpp"

#include <limits>
#include <stdexcept>

namespace foldcheck {

std::int64_t element_count(const Shape& s) {
  std::int64_t n = 1;
  for (auto d : s) {
    if (d < 0) throw std::invalid_argument("negative dimension");
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d) throw std::invalid_argument("shape overflows");
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& s) {
  std::string r = "[";
  for (std::size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

std::vector<std::int64_t> unravel_index(const Shape& s, std::size_t flat) {
  std::vector<std::int64_t> c(s.size());
  auto rem = static_cast<std::int64_t>(flat);
  for (std::size_t d = s.size(); d-- > 0;) {
    c[d] = s[d] > 0 ? rem % s[d] : 0;
    rem = s[d] > 0 ? rem / s[d] : rem;
  }
  return c;
}

}  // namespace foldcheck
