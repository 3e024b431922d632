#include "foldcheck/reference/mp_number.hpp"

#include <vector>

namespace foldcheck::ref {

std::string MpNumber::to_string(int digits) const {
  const int n = mpfr_snprintf(nullptr, 0, "%.*Re", digits - 1, v_);
  std::vector<char> buf(static_cast<size_t>(n) + 1);
  mpfr_snprintf(buf.data(), buf.size(), "%.*Re", digits - 1, v_);
  return std::string(buf.data());
}

}  // namespace foldcheck::ref
