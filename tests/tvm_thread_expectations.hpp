#pragma once
// What the TVM forum thread's numbers must give (issue 2's acceptance), shared by the
// library test of explain() and the CLI test of `foldcheck explain`.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

// Every element drifts by -5 ppm (within [-5.1, -4.9]) and lies within
// `max_residual_ulp` of the exact fold; the tvm recipe reproduces the values bit for bit.
inline void check_tvm_thread_elements(const nlohmann::json& j, double max_residual_ulp) {
  for (const auto& e : j["elements"]) {
    CHECK(e["drift_ppm"].get<double>() >= -5.1);
    CHECK(e["drift_ppm"].get<double>() <= -4.9);
    CHECK(std::fabs(e["residual_ulp"].get<double>()) <= max_residual_ulp);
  }
  const auto be = j["bit_exact_recipes"].get<std::vector<std::string>>();
  CHECK(std::find(be.begin(), be.end(), "tvm") != be.end());
}
