#pragma once
// Terminal renderings of the model commands' results from their typed views
// (foldcheck/result/views/): what text.hpp's JSON entry points call after restoring the view
// once. A renderer reads only its view; verdicts are printed as the command judged them. Not in
// text.hpp: there each name has one overload, so `reports::x_text` passed as a
// std::function<std::string(const json&)> (cli/common.hpp's finish) stays unambiguous.
#include <optional>
#include <string>

#include "foldcheck/reports/run_answer.hpp"
#include "foldcheck/result/views/accuracy_diff.hpp"
#include "foldcheck/result/views/bisect.hpp"
#include "foldcheck/result/views/diagnose.hpp"
#include "foldcheck/result/views/engines.hpp"
#include "foldcheck/result/views/quant_check.hpp"

namespace foldcheck::reports {

std::string diagnose_text(const result::views::Diagnose& r);
std::string quant_check_text(const result::views::QuantCheck& q);
std::string engines_text(const result::views::Engines& r);
std::string bisect_text(const result::views::Bisect& r);
// answer: the summary's answer (summarize(), model_answer(), answer_lines()) when the result
// has layers; none without (the result's own reasoning says why nothing was compared).
std::string accuracy_diff_text(const result::views::AccuracyDiff& r, const std::optional<AnswerLines>& answer);
// A fold check on its own (foldcheck.fold_check: fold_check.hpp's JSON, the schema of an
// accuracy-diff layer's "fold"): fold_check_answer is its first line, "verdict: V: reason" (the
// closest recipe's worst ratio and channel; none compared), fold_check_text what follows it (the
// Python Result prints the two): where the folded values came from, one row per recipe (worst
// ratio, where, channel, max |ULP| of weights and bias, its verdict) and the bound.
std::string fold_check_answer(const result::views::AdiffFold& f);
std::string fold_check_text(const result::views::AdiffFold& f);

}  // namespace foldcheck::reports
