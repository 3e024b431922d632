#pragma once
// Table rows whose numbers are identical, shown once: a run's table lists every order,
// arithmetic and recipe, and many of them give the same numbers to the printed digits (a
// recipe that rounds like another, an order with the same sums). A reader compares rows;
// repeats hide the few that differ. Internal to reports.
#include <cstddef>
#include <string>
#include <vector>

namespace foldcheck::reports {

// Groups of row indices with equal keys (the row's rendered cells other than the labels
// allowed to differ), in the order of each group's first row.
std::vector<std::vector<std::size_t>> identical_groups(const std::vector<std::string>& keys);

// The distinct values of column `column` over the rows `group` of `labels`, in first order.
std::vector<std::string> distinct_column(const std::vector<std::vector<std::string>>& labels,
                                         const std::vector<std::size_t>& group, std::size_t column);

// Those values joined by ", " (a merged row's names).
std::string joined_column(const std::vector<std::vector<std::string>>& labels, const std::vector<std::size_t>& group,
                          std::size_t column);

}  // namespace foldcheck::reports
