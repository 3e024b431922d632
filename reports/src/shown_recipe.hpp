#pragma once
// The recipe a layer's fold check reports in full: the entry of `recipes` that `shown_recipe`
// names (fold_check.hpp's FoldCheck::shown: observed -> the closest recipe; otherwise the one of
// the largest ratio), else the first. One choice for every renderer (the accuracy-diff text and
// the run summary). `fold` is a layer's "fold" object with at least one recipe.
#include <nlohmann/json.hpp>

namespace foldcheck::reports {

inline const nlohmann::json& shown_recipe(const nlohmann::json& fold) {
  const nlohmann::json* shown = &fold["recipes"][0];
  for (const nlohmann::json& rc : fold["recipes"])
    if (rc["recipe"] == fold["shown_recipe"]) shown = &rc;
  return *shown;
}

}  // namespace foldcheck::reports
