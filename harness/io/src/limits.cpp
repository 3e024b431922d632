// The element limit and checked sizes (limits.hpp).
#include "foldcheck/io/limits.hpp"

#include <atomic>
#include <cstdlib>
#include <limits>
#include <unistd.h>

#include <fmt/format.h>

#include "foldcheck/base/errors.hpp"

namespace foldcheck {
namespace {

std::atomic<std::int64_t> g_max_elements{kDefaultMaxElements};

[[noreturn]] void over_limit(const std::string& what, const Shape& shape, const std::string& count) {
  throw InputError(fmt::format(fmt::runtime("{}: shape {} has {} elements, over the limit of {} (raise it with " + field("max_elements") + " "
                               "or FOLDCHECK_MAX_ELEMENTS)"),
                               what, shape_string(shape), count, max_elements()));
}

}  // namespace

std::int64_t max_elements() { return g_max_elements.load(std::memory_order_relaxed); }

void set_max_elements(std::int64_t n) {
  if (n < 1 || n > kMaxElementLimit)
    throw InputError(fmt::format("the element limit must be between 1 and 2^40 = {} (got {})", kMaxElementLimit, n));
  g_max_elements.store(n, std::memory_order_relaxed);
}

std::int64_t parse_element_limit(const std::string& text) {
  // 14 digits hold 2^40 = 1099511627776 (13 digits) and stay far from strtoll's overflow.
  if (text.empty() || text.size() > 14 || text.find_first_not_of("0123456789") != std::string::npos) return 0;
  const long long n = std::strtoll(text.c_str(), nullptr, 10);
  return n >= 1 && n <= kMaxElementLimit ? n : 0;
}

std::int64_t max_elements_from_environment() {
  const char* v = std::getenv("FOLDCHECK_MAX_ELEMENTS");
  if (!v || !*v) return kDefaultMaxElements;
  const std::int64_t n = parse_element_limit(v);
  if (n == 0) throw InputError(fmt::format("FOLDCHECK_MAX_ELEMENTS='{}': expected {}", v, kElementLimitRange));
  return n;
}

void check_fits_in_memory(std::uint64_t elements, std::uint64_t bytes_per_element, const std::string& what) {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return;  // unknown: nothing to compare against
  const double memory = static_cast<double>(pages) * static_cast<double>(page);
  const double need = static_cast<double>(elements) * static_cast<double>(bytes_per_element);
  if (need > 0.75 * memory)
    throw InputError(fmt::format("{}: {} elements need about {:.1f} GB ({} bytes each), over 3/4 of this machine's "
                                 "{:.1f} GB of memory",
                                 what, elements, need / 1e9, bytes_per_element, memory / 1e9));
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
