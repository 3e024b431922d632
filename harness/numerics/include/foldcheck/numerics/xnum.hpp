#pragma once
// XNum: the number type of attribution runs. It performs each operation either like the
// float path (rounded to the arithmetic type, bit-identical to float/double code) or,
// when the operation's stage is made exact, without rounding.
//
// Contract: an XNum holds a double-double value (hi + lo, |lo| <= ulp(hi)/2, ~106 bits).
// The thread's XContext says which arithmetic type rounds (float32 or float64), the
// mode (below), which stages are exact, and which stage the current operation belongs
// to (set by StageScope<XNum>). A rounded operation whose operands are all representable
// in the arithmetic type is computed with the native float/double operation, so a run
// with no exact stage reproduces the float path bit for bit (Round and Record modes). A
// rounded operation on an operand an exact stage left unrounded is rounded correctly
// from its double-double value. Exact values keep ~106 bits: +, -, * of double-doubles
// lose at most ~2^-105 relative, / and sqrt ~2^-104; the local error of + and * of
// arithmetic-type operands is recorded exactly. Attribution thus resolves contributions
// far below an output's ULP.
#include <cmath>
#include <vector>

#include "foldcheck/numerics/arithmetic.hpp"
#include "foldcheck/numerics/dtype.hpp"

namespace foldcheck {

struct XNum {
  double hi = 0.0, lo = 0.0;
  XNum() = default;
  XNum(double h) : hi(h) {}  // NOLINT: implicit from exact doubles, like float code
  XNum(double h, double l) : hi(h), lo(l) {}
  explicit operator double() const { return hi + lo; }
};

// Round:  each operation rounds (or, in an exact stage, does not).
// Record: each operation rounds and appends its local error (rounded - exact, as a
//         double-double) to the tape.
// Replay: each operation takes its exact value on the current operands and, unless its
//         stage is exact, adds the local error recorded for it: the other stages'
//         rounding errors stay what they were in the float run.
enum class XMode { Round, Record, Replay };

struct XContext {
  DType arith = DType::Float32;
  XMode mode = XMode::Round;
  unsigned exact_mask = 0;  // bit(stage) set: that stage's operations are exact
  Stage stage = Stage::Accumulation;
  std::vector<XNum>* tape = nullptr;  // Record / Replay
  std::size_t pos = 0;                // Replay: next tape entry
  bool exact() const { return exact_mask & bit(stage); }
};
XContext& xcontext();  // thread-local

template <>
struct StageScope<XNum> {
  explicit StageScope(Stage s) : saved(xcontext().stage) { xcontext().stage = s; }
  ~StageScope() { xcontext().stage = saved; }
  StageScope(const StageScope&) = delete;
  StageScope& operator=(const StageScope&) = delete;
  Stage saved;
};

XNum operator+(const XNum& a, const XNum& b);
XNum operator-(const XNum& a, const XNum& b);
XNum operator*(const XNum& a, const XNum& b);
XNum operator/(const XNum& a, const XNum& b);
XNum operator-(const XNum& a);
XNum sqrt(const XNum& a);
XNum fma(const XNum& a, const XNum& b, const XNum& c);

// a*b to double-double accuracy whatever the stage (for values that are exact by
// definition, such as the exact fold's w * scale).
XNum exact_product(const XNum& a, const XNum& b);

// Correct rounding of a double-double to t (ties to even).
double round_dd(DType t, double hi, double lo);
// Round v to the storage type t under the current stage (unchanged if it is exact).
XNum store(const XNum& v, DType t);
// The 12-bit estimate of 1/sqrt(a) (see arithmetic.hpp); exact 1/sqrt(a) if the stage is exact.
XNum rsqrt_estimate(const XNum& a);

}  // namespace foldcheck
