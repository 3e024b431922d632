#pragma once
// The values every command option accepts, in one place: the `foldcheck` command's flags check
// them (harness/cli: integer_in, finite_number) and the Python functions' arguments are converted
// against them (python/src/scalars.hpp), so `threads=-1` and `--threads -1` are refused by the
// same range and say the same thing.
#include <cstdint>
#include <limits>

namespace foldcheck::options {

// An integer from lo to hi (both included).
struct IntegerRange {
  std::uint64_t lo, hi;
};

// A finite number above lo (strictly when lo_excluded) and at most hi.
struct NumberRange {
  double lo;
  bool lo_excluded;
  double hi = std::numeric_limits<double>::max();
};

inline constexpr IntegerRange kPrecision{64, 65536};  // the reference's starting precision, bits
inline constexpr IntegerRange kThreads{0, 1024};      // 0: every core
inline constexpr IntegerRange kSeed{0, std::numeric_limits<std::uint64_t>::max()};
inline constexpr IntegerRange kAttributionElements{0, std::uint64_t(1) << 40};  // 0: all
// accuracy-diff's perturbed runs of the end-to-end bound (at least two make a spread).
inline constexpr IntegerRange kOutputSamples{2, 4096};
// engines' perturbed runs of the final outputs' bound (0: final outputs not judged) and honest
// computations per layer (0: the rigorous bound only).
inline constexpr IntegerRange kEngineOutputSamples{0, 4096};
inline constexpr IntegerRange kChannelSamples{0, 4096};
inline constexpr IntegerRange kStride{1, 1 << 20};
inline constexpr IntegerRange kDilation{1, 1 << 20};
inline constexpr IntegerRange kPadding{0, 1 << 20};
inline constexpr IntegerRange kQuantBits{2, 16};
inline constexpr IntegerRange kOptLevel{0, 4};

inline constexpr NumberRange kConfidence{0.5, true, 1 - 1e-12};
inline constexpr NumberRange kTimeoutSeconds{0, true};
inline constexpr NumberRange kThresholdUlp{0, false};
// Any finite number (BatchNorm's eps: its own rule, bn_params.hpp, refuses eps <= 0 by name).
inline constexpr NumberRange kAnyFinite{-std::numeric_limits<double>::max(), false};

}  // namespace foldcheck::options
