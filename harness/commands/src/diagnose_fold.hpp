#pragma once
// diagnose's fused path for a 16-bit output: the per-channel terms of every fold the
// observed output may come from (diagnosis::FoldTerms), from the fold pass's bounds.
#include "foldcheck/commands/diagnose.hpp"
#include "foldcheck/diagnosis/hypotheses.hpp"

namespace foldcheck {

// Fills L.fold (folds kept in one conv), L.fold_shift (TVM's with a conv bias: a separate
// shift) and L.x_max when the output's dtype is narrower than its arithmetic (float16,
// bfloat16); leaves them empty otherwise. per_channel: the weights of one output channel.
void add_fold_terms(const DiagnoseInput& in, std::int64_t per_channel, diagnosis::Layer& L);

}  // namespace foldcheck
