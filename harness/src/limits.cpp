// The element limit and checked sizes (limits.hpp).
#include "foldcheck/limits.hpp"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "foldcheck/errors.hpp"

namespace foldcheck {
namespace {

std::atomic<std::int64_t> g_max_elements{kDefaultMaxElements};

[[noreturn]] void over_limit(const std::string& what, const Shape& shape, const std::string& count) {
  throw InputError(fmt::format("{}: shape {} has {} elements, over the limit of {} (raise it with --max-elements "
                               "or FOLDCHECK_MAX_ELEMENTS)",
                               what, shape_string(shape), count, max_elements()));
}

}  // namespace

std::int64_t max_elements() { return g_max_elements.load(std::memory_order_relaxed); }

void set_max_elements(std::int64_t n) {
  if (n < 1) throw InputError(fmt::format("the element limit must be >= 1 (got {})", n));
  g_max_elements.store(n, std::memory_order_relaxed);
}

std::int64_t max_elements_from_environment() {
  const char* v = std::getenv("FOLDCHECK_MAX_ELEMENTS");
  if (!v || !*v) return kDefaultMaxElements;
  char* end = nullptr;
  errno = 0;
  const long long n = std::strtoll(v, &end, 10);
  if (errno || *end || n < 1)
    throw InputError(fmt::format("FOLDCHECK_MAX_ELEMENTS='{}': expected a positive integer", v));
  return n;
}

std::int64_t checked_element_count(const Shape& shape, const std::string& what) {
  std::int64_t n = 1;
  bool overflow = false;
  for (const std::int64_t d : shape)
    if (d < 0) throw InputError(fmt::format("{}: negative dimension in shape {}", what, shape_string(shape)));
  for (const std::int64_t d : shape) {
    if (d == 0) return 0;
    if (n > std::numeric_limits<std::int64_t>::max() / d) overflow = true;
    else n *= d;
  }
  if (overflow) over_limit(what, shape, "more than 2^63");
  if (n > max_elements()) over_limit(what, shape, std::to_string(n));
  return n;
}

}  // namespace foldcheck
