// libFuzzer target: `compare` and the report writers on arbitrary JSON (a baseline or
// report file edited by hand or truncated). Any input must produce a result or throw a
// JSON type error / std::invalid_argument (the CLI reports both as a bad input).
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "foldcheck/reports/compare_reports.hpp"
#include "foldcheck/reports/suite_reports.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size,
                                                 nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    (void)foldcheck::reports::compare_reports(j, j, {});
    (void)foldcheck::reports::report_markdown(j);
    (void)foldcheck::reports::report_html(j);
  } catch (const nlohmann::json::exception&) {
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
