#pragma once
// Forced into every translation unit (-include, CMakeLists.txt) so that all of them see the
// same nlohmann::json configuration. nlohmann's const operator[] on a missing object key is
// undefined behaviour guarded only by JSON_ASSERT (an assert, compiled out in release
// builds). foldcheck reads JSON from users (case files, suites, reports edited by hand or
// truncated), so a missing key must be an error, not UB: here JSON_ASSERT throws, and the
// CLI reports it as bad input (exit 2). Found by fuzz_report_json
// (fuzz/regressions/fuzz_report_json/).
#include <stdexcept>

namespace foldcheck {
struct JsonAccessError : std::out_of_range {
  using std::out_of_range::out_of_range;
};
// A function, not a throw-expression in the macro: nlohmann also asserts internal
// invariants inside noexcept functions, where a throw would only terminate (as the assert
// would abort); those cannot fail on any input.
[[noreturn]] inline void json_assert_failed() {
  throw JsonAccessError("a JSON document lacks a key or value foldcheck reads");
}
}  // namespace foldcheck

#define JSON_ASSERT(x) ((x) ? static_cast<void>(0) : ::foldcheck::json_assert_failed())
