#pragma once
// Explanations in place: the sentences a reader needs beside a row whose numbers look
// alarming but are expected, or whose verdict does not count. Input: one scored comparison
// as a run writes it (compare.hpp's JSON with the run's "bound" and "notes"), or a summary's
// path or folded-parameter entry (summary.hpp), which carries the same fields.
//  - Cancellation: a max |ULP| above the "bound ULP" column (the bound at the element nearest
//    its bound) under EXPECTED. Each element has its own bound, which scales with the
//    magnitudes of its terms (sum |w x| for an output, |b - mean| s and |beta| for a folded
//    bias), while a ULP scales with the result: a result that cancelled to a small value has
//    a bound of many of its ULPs. The note gives that element's own bound in ULP.
//  - MISTRUSTED: nothing informative was compared (every exact value 0, or rounding to 0 or
//    an infinity), so it is not a pass; a folded bias's cause ("mistrusted_cause", from the
//    run) and why it does not count.
//  - eps held in float32 by the recipe ("eps_held_in_float32", the run's facts): how far it
//    moves the scale, when that is at least an ULP of the type.
// A summary's entry carries these sentences as "notes", rendered once from its run.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foldcheck/result/views/run.hpp"

namespace foldcheck::reports {

// Each takes the row's facts (views/run.hpp NoteFacts), or the row's JSON, restored first.
std::vector<std::string> row_notes(const result::views::NoteFacts& c);
std::vector<std::string> row_notes(const nlohmann::json& c);
// Whether c's row carries the cancellation note (its max |ULP| is above the bound ULP column
// and within its own element's bound).
bool shows_cancellation(const result::views::NoteFacts& c);
bool shows_cancellation(const nlohmann::json& c);
// That note alone ("" when the row does not carry it).
std::string cancellation_note(const result::views::NoteFacts& c);
std::string cancellation_note(const nlohmann::json& c);

// Once per report, beside the first cancellation note: why a large |ULP| can be within.
inline constexpr const char* kCancellationNote =
    "A cancelled result: each element's bound scales with the magnitudes of its terms (sum |w x| for an output, "
    "|b - mean| s and |beta| for a folded bias) while its ULP scales with the result, so a result that cancelled to a "
    "small value has a bound of many of its ULP and a large |ULP| within it.";

// Under a suite's table of entries, for its p99.9 |ULP| column (a dagger marks a value that
// is above its path's bound in ULP while within the bound: summary.hpp's headline).
inline constexpr const char* kP999Note =
    "† p99.9 |ULP| counts ULP of each element's own exact value: where a result cancelled to a small value its bound, "
    "which scales with the magnitudes of its terms, is many of its ULP, so a large value there is within the bound; "
    "the verdict is the bound ratio.";

}  // namespace foldcheck::reports
