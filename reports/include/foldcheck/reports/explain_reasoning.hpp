#pragma once
// The English of an `explain` result ("reasoning"): written here with the rest of foldcheck's
// wording for people, from the facts the harness found (foldcheck/commands/explain.hpp), and
// put into the result by its to_json.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace foldcheck::reports {

struct ExplainFacts {
  bool explained = false;           // some recipe's bound holds for every element
  bool vacuous = false;             // ... but every exact value is 0 or not finite: nothing compared
  std::size_t worst_index = 0;      // the element farthest from the exact fold
  double worst_residual_ulp = 0;    // its residual, ULP
  double worst_bound_ulp = 0;       // the cited recipe's bound there, ULP
  std::string recipe, chain;        // the cited recipe and its chain of operations
  int arithmetic_precision = 24;    // bits of the arithmetic type (u = 2^-p)
  std::vector<std::string> bit_exact;  // recipes that reproduce the observation bit for bit
  std::string bn_source;
  std::optional<std::string> scale_fit;  // the common fold scale the observations fit (BatchNorm not given)
  // An infinite observed value at the worst element: the exact fold there, and whether its
  // correct rounding in the dtype is itself infinite (the exact fold overflows) or not (an
  // intermediate of the engine's fold overflowed).
  struct Overflow {
    double exact = 0, max_finite = 0, observed = 0;  // observed: the infinity seen
    bool exact_overflows = false;
    std::string dtype, arithmetic;
    std::vector<std::string> replayed_by;  // the recipes whose replay is infinite there (their chain overflows)
  };
  std::optional<Overflow> overflow;
  // Observed infinities that are the correct rounding of an exact fold past the dtype's range
  // (agreement: the fold is not wrong there, but the folded model holds infinite weights).
  struct PastRange {
    std::int64_t count = 0;
    double max_finite = 0;
    std::string dtype;
  };
  std::optional<PastRange> past_range;
};

std::vector<std::string> explain_reasoning(const ExplainFacts& f);

}  // namespace foldcheck::reports
