// libFuzzer target: case files (load_case on arbitrary JSON text) and, when one loads, its
// materialization in float32. Any input must load or throw InputError.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "foldcheck/case_file.hpp"
#include "foldcheck/errors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const nlohmann::json j = nlohmann::json::parse(reinterpret_cast<const char*>(data), reinterpret_cast<const char*>(data) + size,
                                                 nullptr, false);
  if (j.is_discarded()) return 0;
  try {
    const foldcheck::CaseSpec s = foldcheck::load_case(j, "/nonexistent/fuzz.json");
    // Keep work per input small: only modest layers are materialized.
    if (s.geometry.N * s.geometry.C * s.geometry.H * s.geometry.W <= (1 << 16) && s.geometry.O * s.geometry.terms_per_output() <= (1 << 16))
      (void)foldcheck::materialize(s, foldcheck::DType::Float32);
  } catch (const foldcheck::InputError&) {
  } catch (const nlohmann::json::exception&) {
    // a JSON value of the wrong type in a known field: reported as a usage error by the CLI
  }
  return 0;
}
