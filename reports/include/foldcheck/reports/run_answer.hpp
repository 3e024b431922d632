#pragma once
// The answer of a `run` result, first in every format (text, Markdown, HTML, JUnit): the
// verdict, the sentence that gives its reason (the path or folded parameters closest to
// their bound, where, and the bound; or the first that leaves it), why MISTRUSTED rows do
// not count, the observed weights' verdict with the recipes that reproduce them bit for bit
// and explain's reasoning, and the assert_close tolerances the bound implies (the unfused
// and first fused path of each dtype's first accumulation order; the others are in the JSON).
//
// Contract: a pure function of the restored `run` result (views/run.hpp Run). Returns the
// answer (views/run.hpp RunAnswer), whose to_json is
//   {"verdict", "reasoning": [sentences], "observed_weights": null | {"verdict",
//    "bit_exact": [recipes], "reasoning": [sentences], "note"}, "tolerances": [{"path",
//    "dtype", "accumulation", "rtol", "atol", "atol_alone"}]}
// (what the JSON entry point returns, and a summary stores under "answer").
// The first sentence: the observed weights when they are not EXPECTED (explain's sentence);
// else the worst set that is not EXPECTED (SUSPICIOUS cites its probabilistic ratio); else
// every set within its bound, with the output path closest to its bound (folded sets are
// one rounding against a half-ULP bound, always near 1). MISTRUSTED folded-bias sets, which
// run leaves out of its verdict, get a sentence of their own.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/run.hpp"

namespace foldcheck::reports {

using RunAnswer = result::views::RunAnswer;

RunAnswer run_answer(const result::views::Run& r);
// The same of the run's JSON, restored first; returns the answer's JSON.
nlohmann::json run_answer(const nlohmann::json& r);

// The answer of an accuracy-diff summary (summary.hpp), in the same shape: why nothing was
// compared; else the worst layer that is not EXPECTED (its folded parameters or its outputs,
// the ratio, the channel); else every layer within its bounds, with the closest.
nlohmann::json model_answer(const nlohmann::json& accuracy_diff_summary);

// The answer as sentences for people, in order: the verdict with its reason, the other
// reasons, the observed weights (verdict, bit-exact recipes, explain's first sentence), the
// distinct assert_close tolerances. Every renderer shows these first.
struct AnswerLines {
  std::string headline;                 // "EXPECTED: Every path ... (element 4856: 0.973 of ...)."
  std::vector<std::string> more;        // further reasons (MISTRUSTED rows, observed weights not EXPECTED)
  std::string observed;                 // "" without observed weights
  std::vector<std::string> tolerances;  // "float32 fused/tvm: rtol=9.87e-06, atol=0.000195 (or atol=0.000232 alone)"
};
// What an accuracy-diff's overall verdict judges besides foldcheck's own end-to-end runs, for
// the sentence where the two differ: the observed output when it is not EXPECTED, else the
// observed model's folds per layer, else each layer's fold.
std::string overall_also_judges(bool observed_output_bad, bool observed_model);

AnswerLines answer_lines(const RunAnswer& a);
// The same of an answer's JSON (a summary's "answer", a run's or a model's), restored first.
AnswerLines answer_lines(const nlohmann::json& a);

}  // namespace foldcheck::reports
