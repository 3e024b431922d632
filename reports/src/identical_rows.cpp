// Identical table rows shown once (identical_rows.hpp).
#include "identical_rows.hpp"

#include <algorithm>
#include <map>


namespace foldcheck::reports {

std::vector<std::vector<std::size_t>> identical_groups(const std::vector<std::string>& keys) {
  std::vector<std::vector<std::size_t>> groups;
  std::map<std::string, std::size_t> group_of;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto [it, added] = group_of.emplace(keys[i], groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(i);
  }
  return groups;
}

std::vector<std::string> distinct_column(const std::vector<std::vector<std::string>>& labels,
                                         const std::vector<std::size_t>& group, std::size_t column) {
  std::vector<std::string> v;
  for (const std::size_t i : group)
    if (std::find(v.begin(), v.end(), labels[i][column]) == v.end()) v.push_back(labels[i][column]);
  return v;
}

std::string joined_column(const std::vector<std::vector<std::string>>& labels, const std::vector<std::size_t>& group,
                          std::size_t column) {
  std::string all;
  for (const std::string& v : distinct_column(labels, group, column)) all += (all.empty() ? "" : ", ") + v;
  return all;
}

}  // namespace foldcheck::reports
