#pragma once
// Log2-bucketed histogram of signed errors, with separate negative and positive sides.
//
// Buckets of |e|: exactly 0; (0, 2^lo]; (2^(k-1), 2^k] for k = lo+1 .. hi; (2^hi, inf).
// For ULP errors lo = -4 (1/16 ULP), hi = 24; for ppm lo = -10, hi = 20. For the ratio of
// an error to its element's bound (unit "bound") lo = -20, hi = 10: 1 = 2^0 is a bucket
// edge, so (1/2, 1] is the last bucket within the bound and (1, 2] the first beyond it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace foldcheck {

struct Histogram {
  std::string unit;
  int lo = -4, hi = 24;
  std::int64_t zero = 0;
  std::vector<std::int64_t> neg, pos;  // index 0: (0, 2^lo], i: (2^(lo+i-1), 2^(lo+i)], last: > 2^hi

  static Histogram for_ulp();
  static Histogram for_ppm();
  static Histogram for_bound_ratio();
  void add(double e);
  std::size_t buckets() const { return neg.size(); }
  std::string label(std::size_t i) const;  // "(0.25, 0.5]"
  double upper_edge(std::size_t i) const;  // +inf for the last
};

nlohmann::json to_json(const Histogram& h);

}  // namespace foldcheck
